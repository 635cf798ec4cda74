"""Tests generated from every rule's own examples: bad code, expected positions, expected fix,
idempotence, look-alikes that must stay silent, and CRLF files."""
from __future__ import annotations

import ast
import re

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, FixSafety, LintOptions
from fusionlint.rules import all_rules, get_rule

BAD = [pytest.param(rule, ex, id=f"{rule.code}-bad{i}") for rule in all_rules() for i, ex in enumerate(rule.examples)]
VALID = [pytest.param(rule, src, id=f"{rule.code}-valid{i}") for rule in all_rules() for i, src in enumerate(rule.valid)]


def _options(rule, fix: FixMode = FixMode.OFF) -> LintOptions:
    return LintOptions(codes=frozenset({rule.code}), fix=fix)


def _mode(rule) -> FixMode:
    return FixMode.UNSAFE if rule.fix_safety is FixSafety.UNSAFE else FixMode.SAFE


@pytest.mark.parametrize("rule,example", BAD)
def test_bad_example_is_flagged_where_expected(rule, example):
    result = lint_source(example.bad, "example.py", _options(rule))
    assert [(f.line, f.column) for f in result.findings] == list(example.at)
    assert {f.code for f in result.findings} == {rule.code}
    assert all(f.fixable == (example.fixed is not None) for f in result.findings)
    assert all(f.pays_in and set(f.pays_in) <= set(rule.pays_in) for f in result.findings)  # a finding may narrow
    assert result.source is None and not result.errors


@pytest.mark.parametrize("rule,example", BAD)
def test_fix_gives_expected_code_and_is_idempotent(rule, example):
    result = lint_source(example.bad, "example.py", _options(rule, _mode(rule)))
    assert not result.errors
    if example.fixed is None:
        assert result.source is None and not result.fixed
        return
    assert result.source == example.fixed
    ast.parse(example.fixed)
    assert len(result.fixed) == len(example.at)
    again = lint_source(example.fixed, "example.py", _options(rule, _mode(rule)))
    assert again.source is None and not again.fixed
    assert not any(f.fixable for f in again.findings)


@pytest.mark.parametrize("rule,example", BAD)
def test_fix_keeps_crlf_line_endings(rule, example):
    crlf = example.bad.replace("\n", "\r\n")
    checked = lint_source(crlf, "example.py", _options(rule))
    assert [(f.line, f.column) for f in checked.findings] == list(example.at)
    result = lint_source(crlf, "example.py", _options(rule, _mode(rule)))
    if example.fixed is not None:
        assert result.source == example.fixed.replace("\n", "\r\n")


@pytest.mark.parametrize("rule,example", BAD)
def test_unsafe_fix_needs_unsafe_mode(rule, example):
    if rule.fix_safety is not FixSafety.UNSAFE or example.fixed is None:
        pytest.skip("only unsafe fixes are held back in safe mode")
    result = lint_source(example.bad, "example.py", _options(rule, FixMode.SAFE))
    assert result.source is None
    assert [f.fix_safety for f in result.findings] == [FixSafety.UNSAFE] * len(example.at)


@pytest.mark.parametrize("rule,source", VALID)
def test_look_alike_is_not_flagged(rule, source):
    ast.parse(source)
    result = lint_source(source, "valid.py", _options(rule, FixMode.UNSAFE))
    assert result.findings == () and result.source is None and not result.errors


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_metadata_and_explain(rule):
    assert re.fullmatch(r"FL\d{3}", rule.code)
    assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.name)
    assert rule.message and "\n" not in rule.message
    assert isinstance(rule.fix_safety, FixSafety)
    assert get_rule(rule.code.lower()) is rule
    assert rule.__module__ == "fusionlint.rules." + rule.name.replace("-", "_"), "a rule's file is named after it"
    text = rule.explain()
    assert text.startswith(f"# {rule.code} ({rule.name})")
    for section in ("## What it does / why it breaks fusion", "## Use instead", "## Fix safety"):
        assert section in text
    if rule.code != "FL999":
        assert rule.examples and rule.valid, "every rule carries bad and look-alike examples"
        assert "## Example" in text
    if any(ex.fixed is not None for ex in rule.examples):
        assert rule.fix_safety is not FixSafety.NONE


def test_registry_is_sorted_unique_and_has_syntax_error():
    codes = [rule.code for rule in all_rules()]
    assert codes == sorted(set(codes))
    assert len({rule.name for rule in all_rules()}) == len(codes)
    assert "FL999" in codes
    with pytest.raises(KeyError, match="FL999"):
        get_rule("FL000")



@pytest.mark.parametrize("rule", [r for r in all_rules() if r.yields_to], ids=lambda r: r.code)
def test_a_rule_yields_to_known_rules_without_a_cycle(rule):
    reached, todo = set(), set(rule.yields_to)
    while todo:
        code = todo.pop()
        reached.add(code)
        todo |= get_rule(code).yields_to - reached  # KeyError: an unknown code
    assert rule.code not in reached


CLONE_BETWEEN_OP_AND_USE = """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    c = z * 3
    s = (a - b).sum(-1, keepdim=True)
    t = c.clone().sum(-1, keepdim=True)
    g = a * b
    return s + t + g * c
"""
KEPT_ALIVE_BETWEEN_CONVS = """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    b = y * 3
    c1 = F.conv2d(a, k1)
    g = a * b
    c2 = F.conv2d(g, k2)
    return c1 + c2
"""


@pytest.mark.parametrize(
    "yielding,winner,source",
    [("FL003", "FL002", CLONE_BETWEEN_OP_AND_USE), ("FL006", "FL003", KEPT_ALIVE_BETWEEN_CONVS)],
    ids=["FL003-yields-to-FL002", "FL006-yields-to-FL003"],
)
def test_precedence_does_not_depend_on_the_selection(yielding, winner, source):
    """Where two rules see one pattern, only the one yielded to reports it, whatever is selected."""
    both = lint_source(source, "m.py", LintOptions(codes=frozenset({yielding, winner})))
    assert [f.code for f in both.findings] == [winner]
    assert lint_source(source, "m.py", LintOptions(codes=frozenset({winner}))).findings == both.findings
    assert lint_source(source, "m.py", LintOptions(codes=frozenset({yielding}))).findings == ()
    assert winner in get_rule(yielding).yields_to
