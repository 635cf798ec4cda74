"""Findings per file content, so that a run over an unchanged tree costs one read and hash per file.

Unlike Ruff's cache, which only remembers files without findings, this one stores the findings
themselves: a warm run then never imports the engine (libcst). An entry is keyed by the file's
bytes and the options that decide its findings; the whole cache belongs to one build of the
tool (its version plus the size and time stamp of every module of the package), so editing a
rule invalidates it. The cache is one JSON file, written only when a run added something.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import fusionlint
from fusionlint.model import Finding, FixSafety, LintOptions, LintResult
from fusionlint.sourcefile import write_atomic

CACHE_FOLDER = ".fusionlint_cache"
MAX_ENTRIES = 20_000  # files; the least recently stored go first


def tool_fingerprint() -> str:
    package = Path(fusionlint.__file__).parent
    stamps = sorted(
        (str(path.relative_to(package)), path.stat().st_size, path.stat().st_mtime_ns)
        for path in package.rglob("*.py")
    )
    return hashlib.blake2b(repr((fusionlint.__version__, stamps)).encode(), digest_size=16).hexdigest()


def options_digest(options: LintOptions) -> bytes:
    """The part of a cache key that comes from the options (the fix mode is not part of it)."""
    described = json.dumps([sorted(options.codes), options.extra_ops])
    return hashlib.blake2b(described.encode(), digest_size=16).digest()


class Cache:
    def __init__(self, folder: Path, tool: str | None = None) -> None:
        self.file = folder / CACHE_FOLDER / "findings.json"
        self.tool = tool or tool_fingerprint()
        self.rule_codes: frozenset[str] | None = None  # the rule registry's codes, for selector resolution
        self._entries: dict[str, list] = {}
        self._used: set[str] = set()
        self._added = False
        self._load()

    def _load(self) -> None:
        try:
            stored = json.loads(self.file.read_bytes())
        except (OSError, ValueError):
            return  # no cache yet, or a damaged one: start afresh
        if not isinstance(stored, dict) or stored.get("tool") != self.tool:
            return
        self._entries = stored.get("entries", {})
        if isinstance(stored.get("rules"), list):
            self.rule_codes = frozenset(stored["rules"])

    @staticmethod
    def key(data: bytes, options_key: bytes) -> str:
        digest = hashlib.sha256(data)  # sha256: CPUs hash it in hardware, the fastest in hashlib here
        digest.update(options_key)
        return digest.hexdigest()

    def get(self, key: str) -> LintResult | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._used.add(key)
        findings, errors = entry
        return LintResult(findings=tuple(_finding(row) for row in findings), errors=tuple(errors))

    def put(self, key: str, result: LintResult) -> None:
        """Store the findings of an unfixed text (the only ones that a later check can reuse)."""
        self._entries[key] = [[_row(finding) for finding in result.findings], list(result.errors)]
        self._used.add(key)
        self._added = True

    def remember_rules(self, codes: frozenset[str]) -> None:
        if codes != self.rule_codes:
            self.rule_codes = codes
            self._added = True

    def save(self) -> None:
        if not self._added:
            return
        # Entries of this run go last, so trimming drops what no recent run used.
        kept = {k: v for k, v in self._entries.items() if k not in self._used}
        kept.update((k, self._entries[k]) for k in self._used if k in self._entries)
        entries = dict(list(kept.items())[-MAX_ENTRIES:])
        stored = {"tool": self.tool, "rules": sorted(self.rule_codes) if self.rule_codes is not None else None, "entries": entries}
        folder = self.file.parent
        folder.mkdir(parents=True, exist_ok=True)
        ignore_everything = folder / ".gitignore"
        if not ignore_everything.exists():
            ignore_everything.write_text("# Created by fusionlint.\n*\n")
        write_atomic(self.file, json.dumps(stored, separators=(",", ":")).encode())


def _row(finding: Finding) -> list:
    return [
        finding.code, finding.message, finding.line, finding.column, finding.end_line,
        finding.end_column, finding.fix_safety.value, finding.cell,
    ]  # fmt: skip


def _finding(row: list) -> Finding:
    code, message, line, column, end_line, end_column, safety, cell = row
    return Finding(code, message, line, column, end_line, end_column, FixSafety(safety), cell)
