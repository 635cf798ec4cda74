"""The GitHub Action's work (``action.yml``): ``python -m fusionlint.action``, its inputs in
``INPUT_*`` environment variables, so that it runs the same on a runner, on a laptop and in tests.

- ``check``: ``fusionlint check`` with GitHub annotations; its exit status is the step's.
- ``fix``: ``fusionlint check --fix --verify``, which writes only the fixes proven by running
  them, then by ``on-fix``: ``commit`` commits the fixed files and pushes them to the branch;
  ``suggest`` leaves the files as they were and writes the proven fixes as a diff, which
  reviewdog posts as suggested changes; ``none`` leaves them fixed in the working tree for a
  later step (one that opens a pull request).

Either mode can also write a SARIF report for code scanning (``sarif``), after any fix.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass

BOT_NAME = "github-actions[bot]"
BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"  # GitHub's own address for the bot
ON_FIX = ("commit", "suggest", "none")


class ActionError(Exception):
    """An input or a repository state the action cannot work with; the message says which."""


@dataclass(frozen=True)
class Inputs:
    mode: str = "check"
    src: tuple[str, ...] = (".",)
    args: tuple[str, ...] = ()
    on_fix: str = "commit"
    push: bool = True
    branch: str = ""
    commit_message: str = "fusionlint: apply verified fixes"
    sarif: str = ""
    suggestions: str = "fusionlint-suggestions.diff"

    @classmethod
    def from_environment(cls, environ: dict[str, str]) -> Inputs:
        def value(name: str, default: str) -> str:
            return environ.get(f"INPUT_{name}", "").strip() or default

        inputs = cls(
            mode=value("MODE", cls.mode),
            src=tuple(shlex.split(value("SRC", "."))),
            args=tuple(shlex.split(value("ARGS", ""))),
            on_fix=value("ON_FIX", cls.on_fix),
            push=value("PUSH", "true").lower() == "true",
            branch=value("BRANCH", environ.get("GITHUB_HEAD_REF", "")),
            commit_message=value("COMMIT_MESSAGE", cls.commit_message),
            sarif=value("SARIF", ""),
            suggestions=value("SUGGESTIONS", cls.suggestions),
        )
        if inputs.mode not in ("check", "fix"):
            raise ActionError(f"mode is {inputs.mode!r}: it is 'check' or 'fix'")
        if inputs.on_fix not in ON_FIX:
            raise ActionError(f"on-fix is {inputs.on_fix!r}: it is one of {', '.join(ON_FIX)}")
        return inputs


def check(inputs: Inputs, *options: str) -> subprocess.CompletedProcess:
    """``fusionlint check`` with the action's arguments and paths, by this same interpreter."""
    arguments = [*options, *inputs.args, *inputs.src]
    print(f"+ fusionlint check {shlex.join(arguments)}", file=sys.stderr, flush=True)
    return subprocess.run([sys.executable, "-m", "fusionlint", "check", *arguments])


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise ActionError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def changed_files() -> list[str]:
    """Tracked files that differ from the last commit (fusionlint only ever rewrites files)."""
    return git("diff", "--name-only", "HEAD").splitlines()


def changes() -> str:
    return git("diff", "HEAD")


def run(inputs: Inputs) -> tuple[int, dict[str, str]]:
    """The step's exit status and its outputs."""
    if inputs.mode == "check":
        status, outputs = check(inputs, "--output-format", "github").returncode, {}
    elif inputs.on_fix == "suggest":
        status, outputs = suggest(inputs)
    else:
        status, outputs = fix(inputs)
    if inputs.sarif and status != 2:
        if check(inputs, "--exit-zero", "--output-format", "sarif", "--output-file", inputs.sarif).returncode != 0:
            return 2, outputs
        outputs["sarif-file"] = inputs.sarif
    return status, outputs


def fix(inputs: Inputs) -> tuple[int, dict[str, str]]:
    """Apply the proven fixes; commit and push them with ``on-fix: commit``."""
    before = changes()
    if inputs.on_fix == "commit" and before:
        raise ActionError("on-fix: commit needs a working tree with no uncommitted changes to tracked files")
    status = check(inputs, "--fix", "--verify", "--output-format", "github").returncode
    fixed = status != 2 and changes() != before
    outputs = {"fixed": str(fixed).lower()}
    if fixed and inputs.on_fix == "commit":
        outputs["commit"] = commit(inputs, changed_files())
    return status, outputs


def commit(inputs: Inputs, files: list[str]) -> str:
    for key, default in (("user.name", BOT_NAME), ("user.email", BOT_EMAIL)):
        if subprocess.run(["git", "config", key], stdout=subprocess.DEVNULL).returncode != 0:
            git("config", key, default)
    git("add", "--", *files)
    git("commit", "--quiet", "-m", inputs.commit_message)
    if inputs.push:
        branch = inputs.branch or git("branch", "--show-current")
        if not branch:
            raise ActionError("cannot push from a detached HEAD: check out the branch (actions/checkout's ref:"
                              " ${{ github.head_ref }}) or give the branch input")
        git("push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
    return git("rev-parse", "HEAD")


def suggest(inputs: Inputs) -> tuple[int, dict[str, str]]:
    """The proven fixes as a diff for reviewdog (nothing is written), then the annotations."""
    proven = check(inputs, "--diff", "--verify", "--output-file", inputs.suggestions).returncode
    if proven == 2:
        return 2, {}
    status = check(inputs, "--output-format", "github").returncode
    return status, {"fixed": str(proven == 1).lower(), "suggestions-file": inputs.suggestions}


def write_outputs(outputs: dict[str, str], environ: dict[str, str]) -> None:
    """Step outputs go to the file GitHub names in ``GITHUB_OUTPUT`` (absent outside Actions)."""
    if environ.get("GITHUB_OUTPUT"):
        with open(environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in outputs.items())


def main() -> int:
    try:
        status, outputs = run(Inputs.from_environment(dict(os.environ)))
    except ActionError as exc:
        print(f"::error title=fusionlint action::{exc}", flush=True)
        return 2
    write_outputs(outputs, dict(os.environ))
    return status


if __name__ == "__main__":
    sys.exit(main())
