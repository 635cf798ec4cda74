"""FL019 beyond its own examples: which products are a scale by one plus a tensor, and the text test."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.unit_offset_scale import UnitOffsetScale

OPTIONS = LintOptions(codes=frozenset({"FL019"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


GEMMA = """\
import torch
from torch import nn


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)
"""


def test_gemmas_rms_norm_scale_is_flagged():
    assert findings(GEMMA) == [
        (13, "`output` scaled by one plus `self.weight.float()`: "
             "`torch.addcmul(output, output, self.weight.float())` is one kernel"),
    ]


GATED = """\
import torch


def gated(up: torch.Tensor, glu: torch.Tensor, n: torch.Tensor, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    gate = (up + 1) * glu
    return gate, n * (n + 1) // 2, (w + 1) * x - w * b
"""


def test_a_polynomial_and_an_extrapolation_are_left_to_others():
    assert [line for line, _ in findings(GATED)] == [5]
    assert "torch.addcmul(glu, glu, up)" in findings(GATED)[0][1]


def test_the_text_test_passes_every_flagged_statement():
    for source in (GEMMA, GATED, *(example.bad for example in UnitOffsetScale.examples[1:])):
        lines = source.splitlines()
        for line, _ in findings(source):
            assert UnitOffsetScale.may_match([lines[line - 1]], 0, op_tables())


def test_the_text_test_passes_the_product_added_back_below():
    """A residual added back is admitted at its product: the add may sit in an ``if`` below."""
    block = ["    result = x * gate", "    if residual:", "    return result"]
    assert UnitOffsetScale.may_match(block, 0, op_tables())
    assert UnitOffsetScale.may_match(["r = x * s", "n = 2", "r = r + x"], 0, op_tables())
    assert not UnitOffsetScale.may_match(["r = x * s", "return r"], 0, op_tables())


FAR = """\
import torch


def far(x: torch.Tensor, s: torch.Tensor, n: int):
    r = x * s
    a = n + 1
    b = n + 2
    c = n + 3
    d = n + 4
    e = n + 5
    r += x
    return r, a, b, c, d, e
"""


def test_an_add_beyond_the_text_tests_reach_is_not_flagged():
    assert findings(FAR) == []


def test_the_text_test_skips_products_without_a_unit_offset():
    for text in ("y = x * (s + 2)", "z = x + 1", "h = (n + 10) * x", "k = x * (s - 1)"):
        assert not UnitOffsetScale.may_match([text], 0, op_tables())


def test_the_message_binds_an_expression_to_a_name_first():
    source = """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, gamma: torch.Tensor):
    return F.layer_norm(x, x.shape[-1:]) * (1 + gamma)
"""
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL019"})))
    assert [f.message for f in result.findings] == [
        "`F.layer_norm(x, x.shape[-1:])` scaled by one plus `gamma`: bound to a name `y`, "
        "`torch.addcmul(y, y, gamma)` is one kernel"
    ]
