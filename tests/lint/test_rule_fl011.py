"""FL011 beyond its own examples: which sums are a matmul and its bias, the fused call, and the
proof that the rewrite computes the same (fp32, bf16) and pays."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fused_rewrites import assert_equal_within_tolerance, verify  # noqa: E402
from fusionlint.engine import lint_source  # noqa: E402
from fusionlint.model import FixMode, LintOptions  # noqa: E402
from fusionlint.rules.matmul_bias import MatmulBias  # noqa: E402

FIND = LintOptions(codes=frozenset({"FL011"}))
FIX = LintOptions(codes=frozenset({"FL011"}), fix=FixMode.UNSAFE)
HEADER = "import torch\nimport torch.nn.functional as F\n\n\ndef f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, a: torch.Tensor):\n"


def findings(body: str) -> list[int]:
    result = lint_source(HEADER + body, "m.py", FIND)
    assert not result.errors
    return [f.line - 5 for f in result.findings]


def fixed(body: str) -> str:
    return lint_source(HEADER + body, "m.py", FIX).source[len(HEADER):]


@pytest.mark.parametrize(
    "body,rewritten",
    [
        ("    return torch.matmul(x, w.T) + b\n", "    return F.linear(x, w, b)\n"),
        ("    return b + x.mm(w.t())\n", "    return F.linear(x, w, b)\n"),
        ("    return x.matmul(w.t()) + b\n", "    return F.linear(x, w, b)\n"),
        ("    return (x @ w.t() + b).relu()\n", "    return (F.linear(x, w, b)).relu()\n"),
        ("    return torch.mm(x, a) + b\n", "    return torch.addmm(b, x, a)\n"),
        ("    h = x @ w.t()\n    y = h + b\n    return y\n", "    y = F.linear(x, w, b)\n    return y\n"),
        ("    h = x @ w.t()\n    c = b * 2\n    h += c\n    return h\n", "    c = b * 2\n    h = F.linear(x, w, c)\n    return h\n"),
        ("    return b - 2 * torch.mm(x, w.t())\n", "    return torch.addmm(b, x, w.t(), alpha=-2)\n"),
        ("    return (b + x.mm(a) * 0.5).relu()\n", "    return (torch.addmm(b, x, a, alpha=0.5)).relu()\n"),
        ("    return F.linear(x, w) + b\n", "    return F.linear(x, w, b)\n"),  # the bias left out, then added
        ("    h = F.linear(x, w)\n    h = h + b\n    return h\n", "    h = F.linear(x, w, b)\n    return h\n"),
    ],
)
def test_flagged_and_fused(body, rewritten):
    assert len(findings(body)) == 1
    assert fixed(body) == rewritten


@pytest.mark.parametrize(
    "body",
    [
        "    return x @ w + b\n",  # no transposed weight: x may be 1-D or batched
        "    return x @ w.mT + b\n",  # a batch of weights
        "    return x @ w.t() - b\n",
        "    return x @ w.t() + 0.5\n",  # F.linear takes no number as bias
        "    return [x @ w.t() + b for _ in range(2)]\n",  # inside a comprehension
        "    h = x @ w.t()\n    y = h + b\n    return y, h\n",  # the product is read again
        "    h = x @ w.t()\n    w = w * 2\n    return h + b\n",  # an operand changes between
        "    h = x @ w.t()\n    if b.dim():\n        h = h + b\n    return h\n",  # the use is in a branch
        "    h = x @ w.t()\n    x.mul_(2)\n    return h + b\n",  # an operand written in place
        "    return b - a.sum() * torch.mm(x, a)\n",  # a scale that is no number
        "    return F.linear(x, w, b) + b\n",  # the bias already passed
        "    return F.linear(x, w) + 1.0\n",  # a number
    ],
)
def test_silent(body):
    assert findings(body) == []


@pytest.mark.parametrize(
    "body",
    [
        "    return b - 2 * (x @ w.t())\n",  # `@` may be batched: addmm (2-D) or baddbmm (3-D)
        "    return 2 * torch.mm(x, a) - b\n",  # the bias subtracted: beta=-1
        # a vector quantizer's distances, the scale on an operand (`(2 * x) @ w`), the terms around it
        "    return -(x.pow(2).sum(1, keepdim=True) - 2 * x @ w + w.pow(2).sum(0, keepdim=True))\n",
        "    x2 = (x ** 2).sum(-1, keepdim=True)\n    return x2 + (a ** 2).sum(-1) - 2 * torch.matmul(x, a.t())\n",
        "    return 2.0 * torch.matmul(x, w) - b\n",  # a Chebyshev recurrence
    ],
)
def test_a_scaled_product_summed_with_tensors_is_flagged_without_a_fix(body):
    assert len(findings(body)) == 1
    assert lint_source(HEADER + body, "m.py", FIX).source in (None, HEADER + body)  # no fix


@pytest.mark.parametrize(
    "body",
    [
        "    return 2 * x @ w\n",  # no sum
        "    return b - a * (x @ w)\n",  # a tensor scale: no alpha
        "    return 2 * (x @ w) - 1.0\n",  # the other term is a number
        "    return (2 * x) @ w + b, x @ (w * 2) + b\n",  # a parenthesized scaling, a tensor factor
    ],
)
def test_a_scaled_product_is_silent_without_tensor_terms(body):
    assert findings(body) == []


def test_the_fix_spells_linear_through_the_files_imports():
    source = "from torch import Tensor, nn\n\n\ndef f(x: Tensor, w: Tensor, b: Tensor):\n    return x @ w.t() + b\n"
    assert "return nn.functional.linear(x, w, b)\n" in lint_source(source, "m.py", FIX).source


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("example", MatmulBias.examples, ids=lambda e: e.call.partition("(")[0])
def test_the_fix_equals_the_original_within_tolerance(example, dtype):
    assert_equal_within_tolerance(example.bad, example.fixed, example.call, dtype)


def test_verify_proves_the_fix_before_applying_it(tmp_path):
    source = "import torch\n\n\ndef project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n    return x @ w.t() + b\n"
    out, text = verify(tmp_path, source, "FL011")
    assert "Verified: 1 fix proven and applied, 0 refused, 0 not run (no harness)." in out
    assert "return torch.nn.functional.linear(x, w, b)\n" in text


@pytest.mark.parametrize(
    "body",
    [
        "    return torch.matmul(x, w.T) + torch.matmul(a, b.T)\n",
        "    p = torch.matmul(x, w.T)\n    n = torch.matmul(a, b.T)\n    return p + n\n",
    ],
)
def test_a_sum_of_two_products_is_one_finding(body):
    assert len(findings(body)) == 1
