"""Capture: flush triggers, source lines, fallbacks, robustness (state, cycles)."""
from __future__ import annotations

import gc
import sys
import weakref

import pytest
import torch

import fusionrt
from fusionrt.capture import BINDING


def test_host_syncs_flush_with_their_reason_and_line():
    x = torch.randn(4, 5)
    with fusionrt.lazy(executor="reference") as session:
        a = x * 2
        text = repr(a)                              # print
        values = (x + 1).tolist()                   # tolist
        arr = (x - 1).numpy()                       # numpy
        item = (x * 3).sum().item()                 # item
        positive = bool((x * 4).sum() > 0)          # bool
        fusionrt.sync()                             # nothing pending: no flush
        c = x * 5
        fusionrt.sync()                             # sync
    reasons = [f.reason for f in session.report.flushes]
    assert reasons == ["print", "tolist", "numpy", "item", "bool", "sync"]
    assert "tensor(" in text and values == (x + 1).tolist()
    assert (arr == (x - 1).numpy()).all() and item == pytest.approx((x * 3).sum().item(), rel=1e-5)
    assert positive == bool((x * 4).sum() > 0)
    line = sys._getframe().f_code.co_firstlineno
    assert session.report.flushes[0].source.endswith(f"test_capture.py:{line + 4}")
    assert session.report.materialized[0].reason == "sync"


# Each builds a tensor from the values of pending 0-d tensors, which C++ reads without dispatch.
_READ_BY_VALUE = {
    "tensor of a list": lambda x, y: torch.tensor([y, x[1] * 3]),
    "nested lists": lambda x, y: torch.tensor([[y, 1.0], [2.0, y]]),
    "a tuple": lambda x, y: torch.as_tensor((y, y + 1)),
    "asarray": lambda x, y: torch.asarray([y]),
    "new_tensor": lambda x, y: x.new_tensor([y, y * y]),
    "keyword data": lambda x, y: torch.tensor(data=[y]),
    "linspace to a tensor end": lambda x, y: torch.linspace(0, y, 5),
    "normal around a tensor": lambda x, y: torch.normal(x * y, 0.0),
}


@pytest.mark.parametrize("build", _READ_BY_VALUE.values(), ids=_READ_BY_VALUE.keys())
def test_tensors_built_from_pending_values_read_them_computed(build):
    x = torch.randn(6)
    expected = build(x, x[0] * 2)
    with fusionrt.lazy(executor="reference"):
        got = build(x, x[0] * 2)
    torch.testing.assert_close(got, expected)


def test_pending_bound_flushes():
    x = torch.randn(8)
    with fusionrt.lazy(executor="reference", max_pending=3) as session:
        for _ in range(7):
            x = x + 1
    assert [f.reason for f in session.report.flushes] == ["pending-bound", "pending-bound", "exit"]
    torch.testing.assert_close(x, x)  # concrete, readable


def test_fallback_runs_eagerly_and_is_reported_by_name():
    x = torch.randn(5, 6)
    with fusionrt.lazy(executor="reference") as session:
        a = torch.cumsum(x * 2, 0)
        b = a + 1
    torch.testing.assert_close(b, torch.cumsum(x * 2, 0) + 1)
    report = session.report
    assert [f.op for f in report.fallbacks] == ["cumsum"]
    assert "fallback-input" in [w.reason for w in report.materialized]
    assert "fallback" in [k.kind for k in report.kernel_records]


@pytest.mark.parametrize("executor", ["reference", "interpret"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_vector_norm_fuses_through_its_decomposition(executor, dtype):
    """A norm runs as its decomposition's reductions and element-wise ops, without autograd
    too: normalizing by hand is one pending block, not a flush at each norm."""
    x = torch.randn(33, 70, dtype=dtype)
    tol = dict(rtol=2e-2, atol=1e-3) if dtype == torch.bfloat16 else {}

    def f(x):
        y = x / x.norm(dim=-1, keepdim=True)
        return y, torch.nn.functional.normalize(x, dim=0), [
            torch.linalg.vector_norm(x, ord=o, dim=d) for o in (1, 3, float("inf"), 0) for d in (-1, None)]

    out, report = fusionrt.measure(f, x, executor=executor)
    ref = f(x)
    torch.testing.assert_close(out[0], ref[0], **tol)
    torch.testing.assert_close(out[1], ref[1], **tol)
    for a, b in zip(out[2], ref[2]):
        torch.testing.assert_close(a, b, **tol)
    assert not report.fallbacks


@pytest.mark.parametrize("executor", ["reference", "interpret"])
def test_a_scale_computed_mid_norm_joins_the_norms_kernel(executor):
    """F.normalize(x) * (gamma * scale) with gamma computed first: the scale of gamma runs in
    the norm's kernel (two kernels, one written tensor), and the result is eager's."""
    x, g = torch.randn(4, 64, 128), torch.randn(1)

    def f(x, g):
        gamma = g + 0.5
        return torch.nn.functional.normalize(x, dim=-1) * (gamma * 11.3)

    out, report = fusionrt.measure(f, x, g, executor=executor)
    torch.testing.assert_close(out, f(x, g))
    assert report.kernels == 2 and [w.shape for w in report.materialized] == [(1,), (4, 64, 128)]


def test_tensors_that_require_grad_are_recorded():
    w = torch.randn(4, requires_grad=True)
    with fusionrt.lazy(executor="reference") as session:
        y = (w * 2).sum()
    y.backward()
    torch.testing.assert_close(w.grad, torch.full((4,), 2.0))
    assert not session.report.fallbacks and len(session.report.kernel_records) == 1


def test_results_are_ordinary_tensors_after_the_block():
    x = torch.randn(3, 4)
    with fusionrt.lazy(executor="reference"):
        y = x.exp()
        v = y.t()
    assert BINDING not in y.__dict__ and BINDING not in v.__dict__
    assert y.data_ptr() != 0
    torch.testing.assert_close(v, x.exp().t())


def test_an_exception_inside_the_block_leaves_no_state():
    x = torch.randn(3)
    with pytest.raises(ZeroDivisionError):
        with fusionrt.lazy(executor="reference") as session:
            y = x * 2
            1 / 0
    assert BINDING not in y.__dict__
    torch.testing.assert_close(y, x * 2)
    assert fusionrt.session.current() is None
    assert session.pending == []
    z = x + 1  # outside any block: plain eager
    torch.testing.assert_close(z, x + 1)


def test_eager_errors_surface_unchanged():
    a, b = torch.randn(3), torch.randn(4)
    with pytest.raises(RuntimeError, match="size of tensor"):
        with fusionrt.lazy(executor="reference"):
            a + b


def test_no_reference_cycles_keep_graphs_alive():
    """Only the bounded plan cache keeps a graph (its nodes, never a tensor) once the block is over."""
    from fusionrt.plan_cache import PLANS

    x = torch.randn(16)
    with fusionrt.lazy(executor="reference") as session:
        a = x * 2
        node = a.__dict__[BINDING][1]
        ref = weakref.ref(node)
        del node, a
        fusionrt.sync()
    tensor_ref = weakref.ref(x)
    del session, x
    gc.collect()
    assert tensor_ref() is None
    PLANS.clear()
    gc.collect()
    assert ref() is None


def test_blocks_do_not_nest():
    with fusionrt.lazy(executor="reference"):
        with pytest.raises(RuntimeError, match="nest"):
            with fusionrt.lazy():
                pass


def test_recording_cost_per_op_on_cache_hits():
    """Recording stays within a small factor of a bare dispatch-mode round trip (metadata comes
    from the cache, not from meta tensors at 90-200 us per op)."""
    import time

    from torch.utils._python_dispatch import TorchDispatchMode

    class Bare(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return torch.empty_strided((8,), (1,))

    def per_op(run) -> float:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) / 1000

    def chain():
        y = x
        for _ in range(1000):
            y = y + 1

    x = torch.randn(8)
    with Bare():
        bare = min(per_op(chain) for _ in range(3))
    with fusionrt.lazy(executor="reference", max_pending=100000):
        chain()  # warms the metadata cache
        recorded = min(per_op(chain) for _ in range(3))
    assert recorded < 15 * bare
