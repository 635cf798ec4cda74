"""The real pre-commit, installing this repository as a hook repository (``pre-commit try-repo``).

pre-commit pip-installs the repository into a fresh virtualenv (about 20-30 s), so this runs
the hooks exactly as users get them. try-repo is pointed at the commit this checkout is on
(``--ref``): all runs share one install, and the hook code is the committed code. In a
working tree with uncommitted changes to the linter, commit first to test them here.
"""
from __future__ import annotations

import os
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
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
    )  # fmt: skip
    (project / "bad.py").write_text(example.bad)
    (project / "good.py").write_text(example.fixed)
    for command in (("git", "init", "-q"), ("git", "add", "."), ("git", "commit", "-q", "-m", "start")):
        assert run(*command, cwd=project, env=env).returncode == 0

    def try_repo(hook: str, name: str) -> subprocess.CompletedProcess:
        return run(pre_commit, "try-repo", str(REPO), hook, "--ref", head, "--files", name, cwd=project, env=env)

    checked = try_repo("fusionlint", "bad.py")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "Failed" in checked.stdout and f"bad.py:{example.at[0][0]}:" in checked.stdout
    assert rule.code in checked.stdout
    assert "\x1b[" not in checked.stdout.split("Failed", 1)[1]  # no color under pre-commit

    good = try_repo("fusionlint", "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    if not safe:
        pytest.skip("the check hook works; no rule has a safe fix yet to try the fix hook with")
    fixed = try_repo("fusionlint-fix", "bad.py")
    assert fixed.returncode == 1  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in fixed.stdout
    assert (project / "bad.py").read_text() == example.fixed

    again = try_repo("fusionlint", "bad.py")
    assert again.returncode == 0, again.stdout + again.stderr
