"""The ``speed`` policy: element-wise values recomputed across a reduction, or by a later kernel,
instead of written, when that reads fewer bytes; ``stream`` stays what lazy()/measure measure."""
from __future__ import annotations

import contextlib
import io

import pytest
import torch
import torch.nn.functional as F

import fusionrt
from fusionrt import cost
from fusionrt.plan import Flags
from fusionrt.schedule import plan

from .differential import LOW_PRECISION, assert_consistent, assert_same, rand
from .test_differential import random_program
from .test_schedule import G, leaf, reasons

pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")


def clone_reduction(x, y):  # bench/gpu_bench.py workload 4
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


def clone_reduction_rewritten(x, y):  # workload 4b
    a = x * 2
    b = y + 1
    tmp = a * b
    t3 = a.sum(-1, keepdim=True)
    return t3 + tmp


def counts(report: fusionrt.Report) -> tuple:
    """Everything a report says about the plan, which no executor may change."""
    return (report.policy, report.kernels, report.writes, report.bytes_written, report.bytes_read,
            [(w.reason, w.shape, w.op, w.kernel) for w in report.materialized],
            [(k.kind, k.ops, k.bytes_read, k.bytes_written) for k in report.kernel_records])


# -- the planner on hand-built graphs -----------------------------------------------------------

def clone_graph() -> tuple[G, dict]:
    g = G()
    x, y = leaf(16, 32), leaf(16, 32)
    a = g.pw("mul", x, 2)
    b = g.pw("add", y, 1)
    t3 = g.sum(g.pw("clone", a), 1)
    out = g.pw("add", t3, g.pw("mul", a, b), shape=(16, 32))
    return g, {"a": a, "b": b, "t3": t3, "out": out}


def test_values_read_after_the_reduction_are_recomputed_in_its_kernel():
    g, n = clone_graph()
    flags = Flags(outputs=frozenset({n["out"]}))
    stream, speed = plan(g.nodes, flags, "stream"), plan(g.nodes, flags, "speed")
    assert [k.kind for k in stream.kernels] == ["reduction", "fused"]
    assert [k.kind for k in speed.kernels] == ["reduction"]
    assert reasons(speed) == [(n["out"].id, "output")]
    (kernel,) = speed.kernels
    assert len(kernel.inputs) == 2  # x and y, each loaded once


def test_a_value_python_keeps_alive_is_still_written():
    g, n = clone_graph()
    p = plan(g.nodes, Flags(outputs=frozenset({n["out"]}), alive={n["a"]: 1}), "speed")
    assert len(p.kernels) == 1
    assert reasons(p) == [(n["a"].id, "alive"), (n["out"].id, "output")]


def test_a_later_kernel_recomputes_a_value_from_its_input_when_that_reads_less():
    """``a`` is read by the reduction's block and, broadcast, by a kernel of a larger space:
    computing it again from ``x`` there reads 2 KiB, writing and reading it back 4 KiB."""
    g = G()
    x, z = leaf(16, 32), leaf(3, 16, 32)
    a = g.pw("mul", x, 2)
    s = g.sum(a, 1)
    out = g.pw("mul", z, a, shape=(3, 16, 32))
    flags = Flags(outputs=frozenset({s, out}))
    assert reasons(plan(g.nodes, flags, "stream")) == [(a.id, "consumed-later"), (s.id, "output"),
                                                       (out.id, "output")]
    speed = plan(g.nodes, flags, "speed")
    assert reasons(speed) == [(s.id, "output"), (out.id, "output")]
    assert [len(k.inputs) for k in speed.kernels] == [1, 2]  # x; then z and x, not a


def test_a_value_whose_inputs_cost_as_much_as_its_write_and_read_is_written():
    """``c = x + y`` read by a later kernel at its own map: recomputing loads x and y (4 KiB),
    as many bytes as writing c and reading it back."""
    g = G()
    x, y, z = leaf(16, 32), leaf(16, 32), leaf(3, 16, 32)
    c = g.pw("add", x, y)
    s = g.sum(c, 1)
    out = g.pw("mul", z, c, shape=(3, 16, 32))
    speed = plan(g.nodes, Flags(outputs=frozenset({s, out})), "speed")
    assert reasons(speed) == [(c.id, "consumed-later"), (s.id, "output"), (out.id, "output")]


def chain_then_sum(ops: int):
    """``ops`` element-wise ops on ``x``, summed, then the chain's value read after the sum."""
    g = G()
    value = g.pw("mul", leaf(16, 32), 1.5)
    for _ in range(ops - 1):
        value = g.pw("add", value, 0.5)
    s = g.sum(value, 1)
    out = g.pw("add", s, value, shape=(16, 32))
    return plan(g.nodes, Flags(outputs=frozenset({out})), "speed"), value, s, out


def test_a_chain_longer_than_the_recompute_budget_is_written():
    longest, _, _, _ = chain_then_sum(cost.MAX_RECOMPUTE_OPS)
    assert len(longest.kernels) == 1 and len(longest.writes) == 1
    too_long, value, s, out = chain_then_sum(cost.MAX_RECOMPUTE_OPS + 1)
    assert reasons(too_long) == [(value.id, "consumed-later"), (s.id, "consumed-later"), (out.id, "output")]


def test_an_unknown_policy_is_named():
    g, n = clone_graph()
    with pytest.raises(ValueError, match="stream, speed"):
        plan(g.nodes, Flags(outputs=frozenset({n["out"]})), "greedy")


# -- captured programs ----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [clone_reduction, clone_reduction_rewritten])
def test_workloads_4_and_4b_under_both_policies_and_executors(fn):
    x, y = rand(64, 128), rand(64, 128)
    expected = fn(x, y)
    reports = {}
    for policy in ("stream", "speed"):
        for executor in ("reference", "interpret"):
            got, report = fusionrt.measure(fn, x, y, policy=policy, executor=executor)
            assert_same(got, expected, what=f"{policy} {executor}")
            assert_consistent(report)
            reports[policy, executor] = report
        assert counts(reports[policy, "reference"]) == counts(reports[policy, "interpret"])
        assert reports[policy, "reference"].policy == policy
    speed, stream = reports["speed", "reference"], reports["stream", "reference"]
    assert (speed.kernels, speed.writes, speed.bytes_written) == (1, 1, 64 * 128 * 4)
    assert speed.bytes_written < stream.bytes_written


def test_the_rewrite_still_pays_under_stream():
    """FL002's contract is measured under stream: workload 4b writes fewer bytes than 4."""
    x, y = rand(64, 128), rand(64, 128)
    _, four = fusionrt.measure(clone_reduction, x, y, executor="reference")
    _, rewritten = fusionrt.measure(clone_reduction_rewritten, x, y, executor="reference")
    assert four.policy == rewritten.policy == "stream"
    assert rewritten.bytes_written < four.bytes_written


def test_a_looped_reduction_recomputes_across_its_passes():
    """Rows longer than the interpreter's single pass: each pass reads its inputs again."""
    x, y = rand(3, 20000), rand(3, 20000)
    got, report = fusionrt.measure(clone_reduction, x, y, policy="speed", executor="interpret")
    _, reference = fusionrt.measure(clone_reduction, x, y, policy="speed", executor="reference")
    torch.testing.assert_close(got, clone_reduction(x, y), atol=1e-3, rtol=1e-4)  # 20000-term sums
    assert counts(report) == counts(reference) and report.writes == 1


def test_reports_name_the_policy():
    x, y = rand(8, 16), rand(8, 16)
    fast = fusionrt.jit(clone_reduction, executor="reference")
    fast(x, y)
    assert fast.report.policy == "speed" and fast.report.to_dict()["policy"] == "speed"
    assert "policy speed," in str(fast.report)
    _, measured = fusionrt.measure(clone_reduction, x, y, executor="reference")
    assert measured.policy == "stream" and "policy stream," in str(measured)


def test_the_compile_backend_plans_under_the_speed_policy():
    from fusionrt.compile_backend import compiled_graphs

    torch._dynamo.reset()
    try:
        before = len(compiled_graphs())
        compiled = torch.compile(clone_reduction, backend="fusionrt", options={"executor": "reference"})
        x, y = rand(16, 32), rand(16, 32)
        assert_same(compiled(x, y), clone_reduction(x, y))
        (graph,) = compiled_graphs()[before:]
        assert graph.policy == "speed" and graph.report.policy == "speed"
        assert (graph.report.kernels, graph.report.writes) == (1, 1)
    finally:
        torch._dynamo.reset()


def _program(seed: int):
    x, lines, last = random_program(seed)
    source = "def program(x):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {last}\n"
    env = {"torch": torch, "F": F, "fusionrt": fusionrt}
    exec(source, env)
    return x, source, env["program"]


def test_random_programs_equal_eager_and_never_write_more_under_speed():
    recomputed = 0
    for seed in range(60):
        x, source, program = _program(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            expected = program(x.clone())
            got, speed = fusionrt.measure(program, x.clone(), policy="speed", executor="reference")
            _, stream = fusionrt.measure(program, x.clone(), policy="stream", executor="reference")
        assert_same(got, expected, low_precision_inside=x.dtype in LOW_PRECISION, what=source)
        assert_consistent(speed)
        assert speed.bytes_written <= stream.bytes_written, source
        recomputed += speed.bytes_written < stream.bytes_written
    assert recomputed >= 5


@pytest.mark.slow
def test_random_programs_plan_alike_under_the_interpreter():
    for seed in (3, 11, 24, 58, 71):
        x, source, program = _program(seed)
        with contextlib.redirect_stdout(io.StringIO()):
            expected = program(x.clone())
            _, reference = fusionrt.measure(program, x.clone(), policy="speed", executor="reference")
            got, interpret = fusionrt.measure(program, x.clone(), policy="speed", executor="interpret")
        assert_same(got, expected, low_precision_inside=x.dtype in LOW_PRECISION, what=source)
        assert counts(reference) == counts(interpret), source


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("fn", [clone_reduction, clone_reduction_rewritten])
def test_workloads_4_and_4b_plan_alike_on_the_gpu(fn):
    """Rows of 4096 floats, as in bench/gpu_bench.py: one single-pass kernel on an H100."""
    x, y = rand(256, 4096).cuda(), rand(256, 4096).cuda()
    got, triton_report = fusionrt.measure(fn, x, y, policy="speed", executor="triton")
    _, reference = fusionrt.measure(fn, x.cpu(), y.cpu(), policy="speed", executor="reference")
    torch.testing.assert_close(got, fn(x, y), atol=1e-4, rtol=1e-5)
    assert counts(triton_report) == counts(reference) and triton_report.writes == 1
