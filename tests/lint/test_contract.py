"""The contract between the halves (DESIGN.md): every rule's fix is proven by fusionrt.

Each runnable bad/fixed (or bad/good, for a rule without a fix) example pair runs under fusionrt's ``reference`` executor on the same
fresh random inputs; the fixed program must give equal results, and be no worse where the rule
says its rewrite pays (``Rule.pays_in``): on fusionrt's writes, bytes written and kernels, and
strictly better on one of them; on the report's eager counts likewise, in at least one example
of the rule.
"""
from __future__ import annotations

import ast
import functools
from typing import Callable

import pytest

torch = pytest.importorskip("torch")
import fusionrt  # noqa: E402
from fusionlint.model import EAGER, FUSIONRT  # noqa: E402
from fusionlint.rules import all_rules  # noqa: E402

PAIRS = [
    pytest.param(rule, i, id=f"{rule.code}-bad{i}")
    for rule in all_rules()
    for i, ex in enumerate(rule.examples)
    if (ex.fixed or ex.good) is not None and ex.call is not None
]
FUSION_RULES = {r.code for r in all_rules() if r.examples}


def _run(source: str, call: str, seed: int, wrap: Callable[[Callable], Callable] = lambda fn: fn):
    """Run ``call`` on a fresh namespace of ``source``: callee and arguments eagerly, the call
    itself (through ``wrap``, if given) lazily, so the inputs are concrete tensors as they are in
    user code."""
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
    return fusionrt.measure(wrap(callee), *args, executor="reference", **kwargs)


def _counts(report, place: str) -> tuple[int, int, int]:
    if place == FUSIONRT:
        return report.writes, report.bytes_written, report.kernels
    return report.eager_writes, report.eager_bytes_written, report.eager_kernels


@functools.lru_cache(maxsize=None)
def _measured(rule, index: int):
    """Results and reports of an example's bad and fixed (or good) programs, on the same inputs."""
    example = rule.examples[index]
    return _run(example.bad, example.call, seed=0), _run(example.fixed or example.good, example.call, seed=0)


def _saves(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    return all(a <= b for a, b in zip(after, before)) and any(a < b for a, b in zip(after, before))


def test_every_rule_is_proven_by_a_runnable_example():
    proven = {p.values[0].code for p in PAIRS}
    assert FUSION_RULES <= proven, f"rules fusionrt never checks: {sorted(FUSION_RULES - proven)}"


@pytest.mark.parametrize("rule", [r for r in all_rules() if r.code in FUSION_RULES], ids=lambda r: r.code)
def test_every_rule_says_where_it_pays(rule):
    assert rule.pays_in, "a rule with examples says where its rewrite saves"
    assert set(rule.pays_in) <= {FUSIONRT, EAGER} and len(set(rule.pays_in)) == len(rule.pays_in)


@pytest.mark.parametrize("rule,index", PAIRS)
def test_fix_gives_equal_results_and_pays_where_the_rule_says(rule, index):
    (before_out, before), (after_out, after) = _measured(rule, index)
    torch.testing.assert_close(after_out, before_out)
    for place in (FUSIONRT, EAGER):
        b, a = _counts(before, place), _counts(after, place)
        print(f"{rule.code} {place}: writes, bytes, kernels {b} -> {a}")
        if place in rule.pays_in:
            assert all(x <= y for x, y in zip(a, b)), f"the fix costs more under {place} on some count: {b} -> {a}"
    if FUSIONRT in rule.pays_in:
        assert _saves(_counts(before, FUSIONRT), _counts(after, FUSIONRT)), "the fix saves nothing under fusionrt"


@pytest.mark.parametrize("rule", [r for r in all_rules() if r.code in FUSION_RULES], ids=lambda r: r.code)
def test_a_rule_claims_only_places_its_examples_save_in(rule):
    pairs = [_measured(rule, p.values[1]) for p in PAIRS if p.values[0] is rule]
    for place in rule.pays_in:
        assert any(_saves(_counts(before, place), _counts(after, place)) for (_, before), (_, after) in pairs), (
            f"{rule.code} claims to pay in {place}, but none of its examples saves there"
        )
