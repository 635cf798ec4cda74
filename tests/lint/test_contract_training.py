"""The contract of tests/lint/test_contract.py, with autograd on: do the rules matter in training?

Each runnable bad/fixed (or bad/good) example pair runs as one training step under fusionrt's
``reference`` executor: its float inputs require grad, and the tensors it returns are summed and
backpropagated inside the measured call. Both programs must give equal results and gradients.
Whether the rewrite still pays under fusionrt (writes, bytes and kernels no worse, one of them
better, in every example of the rule) is measured and pinned per rule in ``PAYS_IN_TRAINING``,
so a change either way is noticed; a rule whose rewrite stops paying says why in its
``training_note``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
from fusionlint.model import FUSIONRT  # noqa: E402
from fusionlint.rules import all_rules  # noqa: E402
from test_contract import FUSION_RULES, PAIRS, _counts, _run, _saves  # noqa: E402

# Measured: does the rewrite still save under fusionrt with grad enabled, in every example?
# FL009 and FL011-FL014 claim only eager savings, with grad or without (FL009's rescale-later
# example writes the scaled operand for backward: 9 -> 11 writes).
PAYS_IN_TRAINING: dict[str, bool] = {
    "FL001": True, "FL002": True, "FL003": True, "FL004": True, "FL005": True, "FL006": True,
    "FL007": False, "FL008": False, "FL009": False, "FL010": False,
    "FL011": False, "FL012": False, "FL013": False, "FL014": False, "FL015": True, "FL016": False,
    "FL017": False, "FL018": False, "FL019": False, "FL020": False, "FL021": False, "FL022": True, "FL023": False,
    "FL024": True, "FL025": True, "FL026": False, "FL027": False, "FL028": False,
    "FL040": True, "FL041": True, "FL042": True, "FL047": False, "FL048": False, "FL049": True, "FL050": False, "FL051": True,
}
RULES = [rule for rule in all_rules() if rule.code in FUSION_RULES]


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def training_step(fn: Callable) -> Callable:
    """``fn`` as one training step: float tensor inputs require grad, what it returns is summed
    and backpropagated; returns ``fn``'s result and the inputs' gradients."""

    def step(*args: Any, **kwargs: Any) -> tuple[Any, list[torch.Tensor | None]]:
        inputs = [t.requires_grad_() for t in _tensors([args, kwargs]) if t.is_floating_point()]
        result = fn(*args, **kwargs)
        differentiable = [t for t in _tensors(result) if t.requires_grad]
        if differentiable:
            sum(t.sum() for t in differentiable).backward()
        return result, [t.grad for t in inputs]

    return step


@functools.lru_cache(maxsize=None)
def _measured(rule, index: int):
    """Results, gradients and reports of an example's two programs as training steps, on the
    same inputs."""
    example = rule.examples[index]
    before = _run(example.bad, example.call, seed=0, wrap=training_step)
    after = _run(example.fixed or example.good, example.call, seed=0, wrap=training_step)
    return before, after


def test_every_rule_has_a_measured_training_outcome():
    assert set(PAYS_IN_TRAINING) == {rule.code for rule in RULES}


@pytest.mark.parametrize("rule,index", PAIRS)
def test_fix_gives_equal_results_and_gradients_in_training(rule, index):
    ((before_out, before_grads), before), ((after_out, after_grads), after) = _measured(rule, index)
    torch.testing.assert_close(after_out, before_out)
    assert any(g is not None for g in before_grads) or not _tensors(before_out), "the step backpropagated nothing"
    # a rewrite that reorders a product (FL014) changes the rounding of the gradient's sums
    torch.testing.assert_close(after_grads, before_grads, rtol=1e-4, atol=1e-4)
    print(f"{rule.code} training {FUSIONRT}: writes, bytes, kernels {_counts(before, FUSIONRT)} -> {_counts(after, FUSIONRT)}")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_where_the_fix_pays_in_training_is_as_measured(rule):
    saves = []
    for pair in [p for p in PAIRS if p.values[0] is rule]:
        (_, before), (_, after) = _measured(rule, pair.values[1])
        saves.append(_saves(_counts(before, FUSIONRT), _counts(after, FUSIONRT)))
    assert all(saves) == PAYS_IN_TRAINING[rule.code], f"{rule.code}: per example {saves}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_a_rule_that_stops_paying_in_training_says_why(rule):
    assert bool(rule.training_note.strip()) == (FUSIONRT in rule.pays_in and not PAYS_IN_TRAINING[rule.code])
