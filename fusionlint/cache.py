"""Findings per file content, so that a run over an unchanged tree costs one read and hash per file.

Unlike Ruff's cache, which only remembers files without findings, this one stores the findings
themselves: a warm run then never imports the engine (libcst). An entry is keyed by the file's
bytes and the options that decide its findings, and lists the other files of its package that
the analysis consulted (paths relative to the file's folder, each with the sha256 of its bytes,
or null for a file looked for and absent): an entry is used only while every one of them is as
it was; the whole cache belongs to one build of the
tool (its version plus the size and time stamp of every module of the package), so editing a
rule invalidates it. The cache is one JSON file per cache folder (each config's ``cache-dir``),
written only when a run added something.

The cache is optional: one that cannot be read or written costs speed, never findings (the
run warns once). It lives in the checked tree, which may come from anyone, so it is never read
or written through a link, and never read from anything but a regular file.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Mapping

import fusionlint
from fusionlint.config import Config
from fusionlint.model import Finding, FixSafety, LineEdit, LintOptions, LintResult
from fusionlint.sourcefile import write_atomic

MAX_ENTRIES = 20_000  # files; the least recently stored go first


def tool_fingerprint() -> str:
    package = Path(fusionlint.__file__).parent
    stamps = sorted(
        (str(path.relative_to(package)), path.stat().st_size, path.stat().st_mtime_ns)
        for path in package.rglob("*.py")
    )
    return hashlib.blake2b(repr((fusionlint.__version__, stamps)).encode(), digest_size=16).hexdigest()


def options_digest(options: LintOptions) -> bytes:
    """The part of a cache key that comes from the options and the interpreter (whose parser
    decides what is a syntax error); the fix mode is not part of it."""
    described = json.dumps([sorted(options.codes), options.extra_ops, sys.version])
    return hashlib.blake2b(described.encode(), digest_size=16).digest()


class Cache:
    def __init__(self, folder: Path, tool: str | None = None) -> None:
        """``folder``: the cache folder itself (made on the first save)."""
        self.file = folder / "findings.json"
        self.tool = tool or tool_fingerprint()
        self.rule_codes: frozenset[str] | None = None  # the rule registry's codes, for selector resolution
        self.warning: str | None = None  # why the cache could not be read or written (the first reason)
        self._entries: dict[str, list] = {}
        self._used: set[str] = set()
        self._added = False
        self._digests: dict[str, str | None] = {}  # a dependency's sha256 now, by path (None: absent)
        self._load()

    def _load(self) -> None:
        try:
            data = self._read()
        except FileNotFoundError:
            return  # no cache yet
        except OSError as exc:
            self.warning = f"cache not read ({self.file}: {exc.strerror or exc})"
            return
        try:
            stored = json.loads(data)
        except ValueError:
            return  # a damaged cache: start afresh
        if not isinstance(stored, dict) or stored.get("tool") != self.tool:
            return
        if isinstance(stored.get("entries"), dict):
            self._entries = stored["entries"]
        if isinstance(stored.get("rules"), list) and all(isinstance(code, str) for code in stored["rules"]):
            self.rule_codes = frozenset(stored["rules"])

    def _read(self) -> bytes:
        _check_folder(self.file.parent)
        if not stat.S_ISREG(os.lstat(self.file).st_mode):
            raise OSError(f"{self.file.name} is not a regular file (a symlink, a folder, ...)")
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        with os.fdopen(os.open(self.file, flags), "rb") as handle:
            return handle.read()

    @staticmethod
    def key(data: bytes, options_key: bytes, kind: str) -> str:
        """``kind``: the file's suffix (the same bytes are linted differently as a notebook)."""
        digest = hashlib.sha256(data)  # sha256: CPUs hash it in hardware, the fastest in hashlib here
        digest.update(options_key)
        digest.update(kind.encode())
        return digest.hexdigest()

    def get(self, key: str, folder: Path | None = None) -> LintResult | None:
        """The findings stored for ``key``, of a file in ``folder``; None when there are none, or
        a file they depend on changed."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            findings, errors, *rest = entry
            if rest and rest[0] and not self._unchanged(rest[0], folder):
                return None
            result = LintResult(findings=tuple(_finding(row) for row in findings), errors=tuple(map(str, errors)))
        except (TypeError, ValueError):
            return None  # a damaged entry: lint the file again
        self._used.add(key)
        return result

    def put(self, key: str, result: LintResult, depends_on: Mapping[str, str | None] = {},
            folder: Path | None = None) -> None:
        """Store the findings of an unfixed text (the only ones that a later check can reuse) of a
        file in ``folder``, with the files its analysis consulted (path -> sha256, None: absent)."""
        entry: list = [[_row(finding) for finding in result.findings], list(result.errors)]
        if depends_on:
            base = os.path.abspath(folder or ".")
            entry.append(sorted([_relative(path, base), digest] for path, digest in depends_on.items()))
        self._entries[key] = entry
        self._used.add(key)
        self._added = True

    def _unchanged(self, depends_on: list, folder: Path | None) -> bool:
        """Is every file in ``depends_on`` (paths relative to ``folder``) as it was?"""
        base = os.path.abspath(folder or ".")
        for relative, digest in depends_on:
            path = os.path.normpath(os.path.join(base, relative))
            if path not in self._digests:
                self._digests[path] = _digest(path)
            if self._digests[path] != digest:
                return False
        return True

    def remember_rules(self, codes: frozenset[str]) -> None:
        if codes != self.rule_codes:
            self.rule_codes = codes
            self._added = True

    def save(self) -> None:
        """Write the cache if this run added to it; a failure only sets ``warning``."""
        if not self._added:
            return
        # Entries of this run go last, so trimming drops what no recent run used.
        kept = {k: v for k, v in self._entries.items() if k not in self._used}
        kept.update((k, self._entries[k]) for k in self._used if k in self._entries)
        entries = dict(list(kept.items())[-MAX_ENTRIES:])
        stored = {"tool": self.tool, "rules": sorted(self.rule_codes) if self.rule_codes is not None else None, "entries": entries}
        try:
            _make_folder(self.file.parent)
            write_atomic(self.file, json.dumps(stored, separators=(",", ":")).encode())
        except OSError as exc:
            self.warning = self.warning or f"cache not written ({self.file}: {exc.strerror or exc})"


class Caches:
    """The caches of one run, one per cache folder: files under different configs keep their
    findings next to their own config, or share the folder that ``cache-dir`` names."""

    def __init__(self, tool: str | None = None) -> None:
        self.tool = tool or tool_fingerprint()
        self._by_folder: dict[Path, Cache] = {}

    def for_config(self, config: Config) -> Cache:
        folder = config.cache_folder
        if folder not in self._by_folder:
            self._by_folder[folder] = Cache(folder, self.tool)
        return self._by_folder[folder]

    def save(self) -> None:
        for cache in self._by_folder.values():
            cache.save()

    @property
    def warnings(self) -> list[str]:
        return [cache.warning for cache in self._by_folder.values() if cache.warning]


def _check_folder(folder: Path) -> None:
    """The cache folder must be a real folder: a symlink there would point reads and writes elsewhere."""
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise OSError(f"{folder.name} is not a folder (a symlink or a file)")


def _make_folder(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)  # a cache-dir may name a folder not made yet
    try:
        folder.mkdir()
    except FileExistsError:
        _check_folder(folder)
    try:
        _create(folder / ".gitignore", b"# Created by fusionlint.\n*\n")
    except FileExistsError:
        pass  # from an earlier run (or the user's own)


def _create(path: Path, data: bytes) -> None:
    """Create a new file, never opening one that exists (or a link planted under its name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
        handle.write(data)


def _relative(path: str, base: str) -> str:
    """``path`` relative to ``base`` (the same entry then serves a moved tree), else as it is."""
    try:
        return os.path.relpath(path, base)
    except ValueError:  # another drive
        return path


def _digest(path: str) -> str | None:
    """The sha256 of the bytes of the file at ``path``, None if there is none to read."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _row(finding: Finding) -> list:
    return [
        finding.code, finding.message, finding.line, finding.column, finding.end_line,
        finding.end_column, finding.fix_safety.value, finding.cell, list(finding.pays_in),
        [[edit.start, edit.end, edit.text] for edit in finding.edits], finding.rule, finding.fix_title,
    ]  # fmt: skip


def _finding(row: list) -> Finding:
    code, message, line, column, end_line, end_column, safety, cell, pays_in, edits, rule, fix_title = row
    return Finding(code, message, line, column, end_line, end_column, FixSafety(safety), cell, pays_in=tuple(pays_in),
                   edits=tuple(LineEdit(*edit) for edit in edits), rule=rule, fix_title=fix_title)
