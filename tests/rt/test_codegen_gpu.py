"""Generated kernels on a CUDA GPU (run through the device tool): every op, every reduction
pattern, odd shapes and layouts, fp32/fp16/bf16/int/bool, against eager on the same device."""
from __future__ import annotations

import pytest
import torch

from fusionrt.codegen import BlockConfig, KernelCache, TritonExecutor
from fusionrt.kernel_ir import Input, Instr, Value, evaluate

from .codegen_cases import (CASES, assert_matches, check_direct_writes, kernel_of, named_inputs, op_kernel,
                            tolerance)
from .reduction_cases import (BF16, F32, bias_gradient, clone_pattern, layer_norm, nan_case, one_reduction, softmax,
                              standard_cases)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8,
          torch.bool]
# Rows past 64 elements loop: the looped kernels at sizes where every tile path is taken.
HALF_ROUNDING = ("round",)
LOOPED = BlockConfig(max_single_pass=64, tile=4096, loop_rblock=64)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> KernelCache:
    return KernelCache(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="module")
def gpu(cache) -> TritonExecutor:
    return TritonExecutor(interpret=False, cache=cache)


def _layouts(t: torch.Tensor):
    """The same values contiguous, transposed (non-contiguous) and sliced out of a larger tensor."""
    big = torch.empty(t.shape[0], t.shape[1] * 2, dtype=t.dtype, device=t.device)
    big[:, ::2] = t
    return {"contiguous": t, "transposed": t.t().contiguous().t(), "strided": big[:, ::2]}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(37, 1029), (1, 1), (3, 1)], ids=str)
def test_every_op_on_gpu(gpu, dtype, shape):
    gen = torch.Generator().manual_seed(DTYPES.index(dtype))
    inputs = named_inputs(dtype, shape, gen, device="cuda")
    groups = [(tuple(CASES), None)]
    if dtype in (torch.float16, torch.bfloat16):
        # CUDA eager rounds a half-type scaled value (round with decimals) to the half type
        # before rounding it to an integer; CPU eager and the kernels (float32 math, one
        # rounding per instruction) do not. The two eagers disagree at those boundaries, and
        # the kernels follow the CPU. (Both eagers round a trunc quotient of two tensors to the
        # half type first, and so do the kernels: div is compared with CUDA eager.)
        groups = [(tuple(op for op in CASES if op not in HALF_ROUNDING), None), (HALF_ROUNDING, "cpu")]
    for ops, reference_device in groups:
        kernel, labels = op_kernel(dtype, inputs, ops)
        for layout in ("contiguous", "transposed", "strided"):
            viewed = [_layouts(t)[layout] for t in inputs]
            assert_matches(kernel, gpu.run(kernel, viewed), viewed, [f"{layout} {x}" for x in labels],
                           gpu=True, reference_device=reference_device)


def test_broadcast_inputs_on_gpu(gpu):
    gen = torch.Generator().manual_seed(7)
    shape = (129, 1000)
    full = named_inputs(torch.float32, shape, gen, device="cuda")
    row = named_inputs(torch.float32, (1, shape[1]), gen, device="cuda")
    col = named_inputs(torch.float32, (shape[0], 1), gen, device="cuda")
    # alternate the broadcast pattern per input: full, row-expanded, column-expanded, scalar
    inputs = [[full[i], row[i].expand(shape), col[i].expand(shape), col[i][:1, :1].expand(shape)][i % 4]
              for i in range(len(full))]
    kernel, labels = op_kernel(torch.float32, inputs)
    assert_matches(kernel, gpu.run(kernel, inputs), inputs, labels, gpu=True)


@pytest.mark.parametrize("blocks", [None, LOOPED], ids=["default", "looped"])
def test_reduction_patterns_on_gpu(cache, blocks):
    ex = TritonExecutor(interpret=False, cache=cache, blocks=blocks)
    failures = []
    cases = standard_cases(small=False) + standard_cases(small=True) + [nan_case()]
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cuda")
        try:
            assert_matches(kernel, ex.run(kernel, inputs), inputs, gpu=True)
        except Exception as err:
            failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_rows_longer_than_a_block(gpu, dtype):
    for i, (name, kernel, make_inputs) in enumerate([
            softmax((8, 10007), 1, dtype), layer_norm((4, 8193), (1,), dtype),
            softmax((2, 4, 3001), 2, dtype), layer_norm((5000, 3, 7), (0,), dtype)]):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cuda")
        assert_matches(kernel, gpu.run(kernel, inputs), inputs, [name] * 3, gpu=True)


def test_large_element_wise_transposed(gpu):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4097, 1031, generator=gen).cuda().t()
    y = torch.randn(1031, 4097, generator=gen).cuda()
    kernel = kernel_of(tuple(x.shape), (F32, F32), [Instr("mul", (Input(0), Input(1)), F32),
                                                   Instr("relu", (Input(0),), F32)], outputs=[0, 1])
    assert_matches(kernel, gpu.run(kernel, [x, y]), [x, y], gpu=True)


@pytest.mark.slow
def test_64_bit_indexing(gpu):
    n = 2**31 + 1025
    x = torch.randint(-100, 100, (n,), dtype=torch.int8, device="cuda")
    kernel = kernel_of((n,), (torch.int8,), [Instr("add", (Input(0), 3), torch.int8)], outputs=[0])
    out = gpu.run(kernel, [x])[0]
    for sl in (slice(0, 4096), slice(2**31 - 2048, 2**31 + 1025)):
        assert torch.equal(out[sl], x[sl] + 3)
    del out, x
    torch.cuda.empty_cache()


def test_interpreter_and_gpu_in_one_process(gpu, cache):
    _, kernel, make_inputs = softmax((6, 300), 1, torch.float32)
    inputs = make_inputs(torch.Generator().manual_seed(0), "cuda")
    on_gpu = gpu.run(kernel, inputs)
    on_cpu = TritonExecutor(interpret=True, cache=cache).run(kernel, [t.cpu() for t in inputs])
    again = gpu.run(kernel, inputs)
    torch.testing.assert_close(on_gpu[0].cpu(), on_cpu[0], rtol=1e-4, atol=1e-6)
    assert torch.equal(on_gpu[0], again[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_single_pass_and_looped_around_the_threshold(gpu, dtype):
    """Row lengths on both sides of every choice (one row per program from 256, single pass up
    to 4096, 2048-wide loops past it), row counts that are no multiple of a block, and sums over
    the outer dim (64 contiguous columns per program)."""
    cases = []
    for n in (255, 256, 1024, 4095, 4096, 4097, 8193):
        cases += [softmax((37, n), 1, dtype), layer_norm((37, n), (1,), dtype),
                  one_reduction("sum", (37, n), (1,), dtype)]
    cases += [one_reduction("sum", (4097, 515), (0,), dtype), one_reduction("amax", (16, 512), (0,), dtype),
              one_reduction("mean", (3, 2048, 64), (0, 2), dtype)]
    failures = []
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cuda")
        try:
            assert_matches(kernel, gpu.run(kernel, inputs), inputs, gpu=True)
        except Exception as err:
            failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_issue_4_kernels_at_their_shapes(gpu, dtype):
    """layer_norm(x + residual) [8192, 4096], softmax(s * 0.125 + mask) [8, 16, 1024, 1024],
    the clone-reduction pattern: the kernels the benchmark times, mask-free."""
    cases = [layer_norm((8192, 4096), (1,), dtype), softmax((8, 16, 1024, 1024), 3, dtype)]
    if dtype == torch.float32:
        cases.append(clone_pattern((8192, 4096)))
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cuda")
        assert_matches(kernel, gpu.run(kernel, inputs), inputs, [name] * 3, gpu=True)


def test_results_land_in_strided_destinations(gpu):
    gen = torch.Generator().manual_seed(21)
    name, kernel, make_inputs = layer_norm((300, 515), (1,), torch.bfloat16)
    inputs = make_inputs(gen, "cuda")
    expected = [e.cuda() for e in evaluate(kernel, inputs)]
    wide = torch.zeros(300, 1030, dtype=torch.bfloat16, device="cuda")
    given = [wide[:, ::2], torch.empty(1, 300, device="cuda").t(), None]
    out = gpu.run(kernel, inputs, given)
    assert out[0] is given[0] and out[1] is given[1]
    for o, e in zip(out, expected):
        torch.testing.assert_close(o, e, **tolerance(e.dtype, gpu=True))
    assert not wide[:, 1::2].any()


def test_bound_launches_repeat_and_follow_pointer_alignment(gpu):
    """The second call of a launch goes straight to the compiled binary; a tensor that is not
    16-byte aligned needs Triton's other specialization and gets it."""
    kernel = kernel_of((4099,), (F32, F32), [Instr("mul", (Input(0), Input(1)), F32),
                                             Instr("add", (Value(0), 1), F32)], outputs=[1])
    gen = torch.Generator().manual_seed(22)
    base = torch.randn(4100, generator=gen).cuda()
    y = torch.randn(4099, generator=gen).cuda()
    for x in (base[:4099], base[1:]):  # aligned, then offset by one element
        bound = gpu.bind(kernel, [x, y])
        for step in range(3):
            x.mul_(1.5)
            (out,) = bound()
            torch.testing.assert_close(out, x * y + 1, rtol=1e-6, atol=1e-6)


def test_reductions_that_leave_the_gpu_idle_split_their_rows(gpu):
    """A backward pass's bias gradient and a whole-tensor sum run as split reductions; launched
    again over new tensors, by address (as a replay does) and inside a CUDA graph, they equal
    aten, each launch with a workspace of its own."""
    from fusionrt.codegen.launch import SplitAddressLaunch, SplitLaunch

    cases = [bias_gradient((6304, 768)), bias_gradient((2048, 3072)), one_reduction("sum", (4096, 4096), (0, 1), F32),
             one_reduction("mean", (32, 64, 3136), (0, 2), BF16), one_reduction("amax", (100003,), (0,), F32)]
    for i, (name, kernel, make_inputs) in enumerate(cases):
        inputs = make_inputs(torch.Generator().manual_seed(i), "cuda")
        bound = gpu.bind(kernel, inputs)
        assert isinstance(bound.launch, SplitLaunch), name
        assert_matches(kernel, bound(), inputs, gpu=True)
        relaunch = bound.relauncher()
        fresh = make_inputs(torch.Generator().manual_seed(50 + i), "cuda")
        assert_matches(kernel, relaunch(fresh, [None] * len(kernel.outputs)), fresh, gpu=True)
        by_address = relaunch.by_address()
        assert isinstance(by_address, SplitAddressLaunch) and by_address.ready(), name
        outs = [torch.empty(kernel.output_shape(j), dtype=kernel.instrs[o.index].dtype, device="cuda")
                for j, o in enumerate(kernel.outputs)]
        static = [t.clone() for t in fresh]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            by_address([t.data_ptr() for t in (*static, *outs)])
        for seed in (70, 71):
            new = make_inputs(torch.Generator().manual_seed(seed + i), "cuda")
            for s, t in zip(static, new):
                s.copy_(t)
            graph.replay()
            assert_matches(kernel, outs, new, gpu=True)


def test_runtime_writes_in_place_and_through_views_on_gpu():
    check_direct_writes("cuda", "triton")


def test_a_first_run_compiles_its_new_kernels_together_and_equals_eager(tmp_path, monkeypatch):
    """A plan's first run binds every kernel, then compiles the new ones on threads before any
    launch; each launch then finds its kernel compiled, and the results are eager's."""
    import fusionrt
    from fusionrt.codegen import launch

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # nothing compiled on disk yet
    compiled_at_launch = []
    real = launch.Spec.launch_jit
    monkeypatch.setattr(launch.Spec, "launch_jit",
                        lambda spec, args, key: compiled_at_launch.append(key) or real(spec, args, key))
    x, w = torch.randn(256, 384, device="cuda"), torch.randn(384, device="cuda")

    def program(x, w):
        h = (x * w).softmax(-1)  # a reduction kernel
        return (h.sin() + x).sum(0), (x - w).abs().amax(-1)  # more kernels of other kinds

    got, report = fusionrt.measure(program, x, w, executor="triton")
    expected = program(x, w)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert report.kernels >= 2
    assert compiled_at_launch == []
