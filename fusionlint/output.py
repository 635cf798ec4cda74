"""How findings are shown: text for people, JSON, SARIF and GitHub annotations for machines.

Text is colored with rich only on an interactive terminal, never under ``CI`` or ``PRE_COMMIT``
(pre-commit runs hooks under a pty) or ``NO_COLOR``; rich is imported only then. Notebook
findings read ``nb.ipynb:cell N:line:col`` with the line counted inside the cell.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

import fusionlint
from fusionlint.check import FileOutcome
from fusionlint.model import Finding, FixMode, FixSafety
from fusionlint.notebook import cell_source, read_notebook
from fusionlint.sourcefile import SourceFileError


@dataclass(frozen=True)
class RuleDoc:
    """What SARIF and ``--statistics`` say about a rule."""

    code: str
    name: str
    message: str
    rationale: str
    help: str  # markdown


def is_interactive(stream: IO[str]) -> bool:
    if any(os.environ.get(name) for name in ("CI", "PRE_COMMIT", "NO_COLOR")):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def display_path(path: Path) -> str:
    return path.as_posix()


def location(outcome: FileOutcome, finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{display_path(outcome.path)}:{cell}{finding.line}:{finding.column}"


def sorted_findings(outcomes: list[FileOutcome]) -> list[tuple[FileOutcome, Finding]]:
    ordered = sorted(outcomes, key=lambda outcome: outcome.path.as_posix())
    return [
        (outcome, finding)
        for outcome in ordered
        for finding in sorted(outcome.findings, key=lambda f: (f.cell or 0, f.line, f.column, f.code))
    ]


def source_line(outcome: FileOutcome, finding: Finding) -> str | None:
    """The line a finding points at (inside its cell for a notebook), without its line ending.
    None for a file that could not be read as source (FL998): its bytes are not worth showing."""
    text = outcome.text
    if text is None or finding.code == "FL998":
        return None
    if finding.cell is not None:
        try:
            text = cell_source(read_notebook(text)["cells"][finding.cell - 1])
        except (SourceFileError, IndexError):
            return None
    lines = text.splitlines()
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


def write_text(outcomes: list[FileOutcome], stream: IO[str], unsafe_hint: bool, show_source: bool) -> None:
    """``path:line:col: CODE [*] message`` per finding, then the source line with a caret under the span.

    ``[*]`` marks a finding whose fix ``--fix`` applies (or, with ``unsafe_hint``, ``--fix --unsafe-fixes``).
    """
    console = _console(stream) if is_interactive(stream) else None
    applicable = FixMode.UNSAFE if unsafe_hint else FixMode.SAFE
    for outcome, finding in sorted_findings(outcomes):
        mark = " [*]" if applicable.allows(finding.fix_safety) else ""
        head = f"{location(outcome, finding)}: {finding.code}{mark} {finding.message}"
        head += _pays(finding) + _verification(finding)
        line = source_line(outcome, finding) if show_source else None
        if console is None:
            stream.write(head + "\n")
            if line is not None:
                stream.write(_plain_snippet(finding, line))
        else:
            _rich_finding(console, outcome, finding, mark, line)


def _pays(finding: Finding) -> str:
    return f" [pays in {', '.join(finding.pays_in)}]" if finding.pays_in else ""


def _verification(finding: Finding) -> str:
    """Why ``--verify`` left a finding's fix unapplied."""
    if finding.verification is None or finding.verified:
        return ""
    return f" (fix {'refused' if finding.verified is False else 'not run'}: {finding.verification})"


def _plain_snippet(finding: Finding, line: str) -> str:
    start, end = _span(finding, line)
    gutter = " " * len(str(finding.line))
    return f"{gutter} |\n{finding.line} | {line}\n{gutter} | {' ' * start}{'^' * (end - start)}\n\n"


def _span(finding: Finding, line: str) -> tuple[int, int]:
    """0-based [start, end) of the finding on its first line (end columns are exclusive)."""
    start = min(max(finding.column - 1, 0), len(line))
    end = finding.end_column - 1 if finding.end_line == finding.line else len(line)
    return start, max(min(end, len(line)), start + 1)


def _console(stream: IO[str]):
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=True)


def _rich_finding(console, outcome: FileOutcome, finding: Finding, mark: str, line: str | None) -> None:
    from rich.syntax import Syntax
    from rich.text import Text

    head = Text()
    head.append(location(outcome, finding), style="bold")
    head.append(": ")
    head.append(finding.code, style="bold red")
    head.append(mark, style="cyan")
    head.append(f" {finding.message}")
    head.append(_pays(finding), style="green")
    head.append(_verification(finding), style="yellow")
    console.print(head)
    if line is None:
        return
    start, end = _span(finding, line)
    number = str(finding.line)
    code = Syntax(line, "python", theme="ansi_dark", background_color="default").highlight(line)
    code.rstrip()
    code.stylize("bold underline red", start, end)
    gutter = Text(f"{number} | ", style="blue")
    console.print(Text(" " * len(number) + " |", style="blue"))
    console.print(gutter + code)
    console.print(Text(" " * len(number) + " | ", style="blue") + Text(" " * start + "^" * (end - start), style="bold red"))
    console.print()


def summary(outcomes: list[FileOutcome], fix: FixMode, unsafe_hint: bool) -> str:
    """Ruff's closing lines: counts, what ``--fix`` would do, and what ``--unsafe-fixes`` would add."""
    remaining = [f for outcome in outcomes for f in outcome.findings]
    fixed = sum(len(outcome.fixed) for outcome in outcomes)
    if not remaining and not fixed:
        return "" if any(outcome.internal_errors for outcome in outcomes) else "All checks passed!\n"
    errors = _plural(len(remaining) + fixed, "error")
    lines = [f"Found {errors} ({fixed} fixed, {len(remaining)} remaining)." if fix is not FixMode.OFF else f"Found {errors}."]
    safe = sum(FixMode.SAFE.allows(f.fix_safety) for f in remaining)
    unsafe = sum(f.fix_safety is FixSafety.UNSAFE for f in remaining)
    fixable = safe + unsafe if unsafe_hint else safe
    option = "`--fix --unsafe-fixes`" if unsafe_hint else "`--fix`"
    hint = f"[*] {fixable} fixable with {option}" if fixable else ""
    if unsafe and not unsafe_hint:
        hidden = f"{_plural(unsafe, 'hidden fix', 'hidden fixes')} can be enabled with `--unsafe-fixes`"
        hint = f"{hint} ({hidden})" if hint else f"No fixes available ({hidden})"
    if hint:
        lines.append(hint + ".")
    return "\n".join(lines) + "\n"


def verify_summary(outcomes: list[FileOutcome]) -> str:
    """After ``--verify``: how many fixes were proven, refused, or could not be run."""
    proven = sum(bool(f.verified) for outcome in outcomes for f in outcome.fixed)
    left = [f for outcome in outcomes for f in outcome.findings if f.verification is not None]
    refused = sum(f.verified is False for f in left)
    if not (proven or left):
        return ""
    return (f"Verified: {_plural(proven, 'fix', 'fixes')} proven and applied, {refused} refused, "
            f"{len(left) - refused} not run (no harness).\n")


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def format_json(outcomes: list[FileOutcome]) -> str:
    return json.dumps(
        [
            {
                "path": display_path(outcome.path),
                "cell": finding.cell,
                "line": finding.line,
                "column": finding.column,
                "end_line": finding.end_line,
                "end_column": finding.end_column,
                "code": finding.code,
                "message": finding.message,
                "fixable": finding.fixable,
                "fix_safety": finding.fix_safety.value,
                "pays_in": list(finding.pays_in),
                **_verification_fields(finding),
            }
            for outcome, finding in sorted_findings(outcomes)
        ],
        indent=2,
    ) + "\n"


def _verification_fields(finding: Finding) -> dict:
    """``verified`` (true, false, or null: not run) and its reason, on a finding ``--verify`` tried."""
    if finding.verification is None:
        return {}
    return {"verified": finding.verified, "verification": finding.verification}


def format_github(outcomes: list[FileOutcome]) -> str:
    """GitHub workflow commands; a notebook cell is named in the message (lines are the cell's)."""
    lines = []
    for outcome, finding in sorted_findings(outcomes):
        properties = {
            "file": display_path(outcome.path),
            "line": finding.line,
            "endLine": finding.end_line,
            "col": finding.column,
            "endColumn": finding.end_column,
            "title": f"fusionlint ({finding.code})",
        }
        described = ",".join(f"{key}={_escape(str(value), property=True)}" for key, value in properties.items())
        cell = f"cell {finding.cell}: " if finding.cell is not None else ""
        lines.append(f"::warning {described}::{_escape(f'{cell}{finding.code} {finding.message}')}")
    return "".join(line + "\n" for line in lines)


def _escape(value: str, property: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if property else value


def format_sarif(outcomes: list[FileOutcome], rules: list[RuleDoc], root: Path) -> str:
    """SARIF 2.1.0 as GitHub code scanning reads it: URIs relative to ``root`` (the repository)."""
    results = []
    seen_hashes: Counter[str] = Counter()
    for outcome, finding in sorted_findings(outcomes):
        uri = _relative_uri(outcome.path, root)
        line_text = source_line(outcome, finding) or ""
        line_hash = hashlib.blake2b(f"{finding.code}\0{line_text.strip()}".encode(), digest_size=8).hexdigest()
        seen_hashes[(uri, line_hash)] += 1
        cell = f"cell {finding.cell}: " if finding.cell is not None else ""
        properties = _sarif_properties(finding)
        results.append(
            {
                "ruleId": finding.code,
                "level": "error" if finding.code in ("FL998", "FL999") else "warning",
                "message": {"text": f"{cell}{finding.message}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": uri},
                            "region": {
                                "startLine": max(finding.line, 1),
                                "startColumn": max(finding.column, 1),
                                "endLine": max(finding.end_line, finding.line, 1),
                                "endColumn": max(finding.end_column, 1),
                            },
                        }
                    }
                ],
                "partialFingerprints": {"primaryLocationLineHash": f"{line_hash}:{seen_hashes[(uri, line_hash)]}"},
                **({"properties": properties} if properties else {}),
            }
        )
    driver = {
        "name": "fusionlint",
        "version": fusionlint.__version__,
        "informationUri": "https://github.com/fusionlint/fusionlint",
        "rules": [
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.message},
                "fullDescription": {"text": rule.rationale},
                "help": {"text": rule.help, "markdown": rule.help},
            }
            for rule in rules
        ],
    }
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    return json.dumps(sarif, indent=2) + "\n"


def _sarif_properties(finding: Finding) -> dict:
    return {**({"pays_in": list(finding.pays_in)} if finding.pays_in else {}), **_verification_fields(finding)}


def _relative_uri(path: Path, root: Path) -> str:
    """A URI reference (RFC 3986): relative to ``root`` when inside it, percent-encoded either way."""
    absolute = path.absolute()
    try:
        return quote(absolute.relative_to(root.absolute()).as_posix(), safe="/")
    except ValueError:
        return absolute.as_uri()


def format_statistics(outcomes: list[FileOutcome], rules: dict[str, RuleDoc], unsafe_hint: bool) -> str:
    """One line per rule with findings, most frequent first: count, code, ``[*]`` if fixable, name."""
    applicable = FixMode.UNSAFE if unsafe_hint else FixMode.SAFE
    counts = Counter(f.code for outcome in outcomes for f in outcome.findings)
    fixable = {f.code for outcome in outcomes for f in outcome.findings if applicable.allows(f.fix_safety)}
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = rules.get(code)
        mark = "[*]" if code in fixable else "   "
        lines.append(f"{count:>5}\t{code}\t{mark} {rule.name if rule else ''}".rstrip())
    return "".join(line + "\n" for line in lines)
