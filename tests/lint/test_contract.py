"""The contract between the halves (DESIGN.md): every rule's fix is proven by fusionrt.

Each runnable bad/fixed (or bad/good, for a rule without a fix) example pair runs under fusionrt's ``reference`` executor on the same
fresh random inputs; the fixed program must give equal results and be no worse on writes,
bytes written and kernels, and strictly better on at least one of them.
"""
from __future__ import annotations

import ast

import pytest

torch = pytest.importorskip("torch")
import fusionrt  # noqa: E402
from fusionlint.rules import all_rules  # noqa: E402

PAIRS = [
    pytest.param(rule, ex, id=f"{rule.code}-bad{i}")
    for rule in all_rules()
    for i, ex in enumerate(rule.examples)
    if (ex.fixed or ex.good) is not None and ex.call is not None
]
FUSION_RULES = {r.code for r in all_rules() if r.examples}


def _run(source: str, call: str, seed: int):
    """Run ``call`` on a fresh namespace of ``source``: callee and arguments eagerly, the call
    itself lazily, so the inputs are concrete tensors as they are in user code."""
    namespace: dict = {"__name__": "example"}
    exec(compile(source, "example.py", "exec"), namespace)
    expr = ast.parse(call, mode="eval").body
    assert isinstance(expr, ast.Call), f"`call` must be a call expression: {call!r}"
    generator = torch.Generator().manual_seed(seed)
    namespace["randn"] = lambda *shape: torch.randn(*shape, generator=generator)
    evaluate = lambda node: eval(compile(ast.Expression(node), "call", "eval"), namespace)  # noqa: E731
    callee = evaluate(expr.func)
    args = [evaluate(a) for a in expr.args]
    kwargs = {k.arg: evaluate(k.value) for k in expr.keywords}
    return fusionrt.measure(callee, *args, executor="reference", **kwargs)


def _numbers(report) -> tuple[int, int, int]:
    return report.writes, report.bytes_written, report.kernels


def test_every_rule_is_proven_by_a_runnable_example():
    proven = {p.values[0].code for p in PAIRS}
    assert FUSION_RULES <= proven, f"rules fusionrt never checks: {sorted(FUSION_RULES - proven)}"


@pytest.mark.parametrize("rule,example", PAIRS)
def test_fix_gives_equal_results_and_fewer_writes(rule, example):
    before_out, before = _run(example.bad, example.call, seed=0)
    after_out, after = _run(example.fixed or example.good, example.call, seed=0)
    print(f"{rule.code}: writes {before.writes} -> {after.writes}, bytes {before.bytes_written} -> "
          f"{after.bytes_written}, kernels {before.kernels} -> {after.kernels}")
    torch.testing.assert_close(after_out, before_out)
    b, a = _numbers(before), _numbers(after)
    assert all(x <= y for x, y in zip(a, b)), f"the fix costs more on some count: {b} -> {a}"
    assert any(x < y for x, y in zip(a, b)), f"the fix saves nothing under fusionrt: {b} -> {a}"
