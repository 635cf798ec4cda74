"""The real pre-commit, installing this repository as a hook repository (``pre-commit try-repo``).

pre-commit pip-installs the repository into a fresh virtualenv on every try-repo call (about
20-30 s), so this runs the hooks exactly as users get them, in two calls: both hooks on a bad
and a good file, then again on the fixed files. try-repo is pointed at the commit this checkout
is on (``--ref``), so the hook code is the committed code: in a working tree with uncommitted
changes to the linter, commit first to test them here.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusionlint.model import FixSafety
from fusionlint.rules import all_rules

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(*command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def head() -> str:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout, which pre-commit try-repo needs")
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def pre_commit() -> str:
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (pip install 'fusionlint[test]')")
    return pre_commit


def test_hooks_fail_on_a_bad_file_fix_it_and_pass(tmp_path, pre_commit, head):
    fixable = [(r, e) for r in all_rules() for e in r.examples if e.fixed is not None]
    safe = [(r, e) for r, e in fixable if r.fix_safety is FixSafety.SAFE]
    rule, example = (safe or fixable)[0]  # the fix hook applies safe fixes only
    project = tmp_path / "project"
    project.mkdir()
    env = {
        key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH", "CI")
    }
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),  # try-repo installs afresh anyway; keep ~ clean
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
    )  # fmt: skip
    (project / "bad.py").write_text(example.bad)
    (project / "good.py").write_text(example.fixed)
    for command in (("git", "init", "-q"), ("git", "add", "."), ("git", "commit", "-q", "-m", "start")):
        assert run(*command, cwd=project, env=env).returncode == 0

    def try_repo() -> subprocess.CompletedProcess:
        """Both hooks (the check, then the fix) on both files: one install of the hook repository."""
        command = (pre_commit, "try-repo", str(REPO), "--ref", head, "--files", "bad.py", "good.py")
        return run(*command, cwd=project, env=env)

    first = try_repo()
    output = first.stdout
    assert first.returncode == 1, output + first.stderr
    check_part, fix_part = output.split("fusionlint (fix)", 1)
    assert re.search(r"^fusionlint\.+Failed", check_part, re.MULTILINE), output
    line, column = example.at[0]
    assert f"bad.py:{line}:{column}: {rule.code}" in check_part
    assert "good.py:" not in output  # the good file passes the same hook
    assert "\x1b[" not in check_part.split("Failed", 1)[1]  # no color under pre-commit
    if not safe:
        assert (project / "bad.py").read_text() == example.bad
        pytest.skip("the check hook works; no rule has a safe fix yet to try the fix hook with")
    assert re.search(r"^\.+Failed", fix_part, re.MULTILINE), output
    assert "files were modified by this hook" in fix_part
    assert (project / "bad.py").read_text() == example.fixed
    assert (project / "good.py").read_text() == example.fixed  # untouched

    second = try_repo()
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(re.findall(r"\.+Passed$", second.stdout, re.MULTILINE)) == 2
