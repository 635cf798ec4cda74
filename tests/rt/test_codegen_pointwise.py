"""Generated element-wise kernels under the Triton interpreter, checked against ``evaluate()``."""
from __future__ import annotations

import os
import warnings

import pytest
import torch

from fusionrt.codegen import BlockConfig, KernelCache, TritonExecutor, UnsupportedKernel, launch_arguments, pointwise
from fusionrt.codegen.config import pointwise_choice
from fusionrt.codegen.layout import analyze, contiguous_strides
from fusionrt.executors import get_executor
from fusionrt.kernel_ir import POINTWISE_OPS, Input, Instr, Value, evaluate

from .codegen_cases import assert_matches, check_direct_writes, kernel_of, named_inputs, op_kernel, tolerance

F32, F16, BF16, I32, I64, BOOL = (torch.float32, torch.float16, torch.bfloat16, torch.int32,
                                  torch.int64, torch.bool)


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> TritonExecutor:
    return TritonExecutor(interpret=True, cache=KernelCache(tmp_path_factory.mktemp("kernels")))


@pytest.fixture(autouse=True)
def _quiet_numpy():
    # Masked-off lanes legitimately compute log(0), x/0, ... in the interpreter's numpy.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


ALL_DTYPES = [F32, F16, BF16, I32, I64, torch.int8, torch.uint8, BOOL]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_pointwise_op_matches_aten(executor, dtype):
    gen = torch.Generator().manual_seed(ALL_DTYPES.index(dtype))
    inputs = named_inputs(dtype, (5, 37), gen)
    kernel, labels = op_kernel(dtype, inputs)
    assert_matches(kernel, executor.run(kernel, inputs), inputs, labels)


def test_every_pointwise_op_is_covered():
    covered = set()
    for dtype in (F32, I32, BOOL):
        inputs = named_inputs(dtype, (2, 3), torch.Generator().manual_seed(0))
        covered |= {ins.op for ins in op_kernel(dtype, inputs)[0].instrs}
    assert covered == POINTWISE_OPS
    float_ops = {ins.op for ins in op_kernel(F32, named_inputs(F32, (2, 3), torch.Generator()))[0].instrs}
    assert POINTWISE_OPS - float_ops == {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}


def _chain(shape, dtypes=(F32, F32)):
    """Five outputs: (a*b + 1) - b, its first step, a > b, sigmoid(a), a*b as float."""
    specs = [("mul", (Input(0), Input(1)), ()), ("add", (Value(0), 1), ()),
             ("sub", (Value(1), Input(1)), ()), ("gt", (Input(0), Input(1)), ()),
             ("sigmoid", (Input(0),), ()), ("_to_copy", (Value(0),), (("dtype", F32),))]
    probe = [torch.ones(2, dtype=d) for d in dtypes]
    values, instrs = [], []
    for op, args, attrs in specs:
        real = [probe[a.index] if isinstance(a, Input) else values[a.index] if isinstance(a, Value)
                else a for a in args]
        values.append(getattr(torch.ops.aten, op)(*real, **dict(attrs)))
        instrs.append(Instr(op, args, values[-1].dtype, attrs))
    return kernel_of(shape, dtypes, instrs, outputs=[2, 0, 3, 4, 5])


def _layouts(gen):
    """(name, inputs viewed into shape) for the layouts an input may arrive in."""
    def r(*shape, dtype=F32):
        return torch.randn(*shape, generator=gen).to(dtype)

    base = r(6, 10)
    return [
        ("contiguous", (6, 10), [r(6, 10), r(6, 10)]),
        ("transposed", (6, 10), [r(10, 6).t(), r(6, 10)]),
        ("both-transposed", (6, 10), [r(10, 6).t(), r(10, 6).t()]),
        ("row-broadcast", (6, 10), [r(6, 10), r(1, 10).expand(6, 10)]),
        ("column-broadcast", (6, 10), [r(6, 1).expand(6, 10), r(6, 10)]),
        ("scalar-broadcast", (6, 10), [r(1, 1).expand(6, 10), r(6, 10)]),
        ("all-broadcast", (6, 10), [r(1, 1).expand(6, 10), r(1, 10).expand(6, 10)]),
        ("sliced", (6, 5), [base[:, ::2], base[:, 1::2]]),
        ("offset-slice", (3, 10), [base[3:], base[1:4]]),
        ("size-1-dims", (1, 7, 1), [r(1, 7, 1), r(7, 1, 1).permute(2, 0, 1)]),
        ("permuted-3d", (4, 3, 5), [r(5, 4, 3).permute(1, 2, 0), r(4, 1, 5).expand(4, 3, 5)]),
        ("rank-4-mixed", (2, 3, 4, 5), [r(2, 3, 4, 5), r(2, 5, 4, 3).transpose(1, 3)]),
        ("zero-d", (), [r(()), r(())]),
        ("one-element", (1,), [r(1), r(1)]),
        ("prime", (13, 17), [r(17, 13).t(), r(13, 17)]),
    ]


def test_layouts(executor):
    gen = torch.Generator().manual_seed(1)
    for name, shape, inputs in _layouts(gen):
        kernel = _chain(shape)
        out = executor.run(kernel, inputs)
        assert_matches(kernel, out, inputs, [f"{name}:{i}" for i in range(5)])


def test_mixed_dtypes_and_half_rounding_match_eager_bit_for_bit(executor):
    gen = torch.Generator().manual_seed(2)
    for dtypes in [(F16, F16), (BF16, BF16), (F16, F32), (I32, F16), (BOOL, F16), (I64, I32)]:
        inputs = [(torch.randn(4, 9, generator=gen) * 3).to(d) for d in dtypes]
        kernel = _chain((4, 9), dtypes)
        out = executor.run(kernel, inputs)
        expected = evaluate(kernel, inputs)
        for i in (0, 1, 2, 4):  # rounded like aten after every op: exactly equal
            assert torch.equal(out[i], expected[i]), (dtypes, i)
        assert_matches(kernel, out, inputs)


def test_empty_iteration_space_returns_empty_and_generates_nothing(tmp_path):
    ex = TritonExecutor(interpret=True, cache=KernelCache(tmp_path))
    inputs = [torch.randn(0, 5), torch.randn(0, 5)]
    out = ex.run(_chain((0, 5)), inputs)
    assert [tuple(t.shape) for t in out] == [(0, 5)] * 5
    assert ex.cache.stats.generated == 0 and not any(tmp_path.iterdir())


def test_contiguous_inputs_read_at_the_flat_index(executor):
    shape = (4, 6, 8)
    layout = analyze(shape, (), [contiguous_strides(shape)] * 7)  # 2 inputs, 5 outputs
    assert layout.xsizes == (192,) and layout.index_bits == 32
    source = pointwise.generate(_chain(shape), layout.pattern)
    assert "in0 + xindex" in source and "in1 + xindex" in source and "//" not in source


def test_broadcast_and_transposed_inputs_use_strides_and_skip_zero_strides():
    shape = (6, 10)
    # transposed input, row-broadcast input, five outputs
    layout = analyze(shape, (), [(1, 6), (0, 1)] + [(10, 1)] * 5)
    pattern = layout.pattern
    assert pattern[3] == ((True, True), (False, True)) + ("xflat",) * 5
    assert layout.stride_args() == [1, 6, 1]
    source = pointwise.generate(_chain(shape), pattern)
    assert "in0 + x0 * st0_0 + x1 * st0_1" in source and "in1 + x1 * st1_1" in source


def test_channels_last_tensors_are_walked_in_memory_order(executor):
    """NCHW-shaped, channels-last tensors: the flat index walks C fastest, as memory does (in
    logical order neighbouring lanes read elements C apart); a per-channel broadcast keeps C
    innermost; a transposed input follows the output's order."""
    shape, cl = (2, 96, 8, 8), (6144, 1, 768, 96)
    assert analyze(shape, (), [cl, cl, cl]).xsizes == (12288,)
    with_gamma = analyze(shape, (), [cl, (0, 1, 0, 0), cl, cl])
    assert with_gamma.xsizes == (128, 96) and with_gamma.strides == ((96, 1), (0, 1), (96, 1), (96, 1))
    transposed = analyze((6, 10), (), [(1, 6), (10, 1)])
    assert transposed.xsizes == (6, 10) and transposed.strides == ((1, 6), (10, 1))
    # a reduction keeps its kept and reduced dims apart, each group in memory order
    per_channel = analyze(shape, (0, 2, 3), [cl, (0, 1, 0, 0)])
    assert per_channel.xsizes == (96,) and per_channel.rsizes == (128,) and per_channel.strides == ((1, 96), (1, 0))
    gen = torch.Generator().manual_seed(4)
    kernel = _chain(shape)
    inputs = [torch.randn(shape, generator=gen).contiguous(memory_format=torch.channels_last),
              torch.randn(1, 96, 1, 1, generator=gen).expand(shape)]
    outs = [torch.empty(shape, dtype=kernel.instrs[o.index].dtype).contiguous(memory_format=torch.channels_last)
            for o in kernel.outputs]
    got = executor.run(kernel, inputs, outs)
    assert all(g is o for g, o in zip(got, outs))  # written in place, channels-last
    assert_matches(kernel, [g.contiguous() for g in got], inputs)


def test_index_width_is_64_bit_only_when_offsets_need_it(executor):
    small = analyze((1024, 1024), (), [(1024, 1), (1024, 1)])
    assert small.index_bits == 32
    big_stride = analyze((4, 8), (), [(2**30, 1)] + [(8, 1)] * 6)  # reaches 3 * 2**30 + 7
    assert big_stride.index_bits == 64
    source = pointwise.generate(_chain((4, 8)), big_stride.pattern)
    assert "tl.program_id(0).to(tl.int64)" in source
    # The 64-bit source runs the same: launch it on small data through the cache.
    kernel = _chain((4, 8))
    fn = executor.cache.kernel(("test-int64",), lambda: source, pointwise.KERNEL_NAME, True)
    gen = torch.Generator().manual_seed(3)
    inputs = [torch.randn(8, 4, generator=gen).t(), torch.randn(4, 8, generator=gen)]
    outs = [torch.empty(4, 8, dtype=kernel.instrs[o.index].dtype) for o in kernel.outputs]
    layout = analyze((4, 8), (), [(1, 4)] + [(8, 1)] * 6)
    assert layout.pattern[:2] == big_stride.pattern[:2] and layout.pattern[3] == big_stride.pattern[3]
    scalars, constants = launch_arguments(layout, 2, pointwise_choice(layout, BlockConfig.for_interpreter()))
    fn[(1,)](*inputs, *outs, *scalars, **constants)
    assert_matches(kernel, outs, inputs)


def test_unsupported_op_is_a_clear_error(executor):
    kernel = kernel_of((3,), (F32,), [Instr("frobnicate", (Input(0),), F32)], outputs=[0])
    with pytest.raises(UnsupportedKernel, match="aten.frobnicate"):
        executor.run(kernel, [torch.randn(3)])


def test_wrong_inputs_are_rejected(executor):
    with pytest.raises(ValueError, match="input 1"):
        executor.run(_chain((3,)), [torch.randn(3), torch.randn(4)])


def test_triton_executor_refuses_cpu_tensors(tmp_path):
    ex = TritonExecutor(interpret=False, cache=KernelCache(tmp_path))
    assert ex.name == "triton"
    with pytest.raises(ValueError, match="CUDA"):
        ex.run(_chain((3,)), [torch.randn(3), torch.randn(3)])


def test_interpret_executor_leaves_the_environment_alone(tmp_path, monkeypatch):
    import triton

    monkeypatch.setenv("FUSIONRT_CACHE_DIR", str(tmp_path))
    before = os.environ.get("TRITON_INTERPRET")
    ex = get_executor("interpret")
    assert ex.name == "interpret"
    inputs = [torch.randn(5), torch.randn(5)]
    assert_matches(_chain((5,)), ex.run(_chain((5,)), inputs), inputs)
    assert os.environ.get("TRITON_INTERPRET") == before
    assert bool(triton.knobs.runtime.interpret) == (before == "1")


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=str)
def test_trunc_division_rounds_the_quotient_like_aten(executor, dtype):
    # aten divides two half tensors in the half type: the quotient is rounded before it is
    # truncated (2.9996 -> 3.0 -> 3), which flips dozens of 38k quotients near integers.
    gen = torch.Generator().manual_seed(11)
    a = (torch.randn(37, 1029, generator=gen) * 20).to(dtype)
    b = (torch.rand(37, 1029, generator=gen) * 2.5 + 0.5).to(dtype)
    trunc = (("rounding_mode", "trunc"),)
    kernel = kernel_of((37, 1029), (dtype, dtype), [Instr("div", (Input(0), Input(1)), dtype, trunc),
                                                   Instr("div", (Input(0), 0.3), dtype, trunc)], outputs=[0, 1])
    out = executor.run(kernel, [a, b])
    assert torch.equal(out[0], torch.div(a, b, rounding_mode="trunc"))
    assert torch.equal(out[1], torch.div(a, 0.3, rounding_mode="trunc"))


def test_outputs_are_written_into_the_given_tensors_whatever_their_strides(executor):
    gen = torch.Generator().manual_seed(12)
    inputs = [torch.randn(6, 10, generator=gen), torch.randn(10, 6, generator=gen).t()]
    kernel = _chain((6, 10))
    expected = evaluate(kernel, inputs)
    big = torch.zeros(12, 10, dtype=expected[1].dtype)
    given = [torch.empty(10, 6, dtype=expected[0].dtype).t(), big[::2], None,
             torch.empty(6, 20, dtype=expected[3].dtype)[:, ::2], None]
    out = executor.run(kernel, inputs, given)
    for j, (o, e) in enumerate(zip(out, expected)):
        if given[j] is not None:
            assert o is given[j]
        torch.testing.assert_close(o, e, **tolerance(e.dtype))
    assert torch.equal(big[1::2], torch.zeros(6, 10))  # the rows between were left alone


def test_a_bound_kernel_launches_again_on_its_tensors(executor):
    x = torch.randn(300)
    kernel = kernel_of((300,), (F32,), [Instr("mul", (Input(0), 3), F32)], outputs=[0])
    bound = executor.bind(kernel, [x])
    (out,) = bound()
    assert torch.equal(out, x * 3)
    x.copy_(torch.arange(300.0))
    assert bound()[0] is out and torch.equal(out, torch.arange(300.0) * 3)


@pytest.mark.parametrize("n", [4096, 4093], ids=["blocks-divide", "masked"])
def test_mask_free_and_masked_variants(tmp_path, n):
    ex = TritonExecutor(interpret=True, cache=KernelCache(tmp_path),
                        blocks=BlockConfig(max_xblock=1024))
    gen = torch.Generator().manual_seed(n)
    inputs = [torch.randn(n, generator=gen), torch.randn(n, generator=gen)]
    kernel = _chain((n,))
    assert_matches(kernel, ex.run(kernel, inputs), inputs)
    (source,) = [p.read_text() for p in tmp_path.glob("k*.py")]
    assert ("xmask" in source) == (n % 1024 != 0)


def test_runtime_writes_in_place_and_through_views():
    check_direct_writes("cpu", "interpret")
