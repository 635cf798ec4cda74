"""Prove a fix before applying it: the original and the fixed function, run under fusionrt.

A fix is kept only for the functions where the fixed version gives results equal to the
original's (``torch.testing.assert_close``, on the same seeded random tensors, inputs mutated
in place included) and fusionrt reports it cheaper: fewer writes, bytes written or kernels, and
more of none. Each version of the file runs in a fresh process (``runner``), which executes
the user's code; the parent only reads JSON verdicts, so the linter itself never imports torch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fusionlint.verify.harness import Harness, apply_only, changed_functions, function_of_line, harnesses

__all__ = ["Verdict", "Verification", "verify_fix", "changed_functions", "function_of_line"]

DEFAULT_TIMEOUT = 60.0  # seconds per function, per version
_STARTUP_SECONDS = 60.0  # a child's own cost: Python, torch, fusionrt and the module's imports


@dataclass(frozen=True)
class Verdict:
    """What running one function said about its fix."""

    verified: bool | None  # None: it could not be run (no harness)
    reason: str
    equal: bool | None = None  # the results compared equal (None: not compared)


@dataclass(frozen=True)
class Verification:
    text: str | None  # the fixed text holding only proven changes; None when none was proven
    verdicts: dict[str, Verdict]  # per changed function (dotted name)


def module_name(path: Path) -> tuple[str, Path]:
    """The dotted module name of ``path`` and the folder it is importable from (packages climbed)."""
    path = path.absolute()
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) or path.parent.name, folder


def verify_fix(
    original: str, fixed: str, path: Path, timeout: float = DEFAULT_TIMEOUT, seed: int = 0,
    extra_paths: tuple[Path, ...] = (),
) -> Verification:
    """Keep the changes ``fixed`` makes to ``original`` only inside the functions they were proven in.

    When some functions are refused, the text holding only the others is run again (a kept
    function may call a reverted one), until every change it holds is proven.
    """
    verdicts, runnable = _plan(original, changed_functions(original, fixed))
    if not runnable:
        return Verification(None, verdicts)
    with tempfile.TemporaryDirectory(prefix="fusionlint-verify-") as scratch:
        runs = _Runs(Path(scratch), path, runnable, timeout, seed, extra_paths)
        first = runs.original(original)
        verdicts.update({name: verdict for name, verdict in first.items() if verdict is not None})
        accepted = {name for name, verdict in first.items() if verdict is None}
        while accepted:
            candidate = apply_only(original, fixed, accepted)
            verdicts.update(runs.fixed(candidate, accepted))
            proven = {name for name in accepted if verdicts[name].verified}
            if proven == accepted:
                return Verification(candidate, verdicts)
            accepted = proven
    return Verification(None, verdicts)


def _plan(original: str, names: list[str]) -> tuple[dict[str, Verdict], list[Harness]]:
    """The verdicts known without running anything (no harness), and the functions left to run."""
    plan = harnesses(original, names)
    verdicts = {name: Verdict(None, harness.unusable) for name, harness in plan.items() if harness.unusable}
    return verdicts, [plan[name] for name in names if not plan[name].unusable]


class _Runs:
    """The runs of one file's functions: the original once, then each candidate fixed text."""

    def __init__(self, scratch: Path, path: Path, functions: list[Harness], timeout: float, seed: int,
                 extra_paths: tuple[Path, ...]) -> None:
        self.scratch, self.functions, self.timeout, self.seed = scratch, functions, timeout, seed
        self.name, self.root = module_name(path)
        self.path, self.extra_paths = str(path.absolute()), extra_paths
        self.reference = scratch / "original"
        self.rounds = 0

    def original(self, text: str) -> dict[str, Verdict | None]:
        """Run the original: None for a function that ran (its results are the reference), else why not."""
        statuses, failure = self._run(text, self.reference, None, range(len(self.functions)))
        verdicts: dict[str, Verdict | None] = {}
        for index, harness in enumerate(self.functions):
            status = statuses.get(index)
            if status is None:
                verdicts[harness.name] = Verdict(False, f"the original could not be run: {failure}")
            elif status["status"] == "ran":
                verdicts[harness.name] = None
            else:
                verified = None if status["status"] == "no_harness" else False
                verdicts[harness.name] = Verdict(verified, status["reason"])
        return verdicts

    def fixed(self, text: str, names: set[str]) -> dict[str, Verdict]:
        self.rounds += 1
        indices = [i for i, harness in enumerate(self.functions) if harness.name in names]
        statuses, failure = self._run(text, self.scratch / f"fixed{self.rounds}", self.reference, indices)
        verdicts = {}
        for index in indices:
            status = statuses.get(index)
            name = self.functions[index].name
            if status is None:
                verdicts[name] = Verdict(False, f"the fixed version could not be run: {failure}")
            else:
                verdicts[name] = Verdict(status["verified"], status["reason"], status.get("equal"))
        return verdicts

    def _run(self, text: str, out: Path, reference: Path | None, indices) -> tuple[dict[int, dict], str]:
        """Run one version in a fresh process; the statuses it wrote (by function index), and why it
        stopped early when it did."""
        out.mkdir()
        functions = [
            {"name": h.name, "tensors": list(h.tensors)} if i in indices else {"name": h.name, "tensors": [], "skip": True}
            for i, h in enumerate(self.functions)
        ]
        job = {
            "text": text, "path": self.path, "module": self.name, "root": str(self.root), "seed": self.seed,
            "timeout": self.timeout, "functions": functions, "out": str(out),
            "reference": None if reference is None else str(reference),
        }
        job_path = out / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        command = [sys.executable, "-m", "fusionlint.verify.runner", str(job_path)]
        limit = _STARTUP_SECONDS + self.timeout * len(indices)
        env = None
        if self.extra_paths:
            paths = [*map(str, self.extra_paths), *filter(None, [os.environ.get("PYTHONPATH")])]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        failure = ""
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=env,
                                  stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                failure = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        except subprocess.TimeoutExpired:
            failure = f"it ran past {limit:g} s"
        statuses = {}
        for index in indices:
            result = out / f"{index}.json"
            if result.is_file():
                statuses[index] = json.loads(result.read_text(encoding="utf-8"))
        return statuses, failure or "it stopped early"
