"""The matmul template on a CUDA GPU (run through the device tool): every block config against
eager on odd shapes, transposed and broadcast operands, size 1, fp32/fp16/bf16, and the bench's
fused programs end to end with the cost model's choices."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fusionrt
from fusionrt.codegen import KernelCache, TritonExecutor
from fusionrt.codegen.matmul import configs_for
from fusionrt.kernel_ir import FusedKernel, Input, Instr, MatmulKernel, Value, identity_kernel

from .test_codegen_matmul import CASES

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Eager's own result differs from an fp32-accumulated one by its rounding of the product; the
# bound grows with K (the sum of K rounded products).
TOL = {torch.float32: dict(atol=1e-3, rtol=1e-3), torch.float16: dict(atol=2e-2, rtol=2e-2),
       torch.bfloat16: dict(atol=8e-2, rtol=5e-2)}
SHAPES = [(1, 1, 1), (37, 29, 19), (129, 257, 65), (64, 64, 64), (300, 17, 1000)]  # (M, N, K)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("kernels"))


def _gelu_prologue_bias_relu(m: int, n: int, k: int, dtype: torch.dtype) -> MatmulKernel:
    """relu(gelu(a) @ b + bias): a prologue and an epilogue with a broadcast input."""
    a = FusedKernel((m, k), (dtype,), (Instr("gelu", (Input(0),), dtype),), (Value(0),))
    epilogue = FusedKernel((m, n), (dtype, dtype), (
        Instr("add", (Input(0), Input(1)), dtype), Instr("relu", (Value(0),), dtype)), (Value(1),))
    return MatmulKernel(a, identity_kernel((k, n), dtype), epilogue, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_config_on_odd_shapes_and_layouts(cache, dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    for config in configs_for(dtype):
        executor = TritonExecutor(interpret=False, cache=cache)
        executor.matmul.configs = (config,)
        for m, n, k in SHAPES:
            kernel = _gelu_prologue_bias_relu(m, n, k, dtype)
            a = torch.randn(k, m, device="cuda", generator=gen).to(dtype).T  # transposed
            b = torch.randn(k, 2 * n, device="cuda", generator=gen).to(dtype)[:, ::2]  # strided
            bias = torch.randn(n, device="cuda", generator=gen).to(dtype).expand(m, n)  # broadcast
            (got,) = executor.run(kernel, [a, b, bias])
            expected = torch.relu(F.gelu(a) @ b + bias)
            torch.testing.assert_close(got, expected, **TOL[dtype], msg=lambda s: f"{config} {m}x{n}x{k}: {s}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batched_broadcast_operand(cache, dtype):
    executor = TritonExecutor(interpret=False, cache=cache)
    t1 = torch.randn(1, 100, 70, device="cuda").to(dtype).expand(5, 100, 70)
    t2 = torch.randn(5, 70, 33, device="cuda").to(dtype)
    kernel = MatmulKernel(identity_kernel((5, 100, 70), dtype), identity_kernel((5, 70, 33), dtype),
                          identity_kernel((5, 100, 33), dtype), dtype)
    (got,) = executor.run(kernel, [t1, t2])
    torch.testing.assert_close(got, torch.bmm(t1, t2), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CASES)
def test_programs_end_to_end(name, dtype):
    fn, shapes, kinds = CASES[name]
    gen = torch.Generator(device="cuda").manual_seed(1)
    args = [torch.randn(*s, device="cuda", generator=gen).to(dtype) for s in shapes]
    expected = fn(*args)
    got, report = fusionrt.measure(fn, *args, executor="triton")
    for g, e in zip(*(((got,), (expected,)) if isinstance(got, torch.Tensor) else (got, expected))):
        torch.testing.assert_close(g, e, **TOL[dtype])
    assert [k.kind for k in report.kernel_records] == kinds


def test_bench_shapes_choose_and_match():
    """Burn's unsqueeze-matmul (bench workload 3) at full size: one template kernel."""
    t1 = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    t2 = torch.randn(16, 1024, 1024, device="cuda", dtype=torch.bfloat16)
    t3 = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    fn = CASES["burn_matmul"][0]
    got, report = fusionrt.measure(fn, t1, t2, t3, executor="triton")
    torch.testing.assert_close(got, fn(t1, t2, t3), **TOL[torch.bfloat16])
    assert [(k.kind, k.backend) for k in report.kernel_records] == [("matmul", "template")]
    assert report.writes == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(37, 29, 19), (256, 128, 64), (1, 8, 8)])
def test_bias_activation_runs_as_cublaslt_epilogue(shape, dtype):
    """relu(x @ w.T + b) and tanh-GELU(x @ w + b): one cuBLAS kernel with its epilogue, recorded
    and replayed, against eager (cuBLASLt adds the bias before rounding once)."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
    w = torch.randn(k, n, device="cuda", dtype=dtype, generator=gen)
    b = torch.randn(n, device="cuda", dtype=dtype, generator=gen)
    for fn, args in ((lambda x, w, b: torch.relu(x @ w.T + b), (x, w.T.contiguous(), b)),
                     (lambda x, w, b: F.gelu(x @ w + b, approximate="tanh"), (x, w, b))):
        fused = fusionrt.jit(fn, executor="triton")
        for _ in range(2):
            torch.testing.assert_close(fused(*args), fn(*args), **TOL[dtype])
        assert [k.backend for k in fused.report.kernel_records] == ["cublaslt"]
        assert fused.stats.replays == 1


def test_a_plan_tunes_its_shape_classes_after_one_compile(tmp_path, monkeypatch):
    """Matmuls of untuned shape classes, bound by one plan, are tuned once every candidate is
    compiled (one batch for all classes), each class once whatever its epilogues; the results
    are eager's, and a matmul run on its own (no plan) tunes at its first use."""
    from fusionrt.codegen import launch, matmul

    batches = []
    compile_new = launch.compile_new

    def counted() -> None:
        batches.append(len(launch._UNCOMPILED))
        compile_new()

    monkeypatch.setattr(matmul, "compile_new", counted)
    monkeypatch.setattr("fusionrt.codegen.compile_new", counted)
    executor = TritonExecutor(interpret=False, cache=KernelCache(tmp_path))
    gen = torch.Generator(device="cuda").manual_seed(2)
    dtype = torch.bfloat16
    bound, expected = [], []
    for m, n, k in [(256, 512, 128), (256, 512, 128), (1024, 64, 256)]:
        kernel = _gelu_prologue_bias_relu(m, n, k, dtype)
        a, b = (torch.randn(m, k, device="cuda", generator=gen).to(dtype),
                torch.randn(k, n, device="cuda", generator=gen).to(dtype))
        bias = torch.randn(n, device="cuda", generator=gen).to(dtype).expand(m, n)
        bound.append(executor.bind(kernel, [a, b, bias]))
        expected.append(torch.relu(F.gelu(a) @ b + bias))
    executor.compile_bound()
    assert len(executor.matmul.tuning.table) == 2  # two shape classes, one tuning each
    candidates = [matmul._fitting(configs_for(dtype), m, n) for m, n in [(256, 512), (1024, 64)]]
    assert all(len(c) > 1 for c in candidates)  # both classes are tuned
    assert batches[0] >= sum(map(len, candidates))  # every class's candidates in the first batch
    for call, want in zip(bound, expected):
        (got,) = call()
        torch.testing.assert_close(got, want, **TOL[dtype])
    kernel = _gelu_prologue_bias_relu(64, 2048, 32, dtype)
    a, b = torch.randn(64, 32, device="cuda").to(dtype), torch.randn(32, 2048, device="cuda").to(dtype)
    bias = torch.randn(2048, device="cuda").to(dtype).expand(64, 2048)
    (got,) = executor.run(kernel, [a, b, bias])
    torch.testing.assert_close(got, torch.relu(F.gelu(a) @ b + bias), **TOL[dtype])
    assert len(executor.matmul.tuning.table) == 3
