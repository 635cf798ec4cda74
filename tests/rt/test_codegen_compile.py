"""The generated kernels compile with Triton's real GPU compiler (to an sm_90 cubin) on a
machine without a GPU: what the interpreter cannot check (constexpr globals, loop-carried types,
bitcasts, the layouts of reductions) fails here instead of on the device."""
from __future__ import annotations

import pytest
import torch

from fusionrt.codegen import KernelCache, pointwise, reduction
from fusionrt.codegen.layout import analyze, contiguous_strides, tensor_strides
from fusionrt.kernel_ir import FusedKernel

from .codegen_cases import named_inputs, op_kernel
from .reduction_cases import nan_case, standard_cases

compiler = pytest.importorskip("triton.compiler")
GPUTarget = pytest.importorskip("triton.backends.compiler").GPUTarget

POINTER = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
           torch.float64: "*fp64", torch.int8: "*i8", torch.uint8: "*u8", torch.int16: "*i16",
           torch.int32: "*i32", torch.int64: "*i64", torch.bool: "*i1"}


@pytest.fixture(autouse=True)
def _triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))


def _compile(fn, kernel: FusedKernel, constants: dict[str, int]) -> dict:
    dtypes = list(kernel.input_dtypes) + [kernel.instrs[o.index].dtype for o in kernel.outputs]
    signature = {}
    for i, name in enumerate(fn.arg_names):
        signature[name] = (POINTER[dtypes[i]] if i < len(dtypes)
                           else "constexpr" if name in constants else "i32")
    source = compiler.ASTSource(fn=fn, signature=signature, constexprs=constants)
    return compiler.compile(source, target=GPUTarget("cuda", 90, 32)).asm


def _layout(kernel: FusedKernel, inputs: list[torch.Tensor]):
    strides = [tensor_strides(t.shape, t.stride()) for t in inputs]
    strides += [tensor_strides(kernel.output_shape(j), contiguous_strides(kernel.output_shape(j)))
                for j in range(len(kernel.outputs))]
    return analyze(kernel.shape, kernel.reduce_dims, strides)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_every_op_compiles_for_sm90(tmp_path, dtype):
    inputs = named_inputs(dtype, (5, 7), torch.Generator())
    inputs[1] = inputs[1].t().contiguous().t()  # one strided input, one broadcast
    inputs[2] = inputs[2][:1].expand(5, 7)
    kernel, _ = op_kernel(dtype, inputs)
    pattern = _layout(kernel, inputs).pattern
    fn = KernelCache(tmp_path).kernel("k", lambda: pointwise.generate(kernel, pattern),
                                      pointwise.KERNEL_NAME, interpret=False)
    assert "cubin" in _compile(fn, kernel, {"XBLOCK": 128})  # small: fast to compile


@pytest.mark.slow
@pytest.mark.parametrize("looped", [False, True], ids=["single-pass", "looped"])
def test_every_reduction_pattern_compiles_for_sm90(tmp_path, looped):
    cache = KernelCache(tmp_path)
    for i, (name, kernel, make_inputs) in enumerate(standard_cases() + [nan_case()]):
        pattern = _layout(kernel, make_inputs(torch.Generator(), "cpu")).pattern
        fn = cache.kernel(name, lambda: reduction.generate(kernel, pattern, looped),
                          reduction.KERNEL_NAME, interpret=False)
        constants = {"XBLOCK": 1, "RBLOCK": 128} if looped else {"XBLOCK": 2, "RBLOCK": 64}
        assert "cubin" in _compile(fn, kernel, constants), name
