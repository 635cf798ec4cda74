"""What ``fusionlint check`` may read and write: the cache, fixed files, odd paths, internal errors.

A checked tree may come from anyone (a cloned repository), so a symlink or a FIFO planted in it
must not make the run write elsewhere or hang; and the user's own files must never lose an edit,
a mode, an owner or a hard link to a fix.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from fusionlint import check, engine
from fusionlint.cli import main
from fusionlint.model import FixSafety
from fusionlint.rules import all_rules

RULE, EXAMPLE = next((r, e) for r in all_rules() for e in r.examples if e.fixed is not None)
FIX = ["--fix", "--unsafe-fixes"] if RULE.fix_safety is FixSafety.UNSAFE else ["--fix"]
CACHE = ".fusionlint_cache"


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def fusionlint(*args: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT")}
    environment.update(env or {})
    command = [sys.executable, "-m", "fusionlint", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=environment, timeout=60)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def bad(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(EXAMPLE.bad)
    return path


# --------------------------------------------------------------------------- the cache


def test_a_symlinked_cache_file_is_replaced_never_written_through(tmp_path, capsys, bad):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / CACHE).mkdir()
    (tmp_path / CACHE / "findings.json").symlink_to(victim)
    (tmp_path / CACHE / ".gitignore").symlink_to(tmp_path / "planted")  # dangling: must not be created
    status, out, err = run_main(capsys, "check", "--output-format", "concise", "-q")
    assert status == 1 and f" {RULE.code} " in out
    assert err.count("\n") == 1 and "cache not read" in err and "not a regular file" in err
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "planted").exists()
    assert not (tmp_path / CACHE / "findings.json").is_symlink()
    assert run_main(capsys, "check", "--output-format", "concise", "-q") == (status, out, "")  # cached now


def test_a_symlinked_cache_folder_is_not_used(tmp_path, capsys, bad):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / CACHE).symlink_to(elsewhere, target_is_directory=True)
    for _ in range(2):  # each run warns once, and never writes there
        status, out, err = run_main(capsys, "check", "--output-format", "concise", "-q")
        assert status == 1 and f" {RULE.code} " in out
        assert err.count("\n") == 1 and "cache not read" in err and "is not a folder" in err
        assert os.listdir(elsewhere) == []


def test_a_planted_temporary_name_is_never_opened(tmp_path, capsys, bad, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / CACHE).mkdir()
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / CACHE / ".findings.json.planted.fusionlint-tmp").symlink_to(victim)
    assert run_main(capsys, "check", "-q")[0] == 1
    assert victim.read_text() == "precious\n"
    assert json.loads((tmp_path / CACHE / "findings.json").read_text())["entries"]


def test_a_cache_that_cannot_be_written_costs_speed_not_findings_nor_fixes(tmp_path, capsys, bad):
    (tmp_path / CACHE).write_text("a file where the folder should be\n")
    status, out, err = run_main(capsys, "check", *FIX)
    assert status == 0 and "fixed, 0 remaining" in out
    assert bad.read_text() == EXAMPLE.fixed
    assert err.startswith("fusionlint: warning: cache not") and err.count("\n") == 1
    assert (tmp_path / CACHE).read_text() == "a file where the folder should be\n"


def test_an_unreadable_cache_is_one_warning(tmp_path, capsys, bad):
    (tmp_path / CACHE / "findings.json").mkdir(parents=True)
    status, out, err = run_main(capsys, "check", "--output-format", "concise", "-q")
    assert status == 1 and f" {RULE.code} " in out
    assert err.count("\n") == 1 and "cache not read" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_folder_is_one_warning(tmp_path, capsys, bad):
    (tmp_path / CACHE).mkdir()
    (tmp_path / CACHE).chmod(0o555)
    try:
        status, out, err = run_main(capsys, "check", "--output-format", "concise", "-q")
    finally:
        (tmp_path / CACHE).chmod(0o755)
    assert status == 1 and f" {RULE.code} " in out
    assert err.count("\n") == 1 and "cache not written" in err and "Permission denied" in err


def test_a_damaged_cache_entry_is_linted_again(tmp_path, capsys, bad):
    assert run_main(capsys, "check", "-q")[0] == 1
    stored = tmp_path / CACHE / "findings.json"
    document = json.loads(stored.read_text())
    document["entries"] = {key: [["not", "a", "row"], 7] for key in document["entries"]}
    stored.write_text(json.dumps(document))
    status, out, err = run_main(capsys, "check", "--output-format", "concise", "-q")
    assert (status, err) == (1, "") and f" {RULE.code} " in out


# --------------------------------------------------------------------------- fixes


def test_an_edit_made_while_linting_is_never_overwritten(tmp_path, capsys, bad, monkeypatch):
    lint = check._run_jobs

    def lint_then_edit(jobs):
        results = lint(jobs)
        bad.write_text(EXAMPLE.bad + "# the user's edit\n")
        return results

    monkeypatch.setattr(check, "_run_jobs", lint_then_edit)
    status, out, err = run_main(capsys, "check", *FIX)
    assert bad.read_text() == EXAMPLE.bad + "# the user's edit\n"
    assert status == 1 and "(0 fixed," in out
    assert "bad.py: fixes not written: the file changed while it was being checked" in err
    assert [name for name in os.listdir(tmp_path) if "fusionlint-tmp" in name] == []


def test_read_only_files_are_not_fixed(tmp_path, capsys, bad):
    bad.chmod(0o444)
    status, out, err = run_main(capsys, "check", *FIX)
    assert bad.read_text() == EXAMPLE.bad and stat.S_IMODE(bad.stat().st_mode) == 0o444
    assert status == 1 and "bad.py: fixes not written: the file is read-only" in err


def test_hard_linked_files_are_not_fixed(tmp_path, capsys, bad):
    other = tmp_path / "other_name.txt"
    os.link(bad, other)
    status, out, err = run_main(capsys, "check", *FIX, "bad.py")
    assert bad.read_text() == other.read_text() == EXAMPLE.bad
    assert os.stat(bad).st_ino == os.stat(other).st_ino
    assert status == 1 and "bad.py: fixes not written: the file has 2 hard links" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another owner")
def test_a_fix_keeps_the_owner_and_mode(tmp_path, capsys, bad):
    os.chown(bad, 4321, 4322)
    bad.chmod(0o640)
    assert run_main(capsys, "check", *FIX)[0] == 0
    assert bad.read_text() == EXAMPLE.fixed
    status = bad.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (4321, 4322, 0o640)


def test_a_symlink_named_on_the_command_line_has_its_target_fixed(tmp_path, capsys, bad):
    (tmp_path / "link.py").symlink_to(bad)
    assert run_main(capsys, "check", *FIX, "link.py")[0] == 0
    assert (tmp_path / "link.py").is_symlink() and bad.read_text() == EXAMPLE.fixed


# --------------------------------------------------------------------------- odd paths


def test_a_fifo_or_a_dangling_link_is_fl998_never_a_hang(tmp_path, bad):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "gone.py").symlink_to(tmp_path / "nowhere.py")
    for args in (["gone.py", "pipe.py", "bad.py"], []):  # named, and found by walking
        done = fusionlint("check", "--output-format", "json", *args, cwd=tmp_path)
        assert done.returncode == 1 and done.stderr == ""
        rows = {(row["path"], row["code"]): row["message"] for row in json.loads(done.stdout)}
        assert rows[("pipe.py", "FL998")] == "not a regular file"
        assert rows[("gone.py", "FL998")] == "cannot read file: No such file or directory"
        assert ("bad.py", RULE.code) in rows


# --------------------------------------------------------------------------- internal errors

DEEP = (
    "import torch\nimport torch.nn.functional as F\n\n\n"
    "def f(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:\n"
    f"    z = x{'.relu()' * 250}\n"
    "    h = F.gelu(x).flatten(0, 1)\n"
    "    return h + bias + z\n"
)


def test_a_deep_expression_is_linted(tmp_path):
    (tmp_path / "deep.py").write_text(DEEP)
    done = fusionlint("check", "--output-format", "concise", "-q", "deep.py", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.startswith("deep.py:7:9: FL001 ")


def test_an_internal_error_fails_the_run_in_one_line_and_is_not_cached(tmp_path, capsys, monkeypatch):
    (tmp_path / "deep.py").write_text(DEEP)
    monkeypatch.setattr(engine, "_DEEP_RECURSION_LIMIT", sys.getrecursionlimit())  # no room for a retry
    status, out, err = run_main(capsys, "check", *FIX)
    assert status == 2 and "All checks passed" not in out
    assert err.startswith("deep.py: internal error: RecursionError: ", len("fusionlint: error: "))
    assert err.count("\n") == 1 and "FUSIONLINT_DEBUG=1" in err
    assert (tmp_path / "deep.py").read_text() == DEEP  # no fix written from a half-done lint
    monkeypatch.undo()
    assert run_main(capsys, "check", "--output-format", "concise")[0] == 1  # not cached as clean


def test_a_crashing_rule_fails_the_run_and_debug_shows_the_traceback(tmp_path, capsys, monkeypatch, bad):
    other = next(rule for rule in all_rules() if rule.code != RULE.code)

    def crash(self, scope):
        raise RuntimeError("boom")

    monkeypatch.setattr(other, "check", crash)
    status, out, err = run_main(capsys, "check", "--output-format", "concise")
    assert status == 2 and f"bad.py:{EXAMPLE.at[0][0]}:" in out  # the other rules' findings are shown
    assert err == (
        f"fusionlint: error: bad.py ({other.code}): internal error: RuntimeError: boom"
        " (a bug in fusionlint; FUSIONLINT_DEBUG=1 shows the traceback)\n"
    )
    monkeypatch.setenv("FUSIONLINT_DEBUG", "1")
    status, out, err = run_main(capsys, "check", "--output-format", "concise")
    assert status == 2 and "Traceback (most recent call last)" in err and 'raise RuntimeError("boom")' in err


def test_an_internal_error_outside_any_file_is_one_line_too(tmp_path, capsys, monkeypatch, bad):
    def broken(*args, **kwargs):
        raise RuntimeError("walk failed")

    monkeypatch.setattr("fusionlint.cli.find_source_files", broken)
    expected = "fusionlint: internal error: RuntimeError: walk failed (a bug in fusionlint; FUSIONLINT_DEBUG=1 "
    assert run_main(capsys, "check") == (2, "", expected + "shows the traceback)\n")
