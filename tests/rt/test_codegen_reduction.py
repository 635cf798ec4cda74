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
from .reduction_cases import F32, clone_pattern, nan_case, softmax, standard_cases

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
