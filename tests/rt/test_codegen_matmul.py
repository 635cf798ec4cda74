"""The matmul template under Triton's CPU interpreter, through the whole runtime: programs with
matmuls, prologues and epilogues, on small odd shapes and fresh random inputs, against eager.
The same programs under the reference executor must plan and count identically."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fusionrt
from fusionrt.codegen import KernelCache, TritonExecutor
from fusionrt.codegen.matmul import KERNEL_NAME, MatmulConfig, configs_for, generate
from fusionrt.kernel_ir import FusedKernel, Input, Instr, MatmulKernel, Value, identity_kernel

TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float16: dict(atol=1e-2, rtol=1e-2),
       torch.bfloat16: dict(atol=4e-2, rtol=4e-2)}


def _r(*shape, dtype=torch.float32, gen=None):
    return torch.randn(*shape, generator=gen).to(dtype)


def mm_bias_relu(x, w, b):
    return torch.relu(x @ w.T + b)


def burn_matmul(t1, t2, t3):
    return t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)


def prologue_chain(x, w):
    return (x * 2 + 1) @ w


def gelu_prologue_transposed(x, w):
    return F.gelu(x.T) @ w.T


def addmm_scaled(b, x, w):
    return torch.addmm(b, x, w, beta=0.5, alpha=2.0)


def baddbmm(b, x, w):
    return torch.baddbmm(b, x, w)


def residual_scale_cast(x, w, r):
    return ((x @ w) * 0.5 + r).to(torch.float16)


def product_and_activation(x, w):
    h = x @ w
    return h, torch.sigmoid(h)


def swiglu(x, w1, w2):
    return F.silu(x @ w1) * (x @ w2)


def linear_3d(x, w, b):
    return F.linear(x, w, b)


# (function, input shapes, expected kernel kinds under the stream policy)
CASES = {
    "mm_bias_relu": (mm_bias_relu, [(37, 29), (19, 29), (19,)], ["matmul"]),
    "burn_matmul": (burn_matmul, [(13, 21), (3, 21, 17), (13, 17)], ["matmul"]),
    "prologue_chain": (prologue_chain, [(37, 45), (45, 19)], ["matmul"]),
    "gelu_prologue_transposed": (gelu_prologue_transposed, [(33, 20), (9, 33)], ["matmul"]),
    "addmm_scaled": (addmm_scaled, [(19,), (37, 29), (29, 19)], ["matmul"]),
    "baddbmm": (baddbmm, [(2, 11, 7), (2, 11, 35), (2, 35, 7)], ["matmul"]),
    "residual_scale_cast": (residual_scale_cast, [(37, 29), (29, 19), (37, 19)], ["matmul"]),
    "product_and_activation": (product_and_activation, [(37, 29), (29, 19)], ["matmul"]),
    "swiglu": (swiglu, [(37, 29), (29, 40), (29, 40)], ["matmul", "matmul"]),
    "size_one": (mm_bias_relu, [(1, 1), (1, 1), (1,)], ["matmul"]),
    "linear_3d": (linear_3d, [(2, 7, 29), (19, 29), (19,)], ["matmul"]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", CASES)
def test_template_matches_eager_and_counts_match_reference(name, dtype):
    fn, shapes, kinds = CASES[name]
    gen = torch.Generator().manual_seed(len(name))
    args = [_r(*s, dtype=dtype, gen=gen) for s in shapes]
    expected = fn(*args)
    got, report = fusionrt.measure(fn, *args, executor="interpret")
    _, reference = fusionrt.measure(fn, *args, executor="reference")
    for g, e in zip(*(((got,), (expected,)) if isinstance(got, torch.Tensor) else (got, expected))):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, **TOL[dtype])
    assert [k.kind for k in report.kernel_records] == kinds
    # bias + ReLU of a 2-d half product is cuBLASLt's fused epilogue (backends.cublaslt_activation)
    lt = name in ("mm_bias_relu", "size_one") and dtype != torch.float32
    assert [k.backend for k in report.kernel_records] == (["cublaslt"] if lt else ["template"] * len(kinds))
    assert [(w.op, w.reason, w.bytes) for w in report.materialized] == \
        [(w.op, w.reason, w.bytes) for w in reference.materialized]
    assert report.to_dict()["totals"] == reference.to_dict()["totals"]


def test_epilogue_writes_only_the_result_where_eager_writes_three():
    x, w, b = _r(37, 29), _r(19, 29), _r(19)
    _, report = fusionrt.measure(mm_bias_relu, x, w, b, executor="interpret")
    assert (report.kernels, report.writes) == (1, 1)
    assert (report.eager_kernels, report.eager_writes) == (3, 3)


def test_prologue_is_not_written():
    x, w = _r(37, 45), _r(45, 19)
    _, report = fusionrt.measure(prologue_chain, x, w, executor="interpret")
    assert [(w.op, w.reason) for w in report.materialized] == [("mm", "output")]


def _plain_kernel(dtype: torch.dtype) -> MatmulKernel:
    """relu(a @ b + 1) over [37, 29] @ [29, 19], built by hand."""
    epilogue = FusedKernel((37, 19), (dtype,), (
        Instr("add", (Input(0), 1), dtype), Instr("relu", (Value(0),), dtype)), (Value(1),))
    return MatmulKernel(identity_kernel((37, 29), dtype), identity_kernel((29, 19), dtype), epilogue, dtype)


@pytest.mark.parametrize("config", [MatmulConfig(16, 16, 16, 1, 4, 1), MatmulConfig(32, 16, 64, 2, 4, 1)],
                         ids=str)
def test_block_configs_with_odd_shapes_and_strided_operands(tmp_path, config):
    kernel = _plain_kernel(torch.float32)
    executor = TritonExecutor(interpret=True, cache=KernelCache(tmp_path))
    executor.matmul.configs = (config,)
    a = _r(29, 37).T  # transposed
    b = _r(19, 58)[:, ::2].T  # strided and transposed
    (got,) = executor.run(kernel, [a, b])
    torch.testing.assert_close(got, torch.relu(a @ b + 1), atol=1e-4, rtol=1e-4)
    out = torch.empty(19, 37).T  # written through the caller's strides
    (written,) = executor.run(kernel, [a, b], [out])
    assert written is out
    torch.testing.assert_close(out, torch.relu(a @ b + 1), atol=1e-4, rtol=1e-4)


def test_zero_sized_k_gives_aten_zeros(tmp_path):
    kernel = MatmulKernel(identity_kernel((3, 0), torch.float32), identity_kernel((0, 4), torch.float32),
                          identity_kernel((3, 4), torch.float32), torch.float32)
    (got,) = TritonExecutor(interpret=True, cache=KernelCache(tmp_path)).run(kernel, [_r(3, 0), _r(0, 4)])
    assert torch.equal(got, torch.zeros(3, 4))


def test_generated_source_compiles_names_only_builtins():
    source = generate(_plain_kernel(torch.bfloat16), wide=False, interpret=False)
    assert "tl.dot(aop, bop, acc" in source and "tl.zeros" not in source and "tl.cdiv" not in source
    assert "_to_bf16(acc)" in source  # the product rounded as eager rounds it


def test_malformed_matmul_kernel_is_refused():
    with pytest.raises(ValueError, match="do not multiply"):
        MatmulKernel(identity_kernel((3, 5), torch.float32), identity_kernel((4, 2), torch.float32),
                     identity_kernel((3, 2), torch.float32), torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_template_compiles_to_wgmma_for_sm90(tmp_path, monkeypatch, dtype):
    """The real GPU compiler on this GPU-less machine: what the interpreter cannot check (types
    carried through the K loop, the dot's operand layouts), at the largest config."""
    compiler = pytest.importorskip("triton.compiler")
    target = pytest.importorskip("triton.backends.compiler").GPUTarget("cuda", 90, 32)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    kernel = _plain_kernel(dtype)
    config = configs_for(dtype)[0]
    fn = KernelCache(tmp_path).kernel("k", lambda: generate(kernel, wide=False, interpret=False, even_k=True),
                                      KERNEL_NAME, interpret=False)
    constants = {k: v for k, v in config.constants().items() if k.isupper()}
    pointer = {torch.bfloat16: "*bf16", torch.float32: "*fp32"}[dtype]
    signature, constexprs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constants:
            signature[name], constexprs[(i,)] = "constexpr", constants[name]
        else:
            signature[name] = pointer if name.startswith(("in", "out")) else "i32"
    source = compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    asm = compiler.compile(source, target=target, options={"num_warps": config.num_warps,
                                                          "num_stages": config.num_stages}).asm
    if dtype == torch.bfloat16:
        assert "wgmma" in asm["ptx"]  # Hopper's warpgroup MMA, not the older mma.sync path
    else:
        assert "wgmma" not in asm["ptx"] and "fma.rn.f32" in asm["ptx"]  # exact fp32, no TF32
