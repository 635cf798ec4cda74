"""Output formats on hand-made outcomes (the CLI tests run them on real findings)."""
from __future__ import annotations

import io
import json
import random
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path

import pytest

from fusionlint.check import FileOutcome
from fusionlint.edits import TextEdit, text_edits
from fusionlint.model import Finding, FixMode, FixSafety, LineEdit
from fusionlint.output import (
    RuleDoc,
    fixed_summary,
    format_github,
    format_gitlab,
    format_json,
    format_json_lines,
    format_junit,
    format_rdjson,
    format_sarif,
    format_statistics,
    rule_url,
    summary,
    write_text,
)
from fusionlint.sourcefile import SourceFile

SOURCE = "import torch\nt4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)\ny = x.clone()\n"
SAFE = Finding("FL001", "group the views", 2, 6, 2, 32, FixSafety.SAFE)
UNSAFE = Finding("FL002", "clone, then compute", 3, 5, 3, 14, FixSafety.UNSAFE)
PLAIN = Finding("FL002", "clone, then compute", 3, 5, 3, 14)
RULES = [RuleDoc("FL001", "inline-view", "group the views", "Views break blocks.", "# FL001\n")]


def outcome(*findings: Finding, path: str = "src/m.py", text: str = SOURCE) -> FileOutcome:
    source = SourceFile(Path(path), text.encode(), text, "utf-8")
    return FileOutcome(path=Path(path), source=source, findings=findings)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_text_lines_and_snippets():
    stream = io.StringIO()
    write_text([outcome(SAFE, UNSAFE)], stream, unsafe_hint=False, show_source=True)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "src/m.py:2:6: FL001 [*] group the views"
    assert lines[2] == "2 | t4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)"
    assert lines[3] == "  |      " + "^" * 26  # columns 6..31, the end column is exclusive
    assert "src/m.py:3:5: FL002 clone, then compute" in lines  # unsafe: no [*] without --unsafe-fixes
    stream = io.StringIO()
    write_text([outcome(UNSAFE)], stream, unsafe_hint=True, show_source=False)
    assert stream.getvalue() == "src/m.py:3:5: FL002 [*] clone, then compute\n"


def test_notebook_locations_name_the_cell():
    cell = Finding("FL001", "group the views", 1, 3, 1, 5, cell=4)
    stream = io.StringIO()
    write_text([outcome(cell, path="nb.ipynb", text="{}")], stream, unsafe_hint=False, show_source=False)
    assert stream.getvalue() == "nb.ipynb:cell 4:1:3: FL001 group the views\n"


def test_color_only_on_a_terminal_outside_ci_and_pre_commit(monkeypatch):
    for name in ("CI", "PRE_COMMIT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    terminal = Terminal()
    write_text([outcome(SAFE)], terminal, unsafe_hint=False, show_source=True)
    assert "\x1b[" in terminal.getvalue()
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert "2 | t4 = t1.unsqueeze(0).matmul(t2)" in shown and "^" * 26 in shown
    for name in ("CI", "PRE_COMMIT"):
        monkeypatch.setenv(name, "1")
        terminal = Terminal()
        write_text([outcome(SAFE)], terminal, unsafe_hint=False, show_source=True)
        assert "\x1b[" not in terminal.getvalue()
        monkeypatch.delenv(name)


def test_summaries():
    assert summary([outcome()], FixMode.OFF, unsafe_hint=False) == "All checks passed!\n"
    assert summary([outcome(SAFE, UNSAFE, PLAIN)], FixMode.OFF, unsafe_hint=False) == (
        "Found 3 errors.\n[*] 1 fixable with `--fix` (1 hidden fix can be enabled with `--unsafe-fixes`).\n"
    )
    assert summary([outcome(SAFE, UNSAFE)], FixMode.OFF, unsafe_hint=True) == (
        "Found 2 errors.\n[*] 2 fixable with `--fix --unsafe-fixes`.\n"
    )
    fixed = outcome(PLAIN)
    fixed.fixed = (SAFE,)
    assert summary([fixed], FixMode.SAFE, unsafe_hint=False) == "Found 2 errors (1 fixed, 1 remaining).\n"


def test_json_fields():
    cell = Finding("FL002", "m", 1, 1, 1, 2, cell=3)
    rows = json.loads(format_json([outcome(SAFE), outcome(cell, path="a/nb.ipynb")]))
    assert rows[0] == {
        "path": "a/nb.ipynb", "cell": 3, "line": 1, "column": 1, "end_line": 1, "end_column": 2,
        "code": "FL002", "message": "m", "fixable": False, "fix_safety": "none", "fix": None, "url": None,
        "pays_in": [],
    }  # fmt: skip
    assert rows[1]["fixable"] is True and rows[1]["cell"] is None and rows[1]["end_column"] == 32
    paying = Finding("FL002", "m", 1, 1, 1, 2, pays_in=("fusionrt", "eager"))
    assert json.loads(format_json([outcome(paying)]))[0]["pays_in"] == ["fusionrt", "eager"]


def test_where_a_finding_pays_is_shown_compactly(monkeypatch):
    paying = Finding("FL002", "clone, then compute", 3, 5, 3, 14, pays_in=("fusionrt", "eager"))
    stream = io.StringIO()
    write_text([outcome(paying)], stream, unsafe_hint=False, show_source=False)
    assert stream.getvalue() == "src/m.py:3:5: FL002 clone, then compute [pays in fusionrt, eager]\n"
    for name in ("CI", "PRE_COMMIT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    terminal = Terminal()
    write_text([outcome(paying)], terminal, unsafe_hint=False, show_source=False)
    assert "\x1b[" in terminal.getvalue()
    assert "clone, then compute [pays in fusionrt, eager]" in re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())


def test_github_annotations_escape_properties_and_data():
    odd = Finding("FL001", "50% slower,\nreally: yes", 2, 6, 2, 32)
    line = format_github([outcome(odd, path="dir,x/a:b.py")])
    assert line == (
        "::error title=fusionlint (FL001),file=dir%2Cx/a%3Ab.py,line=2,col=6,endLine=2,endColumn=32"
        "::FL001 50%25 slower,%0Areally: yes\n"
    )


def test_sarif_has_what_code_scanning_needs(tmp_path):
    path = tmp_path / "src" / "m.py"
    again = Finding("FL001", "group the views", 2, 6, 2, 32)
    document = json.loads(format_sarif([outcome(SAFE, again, path=str(path))], RULES, root=tmp_path))
    assert document["version"] == "2.1.0"
    run = document["runs"][0]
    assert run["tool"]["driver"]["name"] == "fusionlint"
    (rule,) = run["tool"]["driver"]["rules"]
    assert set(rule) >= {"id", "shortDescription", "fullDescription", "help"}
    first, second = run["results"]
    assert first["ruleId"] == "FL001" and first["message"]["text"] == "group the views"
    assert first["level"] == "error"  # every finding fails the check
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/m.py"
    assert location["region"] == {"startLine": 2, "startColumn": 6, "endLine": 2, "endColumn": 32}
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in (first, second)]
    assert hashes[0].endswith(":1") and hashes[1].endswith(":2") and hashes[0][:-2] == hashes[1][:-2]
    assert "properties" not in first
    paying = Finding("FL001", "group the views", 2, 6, 2, 32, pays_in=("fusionrt",))
    document = json.loads(format_sarif([outcome(paying, path=str(path))], RULES, root=tmp_path))
    assert document["runs"][0]["results"][0]["properties"] == {"pays_in": ["fusionrt"]}


def test_statistics_most_frequent_first():
    rules = {rule.code: rule for rule in RULES}
    text = format_statistics([outcome(SAFE, PLAIN), outcome(PLAIN)], rules, unsafe_hint=False)
    assert text == "    2\tFL002\n    1\tFL001\t[*] inline-view\n"
    text = format_statistics([outcome(UNSAFE)], rules, unsafe_hint=True)
    assert text == "    1\tFL002\t[*]\n"


@pytest.mark.parametrize("show_source", [True, False])
def test_findings_come_sorted_by_path_then_position(show_source):
    stream = io.StringIO()
    write_text([outcome(UNSAFE, SAFE, path="b.py"), outcome(PLAIN, path="a.py")], stream, False, show_source)
    heads = [line.split(":")[0:2] for line in stream.getvalue().splitlines() if line.endswith(("views", "compute"))]
    assert heads == [["a.py", "3"], ["b.py", "2"], ["b.py", "3"]]


@pytest.mark.parametrize(
    ("name", "uri"),
    [
        ("my dir/a b.py", "my%20dir/a%20b.py"),
        ("#1/100%.py", "%231/100%25.py"),
        ("caf\u00e9/\u4e2d.py", "caf%C3%A9/%E4%B8%AD.py"),
        ("a:b/c?d[e].py", "a%3Ab/c%3Fd%5Be%5D.py"),
    ],
)
def test_sarif_uris_are_percent_encoded(tmp_path, name, uri):
    inside = json.loads(format_sarif([outcome(SAFE, path=str(tmp_path / name))], RULES, root=tmp_path))
    assert inside["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri
    outside = json.loads(format_sarif([outcome(SAFE, path=str(tmp_path / name))], RULES, root=tmp_path / "other"))
    absolute = outside["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert absolute == (tmp_path / name).as_uri() and absolute.endswith("/" + uri)


def test_github_annotations_say_why_verify_left_a_fix_unapplied():
    refused = Finding("FL007", "a copy", 3, 5, 3, 14, FixSafety.UNSAFE, verified=False, verification="results differ")
    line = format_github([outcome(refused)])
    assert line.endswith("::FL007 a copy (fix refused: results differ)\n")


def test_github_properties_escape_percent_and_line_breaks_in_paths():
    line = format_github([outcome(PLAIN, path="100%\r\nx.py")])
    assert line.startswith("::error title=fusionlint (FL002),file=100%25%0D%0Ax.py,line=3,") and line.count("\n") == 1


def test_an_unreadable_file_shows_no_source_line(tmp_path, capsys):
    """A one-line notebook of the wrong shape is all on line 1: printing it would dump the file."""
    from fusionlint.cli import main

    notebook = tmp_path / "flat.ipynb"
    notebook.write_text('{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "pad": "' + "x" * 500 + '"}')
    assert main(["check", str(notebook), "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert ": FL998 " in out and "xxxxx" not in out


# ----------------------------------------------------------------------------- fixes, machine formats

COPY = Finding("FL007", "a copy nothing needs", 3, 5, 3, 14, FixSafety.UNSAFE, edits=(LineEdit(3, 3, "y = x\n"),),
               rule="redundant-copy", fix_title="The fix drops the copy.")  # fmt: skip


def apply_text_edits(text: str, edits: list[TextEdit]) -> str:
    """What an editor does with Ruff-style edits: rows and columns are 1-based, ends exclusive."""
    lines = io.StringIO(text, newline="").readlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1] - 1

    for edit in sorted(edits, key=lambda edit: offset(edit.start), reverse=True):
        text = text[: offset(edit.start)] + edit.content + text[offset(edit.end) :]
    return text


def replace_lines(text: str, edit: LineEdit) -> str:
    lines = io.StringIO(text, newline="").readlines()
    lines[edit.start - 1 : edit.end] = [edit.text]
    return "".join(lines)


def test_a_fix_is_narrowed_to_what_it_changes_cut_between_words():
    (edit,) = text_edits(SOURCE, COPY.edits)
    assert edit == TextEdit("", (3, 6), (3, 14))  # `.clone()` goes
    fused = LineEdit(2, 2, "t4 = torch.addmm(t3, t1, t2) * 2\n")
    (edit,) = text_edits(SOURCE, (fused,))
    assert edit == TextEdit("torch.addmm(t3, t1, t2) * 2", (2, 6), (2, 50))  # not "orch.addmm(..."
    crlf = SOURCE.replace("\n", "\r\n")
    joined = LineEdit(2, 3, "t4 = 1\r\n")
    (edit,) = text_edits(crlf, (joined,))
    assert apply_text_edits(crlf, [edit]) == replace_lines(crlf, joined)


def test_narrowed_edits_reproduce_whole_line_edits_on_random_texts():
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    words = ["x", "y_1", "é", "torch", "(", ")", " ", ".", "+", "中", "=", "\t"]
    for _ in range(300):
        newline = rng.choice(["\n", "\r\n", "\r"])
        lines = ["".join(rng.choices(words, k=rng.randrange(0, 8))) + newline for _ in range(rng.randrange(1, 6))]
        text = "".join(lines)
        start = rng.randrange(1, len(lines) + 1)
        end = rng.randrange(start, len(lines) + 1)
        kept = "".join(lines[start - 1 : end])
        other = "".join(rng.choices(words, k=5)) + newline
        endings = kept.replace(newline, rng.choice(["\n", "\r\n", "\r"]))  # a fix may change line endings
        replacement = "".join(rng.choice([kept, "", other, endings]) for _ in range(2))
        line_edit = LineEdit(start, end, replacement)
        assert apply_text_edits(text, text_edits(text, (line_edit,))) == replace_lines(text, line_edit), seed


def test_json_carries_the_fix_in_ruffs_shape_and_the_rule_url():
    (row,) = json.loads(format_json([outcome(COPY)]))
    assert row["fix"] == {
        "applicability": "unsafe",
        "message": "The fix drops the copy.",
        "edits": [{"content": "", "location": {"row": 3, "column": 6}, "end_location": {"row": 3, "column": 14}}],
    }
    assert row["url"] == "https://github.com/fusionlint/fusionlint/blob/main/docs/rules.md#fl007-redundant-copy"
    (row,) = json.loads(format_json([outcome(PLAIN)]))
    assert row["fix"] is None and row["url"] is None  # a finding of no rule (FL998, FL999)


def test_json_lines_hold_the_same_objects_one_per_line():
    outcomes = [outcome(COPY, SAFE), outcome(PLAIN, path="a.py")]
    lines = format_json_lines(outcomes).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(format_json(outcomes))
    assert len(lines) == 3 and format_json_lines([outcome()]) == ""


def test_gitlab_code_quality_report(tmp_path):
    path = tmp_path / "src" / "m.py"
    twice = Finding("FL001", "group the views", 2, 6, 2, 32)
    issues = json.loads(format_gitlab([outcome(SAFE, twice, COPY, path=str(path))], root=tmp_path))
    assert [issue["check_name"] for issue in issues] == ["FL001", "FL001", "FL007"]
    for issue in issues:
        assert issue["severity"] == "major" and re.fullmatch(r"[0-9a-f]{32}", issue["fingerprint"])
        assert issue["location"]["path"] == "src/m.py"
    assert issues[2]["location"]["positions"] == {"begin": {"line": 3, "column": 5}, "end": {"line": 3, "column": 14}}
    assert issues[2]["description"] == "FL007 a copy nothing needs"
    assert len({issue["fingerprint"] for issue in issues}) == 3  # the same line twice: still unique
    moved = Finding("FL007", "a copy nothing needs", 4, 5, 4, 14, FixSafety.UNSAFE)
    later = json.loads(format_gitlab([outcome(moved, path=str(path), text="\n" + SOURCE)], root=tmp_path))
    assert later[0]["fingerprint"] == issues[2]["fingerprint"]  # a line added above keeps the issue's identity


def test_junit_report_parses_as_xml():
    document = ElementTree.fromstring(format_junit([outcome(SAFE, COPY), outcome(PLAIN, path="a.py")]))
    assert document.tag == "testsuites" and document.get("tests") == "3" and document.get("failures") == "3"
    suites = {suite.get("name"): suite for suite in document.iter("testsuite")}
    assert set(suites) == {"a.py", "src/m.py"} and suites["src/m.py"].get("failures") == "2"
    case = suites["src/m.py"].findall("testcase")[1]
    assert case.get("name") == "fusionlint.FL007" and case.get("classname") == "src/m.py" and case.get("line") == "3"
    failure = case.find("failure")
    assert failure.get("message") == "a copy nothing needs" and failure.text == "line 3, col 5, FL007 a copy nothing needs"
    clean = ElementTree.fromstring(format_junit([outcome()]))
    assert clean.get("failures") == "0" and clean.find("testsuite/testcase").get("name") == "No errors found"
    odd = Finding("FL001", 'a <b> & "c"', 1, 1, 1, 2)
    assert ElementTree.fromstring(format_junit([outcome(odd)])).find(".//failure").get("message") == 'a <b> & "c"'


POSITION = {"type": "object", "properties": {"line": {"type": "integer", "minimum": 1},
                                             "column": {"type": "integer", "minimum": 1}}}  # fmt: skip
RANGE = {"type": "object", "required": ["start"], "properties": {"start": POSITION, "end": POSITION}}
# reviewdog's DiagnosticResult (proto/rdf/reviewdog.proto), written as a JSON schema
RDJSON_SCHEMA = {
    "type": "object",
    "required": ["diagnostics"],
    "properties": {
        "source": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "url": {"type": "string"}}},
        "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
        "diagnostics": {"type": "array", "items": {
            "type": "object",
            "required": ["message", "location"],
            "additionalProperties": False,
            "properties": {
                "message": {"type": "string"},
                "location": {"type": "object", "required": ["path"], "additionalProperties": False,
                             "properties": {"path": {"type": "string"}, "range": RANGE}},
                "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
                "code": {"type": "object", "required": ["value"], "additionalProperties": False,
                         "properties": {"value": {"type": "string"}, "url": {"type": "string"}}},
                "suggestions": {"type": "array", "items": {
                    "type": "object", "required": ["range", "text"], "additionalProperties": False,
                    "properties": {"range": RANGE, "text": {"type": "string"}}}},
            },
        }},
    },
}  # fmt: skip


def test_rdjson_follows_reviewdogs_format_with_utf8_byte_columns():
    jsonschema = pytest.importorskip("jsonschema")
    text = "import torch\ny = 'é中' + x.clone()\n"
    copy = replace(COPY, line=2, column=12, end_line=2, end_column=21, edits=(LineEdit(2, 2, "y = 'é中' + x\n"),))
    in_cell = replace(copy, cell=2)
    document = json.loads(format_rdjson([outcome(copy, text=text), outcome(in_cell, path="nb.ipynb", text="{}")]))
    jsonschema.validate(document, RDJSON_SCHEMA)
    second, first = document["diagnostics"]  # sorted by path: nb.ipynb, src/m.py
    assert first["severity"] == "ERROR" and first["code"]["url"].endswith("#fl007-redundant-copy")
    # `x` is character 12 and byte 15 ('é' is 2 bytes, '中' 3)
    assert first["location"]["range"] == {"start": {"line": 2, "column": 15}, "end": {"line": 2, "column": 24}}
    assert first["suggestions"] == [{"range": {"start": {"line": 2, "column": 16}, "end": {"line": 2, "column": 24}}, "text": ""}]
    line = text.splitlines()[1].encode()
    assert line[15 - 1 : 24 - 1] == b"x.clone()" and line[16 - 1 : 24 - 1] == b".clone()"
    assert "suggestions" not in second and second["message"].startswith("cell 2: ")  # cell lines are not the file's


def test_show_fixes_prints_each_fix_as_a_diff_and_lists_the_fixes_applied():
    stream = io.StringIO()
    write_text([outcome(COPY)], stream, unsafe_hint=False, show_source=True, show_fixes=True)
    assert stream.getvalue().splitlines()[4:7] == [
        "  = help: The fix drops the copy. (unsafe fix)",
        "  - y = x.clone()",
        "  + y = x",
    ]
    fixed = outcome(PLAIN)
    fixed.fixed = (COPY, COPY, SAFE)
    assert fixed_summary([fixed, outcome(PLAIN, path="b.py")]) == (
        "Fixed 3 errors:\n- src/m.py:\n    1 \u00d7 FL001\n    2 \u00d7 FL007 (redundant-copy)\n\n"
    )
    assert fixed_summary([outcome(PLAIN)]) == ""


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_rule_urls_point_at_their_section_of_docs_rules_md():
    """The URL of each rule's findings (and SARIF's helpUri) names a heading of docs/rules.md."""
    from fusionlint.cli import _rule_docs
    from fusionlint.engine import lint_source
    from fusionlint.model import LintOptions
    from fusionlint.ruledocs import documented_rules

    page = (Path(__file__).parents[2] / "docs" / "rules.md").read_text(encoding="utf-8")
    anchors = {github_anchor(line[3:]) for line in page.splitlines() if line.startswith("## ")}
    for rule in documented_rules():
        (finding, *_) = lint_source(rule.examples[0].bad, "m.py", LintOptions(codes=frozenset({rule.code}))).findings
        page_url, anchor = rule_url(finding).split("#")
        assert page_url.endswith("/blob/main/docs/rules.md") and anchor in anchors, rule.code
        if finding.fixable:  # the first sentence of the fix notes, on one line
            assert finding.fix_title.startswith("The fix ") and finding.fix_title.endswith("."), rule.code
            assert "\n" not in finding.fix_title and "  " not in finding.fix_title
        else:
            assert finding.fix_title == ""
    documented = [doc for doc in _rule_docs() if doc.url is not None]
    assert {doc.code for doc in documented} == {rule.code for rule in documented_rules()}
    assert all(doc.url.split("#")[1] in anchors for doc in documented)
