"""How findings are shown: text for people; JSON, JSON lines, SARIF, GitHub annotations, GitLab
Code Quality, JUnit XML and reviewdog's rdjson for machines.

fusionlint has no severities: every finding fails the check (exit 1), so every format that has a
level reports an error (GitLab's scale has none: ``major``, as Ruff writes). A finding's fix
is shown as Ruff shows it (``fusionlint.edits``), in characters (rdjson: in UTF-8 bytes, as
reviewdog counts).

Text is colored with rich only on an interactive terminal, never under ``CI`` or ``PRE_COMMIT``
(pre-commit runs hooks under a pty) or ``NO_COLOR``; rich is imported only then. Notebook
findings read ``nb.ipynb:cell N:line:col`` with the line counted inside the cell.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import xml.etree.ElementTree as ElementTree
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

import fusionlint
from fusionlint.check import FileOutcome
from fusionlint.edits import text_edits
from fusionlint.model import Finding, FixMode, FixSafety
from fusionlint.notebook import cell_source, read_notebook, source_lines
from fusionlint.sourcefile import SourceFileError

RULES_PAGE = f"{fusionlint.REPOSITORY_URL}/blob/main/docs/rules.md"


@dataclass(frozen=True)
class RuleDoc:
    """What the outputs say about a rule."""

    code: str
    name: str
    message: str
    rationale: str
    help: str  # markdown
    documented: bool = False  # has a section in docs/rules.md

    @property
    def url(self) -> str | None:
        return f"{RULES_PAGE}#{rule_anchor(self.code, self.name)}" if self.documented else None


def rule_anchor(code: str, name: str) -> str:
    """The GitHub anchor of a rule's section in docs/rules.md, whose heading is ``CODE (name)``."""
    return f"{code.lower()}-{name}"


def rule_url(finding: Finding) -> str | None:
    """The section of docs/rules.md about the finding's rule (FL998 and FL999 have none)."""
    return f"{RULES_PAGE}#{rule_anchor(finding.code, finding.rule)}" if finding.rule else None


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


def finding_text(outcome: FileOutcome, finding: Finding) -> str | None:
    """The text a finding's lines count in: its file's, or its cell's for a notebook. None for a
    file that could not be read as source (FL998): its bytes are not worth showing."""
    text = outcome.text
    if text is None or finding.code == "FL998":
        return None
    if finding.cell is not None:
        cells = _cell_sources(text)
        return cells[finding.cell - 1] if cells is not None and 0 < finding.cell <= len(cells) else None
    return text


@functools.lru_cache(maxsize=4)
def _cell_sources(text: str) -> tuple[str, ...] | None:
    """A notebook's cell sources, read once for all its findings (reading it per finding made a
    notebook with thousands of findings quadratic)."""
    try:
        return tuple(cell_source(cell) for cell in read_notebook(text)["cells"])
    except SourceFileError:
        return None


def source_line(outcome: FileOutcome, finding: Finding) -> str | None:
    """The line a finding points at (inside its cell for a notebook), without its line ending."""
    text = finding_text(outcome, finding)
    lines = source_lines(text) if text is not None else []
    return lines[finding.line - 1].rstrip("\r\n") if 0 < finding.line <= len(lines) else None


def write_text(
    outcomes: list[FileOutcome], stream: IO[str], unsafe_hint: bool, show_source: bool, show_fixes: bool = False
) -> None:
    """``path:line:col: CODE [*] message`` per finding, then the source line with a caret under the span.

    ``[*]`` marks a finding whose fix ``--fix`` applies (or, with ``unsafe_hint``, ``--fix --unsafe-fixes``).
    With ``show_fixes``, each fix follows its finding as a diff.
    """
    console = _console(stream) if is_interactive(stream) else None
    applicable = FixMode.UNSAFE if unsafe_hint else FixMode.SAFE
    for outcome, finding in sorted_findings(outcomes):
        mark = " [*]" if applicable.allows(finding.fix_safety) else ""
        head = f"{location(outcome, finding)}: {finding.code}{mark} {finding.message}"
        head += _pays(finding) + _verification(finding)
        line = source_line(outcome, finding) if show_source else None
        fix = _fix_lines(outcome, finding) if show_fixes else []
        if console is None:
            stream.write(head + "\n")
            if line is not None:
                stream.write(_plain_snippet(finding, line))
            stream.write("".join(text + "\n" for text in fix))
            if line is not None or fix:
                stream.write("\n")
        else:
            _rich_finding(console, outcome, finding, mark, line, fix)


def _fix_lines(outcome: FileOutcome, finding: Finding) -> list[str]:
    """A finding's fix as Ruff's ``--show-fixes`` shows it: what it does, then the lines it
    replaces (``-``) and their replacement (``+``)."""
    text = finding_text(outcome, finding)
    if not finding.edits or text is None:
        return []
    lines = source_lines(text)
    shown = [f"  = help: {finding.fix_title or 'Apply the fix'} ({finding.fix_safety.value} fix)"]
    for edit in finding.edits:
        shown += ["  - " + old.rstrip("\r\n") for old in lines[edit.start - 1 : edit.end]]
        shown += ["  + " + new.rstrip("\r\n") for new in source_lines(edit.text)]
    return shown


def fixed_summary(outcomes: list[FileOutcome]) -> str:
    """After ``--fix --show-fixes``: the fixes applied, per file and rule, as Ruff lists them."""
    files = sorted((outcome for outcome in outcomes if outcome.fixed), key=lambda outcome: outcome.path.as_posix())
    if not files:
        return ""
    lines = [f"Fixed {_plural(sum(len(outcome.fixed) for outcome in files), 'error')}:"]
    for outcome in files:
        lines.append(f"- {display_path(outcome.path)}:")
        for (code, name), count in sorted(Counter((f.code, f.rule) for f in outcome.fixed).items()):
            lines.append(f"    {count} \u00d7 {code}{f' ({name})' if name else ''}")
    return "\n".join(lines) + "\n\n"


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
    return f"{gutter} |\n{finding.line} | {line}\n{gutter} | {' ' * start}{'^' * (end - start)}\n"


def _span(finding: Finding, line: str) -> tuple[int, int]:
    """0-based [start, end) of the finding on its first line (end columns are exclusive)."""
    start = min(max(finding.column - 1, 0), len(line))
    end = finding.end_column - 1 if finding.end_line == finding.line else len(line)
    return start, max(min(end, len(line)), start + 1)


def _console(stream: IO[str]):
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=True)


def _rich_finding(
    console, outcome: FileOutcome, finding: Finding, mark: str, line: str | None, fix: list[str]
) -> None:
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
    if line is not None:
        start, end = _span(finding, line)
        number = str(finding.line)
        code = Syntax(line, "python", theme="ansi_dark", background_color="default").highlight(line)
        code.rstrip()
        code.stylize("bold underline red", start, end)
        gutter = Text(f"{number} | ", style="blue")
        console.print(Text(" " * len(number) + " |", style="blue"))
        console.print(gutter + code)
        console.print(Text(" " * len(number) + " | ", style="blue") + Text(" " * start + "^" * (end - start), style="bold red"))
    styles = {"-": "red", "+": "green"}
    for shown in fix:
        console.print(Text(shown, style=styles.get(shown[2], "cyan")))
    if line is not None or fix:
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


ERROR = "error"  # the level of every finding in the formats that have levels (see the module's docstring)


def json_rows(outcomes: list[FileOutcome]) -> list[dict]:
    """One object per finding: where, what, its fix in Ruff's shape (or null), and its rule's URL."""
    rows = []
    for outcome, finding in sorted_findings(outcomes):
        rows.append({
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
            "fix": _json_fix(outcome, finding),
            "url": rule_url(finding),
            "pays_in": list(finding.pays_in),
            **_verification_fields(finding),
        })  # fmt: skip
    return rows


def _json_fix(outcome: FileOutcome, finding: Finding) -> dict | None:
    text = finding_text(outcome, finding)
    if not finding.edits or text is None:
        return None
    return {
        "applicability": finding.fix_safety.value,
        "message": finding.fix_title or None,
        "edits": [
            {"content": edit.content, "location": _row_column(edit.start), "end_location": _row_column(edit.end)}
            for edit in text_edits(text, finding.edits)
        ],
    }


def _row_column(position: tuple[int, int]) -> dict:
    return {"row": position[0], "column": position[1]}


def format_json(outcomes: list[FileOutcome]) -> str:
    return json.dumps(json_rows(outcomes), indent=2) + "\n"


def format_json_lines(outcomes: list[FileOutcome]) -> str:
    return "".join(json.dumps(row) + "\n" for row in json_rows(outcomes))


def _verification_fields(finding: Finding) -> dict:
    """``verified`` (true, false, or null: not run) and its reason, on a finding ``--verify`` tried."""
    if finding.verification is None:
        return {}
    return {"verified": finding.verified, "verification": finding.verification}


def format_github(outcomes: list[FileOutcome]) -> str:
    """GitHub workflow commands; a notebook cell is named in the message (lines are the cell's), and
    so is why ``--verify`` left a fix unapplied."""
    lines = []
    for outcome, finding in sorted_findings(outcomes):
        properties = {
            "title": f"fusionlint ({finding.code})",
            "file": display_path(outcome.path),
            "line": finding.line,
            "col": finding.column,
            "endLine": finding.end_line,
            "endColumn": finding.end_column,
        }
        described = ",".join(f"{key}={_escape(str(value), property=True)}" for key, value in properties.items())
        message = f"{_cell(finding)}{finding.code} {finding.message}{_verification(finding)}"
        lines.append(f"::{ERROR} {described}::{_escape(message)}")
    return "".join(line + "\n" for line in lines)


def _cell(finding: Finding) -> str:
    return f"cell {finding.cell}: " if finding.cell is not None else ""


def _escape(value: str, property: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if property else value


def _fingerprinted(outcomes: list[FileOutcome], root: Path) -> list[tuple[FileOutcome, Finding, str | None, str]]:
    """Each finding with its path relative to ``root`` (None: outside it) and a fingerprint that
    survives edits elsewhere in the file: a hash of the rule and the line's text, and the
    occurrence number of that pair in the file."""
    located = []
    seen: Counter[tuple[str, str]] = Counter()
    for outcome, finding in sorted_findings(outcomes):
        relative = _relative(outcome.path, root)
        line_text = source_line(outcome, finding) or ""
        line_hash = hashlib.blake2b(f"{finding.code}\0{line_text.strip()}".encode(), digest_size=8).hexdigest()
        key = (outcome.path.absolute().as_posix(), line_hash)
        seen[key] += 1
        located.append((outcome, finding, relative, f"{line_hash}:{seen[key]}"))
    return located


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        return None


def format_sarif(outcomes: list[FileOutcome], rules: list[RuleDoc], root: Path) -> str:
    """SARIF 2.1.0 as GitHub code scanning reads it: URIs relative to ``root`` (the repository),
    percent-encoded as RFC 3986 asks (absolute ``file:`` URIs outside it)."""
    results = []
    for outcome, finding, relative, line_fingerprint in _fingerprinted(outcomes, root):
        uri = quote(relative, safe="/") if relative is not None else outcome.path.absolute().as_uri()
        properties = _sarif_properties(finding)
        results.append(
            {
                "ruleId": finding.code,
                "level": ERROR,
                "message": {"text": f"{_cell(finding)}{finding.message}"},
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
                "partialFingerprints": {"primaryLocationLineHash": line_fingerprint},
                **({"properties": properties} if properties else {}),
            }
        )
    driver = {
        "name": "fusionlint",
        "version": fusionlint.__version__,
        "informationUri": fusionlint.REPOSITORY_URL,
        "rules": [
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.message},
                "fullDescription": {"text": rule.rationale},
                "help": {"text": rule.help, "markdown": rule.help},
                **({"helpUri": rule.url} if rule.url else {}),
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


def format_gitlab(outcomes: list[FileOutcome], root: Path) -> str:
    """GitLab Code Quality: paths relative to ``root`` (the project folder), a unique fingerprint each."""
    issues = []
    for outcome, finding, relative, line_fingerprint in _fingerprinted(outcomes, root):
        path = relative if relative is not None else outcome.path.absolute().as_posix()
        issues.append({
            "check_name": finding.code,
            "description": f"{_cell(finding)}{finding.code} {finding.message}",
            "severity": "major",
            "fingerprint": hashlib.blake2b(f"{path}\0{line_fingerprint}".encode(), digest_size=16).hexdigest(),
            "location": {
                "path": path,
                "positions": {
                    "begin": {"line": max(finding.line, 1), "column": finding.column},
                    "end": {"line": max(finding.end_line, finding.line, 1), "column": finding.end_column},
                },
            },
        })  # fmt: skip
    return json.dumps(issues, indent=2) + "\n"


def format_junit(outcomes: list[FileOutcome]) -> str:
    """JUnit XML as CI servers read it: a test suite per file, a failed test case per finding
    (a single passing case when there is none)."""
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for outcome, finding in sorted_findings(outcomes):
        by_file[display_path(outcome.path)].append(finding)
    total = sum(len(findings) for findings in by_file.values())
    suites = ElementTree.Element("testsuites", name="fusionlint", tests=str(max(total, 1)), failures=str(total), errors="0")
    if not by_file:
        suite = ElementTree.SubElement(suites, "testsuite", name="fusionlint", tests="1", failures="0", errors="0")
        ElementTree.SubElement(suite, "testcase", name="No errors found", classname="fusionlint")
    for path, findings in by_file.items():
        count = str(len(findings))
        suite = ElementTree.SubElement(suites, "testsuite", name=path, tests=count, failures=count, errors="0")
        for finding in findings:
            case = ElementTree.SubElement(
                suite, "testcase", name=f"fusionlint.{finding.code}", classname=path,
                line=str(finding.line), column=str(finding.column),
            )
            failure = ElementTree.SubElement(case, "failure", message=finding.message)
            failure.text = f"{_cell(finding)}line {finding.line}, col {finding.column}, {finding.code} {finding.message}"
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def format_rdjson(outcomes: list[FileOutcome]) -> str:
    """reviewdog's Diagnostic Format: each finding, and its fix as a suggestion (not for a
    notebook, whose lines are the cell's while reviewdog counts the file's)."""
    diagnostics = []
    for outcome, finding in sorted_findings(outcomes):
        text = finding_text(outcome, finding)
        lines = source_lines(text) if text is not None else []
        url = rule_url(finding)
        diagnostic = {
            "message": f"{_cell(finding)}{finding.message}",
            "location": {
                "path": display_path(outcome.path),
                "range": _byte_range(lines, (finding.line, finding.column), (finding.end_line, finding.end_column)),
            },
            "severity": ERROR.upper(),
            "code": {"value": finding.code, **({"url": url} if url else {})},
        }
        if finding.edits and text is not None and finding.cell is None:
            diagnostic["suggestions"] = [
                {"range": _byte_range(lines, edit.start, edit.end), "text": edit.content}
                for edit in text_edits(text, finding.edits)
            ]
        diagnostics.append(diagnostic)
    result = {"source": {"name": "fusionlint", "url": fusionlint.REPOSITORY_URL}, "severity": ERROR.upper(),
              "diagnostics": diagnostics}  # fmt: skip
    return json.dumps(result, indent=2) + "\n"


def _byte_range(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": _byte_position(lines, *start), "end": _byte_position(lines, *end)}


def _byte_position(lines: list[str], row: int, column: int) -> dict:
    """reviewdog's position: 1-based, its column counted in UTF-8 bytes."""
    line = lines[row - 1] if 0 < row <= len(lines) else ""
    before = line[: column - 1]
    width = len(before.encode("utf-8", "surrogatepass")) + max(column - 1 - len(before), 0)
    return {"line": max(row, 1), "column": width + 1}


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
