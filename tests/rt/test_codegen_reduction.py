"""Generated reduction kernels under the Triton interpreter: single-pass and looped."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import triton

from fusionrt.codegen import BlockConfig, KernelCache, TritonExecutor, reduction
from fusionrt.codegen.layout import analyze
from fusionrt.kernel_ir import Input, Instr

from .codegen_cases import assert_matches, kernel_of
from .reduction_cases import (BF16, F16, F32, bias_gradient, clone_pattern, layer_norm, nan_case, one_reduction, softmax,
                              standard_cases)

# Rows longer than 8 elements loop over 8-wide tiles: the looped kernels on small tensors.
LOOPED = BlockConfig(max_xblock=64, max_single_pass=8, tile=32, loop_rblock=8)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# triton < 3.7's interpreter turns a runtime loop bound into an int with int(1-element array),
# which numpy 2.x rejects (3.7+ squeezes first); compiled kernels are unaffected.
OLD_INTERPRETER_LOOPS = (tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 7)
                         and int(np.__version__.split(".")[0]) >= 2)


@pytest.mark.parametrize("looped", [False, True], ids=["single-pass", "looped"])
def test_reduction_patterns(cache, looped):
    if looped and OLD_INTERPRETER_LOOPS:
        pytest.skip("triton < 3.7 interpreter cannot loop to a runtime bound with numpy 2")
    executor = TritonExecutor(interpret=True, cache=cache, blocks=LOOPED if looped else None)
    failures = []
    for i, (name, kernel, make_inputs) in enumerate(standard_cases() + [nan_case()]):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cpu")
        try:
            assert_matches(kernel, executor.run(kernel, inputs), inputs)
        except Exception as err:  # collect every failing pattern, not just the first
            failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)


def test_single_pass_reads_each_input_once_and_looped_recomputes_the_prologue():
    name, kernel, _ = softmax((4, 50), 1, F32)
    layout = analyze(kernel.shape, kernel.reduce_dims, [(50, 1), (0, 1), (50, 1)])
    single = reduction.generate(kernel, layout.pattern, looped=False)
    looped = reduction.generate(kernel, layout.pattern, looped=True)
    assert single.count("tl.load(") == 2 and "for roffset" not in single
    # max pass, sum pass, output pass: each reloads x and the mask
    assert looped.count("for roffset") == 3 and looped.count("tl.load(") == 6


def test_reduction_over_leading_dim_reads_through_strides():
    # x [R=37, X=6] contiguous: the reduced dim is outer, so x is read at r * 6 + x.
    layout = analyze((37, 6), (0,), [(6, 1), (0, 1)])
    assert layout.xsizes == (6,) and layout.rsizes == (37,)
    _, kernel, _ = standard_cases()[1]
    source = reduction.generate(kernel, layout.pattern, looped=False)
    assert "in0 + x0 * st0_0 + r0 * st0_1" in source and "out0 + xindex" in source


def test_empty_rows_follow_aten(cache):
    executor = TritonExecutor(interpret=True, cache=cache)
    kernel = kernel_of((3, 0), (F32,), [Instr("sum", (Input(0),), F32)], outputs=[0], reduce_dims=(1,))
    out = executor.run(kernel, [torch.randn(3, 0)])
    assert torch.equal(out[0], torch.zeros(3, 1))
    kernel = kernel_of((0, 4), (F32,), [Instr("sum", (Input(0),), F32)], outputs=[0], reduce_dims=(1,))
    assert executor.run(kernel, [torch.randn(0, 4)])[0].shape == (0, 1)


def test_same_kernel_new_strides_gets_a_new_plan_and_right_answer(cache):
    executor = TritonExecutor(interpret=True, cache=cache)
    _, kernel, make_inputs = clone_pattern((6, 20))
    gen = torch.Generator().manual_seed(5)
    x, y = make_inputs(gen, "cpu")
    for inputs in ([x, y], [x.t().contiguous().t(), y], [x, y[:1].expand(6, 20)]):
        assert_matches(kernel, executor.run(kernel, inputs), inputs)


def _choice(shape, dims, strides):
    from fusionrt.codegen.config import reduction_choice

    return reduction_choice(analyze(shape, dims, strides), BlockConfig())


def test_gpu_choices_follow_row_length_and_layout():
    # layer_norm / RMSNorm rows of 4096 and softmax rows of 1024: one row per program, whole row
    # in registers, no masks; a warp per 256 elements (8 and 4 warps).
    ln = _choice((8192, 4096), (1,), [(4096, 1), (0, 1), (1, 0)])
    assert (ln.looped, ln.xblock, ln.rblock, ln.num_warps, ln.xmask, ln.rmask) == (False, 1, 4096, 8, False, False)
    sm = _choice((131072, 1024), (1,), [(1024, 1), (1, 0)])
    assert (sm.looped, sm.xblock, sm.rblock, sm.num_warps) == (False, 1, 1024, 4)
    # short rows share a program; odd lengths keep their masks
    short = _choice((1000, 37), (1,), [(37, 1), (1, 0)])
    assert (short.looped, short.xblock, short.rblock, short.xmask, short.rmask) == (False, 64, 64, True, True)
    # past the single-pass limit: 2048-wide tiles in a loop
    long = _choice((64, 4097), (1,), [(4097, 1), (1, 0)])
    assert (long.looped, long.xblock, long.rblock, long.rmask) == (True, 1, 2048, True)
    # sum(0) of a row-major matrix: 64 contiguous columns per program, looped over the rows
    outer = _choice((4096, 512), (0,), [(512, 1), (0, 1)])
    assert (outer.looped, outer.xblock, outer.rblock) == (True, 64, 32)
    assert _choice((16, 512), (0,), [(512, 1), (0, 1)]).looped is False


# Small blocks that take every path the GPU choices take: outer tiles, loops, no masks.
GPU_LIKE = BlockConfig(max_xblock=64, max_single_pass=16, tile=64, one_row_from=16, loop_rblock=8, loop_tile=16,
                       outer_xblock=4)


@pytest.mark.parametrize("blocks", [GPU_LIKE, BlockConfig.for_interpreter()], ids=["gpu-like", "interpreter"])
def test_mask_free_outer_and_broadcast_reductions(cache, blocks):
    if OLD_INTERPRETER_LOOPS:
        pytest.skip("triton < 3.7 interpreter cannot loop to a runtime bound with numpy 2")
    executor = TritonExecutor(interpret=True, cache=cache, blocks=blocks)
    cases = [
        one_reduction("sum", (8, 64), (1,), F32),                         # blocks divide: no masks
        one_reduction("sum", (64, 8), (0,), F32),                         # outer, no masks
        one_reduction("amax", (37, 12), (0,), F32),                       # outer, masked
        one_reduction("sum", (8, 16), (1,), F32, make_input=lambda x: x.expand(8, 16), storage_shape=(8, 1)),
        one_reduction("sum", (16, 8), (0,), F32, make_input=lambda x: x.expand(16, 8), storage_shape=(16, 1)),
        softmax((16, 32), 1, BF16), layer_norm((4, 64), (1,), F16), clone_pattern((4, 16)),
    ]
    failures = []
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cpu")
        try:
            assert_matches(kernel, executor.run(kernel, inputs), inputs)
        except Exception as err:
            failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)


# Every looped reduction splits its rows into chunks of two or more tiles (on the GPU only
# reductions that leave most of it idle do).
SPLIT = BlockConfig(max_xblock=64, max_single_pass=8, tile=32, one_row_from=16, loop_rblock=8, loop_tile=16,
                    outer_xblock=4, split_below=1 << 30, split_programs=16, min_work=8)


def test_split_reductions_equal_aten(cache):
    from fusionrt.codegen.launch import SplitLaunch

    if OLD_INTERPRETER_LOOPS:
        pytest.skip("triton < 3.7 interpreter cannot loop to a runtime bound with numpy 2")
    executor = TritonExecutor(interpret=True, cache=cache, blocks=SPLIT)
    failures, split = [], []
    cases = standard_cases() + [nan_case(), bias_gradient((70, 12)), bias_gradient((64, 8)),
                                one_reduction("sum", (3, 4, 50), (0, 1, 2), F32),
                                one_reduction("mean", (96, 5), (0,), BF16)]
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cpu")
        try:
            bound = executor.bind(kernel, inputs)
            assert_matches(kernel, bound(), inputs)
            if isinstance(bound.launch, SplitLaunch):
                split.append(name)
                # a replay relaunches the split over new tensors with a workspace of its own
                fresh = make_inputs(torch.Generator().manual_seed(100 + i), "cpu")
                assert_matches(kernel, bound.relauncher()(fresh, [None] * len(kernel.outputs)), fresh)
        except Exception as err:
            failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)
    # every kind of split reduction ran split: outer and inner rows, several reductions, full
    # outputs stored by the first kernel, reduced inputs read by the second, masks or none
    for name in ("sum-(37, 6)-dims(0,)-float32", "sum-(3, 4, 5)-dims(0, 1, 2)-float32", "nan-propagation",
                 "bias-gradient-(70, 12)", "bias-gradient-(64, 8)", "reduced-inputs-(4, 3, 10)-dims(0, 2)",
                 "mean-(96, 5)-dims(0,)-bfloat16", "amax-(6, 19)-dims(1,)-bool", "sum-(6, 19)-dims(1,)-int32"):
        assert name in split, (name, "\n".join(sorted(split)))
    # a reduction that reads another's result, or a full output that does, is never split
    assert not any(name.startswith(("softmax", "layer_norm", "clone-pattern")) for name in split)
