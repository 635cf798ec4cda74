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


def test_a_formula_inside_another_is_reported_once():
    source = "import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.log(1 + torch.exp(x * torch.sigmoid(x)))\n"
    assert [line for line, _ in findings(source)] == [5]


def test_the_text_test_passes_every_flagged_statement():
    for source in (SPELLINGS, *(example.bad for example in ElementwiseByHand.examples)):
        lines = source.splitlines()
        for line, _ in findings(source):
            assert ElementwiseByHand.may_match([lines[line - 1]], 0, op_tables())


def test_the_text_test_skips_statements_without_those_calls():
    for text in ("y = x * w + b", "z = torch.sigmoid(x)", "h = F.gelu(x)"):
        assert not ElementwiseByHand.may_match([text], 0, op_tables())
