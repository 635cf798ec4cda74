"""FL013 beyond its own examples: which sums one fused op computes, which scales are numbers,
and the proof that the rewrite computes the same (fp32, bf16) and pays in eager."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fused_rewrites import assert_equal_within_tolerance, run, verify  # noqa: E402
from fusionlint.engine import lint_source  # noqa: E402
from fusionlint.model import FixMode, LintOptions  # noqa: E402
from fusionlint.rules.scalar_fused_op import ScalarFusedOp  # noqa: E402

FIND = LintOptions(codes=frozenset({"FL013"}))
FIX = LintOptions(codes=frozenset({"FL013"}), fix=FixMode.UNSAFE)
HEADER = "import math\n\nimport torch\n\n\ndef f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, s: float, n):\n"


def findings(body: str) -> int:
    result = lint_source(HEADER + body, "m.py", FIND)
    assert not result.errors
    return len(result.findings)


def fixed(body: str) -> str:
    return lint_source(HEADER + body, "m.py", FIX).source[len(HEADER):]


@pytest.mark.parametrize(
    "body,rewritten",
    [
        ("    return x + 0.5 * y\n", "    return torch.add(x, y, alpha=0.5)\n"),
        ("    return y * -2 + x\n", "    return torch.add(x, y, alpha=-2)\n"),
        ("    return x - s * y\n", "    return torch.sub(x, y, alpha=s)\n"),
        ("    return x + y * (1 / math.sqrt(s))\n", "    return torch.add(x, y, alpha=(1 / math.sqrt(s)))\n"),
        ("    k = 0.1\n    return x + k * y\n", "    k = 0.1\n    return torch.add(x, y, alpha=k)\n"),
        ("    return z + x * y\n", "    return torch.addcmul(z, x, y)\n"),
        ("    k = y.sum()\n    return x + k * y\n", "    k = y.sum()\n    return torch.addcmul(x, k, y)\n"),  # a tensor scale
        ("    return 2 * x * y + z\n", "    return torch.addcmul(z, x, y, value=2)\n"),
        ("    return x / y + z\n", "    return torch.addcdiv(z, x, y)\n"),
        ("    return (x / y) * 0.5 + z\n", "    return torch.addcdiv(z, x, y, value=0.5)\n"),
        ("    return (x * y + z).relu()\n", "    return (torch.addcmul(z, x, y)).relu()\n"),
        ("    return z + x * y * z\n", "    return torch.addcmul(z, x * y, z)\n"),  # one product kept
        ("    return x * y + z * x\n", "    return torch.addcmul(z * x, x, y)\n"),  # two products: one kept
        ("    return x * y + z * 0.5\n", "    return torch.addcmul(z * 0.5, x, y)\n"),
        # the inner sum's fused op is known: it is reported, not the sum around it
        ("    return x + y * z + x * n\n", "    return torch.addcmul(x, y, z) + x * n\n"),
    ],
)
def test_flagged_and_fused(body, rewritten):
    assert findings(body) == 1
    assert fixed(body) == rewritten


@pytest.mark.parametrize(
    "body,scale",
    [
        ("    return x + n * y\n", "n"),  # n may be a tensor (of any shape) or a number
        ("    return x + self_scale() * y\n", "self_scale()"),
        ("    k = 0.1\n    k = n\n    return x + k * y\n", "k"),  # a name that is not always a number
        ("    return x + y * n[0]\n", "n[0]"),
        ("    return x * (1 + n) + y\n", "1 + n"),
        ("    i = x.long()\n    return i.float() * n + y\n", "n"),  # a float cast: the integer work is below it
    ],
)
def test_flagged_without_a_fix_where_the_scale_may_be_either(body, scale):
    result = lint_source(HEADER + body, "m.py", FIX)
    assert [f.fix_safety.value for f in result.findings] == ["none"]
    assert f"`torch.add(..., alpha={scale})` if `{scale}` is a number, `torch.addcmul` if it is a tensor" in result.findings[0].message
    assert result.source is None  # nothing rewritten


@pytest.mark.parametrize(
    "body",
    [
        "    return x * 2 + 1\n",
        "    return x - y * z\n",  # a product subtracted: no addcmul with a sign here
        "    return x - n * y\n",  # nor where n may be a tensor
        "    x += 0.5 * y\n    return x\n",  # in place
        "    return x / 2 + y\n",  # a division by a number: a plain scale, no alpha form
        "    return x / n + y\n",
        "    return x * 0.5 * s + y\n",  # two scales
        "    return n + (y - n) * x\n",  # the addend may be a number: no fused op adds one
        "    return x + n * s\n",  # no tensor factor
        "    loss = x.mean()\n    return torch.nn.functional.mse_loss(y, z) + n * loss\n",  # one-number tensors
        "    aux = y.sum()\n    aux = aux + x.mean()\n    return aux * 0.1 + x.sum()\n",
        "    return x.long() + y.long() * 0.5\n",  # integer tensors: alpha= refuses a float
        "    i = x // 2\n    return i / y + z\n",  # addcdiv refuses integer tensors
        # index arithmetic on integer tensors: a cast, indices unpacked, a range, a floor division
        "    return x.long() * n + y.long()\n",
        "    _, order = x.sort(dim=-1)\n    return n * torch.arange(4)[:, None] + order[:, :2]\n",
        "    values, winners = x.topk(3, dim=1)\n    return winners // 3 * n + y.long().gather(1, winners)\n",
        "    q = torch.div(x, n, rounding_mode='floor')\n    return y.long() - q * n\n",
        # a sum of losses, named so: one number each
        "    loss = x.mean(-1)\n    cont_loss = y[z > 0].mean()\n    return loss + cont_loss * s\n",
    ],
)
def test_silent(body):
    assert findings(body) == 0


def test_a_chain_is_reported_once():
    assert findings("    return x + 0.5 * y + 0.25 * z\n") == 1


def test_a_sum_of_reductions_along_a_dim_is_no_one_number():
    assert findings("    return x.mean(-1) + n * y.sum(dim=0)\n") == 1


@pytest.mark.parametrize("scale", ["0.3", "randn(64, 1, 1)", "randn(())", "randn(8, 64, 16, 16)"], ids=["number", "channel", "0-d", "full"])
def test_both_forms_of_an_unknown_scale_pay_in_eager(scale):
    """What the finding without a fix claims: the fused op for a number (``alpha=``) or for a
    tensor (``addcmul``) saves the scaled operand's kernel and write, and fusionrt counts the same."""
    fused = "torch.add(x, y, alpha=s)" if scale == "0.3" else "torch.addcmul(x, s, y)"
    header = "import torch\n\n\ndef f(x, y, s):\n    return "
    call = f"f(randn(8, 64, 16, 16), randn(8, 64, 16, 16), {scale})"
    (before, written), (after, fused_report) = run(header + "x + s * y\n", call, torch.float32), run(header + fused + "\n", call, torch.float32)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    assert fused_report.eager_kernels == written.eager_kernels - 1
    assert fused_report.eager_bytes_written < written.eager_bytes_written
    assert (fused_report.writes, fused_report.bytes_written, fused_report.kernels) == (written.writes, written.bytes_written, written.kernels)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("example", ScalarFusedOp.examples, ids=lambda e: e.call.partition("(")[0])
def test_the_fix_equals_the_original_within_tolerance(example, dtype):
    assert_equal_within_tolerance(example.bad, example.fixed or example.good, example.call, dtype)


@pytest.mark.parametrize("example", ScalarFusedOp.examples, ids=lambda e: e.call.partition("(")[0])
def test_the_fix_runs_fewer_eager_kernels_and_no_more_under_fusionrt(example):
    (_, before), (_, after) = run(example.bad, example.call, torch.float32), run(example.fixed or example.good, example.call, torch.float32)
    assert after.eager_kernels < before.eager_kernels and after.eager_bytes_written < before.eager_bytes_written
    assert (after.writes, after.bytes_written, after.kernels) == (before.writes, before.bytes_written, before.kernels)


def test_verify_proves_the_fix_before_applying_it(tmp_path):
    source = "import torch\n\n\ndef step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    return x + 0.5 * y\n"
    out, text = verify(tmp_path, source, "FL013")
    assert "Verified: 1 fix proven and applied, 0 refused, 0 not run (no harness)." in out
    assert "return torch.add(x, y, alpha=0.5)\n" in text


MEMBERS = """\
import torch


class Scaled(torch.nn.Module):
    def __init__(self, dim, eps: float = 1e-6, init=0.1, gamma=None):
        super().__init__()
        self.eps = eps
        self.init = init * 2
        self.scale = dim ** -0.5
        self.gamma = gamma

    def forward(self, x, y):
        return x + self.eps * y, x + self.init * y, x + self.scale * y, x + self.gamma * y
"""


def test_a_member_the_class_assigns_only_numbers_is_a_number():
    result = lint_source(MEMBERS, "m.py", FIX)
    assert "return torch.add(x, y, alpha=self.eps), torch.add(x, y, alpha=self.init), x + self.scale * y, x + self.gamma * y\n" in result.source
    assert [f.line for f in result.findings] == [13, 13]  # dim and gamma may hold anything: no fix
    assert all("if it is a tensor" in f.message for f in result.findings)


LOOP = """\
import torch


def ramp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    total = x
    for i in range(4):
        total = total + torch.tanh(x * i + y)
    for k in (0.5, y):
        total = total + torch.tanh(x * k + y)
    return total
"""


def test_a_loop_over_a_range_binds_a_number():
    result = lint_source(LOOP, "m.py", FIX)
    assert "torch.tanh(torch.add(y, x, alpha=i))" in result.source
    assert "torch.tanh(x * k + y)" in result.source  # k may be a tensor: reported, no fix
    assert [f.line for f in result.findings] == [9]
