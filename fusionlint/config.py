"""The user's settings: ``[tool.fusionlint]`` in the nearest ``pyproject.toml``, then the command line.

Only the standard library is imported here: settings are needed on every run, including the
fully cached ones that must not pay for the engine.

Rule selection follows Ruff: ``select`` (default: every rule) plus ``extend-select`` minus
``ignore``, then minus the ``per-file-ignores`` whose glob matches the file. A selector is
``ALL``, a full code or a code prefix (``FL0``). The pseudo rules FL998 (unreadable file) and
FL999 (syntax error) stay on under any ``select`` and go only when ``ignore`` names them. Globs
(``exclude``, ``extend-exclude``, ``per-file-ignores``) are matched against the path relative to
the config's folder and against the file name alone.

Each file gets the settings of the nearest config above it (``Settings``), as Ruff's
hierarchical configuration does; a nested config replaces the outer one, it inherits nothing.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from fusionlint.ops import OP_CLASSES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli is the same parser (a dependency there)
    import tomli as tomllib

CACHE_DIR_VARIABLE = "FUSIONLINT_CACHE_DIR"
DEFAULT_CACHE_FOLDER = ".fusionlint_cache"
# Folders of other people's code, generated files and tool caches; ``exclude`` replaces them, as in Ruff.
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "__pycache__",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", DEFAULT_CACHE_FOLDER,
    ".ipynb_checkpoints", "*.egg-info",
)  # fmt: skip
SELECTOR = re.compile(r"FL\d{0,3}|ALL")
# Unreadable file, syntax error: whatever ``select`` says, reported unless ignored (``ALL`` excepted).
PSEUDO_RULES = frozenset({"FL998", "FL999"})


class ConfigError(Exception):
    """Settings that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class Config:
    root: Path  # folder that globs and the cache folder are relative to
    source: Path | None = None  # the pyproject.toml read, None when running on defaults
    select: tuple[str, ...] = ("ALL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    cache_dir: Path | None = None  # None: DEFAULT_CACHE_FOLDER in root
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def cache_folder(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else self.root / DEFAULT_CACHE_FOLDER

    def relative(self, path: Path) -> str:
        """``path`` relative to ``root`` with ``/`` separators; absolute when it lies outside."""
        absolute = os.path.abspath(path)  # strings, not pathlib: this runs for every file and folder
        if absolute.startswith(self._root_prefix):
            return absolute[len(self._root_prefix) :].replace(os.sep, "/")
        return "." if absolute == str(self.root) else absolute.replace(os.sep, "/")

    @cached_property
    def _root_prefix(self) -> str:
        return os.path.join(str(self.root), "")

    @cached_property
    def _excluded(self) -> _Globs:
        return _Globs(self.exclude + self.extend_exclude)

    @cached_property
    def _per_file_globs(self) -> tuple[tuple[_Globs, tuple[str, ...]], ...]:
        return tuple((_Globs((pattern,)), selectors) for pattern, selectors in self.per_file_ignores)

    def is_excluded(self, path: Path) -> bool:
        return self._excluded.match(self.relative(path), path.name)

    def ignored_selectors(self, path: Path) -> tuple[str, ...]:
        if not self.per_file_ignores:
            return ()
        relative = self.relative(path)
        return tuple(
            selector
            for globs, selectors in self._per_file_globs
            if globs.match(relative, path.name)
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
        cache_dir: Path | None = None,
    ) -> Config:
        """Command-line settings: ``--select`` and ``cache_dir`` replace the file's, the others add to it."""
        for selector in (select or ()) + extend_select + ignore:
            _check_syntax(selector, "command line")
        return replace(
            self,
            select=self.select if select is None else select,
            extend_select=self.extend_select + extend_select,
            ignore=self.ignore + ignore,
            cache_dir=self.cache_dir if cache_dir is None else cache_dir.absolute(),
        )

    def described(self, known_codes: frozenset[str], path: Path) -> str:
        """The settings that apply to ``path``, as TOML (``--show-settings``)."""
        source = str(self.source) if self.source is not None else "none (the defaults)"
        values = {
            "root": str(self.root),
            "select": list(self.select),
            "extend-select": list(self.extend_select),
            "ignore": list(self.ignore),
            "per-file-ignores": {pattern: list(selectors) for pattern, selectors in self.per_file_ignores},
            "enabled-rules": sorted(self.enabled_codes(known_codes, path)),
            "exclude": list(self.exclude),
            "extend-exclude": list(self.extend_exclude),
            "respect-gitignore": self.respect_gitignore,
            "cache-dir": str(self.cache_folder),
            "extra-ops": {op_class: list(names) for op_class, names in self.extra_ops},
        }
        lines = [f"# Resolved settings for: {path}", f"# Settings path: {source}"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key)} = {_toml_value(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)  # a string, a bool, a list of strings: JSON spells them as TOML does


class _Globs:
    """Globs matched against a relative path or a name alone; a pattern naming a folder also covers
    what is inside it. All of them in one regular expression: it runs for every file and folder."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        patterns = tuple(pattern.rstrip("/") for pattern in patterns)
        self._whole = re.compile("|".join(map(fnmatch.translate, patterns))) if patterns else None
        self._folder = re.compile("|".join(re.escape(pattern) + "/" for pattern in patterns))

    def match(self, relative: str, name: str) -> bool:
        if self._whole is None:
            return False
        return bool(self._whole.match(relative) or self._whole.match(name) or self._folder.match(relative))


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


class Settings:
    """The settings of every path: those of the nearest ``pyproject.toml`` with ``[tool.fusionlint]``
    above it (or of the one file given), with the command line's on top. Each folder is looked up
    once, and each config read once."""

    def __init__(
        self,
        config_file: Path | None = None,
        *,
        select: tuple[str, ...] | None = None,
        extend_select: tuple[str, ...] = (),
        ignore: tuple[str, ...] = (),
        cache_dir: Path | None = None,
    ) -> None:
        """``cache_dir``: the command line's; without it, ``$FUSIONLINT_CACHE_DIR``, then each config's."""
        if cache_dir is None and os.environ.get(CACHE_DIR_VARIABLE):
            cache_dir = Path(os.environ[CACHE_DIR_VARIABLE])
        self._overrides = {"select": select, "extend_select": extend_select, "ignore": ignore, "cache_dir": cache_dir}
        self._cwd = Path.cwd()
        self._fixed = None if config_file is None else self._finished(load_config(config_file, self._cwd))
        self._fallback: Config | None = None
        self._by_folder: dict[str, Config] = {}

    def _finished(self, config: Config) -> Config:
        return config.with_overrides(**self._overrides)

    def for_path(self, path: Path) -> Config:
        """The settings of ``path``: those of the folder holding it."""
        return self.for_folder(os.path.dirname(os.path.abspath(path)))

    def for_folder(self, folder: str) -> Config:
        if self._fixed is not None:
            return self._fixed
        config = self._by_folder.get(folder)
        if config is None:
            config_file = _config_file_in(folder)
            parent = os.path.dirname(folder)
            if config_file is not None:
                config = self._finished(load_config(config_file, self._cwd))
            else:
                config = self._fallback_config() if parent == folder else self.for_folder(parent)
            self._by_folder[folder] = config
        return config

    def _fallback_config(self) -> Config:
        """For a file with no config above it: the current folder's, as in Ruff, else the defaults."""
        if self._fallback is None:
            self._fallback = self._finished(load_config(find_config_file(self._cwd), self._cwd))
        return self._fallback

    def configs(self) -> list[Config]:
        """The distinct settings met so far."""
        seen = [self._fixed] if self._fixed is not None else self._by_folder.values()
        return list({id(config): config for config in seen}.values())

    def described(self, path: Path, known_codes: frozenset[str]) -> str:
        """The settings of ``path``, or for a folder those of the files in it (``--show-settings``)."""
        config = self.for_folder(os.path.abspath(path)) if path.is_dir() else self.for_path(path)
        return config.described(known_codes, path)

    def check_selectors(self, known_codes: frozenset[str]) -> None:
        """The command line's selectors, then each config's: an error names the config it is in."""
        self._finished(Config(root=self._cwd)).check_selectors(known_codes)  # the command line's alone
        for config in self.configs():
            try:
                config.check_selectors(known_codes)
            except ConfigError as error:
                raise ConfigError(f"{config.source}: [tool.fusionlint]: {error}") from None


def _config_file_in(folder: str) -> Path | None:
    candidate = os.path.join(folder, "pyproject.toml")
    if os.path.isfile(candidate) and _fusionlint_table(Path(candidate)) is not None:
        return Path(candidate)
    return None


def find_config_file(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.fusionlint]`` table, from ``start`` upwards."""
    start = start.absolute()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        config_file = _config_file_in(str(folder))
        if config_file is not None:
            return config_file
    return None


def load_config(config_file: Path | None, default_root: Path) -> Config:
    """``config_file``'s settings (paths in it relative to its folder), the defaults without one."""
    if config_file is None:
        return Config(root=default_root.absolute())
    table = _fusionlint_table(config_file) or {}
    where = f"{config_file}: [tool.fusionlint]"
    root = config_file.parent.absolute()
    known = {
        "select", "extend-select", "ignore", "exclude", "extend-exclude", "respect-gitignore", "cache-dir",
        "per-file-ignores", "extra-ops",
    }  # fmt: skip
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
    exclude = _string_list(table, "exclude", where)
    respect_gitignore = table.get("respect-gitignore", True)
    if not isinstance(respect_gitignore, bool):
        raise ConfigError(f"{where}: respect-gitignore must be true or false, got {respect_gitignore!r}")
    cache_dir = table.get("cache-dir")
    if cache_dir is not None and (not isinstance(cache_dir, str) or not cache_dir):
        raise ConfigError(f"{where}: cache-dir must be a path (a non-empty string), got {cache_dir!r}")
    return Config(
        root=root,
        source=config_file,
        select=selectors["select"] if selectors["select"] is not None else ("ALL",),
        extend_select=selectors["extend-select"] or (),
        ignore=selectors["ignore"] or (),
        exclude=exclude if exclude is not None else DEFAULT_EXCLUDE,
        extend_exclude=_string_list(table, "extend-exclude", where) or (),
        respect_gitignore=respect_gitignore,
        cache_dir=root / os.path.expanduser(cache_dir) if cache_dir is not None else None,
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
