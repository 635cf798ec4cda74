"""The GitHub Action, run as a runner runs a composite action: action.yml's steps in order, its
``${{ }}`` expressions filled in, on a temporary git repository with a fixable file, a config and
a remote to push to. ``--verify`` runs the file's code under fusionrt on the CPU."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fusionlint.action import BOT_NAME, Inputs
from fusionlint.rules import all_rules

ROOT = Path(__file__).parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
CONDITION = re.compile(r"inputs\.([\w-]+) (==|!=) '([^']*)'")
# FL007's first example: an unsafe fix that --verify proves (equal results, fewer writes)
RULE = next(rule for rule in all_rules() if rule.code == "FL007")
EXAMPLE = RULE.examples[0]
CONFIG = '[project]\nname = "demo"\n\n[tool.fusionlint]\nselect = ["FL007"]\n'


def evaluate(expression: str, inputs: dict[str, str]) -> str:
    """The expressions action.yml may use: an input, the action's folder."""
    if expression.startswith("inputs."):
        return inputs[expression.removeprefix("inputs.")]
    assert expression == "github.action_path", f"an expression the test runner does not know: {expression}"
    return str(ROOT)


def holds(condition: str, inputs: dict[str, str]) -> bool:
    match = CONDITION.fullmatch(condition)
    assert match, f"a condition the test runner does not know: {condition}"
    name, operator, literal = match.groups()
    return (inputs[name] == literal) == (operator == "==")


def run_action(repo: Path, **given: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """The action's steps on ``repo``, as a runner would run them; its outputs as written to GITHUB_OUTPUT."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update({name.replace("_", "-"): value for name, value in given.items()})
    outputs_file = repo.parent / "github_output"
    outputs_file.write_text("")
    environment = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT", "GITHUB_HEAD_REF")}
    environment.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `python` is this interpreter
        GITHUB_OUTPUT=str(outputs_file),
        HOME=str(repo.parent),  # no global git identity: the action brings its own
        GIT_CONFIG_NOSYSTEM="1",
    )
    result = None
    for step in ACTION["runs"]["steps"]:
        if "if" in step and not holds(step["if"], inputs):
            continue
        assert "run" in step, f"the test runs no `uses:` step: {step.get('name')} (give its input)"
        env = {**environment, **{key: EXPRESSION.sub(lambda m: evaluate(m[1], inputs), str(value))
                                 for key, value in step.get("env", {}).items()}}  # fmt: skip
        result = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            break
    outputs = dict(line.split("=", 1) for line in outputs_file.read_text().splitlines())
    return result, outputs


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository with a config and a file holding FL007's example, pushed to a bare remote."""
    remote, repo = tmp_path / "remote.git", tmp_path / "repo"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(repo)], check=True)
    (repo / "pyproject.toml").write_text(CONFIG)
    (repo / "model.py").write_text(EXAMPLE.bad)
    git(repo, "add", ".")
    git(repo, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "--quiet", "-m", "start")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "--quiet", "-u", "origin", "main")
    return repo


@pytest.mark.slow  # runs the code under fusionrt
def test_fix_mode_commits_the_proven_fixes_and_pushes_them(repo):
    start = git(repo, "rev-parse", "HEAD")
    result, outputs = run_action(repo, mode="fix", args="--unsafe-fixes", version="installed", sarif="fusionlint.sarif")
    assert result.returncode == 0, result.stdout + result.stderr
    head = git(repo, "rev-parse", "HEAD")
    assert head != start and git(repo, "rev-parse", "HEAD~1") == start
    assert git(repo, "show", "HEAD:model.py") + "\n" == EXAMPLE.fixed
    assert git(repo, "log", "-1", "--format=%an|%s") == f"{BOT_NAME}|fusionlint: apply verified fixes"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "model.py"
    assert git(repo, "rev-parse", "origin/main") == head == git(repo.parent / "remote.git", "rev-parse", "main")
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert outputs == {"fixed": "true", "commit": head, "sarif-file": "fusionlint.sarif"}
    assert json.loads((repo / "fusionlint.sarif").read_text())["runs"][0]["results"] == []  # nothing left
    again, outputs = run_action(repo, mode="fix", args="--unsafe-fixes", version="installed")
    assert again.returncode == 0 and outputs == {"fixed": "false"} and git(repo, "rev-parse", "HEAD") == head


def test_check_mode_fails_with_annotations_and_writes_sarif(repo):
    result, outputs = run_action(repo, version="installed", sarif="reports/fusionlint.sarif")
    assert result.returncode == 1
    line, column = EXAMPLE.at[0]
    assert f"::error title=fusionlint (FL007),file=model.py,line={line},col={column}," in result.stdout
    assert (repo / "model.py").read_text() == EXAMPLE.bad and git(repo, "log", "--format=%s") == "start"
    (found,) = json.loads((repo / "reports" / "fusionlint.sarif").read_text())["runs"][0]["results"]
    assert found["ruleId"] == "FL007" and outputs == {"sarif-file": "reports/fusionlint.sarif"}


@pytest.mark.slow  # runs the code under fusionrt
def test_suggest_mode_writes_the_proven_fixes_as_a_diff_and_changes_nothing(repo):
    result, outputs = run_action(repo, mode="fix", on_fix="suggest", args="--unsafe-fixes", version="installed")
    assert result.returncode == 1  # the finding is still in the code under review
    assert "::error title=fusionlint (FL007)" in result.stdout
    assert outputs == {"fixed": "true", "suggestions-file": "fusionlint-suggestions.diff"}
    assert (repo / "model.py").read_text() == EXAMPLE.bad and git(repo, "log", "--format=%s") == "start"
    diff = (repo / "fusionlint-suggestions.diff").read_text()
    assert diff.startswith("--- model.py\n+++ model.py\n")  # reviewdog -f=diff -f.diff.strip=0
    git(repo, "apply", "-p0", "fusionlint-suggestions.diff")
    assert (repo / "model.py").read_text() == EXAMPLE.fixed


@pytest.mark.slow  # runs the code under fusionrt
def test_a_fix_that_cannot_be_proven_is_neither_written_nor_committed(repo):
    unproven = EXAMPLE.bad.replace("(x: torch.Tensor,", "(x: torch.Tensor, k: int,", 1)
    assert unproven != EXAMPLE.bad
    (repo / "model.py").write_text(unproven)
    git(repo, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "--quiet", "-am", "k")
    result, outputs = run_action(repo, mode="fix", args="--unsafe-fixes", version="installed")
    assert result.returncode == 1 and outputs == {"fixed": "false"}
    assert "(fix not run: parameter 'k' is required" in result.stdout  # the annotation says why
    assert (repo / "model.py").read_text() == unproven and git(repo, "log", "-1", "--format=%s") == "k"


def test_commit_mode_refuses_a_tree_with_uncommitted_changes(repo):
    (repo / "pyproject.toml").write_text(CONFIG + "\n")
    result, _ = run_action(repo, mode="fix", version="installed")
    assert result.returncode == 2 and "::error title=fusionlint action::on-fix: commit needs" in result.stdout
    assert (repo / "model.py").read_text() == EXAMPLE.bad


def test_every_input_reaches_the_script():
    """Each input is used by a step, and each variable the run step sets changes what the script does."""
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used = {match[1].removeprefix("inputs.") for match in EXPRESSION.finditer(text)} | {
        match[1] for step in ACTION["runs"]["steps"] if "if" in step for match in [CONDITION.fullmatch(step["if"])]
    }
    assert set(ACTION["inputs"]) <= used
    (run_step,) = [step for step in ACTION["runs"]["steps"] if step.get("id") == "fusionlint"]
    assert run_step["run"] == "python -m fusionlint.action"
    samples = {"INPUT_MODE": "fix", "INPUT_ON_FIX": "none", "INPUT_PUSH": "false"}
    for variable in run_step["env"]:
        changed = Inputs.from_environment({variable: samples.get(variable, "a b")})
        assert changed != Inputs(), f"{variable} is not read by fusionlint.action"
