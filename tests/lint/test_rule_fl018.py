"""FL018 beyond its own examples: the spellings of each formula, and the text test."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.elementwise_by_hand import ElementwiseByHand

OPTIONS = LintOptions(codes=frozenset({"FL018"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


SPELLINGS = """\
import math

import torch
import torch.nn.functional as F


def spellings(x: torch.Tensor):
    a = F.sigmoid(x) * x
    b = 0.5 * x * (1 + torch.erf(x * 0.7071067811865476))
    c = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    d = torch.log1p(x.exp())
    e = (1.0 + x.abs()).log()
    f = x.exp() - 1.0
    return a, b, c, d, e, f
"""


def test_each_spelling_names_its_op():
    assert findings(SPELLINGS) == [
        (8, "SiLU written out: `F.silu` computes it in one kernel"),
        (9, "GELU written out: `F.gelu` computes it in one kernel"),
        (10, "GELU's tanh approximation written out: `F.gelu(..., approximate=\"tanh\")` computes it in one kernel"),
        (11, "softplus written out: `F.softplus` computes it in one kernel"),
        (12, "`log(1 + x)` written out: `torch.log1p` computes it in one kernel"),
        (13, "`exp(x) - 1` written out: `torch.expm1` computes it in one kernel"),
    ]


HARD_SPELLINGS = """\
import torch
import torch.nn.functional as F


def hard_spellings(x: torch.Tensor):
    a = x.mul(F.softplus(x).tanh())
    b = (x + 3).clamp(min=0, max=6).div(6.)
    c = x * (torch.clamp(3.0 + x, 0, 6) / 6)
    d = 1.0 / (1.0 + (-x).exp())
    e = x.mul(torch.sigmoid(x))
    return a, b, c, d, e
"""


def test_each_hard_spelling_names_its_op():
    assert findings(HARD_SPELLINGS) == [
        (6, "Mish written out: `F.mish` computes it in one kernel"),
        (7, "hard sigmoid written out: `F.hardsigmoid` computes it in one kernel"),
        (8, "hard swish written out: `F.hardswish` computes it in one kernel"),
        (9, "the logistic function written out: `torch.sigmoid` computes it in one kernel"),
        (10, "SiLU written out: `F.silu` computes it in one kernel"),
    ]


def test_hard_look_alikes_are_not_flagged():
    source = """\
import torch
import torch.nn.functional as F


def look_alikes(x: torch.Tensor, y: torch.Tensor):
    hard_mish = 0.5 * x * (x + 2).clamp(min=0, max=2)
    in_place = x.add_(3.).clamp_(0., 6.).div_(6.)
    other_input = y * F.relu6(x + 3) / 6
    other_bounds = (x + 3).clamp(-6, 6) / 6
    other_sign = 1 / (1 + torch.exp(x))
    return hard_mish, in_place, other_input, other_bounds, other_sign
"""
    assert findings(source) == []


def test_a_formula_inside_another_is_reported_once():
    source = "import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.log(1 + torch.exp(x * torch.sigmoid(x)))\n"
    assert [line for line, _ in findings(source)] == [5]


def test_the_text_test_passes_every_flagged_statement():
    for source in (SPELLINGS, HARD_SPELLINGS, *(example.bad for example in ElementwiseByHand.examples[:3])):
        lines = source.splitlines()
        for line, _ in findings(source):
            assert ElementwiseByHand.may_match([lines[line - 1]], 0, op_tables())


def test_the_text_test_passes_the_first_link_of_a_split_formula():
    """``x * gate`` holds no call: ``gate = torch.sigmoid(x)`` passes, as its next statements read it."""
    for source in (SPLIT_SPELLINGS, ElementwiseByHand.examples[3].bad):
        lines = source.splitlines()
        for line, _ in findings(source):
            assert any(ElementwiseByHand.may_match(lines, i, op_tables()) for i in range(max(line - 4, 0), line))
    assert not ElementwiseByHand.may_match(["gate = torch.sigmoid(x)", "return gate"], 0, op_tables())


def test_the_text_test_skips_statements_without_those_calls():
    for text in ("y = x * w + b", "z = torch.sigmoid(x)", "h = F.gelu(x)"):
        assert not ElementwiseByHand.may_match([text], 0, op_tables())


SPLIT_SPELLINGS = """\
import math

import torch
import torch.nn.functional as F


def split(x: torch.Tensor, w: torch.Tensor):
    gate = torch.sigmoid(x)
    a = x * gate
    h = x @ w
    cdf = 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
    b = h * cdf
    e = torch.exp(x)
    c = torch.log(1 + e)
    denominator = 1 + torch.exp(-x)
    d = 1 / denominator
    return a, b, c, d, 1.0 / x.sqrt()
"""


def test_a_formula_split_over_statements_is_read_through_its_names():
    assert findings(SPLIT_SPELLINGS) == [
        (9, "SiLU written out: `F.silu` computes it in one kernel"),
        (12, "GELU written out: `F.gelu` computes it in one kernel"),
        (14, "softplus written out: `F.softplus` computes it in one kernel"),
        (16, "the logistic function written out: `torch.sigmoid` computes it in one kernel"),
        (17, "`1 / sqrt(x)` written out: `torch.rsqrt` computes it in one kernel"),
    ]


SPLIT_LOOK_ALIKES = """\
import torch


def look_alikes(x: torch.Tensor, y: torch.Tensor):
    gate = torch.sigmoid(x)
    a = x * gate
    b = gate + 1  # the gate is read again: the sigmoid stays
    g = y.sigmoid()
    x = x + 1
    c = x * g  # another tensor's gate
    s = torch.sigmoid(y)
    if y.sum() > 0:
        s = s * 2
    d = y * s  # s may have changed
    e = torch.exp(x)
    f = torch.log(1 + e) + e  # e read twice: no softplus, but a log1p
    return a, b, c, d, f, gate, 2 / torch.sqrt(x)
"""


def test_a_link_read_again_or_changed_is_not_read_through():
    assert findings(SPLIT_LOOK_ALIKES) == [(16, "`log(1 + x)` written out: `torch.log1p` computes it in one kernel")]


QUANTILES = """\
import math

import torch

_SQRT2 = 2.0 ** 0.5


def f(z: torch.Tensor, x: torch.Tensor):
    a = (torch.tanh(z) + 1.0) / 2.0
    b = 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x ** 3))))
    p = x.sigmoid()
    c = torch.erfinv(2.0 * p - 1.0) * _SQRT2
    d = math.sqrt(2) * torch.erfinv(2 * p - 1)
    g = (torch.tanh(z) + 2.0) / 2.0  # not 1 + tanh
    h = torch.erfinv(2.0 * p - 1.0) * 2.0  # not sqrt(2)
    i = torch.erfinv(p) * _SQRT2  # not 2p - 1
    return a, b, c, d, g, h, i
"""


def test_the_logistic_through_tanh_and_the_normal_quantile():
    assert findings(QUANTILES) == [
        (9, "the logistic function through `tanh` written out: `torch.sigmoid(2 * y)` computes it in one kernel"),
        (10, "the logistic function through `tanh` written out: `torch.sigmoid(2 * y)` computes it in one kernel"),
        (12, "the normal quantile written out: `torch.special.ndtri` computes it in one kernel"),
        (13, "the normal quantile written out: `torch.special.ndtri` computes it in one kernel"),
    ]
