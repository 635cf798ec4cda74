"""Lazy results equal eager ones on fresh random inputs, and counts follow docs/semantics.md."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fusionrt


def rand(*shape, dtype=torch.float32):
    t = torch.randn(*shape)
    return t.to(dtype) if dtype.is_floating_point else (t * 10).to(dtype)


X = rand(6, 10)
Y = rand(6, 10)
W = rand(10)
B = rand(10)
M = rand(10, 7)
MASK = torch.triu(torch.ones(6, 6), 1).bool()
CONV_W, CONV_B, BIAS3 = rand(3, 6, 3), rand(3), rand(2, 6, 7)

PROGRAMS = {
    "chain": lambda x: torch.sigmoid(x * 2 + 1).relu() - torch.tanh(x),
    "broadcast": lambda x: x * W + B.unsqueeze(0),
    "activations": lambda x: F.gelu(x) + F.gelu(x, approximate="tanh") + F.silu(x) + x.exp().log1p(),
    "math": lambda x: x.abs().sqrt() + x.abs().add(1).rsqrt() + x.pow(2) + x.clamp(-0.5, 0.5),
    "compare_where": lambda x: torch.where(x > 0, x, x * 0.1) + (x == x).float(),
    "casts": lambda x: (x.half() * 3).float() + x.to(torch.float64).sum(-1, keepdim=True).float(),
    "int_promotion": lambda x: (x * 10).int() // 3 + 1.5,
    "sum_mean": lambda x: x.sum(0) + x.mean(0) + x.amax(0) - x.amin(0),
    "prod": lambda x: (x * 0.1 + 1).prod(-1),
    "full_reduction": lambda x: (x * x).sum() / x.numel(),
    "softmax": lambda x: F.softmax(x * 0.5, -1),
    "log_softmax_dim0": lambda x: F.log_softmax(x, 0),
    "layer_norm": lambda x: F.layer_norm(x, (10,), W, B),
    "rms_norm": lambda x: F.rms_norm(x, (10,), W),
    "var_std": lambda x: x.var(-1) + x.std(0).sum(),
    "residual_mlp": lambda x: x + F.gelu(x @ M) @ M.t(),
    "attention_mask": lambda x: F.softmax((x @ Y.t()).masked_fill(MASK, float("-inf")) / 3.0, -1) @ Y,
    "transpose_read": lambda x: (x * 2).t() + Y.t(),
    "slice_select": lambda x: (x * 2)[1:, ::3] + (x + 1)[0, ::3],
    "flatten_view_break": lambda x: (x * 2).flatten()[3:9] + 1,
    "expand": lambda x: (x.sum(-1, keepdim=True) * 2).expand(6, 10) + x,
    "cat": lambda x: torch.cat([x * 2, Y + 1], dim=1).sum(-1),
    "conv1d": lambda x: F.relu(F.conv1d(x.unsqueeze(0), CONV_W, CONV_B)),
    "baddbmm": lambda x: torch.baddbmm(BIAS3, x.expand(2, 6, 10), M.expand(2, 10, 7)),
    "einsum": lambda x: torch.einsum("ij,kj->ik", x, Y),
    "factories": lambda x: x + torch.ones_like(x) * torch.arange(10) + torch.full((6, 1), 2.0),
    "fallback_cumsum": lambda x: torch.cumsum(x * 2, 0) + 1,
    "sync_item": lambda x: x * (x.sum() > 0).item(),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_eager(name):
    fn = PROGRAMS[name]
    x = rand(6, 10)
    expected = fn(x)
    got, report = fusionrt.measure(fn, x, executor="reference")
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert report.writes >= 1 and report.eager_kernels >= 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_dtypes(dtype):
    x = rand(5, 7, dtype=dtype)
    fn = (lambda x: (x & ~x) | x) if dtype == torch.bool else (lambda x: (x * 2 + x).sum(-1) + 1)
    got, _ = fusionrt.measure(fn, x, executor="reference")
    expected = fn(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)


def test_odd_shapes_and_strides():
    for x in (rand(1, 1), rand(0, 3), rand(7, 13)[:, ::2], rand(13, 7).t(), rand(1, 5).expand(4, 5)):
        fn = lambda t: (t * 2 + 1).sum(-1, keepdim=True) + t  # noqa: E731
        got, _ = fusionrt.measure(fn, x, executor="reference")
        torch.testing.assert_close(got, fn(x))


def test_results_keep_eager_strides():
    x = rand(4, 6).t()
    got, _ = fusionrt.measure(lambda t: t * 2, x, executor="reference")
    assert got.stride() == (x * 2).stride()


def test_inplace_and_out_are_functionalized():
    def prog(x):
        a = x * 2
        a.add_(1)
        a[0].mul_(3)  # a write through a view is seen by the base
        o = torch.empty(6, 10)
        torch.mul(a, x, out=o)
        o.sub_(x)
        return a, o
    x = rand(6, 10)
    (a, o), report = fusionrt.measure(prog, x, executor="reference")
    ea, eo = prog(x)
    torch.testing.assert_close(a, ea)
    torch.testing.assert_close(o, eo)


def test_inplace_on_an_input_is_seen_by_views_and_later_reads():
    x = rand(6, 10)
    ex = x.clone()
    with fusionrt.lazy(executor="reference"):
        row = x[1]
        y = x * 2
        x.mul_(3)
        z = row + 1  # row saw the write through its base
    ex_row = ex[1]
    ey = ex * 2
    ex.mul_(3)
    torch.testing.assert_close(x, ex)
    torch.testing.assert_close(y, ey)
    torch.testing.assert_close(z, ex_row + 1)


def test_copy_into_a_slice():
    def prog(x):
        buf = torch.zeros(8, 10)
        buf[1:7].copy_(x * 2)
        return buf + 1
    x = rand(6, 10)
    got, _ = fusionrt.measure(prog, x, executor="reference")
    torch.testing.assert_close(got, prog(x))


def test_counts_are_the_same_for_every_executor():
    from fusionrt.executors import get_executor

    get_executor("interpret")  # the generated kernels under TRITON_INTERPRET=1
    x = rand(6, 10)
    fn = lambda t: F.softmax(t * 2, -1) + (t + 1).sum(-1, keepdim=True)  # noqa: E731
    counts = {}
    for ex in ("reference", "interpret"):
        got, report = fusionrt.measure(fn, x, executor=ex)
        torch.testing.assert_close(got, fn(x))
        counts[ex] = (report.kernels, report.writes, report.bytes_written, report.bytes_read,
                      [(w.reason, w.shape) for w in report.materialized])
    assert counts["reference"] == counts["interpret"]


def test_dead_temporaries_cost_nothing_and_eager_counts_every_op():
    x = rand(6, 10)
    _, report = fusionrt.measure(lambda t: ((t * 2 + 1) * 3 - 4).relu(), x, executor="reference")
    assert (report.kernels, report.writes) == (1, 1)
    assert (report.eager_kernels, report.eager_writes) == (5, 5)
    assert report.eager_bytes_written == 5 * x.numel() * 4
