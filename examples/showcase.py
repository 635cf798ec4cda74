"""What every example script does when run: lint it, then measure its block and the better block.

An example script holds the pattern in ordinary PyTorch code and a function ``example()`` that
returns ``(callable, args)``. The better program is fusionlint's own fix of the whole file
(``fusionlint check --fix --unsafe-fixes``, applied in memory) or, for a rule that offers no fix,
the script's ``rewritten_example()``, written by hand. Both run under ``fusionrt.measure`` from
the same torch seed (so modules get the same weights and the same inputs), and the output shows
the findings, the fix as a diff, the two reports side by side, and whether the results are equal.

Under ``fusionrt run`` or ``fusionrt compare`` the runtime is already measuring: the script then
only runs its example once and prints a checksum, which ``compare`` checks between its two runs.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import fusionrt
from fusionlint.engine import lint_source
from fusionlint.model import Finding, FixMode, LintOptions
from fusionlint.rules import all_rules
from fusionrt.cli import print_rendered
from fusionrt.report import Comparison, Report
from fusionrt.session import current

SEED = 0


@dataclass(frozen=True)
class Outcome:
    """One example measured: what the linter found, both reports, and whether the results agree."""

    findings: tuple[Finding, ...]
    diff: str  # the fix as a unified diff; empty for a hand-written rewrite
    comparison: Comparison

    def numbers(self) -> dict[str, Any]:
        """The deterministic numbers (examples/numbers.json holds them for every example)."""
        return {
            "rules": sorted({f.code for f in self.findings}),
            **numbers_of(self.comparison),
        }


def numbers_of(comparison: Comparison) -> dict[str, Any]:
    """Kernels, writes and bytes written before and after, and whether the results are equal."""
    def totals(report: Report) -> dict[str, int]:
        return {"kernels": report.kernels, "writes": report.writes, "bytes_written": report.bytes_written}

    return {"before": totals(comparison.before), "after": totals(comparison.after),
            "results_equal": comparison.outputs_equal}


def measure_example(path: str | Path) -> Outcome:
    """Lint the script at ``path`` and measure its example before and after the better program."""
    path = Path(path)
    source = path.read_text(encoding="utf-8")
    options = LintOptions(codes=frozenset(rule.code for rule in all_rules()), fix=FixMode.UNSAFE)
    lint = lint_source(source, str(path), options)
    if lint.errors:
        raise RuntimeError(f"fusionlint failed on {path}: {'; '.join(lint.errors)}")
    pattern = _load(source, path)
    if "rewritten_example" in pattern:
        better, diff, label = pattern["rewritten_example"], "", "rewritten"
    elif lint.source is not None:
        better, label = _load(lint.source, path)["example"], "fixed"
        diff = "".join(difflib.unified_diff(source.splitlines(keepends=True), lint.source.splitlines(keepends=True),
                                            f"{path.name}", f"{path.name} (fixed)", n=1))
    else:
        raise RuntimeError(f"{path}: fusionlint has no fix here and the script has no rewritten_example()")
    before_out, before = _measure(pattern["example"])
    after_out, after = _measure(better)
    comparison = fusionrt.compare(before, after, labels=("pattern", label),
                                  outputs_equal=_equal(before_out, after_out))
    return Outcome(lint.findings + lint.fixed, diff, comparison)


def _load(source: str, path: Path) -> dict[str, Any]:
    """The script's namespace, compiled under its own path so reports name its lines."""
    namespace: dict[str, Any] = {"__name__": path.stem, "__file__": str(path)}
    exec(compile(source, str(path), "exec"), namespace)
    return namespace


def _measure(example: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]) -> tuple[Any, Report]:
    torch.manual_seed(SEED)
    fn, args = example()
    with torch.no_grad():  # an inference block: no autograd graph keeps tensors alive
        return fusionrt.measure(fn, *args)


def _equal(before: Any, after: Any) -> bool:
    """Equal within the tolerance fusion may change (fp32 reductions reassociate)."""
    try:
        torch.testing.assert_close(after, before)  # dtype-aware tolerances
    except AssertionError:
        return False
    return True


def show(namespace: dict[str, Any]) -> int:
    """``python examples/<example>.py``: print the findings, the fix, and both reports.

    Exit status 1 when the better program gives a different result or costs more.
    """
    if current() is not None:  # under `fusionrt run` / `fusionrt compare`: run the example once
        fn, args = namespace["example"]()
        with torch.no_grad():
            out = fn(*args)
        print(f"{Path(namespace['__file__']).name}: checksum {_checksum(out):.4f}")
        return 0
    path = Path(namespace["__file__"])
    outcome = measure_example(path)
    for f in outcome.findings:
        print(f"{path.name}:{f.line}:{f.column}: {f.code} {f.message}")
    if outcome.diff:
        print("\nfusionlint check --fix --unsafe-fixes:\n" + outcome.diff)
    else:
        print(f"\nfusionlint offers no fix here; {path.name}'s rewritten_example() is the better program\n")
    print_rendered(outcome.comparison)
    c = outcome.comparison
    worse = c.kernels > 0 or c.writes > 0 or c.bytes_written > 0
    return 0 if c.outputs_equal and not worse else 1


def _checksum(out: Any) -> float:
    values = out if isinstance(out, (tuple, list)) else (out,)
    return sum(float(torch.as_tensor(v).double().sum()) for v in values)
