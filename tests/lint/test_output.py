"""Output formats on hand-made outcomes (the CLI tests run them on real findings)."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from fusionlint.check import FileOutcome
from fusionlint.model import Finding, FixMode, FixSafety
from fusionlint.output import (
    RuleDoc,
    format_github,
    format_json,
    format_sarif,
    format_statistics,
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
        "code": "FL002", "message": "m", "fixable": False, "fix_safety": "none", "pays_in": [],
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
        "::warning file=dir%2Cx/a%3Ab.py,line=2,endLine=2,col=6,endColumn=32,title=fusionlint (FL001)"
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


def test_github_properties_escape_percent_and_line_breaks_in_paths():
    line = format_github([outcome(PLAIN, path="100%\r\nx.py")])
    assert line.startswith("::warning file=100%25%0D%0Ax.py,line=3,") and line.count("\n") == 1


def test_an_unreadable_file_shows_no_source_line(tmp_path, capsys):
    """A one-line notebook of the wrong shape is all on line 1: printing it would dump the file."""
    from fusionlint.cli import main

    notebook = tmp_path / "flat.ipynb"
    notebook.write_text('{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "pad": "' + "x" * 500 + '"}')
    assert main(["check", str(notebook), "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert ": FL998 " in out and "xxxxx" not in out
