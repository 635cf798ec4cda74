"""The generated kernels compile with Triton's real GPU compiler (to an sm_90 cubin) on a
machine without a GPU: what the interpreter cannot check (constexpr globals, loop-carried types,
bitcasts, the layouts of reductions) fails here instead of on the device. The issue-4 workload
kernels are compiled exactly as the executor would launch them on an H100 (its block sizes,
warps, masks and specialization), and their machine code is checked for what makes a
memory-bound kernel fast: 128-bit loads and stores, no register spills."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from fusionrt.codegen import BlockConfig, KernelCache, launch_arguments, pointwise, reduction
from fusionrt.codegen.config import Choice, pointwise_choice, reduction_choice
from fusionrt.codegen.layout import analyze, contiguous_strides, tensor_strides
from fusionrt.kernel_ir import FusedKernel, Input, Instr, Value

from .codegen_cases import kernel_of, named_inputs, op_kernel
from .reduction_cases import BF16, F32, bias_gradient, clone_pattern, layer_norm, nan_case, softmax, standard_cases

compiler = pytest.importorskip("triton.compiler")
GPUTarget = pytest.importorskip("triton.backends.compiler").GPUTarget

POINTER = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
           torch.float64: "*fp64", torch.int8: "*i8", torch.uint8: "*u8", torch.int16: "*i16",
           torch.int32: "*i32", torch.int64: "*i64", torch.bool: "*i1"}


@pytest.fixture(autouse=True)
def _triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))


def _layout(kernel: FusedKernel, inputs: list[torch.Tensor]):
    strides = [tensor_strides(t.shape, t.stride()) for t in inputs]
    strides += [tensor_strides(kernel.output_shape(j), contiguous_strides(kernel.output_shape(j)))
                for j in range(len(kernel.outputs))]
    return analyze(kernel.shape, kernel.reduce_dims, strides)


def _compile(cache: KernelCache, kernel: FusedKernel, inputs: list[torch.Tensor],
             choice: Choice | None = None) -> dict:
    """Compile as a launch would: Triton specializes aligned pointers, sizes divisible by 16,
    and integers equal to 1 (constants)."""
    layout = _layout(kernel, inputs)
    pattern = layout.pattern
    if kernel.reduce_dims:
        choice = choice or reduction_choice(layout, BlockConfig())
        fn = cache.kernel(("r", kernel, pattern, choice.variant),
                          lambda: reduction.generate(kernel, pattern, choice.looped, choice.xmask, choice.rmask),
                          reduction.KERNEL_NAME, interpret=False)
    else:
        choice = choice or pointwise_choice(layout, BlockConfig())
        fn = cache.kernel(("p", kernel, pattern, choice.variant),
                          lambda: pointwise.generate(kernel, pattern, choice.xmask),
                          pointwise.KERNEL_NAME, interpret=False)
    scalars, constants = launch_arguments(layout, len(inputs), choice)
    dtypes = list(kernel.input_dtypes) + [kernel.instrs[o.index].dtype for o in kernel.outputs]
    values = [None] * len(dtypes) + scalars
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constants:
            signature[name], constexprs[(i,)] = "constexpr", constants[name]
        elif i < len(dtypes):
            signature[name], attrs[(i,)] = POINTER[dtypes[i]], [["tt.divisibility", 16]]
        elif values[i] == 1:
            signature[name], constexprs[(i,)] = "constexpr", 1
        else:
            signature[name] = "i32" if abs(values[i]) < 2**31 else "i64"
            if values[i] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    source = compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {k: v for k, v in constants.items() if k in ("num_warps", "num_stages")}
    return compiler.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm


def _resources(cubin: bytes, tmp_path: Path) -> dict[str, int]:
    """Registers and local memory (spills) of a cubin, from Triton's bundled cuobjdump."""
    import triton

    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        pytest.skip("triton ships no cuobjdump here")
    text = subprocess.run([str(tool), "--dump-resource-usage", str(path)], capture_output=True,
                          text=True, check=True).stdout
    return {k: int(v) for k, v in re.findall(r"\b(REG|LOCAL|STACK):(\d+)", text)}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_every_op_compiles_for_sm90(tmp_path, dtype):
    inputs = named_inputs(dtype, (5, 7), torch.Generator())
    inputs[1] = inputs[1].t().contiguous().t()  # one strided input, one broadcast
    inputs[2] = inputs[2][:1].expand(5, 7)
    kernel, _ = op_kernel(dtype, inputs)
    assert "cubin" in _compile(KernelCache(tmp_path), kernel, inputs)


@pytest.mark.slow
@pytest.mark.parametrize("looped", [False, True], ids=["single-pass", "looped"])
def test_every_reduction_pattern_compiles_for_sm90(tmp_path, looped):
    cache = KernelCache(tmp_path)
    for name, kernel, make_inputs in standard_cases() + [nan_case()]:
        inputs = make_inputs(torch.Generator(), "cpu")
        # Both mask variants: the cases' odd sizes need masks; pretend the blocks divide them.
        for masks in ((True, True), (False, False)):
            choice = Choice(looped, 1 if looped else 2, 128 if looped else 64, 4, 1, *masks)
            assert "cubin" in _compile(cache, kernel, inputs, choice), (name, masks)


@pytest.mark.slow
def test_split_reductions_compile_for_sm90(tmp_path):
    """Both kernels of a split reduction, as the executor launches them on an H100."""
    from fusionrt.codegen import TritonExecutor
    from fusionrt.codegen.launch import SplitSpec

    executor = TritonExecutor(interpret=False, cache=KernelCache(tmp_path))
    name, kernel, _ = bias_gradient((6304, 768))
    inputs = [_meta((6304, 768), BF16), _meta((6304, 768), BF16)]
    outputs = [_meta(kernel.output_shape(j), kernel.instrs[o.index].dtype) for j, o in enumerate(kernel.outputs)]
    spec = executor._spec(kernel, inputs, outputs)
    assert isinstance(spec, SplitSpec)
    pointers = ["*bf16"] * 4 + ["*fp32"]
    for part in (spec.partial, spec.finish):
        signature, constexprs = {}, {}
        values = [None] * len(pointers) + list(part.scalars)
        for i, arg in enumerate(part.fn.arg_names):
            if arg in part.constants:
                signature[arg], constexprs[(i,)] = "constexpr", part.constants[arg]
            else:
                signature[arg] = pointers[i] if i < len(pointers) else "i32"
        source = compiler.ASTSource(fn=part.fn, signature=signature, constexprs=constexprs)
        options = {k: v for k, v in part.constants.items() if k in ("num_warps", "num_stages")}
        assert "cubin" in compiler.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm, name


def _meta(shape, dtype=F32):
    return torch.empty(shape, dtype=dtype, device="meta")


def _workloads() -> list[tuple[str, FusedKernel, list[torch.Tensor]]]:
    """Issue 4's memory-bound kernels at their benchmark shapes (meta tensors: layouts only)."""
    n, m, k = 1 << 26, 8192, 4096
    relu_chain = kernel_of((n,), (F32,), [Instr("mul", (Input(0), 2), F32), Instr("relu", (Value(0),), F32),
                                          Instr("add", (Value(1), 1), F32)], outputs=[2])
    _, ln, _ = layer_norm((m, k), (1,), BF16)
    _, sm, _ = softmax((8, 16, 1024, 1024), 3, BF16)
    _, clone, _ = clone_pattern((m, k))
    rows = _meta((1, k)).expand(m, k)
    return [
        ("relu-chain fp32", relu_chain, [_meta((n,))]),
        ("layer_norm bf16", ln, [_meta((m, k), BF16), _meta((m, k), BF16), rows, rows]),
        ("softmax bf16", sm, [_meta((8, 16, 1024, 1024), BF16), _meta((1, 1, 1024, 1024)).expand(8, 16, 1024, 1024)]),
        ("clone-reduction fp32", clone, [_meta((m, k)), _meta((m, k))]),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("case", range(4), ids=lambda i: _workloads()[i][0])
def test_workload_kernels_use_wide_accesses_and_do_not_spill(tmp_path, case):
    name, kernel, inputs = _workloads()[case]
    asm = _compile(KernelCache(tmp_path), kernel, inputs)
    ptx = asm["ptx"]
    loads, stores = re.findall(r"ld\.global[.\w]*", ptx), re.findall(r"st\.global[.\w]*", ptx)
    # Every load and store of a full-size tensor moves 8+ bytes per thread (v2/v4); only
    # per-row values (a reduction's result) may be scalar.
    assert loads and all(".v" in op for op in loads), loads
    assert sum(".v" in op for op in stores) >= 1, stores
    usage = _resources(asm["cubin"], tmp_path)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 128, usage
