"""The Burn fusion guide's examples, measured: the numbers docs/semantics.md records."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fusionrt

FULL = 64 * 128 * 4  # bytes of one float32 (64, 128) tensor


def clone_pattern(x, y):
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


def clone_rewrite(x, y):
    a = x * 2
    b = y + 1
    tmp = a * b
    t3 = a.sum(-1, keepdim=True)
    return t3 + tmp


def matmul_bias(t1, t2, t3):
    return t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)


def matmul_bias_views_first(t1, t2, t3):
    t1 = t1.unsqueeze(0)
    t3 = t3.unsqueeze(0)
    return t1.matmul(t2) + t3


def full_size_writes(report):
    return [w for w in report.materialized if w.bytes == FULL and w.reason != "output"]


@pytest.mark.parametrize("executor", ["reference", "interpret"])
def test_clone_pattern_keeps_two_full_size_temporaries_the_rewrite_one(executor):
    x, y = torch.randn(64, 128), torch.randn(64, 128)
    before_out, before = fusionrt.measure(clone_pattern, x, y, executor=executor)
    after_out, after = fusionrt.measure(clone_rewrite, x, y, executor=executor)
    torch.testing.assert_close(before_out, clone_pattern(x, y), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(after_out, clone_rewrite(x, y), atol=1e-4, rtol=1e-4)
    assert [(w.op, w.reason) for w in full_size_writes(before)] == [("mul", "consumed-later"),
                                                                    ("add", "consumed-later")]
    assert [(w.op, w.reason) for w in full_size_writes(after)] == [("mul", "consumed-later")]
    assert (before.kernels, before.writes, before.bytes_written) == (2, 4, 3 * FULL + 64 * 4)
    assert (after.kernels, after.writes, after.bytes_written) == (2, 3, 2 * FULL + 64 * 4)
    assert (before.eager_writes, after.eager_writes) == (6, 5)  # eager: one write per op
    sources = {w.source.rsplit(":", 1)[1] for w in full_size_writes(before)}
    lines = clone_pattern.__code__.co_firstlineno
    assert sources == {str(lines + 1), str(lines + 2)}  # the lines of `a = ...` and `b = ...`


def test_clone_pattern_inside_a_block_reports_the_locals_as_alive():
    x, y = torch.randn(64, 128), torch.randn(64, 128)
    with fusionrt.lazy(executor="reference") as session:
        a = x * 2
        b = y + 1
        t3 = a.clone().sum(-1, keepdim=True)
        out = t3 + a * b
    torch.testing.assert_close(out, clone_pattern(x, y))
    assert sorted(w.reason for w in session.report.materialized) == [
        "alive", "consumed-later", "consumed-later", "consumed-later"]


@pytest.mark.parametrize("executor", ["reference", "interpret"])
def test_matmul_bias_and_its_rewrite_fuse_the_add_on_write(executor):
    t1, t2, t3 = torch.randn(32, 64), torch.randn(4, 64, 48), torch.randn(32, 48)
    results = []
    for fn in (matmul_bias, matmul_bias_views_first):
        out, report = fusionrt.measure(fn, t1, t2, t3, executor=executor)
        torch.testing.assert_close(out, fn(t1, t2, t3), atol=1e-4, rtol=1e-4)
        results.append(report)
        assert [(k.kind, k.backend) for k in report.kernel_records] == [("matmul", "template")]
        assert [(w.reason, w.bytes) for w in report.materialized] == [("output", 4 * 32 * 48 * 4)]
        assert (report.eager_kernels, report.eager_writes) == (2, 2)
    assert results[0].to_dict()["totals"] == results[1].to_dict()["totals"]


def test_fused_matmul_operand_is_read_not_written():
    """An element-wise producer of a matmul operand is computed while the operand is loaded."""
    x, w = torch.randn(32, 64), torch.randn(64, 48)
    out, report = fusionrt.measure(lambda x, w: F.gelu(x * 2) @ w, x, w, executor="reference")
    torch.testing.assert_close(out, F.gelu(x * 2) @ w)
    assert (report.kernels, report.writes, report.eager_writes) == (1, 1, 3)


def test_rms_norm_in_fp32_math_is_one_kernel():
    x, w = torch.randn(64, 128, dtype=torch.bfloat16), torch.randn(128, dtype=torch.bfloat16)

    def rms_norm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)

    out, report = fusionrt.measure(rms_norm, x, w, executor="interpret")
    torch.testing.assert_close(out, rms_norm(x, w))
    assert (report.kernels, report.writes, report.eager_writes) == (1, 1, 9)
