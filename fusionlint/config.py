"""The user's settings: ``[tool.fusionlint]`` in the nearest ``pyproject.toml``, then the command line.

Only the standard library is imported here: settings are needed on every run, including the
fully cached ones that must not pay for the engine.

Rule selection follows Ruff: ``select`` (default: every rule) plus ``extend-select`` minus
``ignore``, then minus the ``per-file-ignores`` whose glob matches the file. A selector is
``ALL``, a full code or a code prefix (``FL0``). The pseudo rules FL998 (unreadable file) and
FL999 (syntax error) stay on under any ``select`` and go only when ``ignore`` names them. Globs (``exclude``, ``per-file-ignores``) are
matched against the path relative to the config's folder and against the file name alone.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from fusionlint.ops import OP_CLASSES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli is the same parser (a dependency there)
    import tomli as tomllib

SELECTOR = re.compile(r"FL\d{0,3}|ALL")
# Unreadable file, syntax error: whatever ``select`` says, reported unless ignored (``ALL`` excepted).
PSEUDO_RULES = frozenset({"FL998", "FL999"})


class ConfigError(Exception):
    """Settings that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class Config:
    root: Path  # folder that globs are relative to; the cache lives here
    source: Path | None = None  # the pyproject.toml read, None when running on defaults
    select: tuple[str, ...] = ("ALL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def relative(self, path: Path) -> str:
        absolute = os.path.abspath(path)  # os.path: pathlib costs a warm run's budget here
        relative = os.path.relpath(absolute, self.root)
        outside = relative == ".." or relative.startswith(".." + os.sep)
        return Path(absolute if outside else relative).as_posix()

    def is_excluded(self, path: Path) -> bool:
        return any(_glob_matches(pattern, self.relative(path), path.name) for pattern in self.exclude)

    def ignored_selectors(self, path: Path) -> tuple[str, ...]:
        if not self.per_file_ignores:
            return ()
        relative = self.relative(path)
        return tuple(
            selector
            for pattern, selectors in self.per_file_ignores
            if _glob_matches(pattern, relative, path.name)
            for selector in selectors
        )

    def enabled_codes(self, known_codes: frozenset[str], path: Path | None = None) -> frozenset[str]:
        """The rule codes to run on ``path`` (or anywhere, when ``path`` is None)."""
        ignored = self.ignore + (self.ignored_selectors(path) if path is not None else ())
        selected = _resolve(self.select + self.extend_select, known_codes) | (known_codes & PSEUDO_RULES)
        return selected - _resolve(ignored, known_codes)

    def check_selectors(self, known_codes: frozenset[str]) -> None:
        """Fail early on a selector that names no rule (a typo would silently disable nothing)."""
        every = self.select + self.extend_select + self.ignore
        every += tuple(s for _, selectors in self.per_file_ignores for s in selectors)
        for selector in every:
            if selector != "ALL" and not _resolve((selector,), known_codes | PSEUDO_RULES):
                raise ConfigError(f"unknown rule selector {selector!r} (see `fusionlint rules`)")

    def with_overrides(
        self,
        select: tuple[str, ...] | None = None,
        extend_select: tuple[str, ...] = (),
        ignore: tuple[str, ...] = (),
    ) -> Config:
        """Command-line selectors: ``--select`` replaces the file's, the others add to it."""
        for selector in (select or ()) + extend_select + ignore:
            _check_syntax(selector, "command line")
        return replace(
            self,
            select=self.select if select is None else select,
            extend_select=self.extend_select + extend_select,
            ignore=self.ignore + ignore,
        )


def _glob_matches(pattern: str, relative: str, name: str) -> bool:
    pattern = pattern.rstrip("/")
    return (
        fnmatch.fnmatchcase(relative, pattern)
        or fnmatch.fnmatchcase(name, pattern)
        or relative.startswith(pattern + "/")  # a folder pattern covers what is inside it
    )


def _resolve(selectors: tuple[str, ...], known_codes: frozenset[str]) -> frozenset[str]:
    chosen: set[str] = set()
    for selector in selectors:
        if selector == "ALL":
            chosen |= known_codes - PSEUDO_RULES
        else:
            chosen |= {code for code in known_codes if code.startswith(selector)}
    return frozenset(chosen)


def _check_syntax(selector: str, where: str) -> None:
    if not SELECTOR.fullmatch(selector):
        raise ConfigError(f"{where}: {selector!r} is not a rule selector (ALL, a code like FL001, or a prefix like FL0)")


def find_config_file(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.fusionlint]`` table, from ``start`` upwards."""
    start = start.absolute()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _fusionlint_table(candidate) is not None:
            return candidate
    return None


def load_config(config_file: Path | None, default_root: Path) -> Config:
    if config_file is None:
        return Config(root=default_root.absolute())
    table = _fusionlint_table(config_file) or {}
    where = f"{config_file}: [tool.fusionlint]"
    known = {"select", "extend-select", "ignore", "exclude", "per-file-ignores", "extra-ops"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    selectors = {key: _string_list(table, key, where) for key in ("select", "extend-select", "ignore")}
    for values in selectors.values():
        for selector in values or ():
            _check_syntax(selector, where)
    per_file_ignores = _string_lists(table, "per-file-ignores", where)
    for _, values in per_file_ignores:
        for selector in values:
            _check_syntax(selector, f"{where} per-file-ignores")
    extra_ops = _string_lists(table, "extra-ops", where)
    for op_class, _ in extra_ops:
        if op_class not in OP_CLASSES:
            raise ConfigError(f"{where} extra-ops: unknown op class {op_class!r} (known: {', '.join(OP_CLASSES)})")
    return Config(
        root=config_file.parent.absolute(),
        source=config_file,
        select=selectors["select"] if selectors["select"] is not None else ("ALL",),
        extend_select=selectors["extend-select"] or (),
        ignore=selectors["ignore"] or (),
        exclude=_string_list(table, "exclude", where) or (),
        per_file_ignores=per_file_ignores,
        extra_ops=extra_ops,
    )


def _fusionlint_table(path: Path) -> dict | None:
    """``[tool.fusionlint]`` of a TOML file, None when it has none; anything else there is an error."""
    try:
        data = path.read_bytes()
        tool = tomllib.loads(data.decode("utf-8")).get("tool", {})
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end]
        raise ConfigError(f"{path}: not valid UTF-8 (TOML files must be UTF-8): byte {bad!r} at line {line}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, got {tool!r}")
    table = tool.get("fusionlint")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.fusionlint` must be a table, got {table!r}")
    return table


def _string_list(table: dict, key: str, where: str) -> tuple[str, ...] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: {key} must be a list of strings, got {value!r}")
    return tuple(value)


def _string_lists(table: dict, key: str, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a table of lists of strings, got {value!r}")
    return tuple(
        (name, _string_list(value, name, f"{where} {key}") or ()) for name in sorted(value)
    )
