"""FL012 beyond its own examples: which scaled sums are a batched matmul's, the fused call, and
the proof that the rewrite computes the same (fp32, bf16) and pays."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fused_rewrites import assert_equal_within_tolerance, verify  # noqa: E402
from fusionlint.engine import lint_source  # noqa: E402
from fusionlint.model import FixMode, LintOptions  # noqa: E402
from fusionlint.rules.bmm_scale_add import BmmScaleAdd  # noqa: E402

FIND = LintOptions(codes=frozenset({"FL012"}))
FIX = LintOptions(codes=frozenset({"FL012"}), fix=FixMode.UNSAFE)
HEADER = "import math\n\nimport torch\n\n\ndef f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: int):\n"


def findings(body: str) -> int:
    result = lint_source(HEADER + body, "m.py", FIND)
    assert not result.errors
    return len(result.findings)


def fixed(body: str) -> str:
    return lint_source(HEADER + body, "m.py", FIX).source[len(HEADER):]


@pytest.mark.parametrize(
    "body,rewritten",
    [
        ("    return torch.bmm(a, b) + c\n", "    return torch.baddbmm(c, a, b)\n"),
        ("    return c + 0.5 * a.bmm(b)\n", "    return torch.baddbmm(c, a, b, alpha=0.5)\n"),
        ("    return 0.3 * c + torch.bmm(a, b) * 0.5\n", "    return torch.baddbmm(c, a, b, beta=0.3, alpha=0.5)\n"),
        ("    return c * 0.3 + torch.bmm(a, b) / math.sqrt(d)\n",
         "    return torch.baddbmm(c, a, b, beta=0.3, alpha=1 / math.sqrt(d))\n"),
        ("    return torch.bmm(a, b) / (d * 2) + c\n", "    return torch.baddbmm(c, a, b, alpha=1 / (d * 2))\n"),
        ("    return torch.mm(a, b) * d + c\n", "    return torch.addmm(c, a, b, alpha=d)\n"),
        ("    return c * c + torch.bmm(a, b)\n", "    return torch.baddbmm(c * c, a, b)\n"),  # no number: no beta
    ],
)
def test_flagged_and_fused(body, rewritten):
    assert findings(body) == 1
    assert fixed(body) == rewritten


@pytest.mark.parametrize(
    "body",
    [
        "    return torch.mm(a, b) + c\n",  # unscaled: FL011's
        "    return torch.bmm(a, b) * c + c\n",  # a scale that is a tensor
        "    return torch.bmm(a, b) * 0.5 + 1\n",  # a number added
        "    return torch.matmul(a, b) * 0.5 + c\n",  # matmul also takes 1-D and 4-D operands
        "    return a @ b * 0.5 + c\n",
        "    return 2 / torch.bmm(a, b) + c\n",  # a divided by the product
        "    return c - torch.bmm(a, b)\n",
        "    return torch.bmm(a, b, out=c) + c\n",
    ],
)
def test_silent(body):
    assert findings(body) == 0


def test_scale_after_matmul_yields_to_it():
    source = HEADER + "    return torch.bmm(a, b.transpose(1, 2)) * 0.125 + c\n"
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL009", "FL012", "FL013"})))
    assert [f.code for f in result.findings] == ["FL012"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("example", BmmScaleAdd.examples, ids=lambda e: e.call.partition("(")[0])
def test_the_fix_equals_the_original_within_tolerance(example, dtype):
    assert_equal_within_tolerance(example.bad, example.fixed, example.call, dtype)


def test_verify_proves_the_fix_before_applying_it(tmp_path):
    # verify's random inputs are of one shape: square heads, batched by flattening
    source = """import torch


def scores(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    a, b, c = a.flatten(0, 1), b.flatten(0, 1), c.flatten(0, 1)
    return torch.bmm(a, b) * 0.5 + c
"""
    out, text = verify(tmp_path, source, "FL012")
    assert "Verified: 1 fix proven and applied, 0 refused, 0 not run (no harness)." in out
    assert "return torch.baddbmm(c, a, b, alpha=0.5)\n" in text
