"""``fusionlint check/rules/explain`` end to end, in-process (``main``) and as a subprocess.

The code under test comes from the rules' own examples (bad code, where it is flagged, what the
fix makes of it), so these tests follow the rules as they change.
"""
from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from fusionlint.cli import main
from fusionlint.model import FixSafety
from fusionlint.edits import TextEdit
from fusionlint.rules import all_rules
from test_output import apply_text_edits

RULES = [rule for rule in all_rules() if rule.examples]
FIXABLE = [(rule, example) for rule in RULES for example in rule.examples if example.fixed is not None]
UNFIXABLE = [(rule, example) for rule in RULES for example in rule.examples if example.fixed is None]
CLEAN = "import torch\n\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return (x * 2).sum()\n"


def fix_flags(rule) -> list[str]:
    return ["--fix", "--unsafe-fixes"] if rule.fix_safety is FixSafety.UNSAFE else ["--fix"]


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def fusionlint(*args: str, cwd, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT")}
    return subprocess.run(
        [sys.executable, "-m", "fusionlint", *args], cwd=cwd, input=stdin, capture_output=True, text=True, env=env
    )


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Every test runs in its own folder, so no config or cache from elsewhere applies."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def bad():
    rule, example = FIXABLE[0]
    return rule, example


def test_clean_tree_passes(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(CLEAN)
    assert run_main(capsys, "check") == (0, "All checks passed!\n", "")


def test_an_empty_file_list_is_not_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    expected = (0, "All checks passed!\n", "fusionlint: warning: no Python files or notebooks found\n")
    assert run_main(capsys, "check", "empty") == expected
    assert run_main(capsys, "check", "--fix", "--force-exclude", "empty") == expected


@pytest.mark.parametrize(("rule", "example"), FIXABLE + UNFIXABLE, ids=lambda x: getattr(x, "code", ""))
def test_examples_are_reported_where_the_rule_says(tmp_path, capsys, rule, example):
    (tmp_path / "bad.py").write_text(example.bad)
    status, out, _ = run_main(capsys, "check", "--output-format", "concise", "--select", rule.code, "-q")
    assert status == 1
    found = [line.split(":")[1:3] for line in out.splitlines()]
    assert found == [[str(line), str(column)] for line, column in example.at]
    assert all(f" {rule.code} " in line for line in out.splitlines())


@pytest.mark.parametrize(("rule", "example"), FIXABLE, ids=lambda x: getattr(x, "code", ""))
def test_fix_writes_the_expected_code_and_exits_0(tmp_path, capsys, rule, example):
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    path.chmod(0o754)
    status, out, _ = run_main(capsys, "check", "--select", rule.code, *fix_flags(rule))
    assert path.read_text() == example.fixed
    assert status == 0, out
    assert "fixed, 0 remaining" in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert sorted(os.listdir(tmp_path)) == [".fusionlint_cache", "bad.py"]  # no temporary file left
    assert run_main(capsys, "check", "--select", rule.code, *fix_flags(rule))[0] == 0  # idempotent


def test_exit_non_zero_on_fix_fails_a_run_that_changed_a_file(tmp_path, capsys):
    rule, example = FIXABLE[0]
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    flags = ("check", "--select", rule.code, *fix_flags(rule), "--exit-non-zero-on-fix")
    status, out, _ = run_main(capsys, *flags)
    assert path.read_text() == example.fixed and "0 remaining" in out
    assert status == 1
    assert run_main(capsys, *flags)[0] == 0  # nothing left to fix: success


def test_fix_exits_1_while_findings_remain(tmp_path, capsys):
    rule, example = UNFIXABLE[0]
    (tmp_path / "bad.py").write_text(example.bad)
    status, out, _ = run_main(capsys, "check", "--fix", "--unsafe-fixes")
    assert status == 1
    assert "(0 fixed, 1 remaining)" in out
    assert (tmp_path / "bad.py").read_text() == example.bad


def test_nothing_is_written_without_fix(tmp_path, capsys, bad):
    rule, example = bad
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    before = path.stat().st_mtime_ns
    assert run_main(capsys, "check", "--unsafe-fixes")[0] == 1
    assert path.read_text() == example.bad and path.stat().st_mtime_ns == before


def test_diff_prints_what_fix_would_do_and_writes_nothing(tmp_path, capsys, bad):
    rule, example = bad
    (tmp_path / "bad.py").write_text(example.bad)
    (tmp_path / "ok.py").write_text(CLEAN)
    status, out, err = run_main(capsys, "check", "--diff", *fix_flags(rule)[1:])
    assert status == 1
    assert out.startswith("--- bad.py\n+++ bad.py\n@@ ")
    removed = [line[1:] for line in out.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert set(removed) <= set(example.bad.splitlines()) and set(added) <= set(example.fixed.splitlines())
    count = len(example.at)
    assert f"Would fix {count} error{'s' if count > 1 else ''}." in err
    assert (tmp_path / "bad.py").read_text() == example.bad
    assert run_main(capsys, "check", "--diff", "ok.py") == (0, "", "No fixes to apply.\n")


def test_a_syntax_error_or_an_unreadable_file_does_not_stop_the_others(tmp_path, capsys, bad):
    rule, example = bad
    (tmp_path / "a_broken.py").write_text("import torch\ndef f(:\n    pass\n")
    (tmp_path / "b_latin.py").write_bytes(b"x = '\xe9'\n")  # no cookie: must be UTF-8
    (tmp_path / "c_gone.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "d_bad.py").write_text(example.bad)
    status, out, err = run_main(capsys, "check", "--output-format", "json")
    assert status == 1 and err == ""
    rows = json.loads(out)
    assert [(row["path"], row["code"]) for row in rows][:3] == [
        ("a_broken.py", "FL999"),
        ("b_latin.py", "FL998"),
        ("c_gone.py", "FL998"),
    ]
    assert rows[0]["line"] == 2
    assert "not valid utf-8: byte b'\\xe9' at line 1" in rows[1]["message"]
    assert "cannot read file" in rows[2]["message"]
    assert {row["code"] for row in rows[3:]} == {rule.code}
    assert (tmp_path / "b_latin.py").read_bytes() == b"x = '\xe9'\n"
    # --fix does not touch what it cannot read either
    run_main(capsys, "check", "--fix", "--unsafe-fixes")
    assert (tmp_path / "b_latin.py").read_bytes() == b"x = '\xe9'\n"
    assert (tmp_path / "d_bad.py").read_text() == example.fixed


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        ("crlf", "utf-8"),
        ("bom+crlf", "utf-8-sig"),
        ("cookie", "iso-8859-1"),
    ],
)
def test_fixes_keep_line_endings_bom_and_encoding(tmp_path, capsys, bad, data, encoding):
    rule, example = bad
    header = "# coding: latin-1\n# caf\u00e9\n" if data == "cookie" else ""
    newline = "\r\n" if "crlf" in data else "\n"
    original = (header + example.bad).replace("\n", newline)
    path = tmp_path / "bad.py"
    path.write_bytes(original.encode(encoding))
    assert run_main(capsys, "check", *fix_flags(rule))[0] == 0
    expected = (header + example.fixed).replace("\n", newline)
    assert path.read_bytes() == expected.encode(encoding)


def test_selection_from_the_command_line_and_the_config(tmp_path, capsys, bad):
    rule, example = bad
    (tmp_path / "bad.py").write_text(example.bad)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_bad.py").write_text(example.bad)
    assert run_main(capsys, "check", "--ignore", rule.code)[0] == 0
    assert run_main(capsys, "check", "--select", "FL9")[0] == 0
    assert run_main(capsys, "check", "--select", "FL9", "--extend-select", rule.code[:3])[0] == 1
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.fusionlint]\nignore = ['{rule.code}']\nexclude = ['tests']\n"
    )
    assert run_main(capsys, "check")[0] == 0
    assert run_main(capsys, "check", "--select", rule.code)[0] == 0  # ignore still applies
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.fusionlint]\nexclude = ['tests']\n[tool.fusionlint.per-file-ignores]\n'bad.py' = ['{rule.code}']\n"
    )
    assert run_main(capsys, "check") == (0, "All checks passed!\n", "")
    status, out, _ = run_main(capsys, "check", "tests/test_bad.py", "--output-format", "concise")
    assert status == 1 and out.startswith("tests/test_bad.py:")  # a named file is checked even if excluded
    assert run_main(capsys, "check", "tests/test_bad.py", "--force-exclude")[0] == 0
    assert run_main(capsys, "check", "--exit-zero", "tests/test_bad.py")[0] == 0


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["check", "missing.py"], None, "missing.py: no such file or directory"),
        (["check", "--select", "XY1"], None, "'XY1' is not a rule selector"),
        (["check", "--select", "FL5"], None, "unknown rule selector 'FL5'"),
        (["check"], "[tool.fusionlint]\nselect = 'FL001'\n", "select must be a list of strings"),
        (["check"], "[tool.fusionlint\n", "invalid TOML"),
        (["check", "--config", "nope.toml"], None, "nope.toml: config file not found"),
        (["check", "--output-format", "xml"], None, "invalid choice: 'xml'"),
        (["check", "-", "ok.py"], None, "cannot be mixed"),
        (["explain", "FL123"], None, "unknown rule code 'FL123'"),
        ([], None, "the following arguments are required: COMMAND"),
    ],
)
def test_usage_and_config_errors_exit_2(tmp_path, capsys, args, config, message):
    (tmp_path / "ok.py").write_text(CLEAN)
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    status, out, err = run_main(capsys, *args)
    assert status == 2
    assert message in err


def test_output_formats_on_real_findings(tmp_path, capsys, bad):
    rule, example = bad
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.py").write_text(example.bad)
    line, column = example.at[0]

    rows = json.loads(run_main(capsys, "check", "--output-format", "json")[1])
    assert rows[0]["path"] == "src/bad.py" and (rows[0]["line"], rows[0]["column"]) == (line, column)
    assert rows[0]["code"] == rule.code and rows[0]["fixable"] is True and rows[0]["cell"] is None
    assert rows[0]["end_line"] >= line

    sarif = json.loads(run_main(capsys, "check", "--output-format", "sarif")[1])
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == rule.code
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/bad.py"
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {rule.code, "FL998", "FL999"}

    github = run_main(capsys, "check", "--output-format", "github")[1]
    assert github.startswith(f"::error title=fusionlint ({rule.code}),file=src/bad.py,line={line},col={column},")
    assert f"::{rule.code} " in github

    lines = run_main(capsys, "check", "--output-format", "json-lines")[1].splitlines()
    assert [json.loads(line) for line in lines] == rows

    (issue, *_) = json.loads(run_main(capsys, "check", "--output-format", "gitlab")[1])
    assert issue["check_name"] == rule.code and issue["location"]["path"] == "src/bad.py"
    assert issue["location"]["positions"]["begin"] == {"line": line, "column": column}

    suites = ElementTree.fromstring(run_main(capsys, "check", "--output-format", "junit")[1])
    case = suites.find("testsuite/testcase")
    assert (case.get("classname"), case.get("name"), case.get("line")) == ("src/bad.py", f"fusionlint.{rule.code}", str(line))
    assert suites.get("failures") == str(len(example.at))

    rdjson = json.loads(run_main(capsys, "check", "--output-format", "rdjson")[1])
    diagnostic = rdjson["diagnostics"][0]
    assert diagnostic["location"]["path"] == "src/bad.py" and diagnostic["code"]["value"] == rule.code
    assert diagnostic["location"]["range"]["start"] == {"line": line, "column": column}  # ASCII: bytes are characters
    assert diagnostic["suggestions"] and diagnostic["code"]["url"] == rows[0]["url"]

    status, stats, _ = run_main(capsys, "check", "--statistics")
    assert status == 1 and stats.split("\t")[:2] == [f"{len(example.at):>5}", rule.code]


def test_stdin(tmp_path, capsys, monkeypatch, bad):
    rule, example = bad
    result = fusionlint("check", "--stdin-filename", "pkg/mod.py", "-", cwd=tmp_path, stdin=example.bad)
    assert result.returncode == 1
    assert result.stdout.startswith(f"pkg/mod.py:{example.at[0][0]}:{example.at[0][1]}: {rule.code}")
    fixed = fusionlint("check", "-", *fix_flags(rule), "--stdin-filename", "m.py", cwd=tmp_path, stdin=example.bad)
    assert fixed.stdout == example.fixed  # the fixed text, and only it, on stdout
    assert fixed.returncode == 0 and "fixed, 0 remaining" in fixed.stderr
    clean = fusionlint("check", "-", cwd=tmp_path, stdin=CLEAN)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed!\n")
    assert not (tmp_path / ".fusionlint_cache").exists()  # stdin is never cached


def test_subprocess_output_is_plain_and_exit_codes_hold(tmp_path, bad):
    rule, example = bad
    (tmp_path / "bad.py").write_text(example.bad)
    result = fusionlint("check", cwd=tmp_path)
    assert result.returncode == 1 and "\x1b[" not in result.stdout
    line, column = example.at[0]
    assert result.stdout.startswith(f"bad.py:{line}:{column}: {rule.code}")
    assert f"{line} | {example.bad.splitlines()[line - 1]}" in result.stdout
    count = len(example.at)
    assert f"Found {count} error{'s' if count > 1 else ''}." in result.stdout
    assert fusionlint("check", "--no-such-option", cwd=tmp_path).returncode == 2


def test_rules_and_explain(capsys):
    status, out, _ = run_main(capsys, "rules")
    assert status == 0
    codes = [line.split()[0] for line in out.splitlines()]
    assert codes == sorted(codes) and {"FL998", "FL999"} <= set(codes)
    for rule in all_rules():
        assert any(line.startswith(rule.code) and rule.name in line for line in out.splitlines())
        status, text, _ = run_main(capsys, "explain", rule.code.lower())
        assert status == 0 and text == rule.explain()
    assert "unreadable-file" in run_main(capsys, "explain", "FL998")[1]


def test_explain_renders_markdown_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("CI", "PRE_COMMIT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    rule = all_rules()[0]
    assert main(["explain", rule.code]) == 0
    shown = terminal.getvalue()
    assert "\x1b[" in shown and "# " not in shown  # headings rendered, not raw markdown
    assert rule.name in re.sub(r"\x1b\[[0-9;]*m", "", shown)


def test_extra_ops_from_the_config_reach_the_rules(tmp_path, capsys):
    if "FL001" not in {rule.code for rule in all_rules()}:
        pytest.skip("FL001 (merging views of element-wise results) is not registered")
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(t1: torch.Tensor) -> torch.Tensor:\n"
        "    return torch.my_act(t1).flatten(0, 1) + 1\n"
    )
    assert run_main(capsys, "check", "-q")[0] == 0  # an op the tables do not know
    (tmp_path / "pyproject.toml").write_text('[tool.fusionlint.extra-ops]\nelementwise = ["my_act"]\n')
    status, out, _ = run_main(capsys, "check", "-q", "--output-format", "concise")
    assert status == 1 and out.startswith("m.py:5:12: FL001")


# ----------------------------------------------------------------------------- fixes in the reports


def apply_json_edits(text: str, rows: list[dict]) -> str:
    """The fixes of a JSON report applied to ``text`` as an editor applies Ruff's edits."""
    def position(where: dict) -> tuple[int, int]:
        return where["row"], where["column"]

    edits = [
        TextEdit(edit["content"], position(edit["location"]), position(edit["end_location"]))
        for row in rows
        for edit in row["fix"]["edits"]
    ]
    return apply_text_edits(text, edits)


@pytest.mark.parametrize(("rule", "example"), FIXABLE, ids=lambda x: getattr(x, "code", ""))
def test_json_fix_edits_applied_to_the_file_give_what_fix_writes(tmp_path, capsys, rule, example):
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    rows = json.loads(run_main(capsys, "check", "--no-cache", "--select", rule.code, "--output-format", "json")[1])
    assert all(row["fix"]["applicability"] == rule.fix_safety.value for row in rows)
    assert all(row["url"].endswith(f"docs/rules.md#{rule.code.lower()}-{rule.name}") for row in rows)
    run_main(capsys, "check", "--no-cache", "--select", rule.code, *fix_flags(rule))
    assert apply_json_edits(example.bad, rows) == path.read_text() == example.fixed


def test_fix_edits_hold_with_crlf_and_non_ascii_text_and_from_the_cache(tmp_path, capsys, bad):
    rule, example = bad
    path = tmp_path / "bad.py"
    original = ("# caf\u00e9 \u4e2d\n" + example.bad).replace("\n", "\r\n")
    path.write_bytes(original.encode())
    flags = ("check", "--select", rule.code, "--output-format", "json")
    cold = json.loads(run_main(capsys, *flags)[1])
    warm = json.loads(run_main(capsys, *flags)[1])
    assert warm == cold and cold[0]["fix"] is not None  # the cache keeps the edits
    run_main(capsys, "check", "--no-cache", "--select", rule.code, *fix_flags(rule))
    fixed = path.read_bytes().decode()
    assert "\r\n" in fixed and apply_json_edits(original, cold) == fixed


def test_notebook_fix_edits_count_inside_the_cell(tmp_path, capsys, bad):
    rule, example = bad
    code_cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                 "source": example.bad.splitlines(keepends=True)}  # fmt: skip
    notebook = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# notes\n", "more"]}, code_cell],
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    rows = json.loads(run_main(capsys, "check", "--select", rule.code, "--output-format", "json")[1])
    assert rows[0]["cell"] == 2 and rows[0]["line"] == example.at[0][0]
    run_main(capsys, "check", "--no-cache", "--select", rule.code, *fix_flags(rule))
    fixed_cell = "".join(json.loads(path.read_text())["cells"][1]["source"])
    assert apply_json_edits(example.bad, rows) == fixed_cell == example.fixed


def test_show_fixes_shows_the_fix_then_lists_what_fix_applied(tmp_path, capsys, bad):
    rule, example = bad
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    status, out, _ = run_main(capsys, "check", "--select", rule.code, "--show-fixes")
    assert status == 1 and f"({rule.fix_safety.value} fix)" in out and "  = help: The fix " in out
    removed = [line[4:] for line in out.splitlines() if line.startswith("  - ")]
    assert removed and all(line in example.bad.splitlines() for line in removed)
    added = [line[4:] for line in out.splitlines() if line.startswith("  + ")]
    assert added and all(line in example.fixed.splitlines() for line in added)
    status, out, _ = run_main(capsys, "check", "--select", rule.code, *fix_flags(rule), "--show-fixes")
    count = len(example.at)
    assert out.startswith(f"Fixed {count} error{'s' if count > 1 else ''}:\n- bad.py:\n    {count} \u00d7 {rule.code} ({rule.name})\n")
    assert status == 0 and path.read_text() == example.fixed


def test_exit_non_zero_on_fix_composes_with_output_file_show_fixes_and_verify(tmp_path, capsys):
    rule, example = next((r, e) for r, e in FIXABLE if r.code == "FL007")  # FL007's first example is proven by --verify
    path = tmp_path / "bad.py"
    path.write_text(example.bad)
    flags = ("check", "--select", rule.code, *fix_flags(rule), "--exit-non-zero-on-fix", "--show-fixes")
    status, out, _ = run_main(capsys, *flags, "--verify", "--output-file", "report.txt")
    assert (status, out) == (1, "") and path.read_text() == example.fixed
    report = (tmp_path / "report.txt").read_text()
    assert "Fixed 1 error:" in report and "Verified: 1 fix proven and applied" in report
    assert run_main(capsys, *flags, "--output-format", "json", "--output-file", "report.json")[0] == 0  # nothing left
    assert json.loads((tmp_path / "report.json").read_text()) == []


def test_output_file_is_replaced_atomically_and_never_through_a_symlink(tmp_path, capsys, bad):
    rule, example = bad
    (tmp_path / "bad.py").write_text(example.bad)
    report = tmp_path / "reports" / "fusionlint.sarif"
    status, out, err = run_main(capsys, "check", "--output-format", "sarif", "--output-file", str(report))
    assert (status, out, err) == (1, "", "")  # the same status, the report in the file only
    assert json.loads(report.read_text())["runs"][0]["results"][0]["ruleId"] == rule.code
    report.chmod(0o644)
    inode = report.stat().st_ino
    run_main(capsys, "check", "--output-format", "sarif", "--output-file", str(report))
    assert report.stat().st_ino != inode and stat.S_IMODE(report.stat().st_mode) == 0o644  # replaced, mode kept
    assert os.listdir(report.parent) == ["fusionlint.sarif"]  # no temporary file left

    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    status, out, err = run_main(capsys, "check", *fix_flags(rule), "--output-format", "json", "--output-file", str(link))
    assert status == 2 and "symlink" in err and out == ""
    assert target.read_text() == "keep me" and link.is_symlink()
    assert (tmp_path / "bad.py").read_text() == example.bad  # refused before anything was fixed
    link.unlink()
    link.symlink_to(tmp_path / "missing.json")  # a dangling link too
    assert run_main(capsys, "check", "--output-file", str(link))[0] == 2 and not (tmp_path / "missing.json").exists()
    status, _, err = run_main(capsys, "check", "--output-file", str(tmp_path))
    assert status == 2 and "folder" in err
