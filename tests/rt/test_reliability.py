"""Ordinary-but-awkward code under fusionrt: eager's result or eager's error, never garbage.

A pending tensor is real memory not written yet. Each case reaches that memory some way other
than a recorded op (an alias made without dispatch, another thread, a child process, a C
function, pickling) or changes state the capture or the replay relies on.
"""
from __future__ import annotations

import concurrent.futures
import copy
import io
import pickle
import queue
import runpy
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import fusionrt

ROOT = Path(__file__).resolve().parents[2]
FUSIONRT = [sys.executable, "-m", "fusionrt"]


def fresh(*shape: int) -> torch.Tensor:
    return torch.randn(*shape) + 3.0  # never zeros; away from 0 so garbage rarely matches


# -- aliases made without dispatch --------------------------------------------------------------

def test_a_parameter_of_a_pending_value_reads_that_value():
    x = fresh(64)
    with fusionrt.lazy() as session:
        p = torch.nn.Parameter(x * 2, requires_grad=False)
        out = p * 3 + 1
    torch.testing.assert_close(out, x * 6 + 1)
    assert "alias" in [f.reason for f in session.report.flushes]


def test_as_subclass_and_data_of_a_pending_value():
    x = fresh(64)
    with fusionrt.lazy():
        s = (x * 2).as_subclass(torch.Tensor) + 1
        d = (x - 1).data * 4
    torch.testing.assert_close(s, x * 2 + 1)
    torch.testing.assert_close(d, (x - 1) * 4)


def test_a_module_whose_init_builds_parameters_from_computed_tensors():
    class Scale(torch.nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(d) * 0.5)
            self.b = torch.nn.Parameter(torch.arange(d, dtype=torch.float32) / d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.w + self.b

    x = fresh(8, 16)
    with fusionrt.lazy():
        out = Scale(16)(x)
    torch.testing.assert_close(out, Scale(16)(x))


def test_swapping_data_between_pending_tensors():
    x = fresh(32)
    with fusionrt.lazy():
        a, b = x * 2, x * 3
        a.data = b
        out_a = a + 1
        c, d = x + 5, x - 5
        d.data, c.data = c.data, d.data
        out_cd = c * 10 + d
    torch.testing.assert_close(out_a, x * 3 + 1)
    torch.testing.assert_close(out_cd, (x - 5) * 10 + (x + 5))


@pytest.mark.parametrize("convert", ["half", "double", "bfloat16"])
def test_module_dtype_conversion_inside_a_block(convert):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
    x = fresh(5, 8)
    expected_model = copy.deepcopy(model)
    getattr(expected_model, convert)()
    dtype = expected_model[0].weight.dtype
    expected = expected_model(x.to(dtype)) if dtype != torch.float16 else None
    with fusionrt.lazy():
        getattr(model, convert)()
        params = [p * 1 for p in model.parameters()]  # reads every converted parameter
        out = model(x.to(dtype)) if expected is not None else None
    assert all(p.dtype == dtype for p in model.parameters())
    for got, want in zip(params, expected_model.parameters()):
        torch.testing.assert_close(got, want.detach())
    if expected is not None:
        torch.testing.assert_close(out, expected)


def test_module_conversion_in_swap_mode_and_swap_tensors_of_pending_tensors():
    """``Module._apply`` swaps tensors' insides when asked to; so can users, with swap_tensors."""
    torch.manual_seed(0)
    model, expected_model = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    expected_model.load_state_dict(model.state_dict())
    x = fresh(3, 4)
    saved = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        with torch.no_grad(), fusionrt.lazy():
            model.double()
            y = model(x.double())
            a, b = x * 2, x * 3
            torch.utils.swap_tensors(a, b)
            z = a + b * 10
    finally:
        torch.__future__.set_swap_module_params_on_conversion(saved)
    with torch.no_grad():
        torch.testing.assert_close(y, expected_model.double()(x.double()))
    torch.testing.assert_close(z, x * 3 + x * 20)


def test_results_of_fusionrt_can_be_swapped_afterwards():
    """The plan cache keeps no weak reference to a flush's tensors (swap_tensors refuses those)."""
    x = fresh(8)
    out, _ = fusionrt.measure(lambda t: t * 2 + 1, x)
    other = fresh(8)
    torch.utils.swap_tensors(out, other)
    torch.testing.assert_close(other, x * 2 + 1)


# -- memory reached without dispatch ------------------------------------------------------------

class _Capsule:
    """What numpy needs to import a DLPack capsule: the bytes are read by numpy, not torch."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def test_to_dlpack_of_a_pending_tensor_exports_written_memory():
    x = fresh(16)
    with fusionrt.lazy() as session:
        a = x * 2 + 1
        values = np.from_dlpack(_Capsule(torch.utils.dlpack.to_dlpack(a))).copy()
    np.testing.assert_allclose(values, (x * 2 + 1).numpy(), rtol=1e-6)
    assert [f.reason for f in session.report.flushes][0] == "dlpack"


def test_pickle_save_and_deepcopy_of_pending_tensors():
    x = fresh(16)
    with fusionrt.lazy():
        a = x * 2
        pickled = pickle.loads(pickle.dumps(a)) + 0
        buffer = io.BytesIO()
        torch.save({"a": x * 3}, buffer)
        copied = copy.deepcopy(x * 4)
    torch.testing.assert_close(pickled, x * 2)
    torch.testing.assert_close(torch.load(io.BytesIO(buffer.getvalue()))["a"], x * 3)
    torch.testing.assert_close(copied, x * 4)


def test_a_concrete_tensor_pickled_inside_a_block_does_not_flush():
    x = fresh(16)
    with fusionrt.lazy() as session:
        a = x * 2
        pickle.dumps(x)
        out = a + 1
    assert [f.reason for f in session.report.flushes] == ["exit"]
    torch.testing.assert_close(out, x * 2 + 1)


def test_sparse_and_nested_tensors_run_eagerly():
    x = fresh(4, 4)
    with fusionrt.lazy():
        sparse = ((x * 2).to_sparse() * 3).to_dense()
        nested = torch.nested.nested_tensor([x[0] * 2, x[1, :2] + 1]) * 2
        padded = nested.to_padded_tensor(0.0)
    torch.testing.assert_close(sparse, x * 6)
    expected = torch.nested.nested_tensor([x[0] * 2, x[1, :2] + 1]) * 2
    torch.testing.assert_close(padded, expected.to_padded_tensor(0.0))


def test_torch_compile_inside_a_block_runs_the_function_lazily():
    x = fresh(32)
    with fusionrt.lazy() as session:
        f = torch.compile(lambda a: a.sin() * 2 + 1)
        out = f(x * 2)
    torch.testing.assert_close(out, (x * 2).sin() * 2 + 1)
    assert session.report.kernels == 1  # the compiled function's ops joined the block's kernel
    torch._dynamo.reset()


# -- what eager refuses, fusionrt refuses -------------------------------------------------------

@pytest.mark.parametrize("program", [
    lambda i, x: i.mul_(2.5),
    lambda i, x: i.add_(x),
    lambda i, x: torch.mul(x, 2, out=i),
    lambda i, x: torch.amax(x, 0, out=torch.zeros((), dtype=torch.float64)),
])
def test_in_place_and_out_casts_that_eager_rejects(program):
    with pytest.raises(RuntimeError) as eager:
        program(torch.arange(5), fresh(5))
    with pytest.raises(RuntimeError) as lazy:
        with fusionrt.lazy():
            program(torch.arange(5), fresh(5))
    assert str(lazy.value).split("\n")[0] == str(eager.value).split("\n")[0]


def test_out_of_another_dtype_that_eager_accepts_gives_eager_s_values():
    x = fresh(6, 5) * 3
    expected = torch.sum(x, 0, out=torch.zeros(5, dtype=torch.long))
    with fusionrt.lazy():
        got = torch.sum(x * 1, 0, out=torch.zeros(5, dtype=torch.long))
    torch.testing.assert_close(got, expected)


# -- replay guards ------------------------------------------------------------------------------

def test_jit_does_not_replay_a_call_recorded_under_autocast():
    f = fusionrt.jit(lambda a, w: torch.nn.functional.linear(a, w) * 2)
    a, w = fresh(8, 16), fresh(4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = f(a, w)
    assert low.dtype == torch.bfloat16
    out = f(a, w)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.nn.functional.linear(a, w) * 2)
    assert f.stats.replays == 0 and f.stats.recordings == 2
    out = f(fresh(8, 16), w)  # same state again: replays
    assert f.stats.replays == 1


def test_jit_guards_the_default_dtype():
    f = fusionrt.jit(lambda a: a * 2 + torch.ones(3))
    a = fresh(3)
    f(a)
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out = f(a)
    finally:
        torch.set_default_dtype(saved)
    assert out.dtype == torch.float64


# -- threads ------------------------------------------------------------------------------------

def test_a_thread_started_in_a_block_reads_written_values():
    x = fresh(1000)
    box = {}
    with fusionrt.lazy():
        a = x * 2 + 1
        t = threading.Thread(target=lambda: box.__setitem__("sum", float(a.sum())))
        t.start()
        t.join()
    assert box["sum"] == pytest.approx(float((x * 2 + 1).sum()), rel=1e-5)


def test_a_thread_started_in_a_block_reads_a_value_recorded_after_it_started():
    x = fresh(1000)
    box, go = {}, threading.Event()

    def reader() -> None:
        go.wait()
        box["sum"] = float(box["t"].sum())
        box["list"] = box["t2"].tolist()

    with fusionrt.lazy() as session:
        t = threading.Thread(target=reader)
        t.start()
        box["t"], box["t2"] = x * 7 - 1, x[:3] * 5
        go.set()
        t.join()
    assert box["sum"] == pytest.approx(float((x * 7 - 1).sum()), rel=1e-5)
    assert box["list"] == pytest.approx((x[:3] * 5).tolist())
    assert "thread" in [f.reason for f in session.report.flushes]


def test_values_handed_to_running_threads_through_a_queue_or_a_pool():
    x = fresh(1000)
    inbox: queue.Queue = queue.Queue()
    outbox: queue.Queue = queue.Queue()
    worker = threading.Thread(target=lambda: outbox.put(float(inbox.get().sum())))
    worker.start()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: None).result()  # the pool's thread runs before the block
        with fusionrt.lazy():
            inbox.put(x * 3 + 2)
            from_pool = pool.submit(lambda t: float(t.sum()), x * 4 - 2).result()
            worker.join()
    assert outbox.get() == pytest.approx(float((x * 3 + 2).sum()), rel=1e-5)
    assert from_pool == pytest.approx(float((x * 4 - 2).sum()), rel=1e-5)


def test_blocks_in_several_threads_at_once():
    x = fresh(1000)
    sums, errors = {}, []

    def own_block(k: int) -> None:
        try:
            with fusionrt.lazy():
                s = (x * k + 1).sum()
            sums[k] = float(s)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with fusionrt.lazy():
        threads = [threading.Thread(target=own_block, args=(k,)) for k in (2, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert sums == {k: pytest.approx(float((x * k + 1).sum()), rel=1e-5) for k in (2, 3, 4)}


def test_blocks_in_threads_started_while_other_blocks_are_open_stay_their_own():
    """A thread started while another block is open is guarded; its own block's eager work
    (views, fallbacks) must not be taken for reads of another thread's pending tensors."""
    x = fresh(64)
    expected = {k: (x.view(8, 8).t() * k + 1).cumsum(0)[::2] for k in (2, 3, 4)}
    for _ in range(60):
        results, errors = {}, []

        def own_block(k: int) -> None:
            try:
                with fusionrt.lazy():
                    results[k] = (x.view(8, 8).t() * k + 1).cumsum(0)[::2]
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=own_block, args=(k,)) for k in (2, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for k in (2, 3, 4):
            torch.testing.assert_close(results[k], expected[k])


def test_blocks_still_do_not_nest_in_one_thread():
    with fusionrt.lazy():
        with pytest.raises(RuntimeError, match="do not nest"):
            with fusionrt.lazy():
                pass


def test_outside_blocks_threads_and_compiled_functions_are_left_alone():
    with fusionrt.lazy():
        pass
    thread = threading.Thread(target=lambda: None)
    run = thread.run
    thread.start()
    thread.join()
    assert thread.run == run  # no guard around a thread started outside blocks
    f = torch.compile(lambda a: a + 1)
    f(fresh(4))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # compiled, not eager
    torch._dynamo.reset()


# -- processes ----------------------------------------------------------------------------------

DATALOADER_SCRIPT = """
import torch
from torch.utils.data import DataLoader, Dataset

class Data(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(4, generator=g) * 2 + 1

got = list(DataLoader(Data(), num_workers=2, batch_size=None))
want = [torch.randn(4, generator=torch.Generator().manual_seed(i)) * 2 + 1 for i in range(6)]
assert all(torch.equal(a, b) for a, b in zip(got, want)), (got, want)
print("dataloader ok")
"""


def test_dataloader_workers_under_fusionrt_run(tmp_path):
    script = tmp_path / "loader.py"
    script.write_text(DATALOADER_SCRIPT)
    run = subprocess.run([*FUSIONRT, "run", str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "dataloader ok" in run.stdout


def test_a_forked_child_computes_eagerly_and_sees_written_values(tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os, torch, fusionrt
        x = torch.arange(8, dtype=torch.float32) + 1
        with fusionrt.lazy():
            a = x * 2
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.write(w, repr((a + 1).tolist()).encode())
                os._exit(0)
            os.waitpid(pid, 0)
            child = eval(os.read(r, 4096))
        assert child == (x * 2 + 1).tolist(), child
        print("fork ok")
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "fork ok" in run.stdout


def test_the_transformer_example_builds_and_runs_inside_a_block():
    """Its module is built (``.half()``, parameters) inside the block, as under ``fusionrt run``."""
    example = runpy.run_path(str(ROOT / "examples" / "transformer_block.py"), run_name="example")
    torch.manual_seed(0)
    fn, args = example["example"]()
    with torch.no_grad():
        expected = fn(*args)
    torch.manual_seed(0)
    with fusionrt.lazy(), torch.no_grad():
        fn, args = example["example"]()
        got = fn(*args)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


def test_the_transformer_example_under_fusionrt_run():
    run = subprocess.run([*FUSIONRT, "run", "transformer_block.py"], capture_output=True, text=True,
                         timeout=600, cwd=ROOT / "examples")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "transformer_block.py: checksum" in run.stdout


# -- memory -------------------------------------------------------------------------------------

def test_a_new_scalar_every_step_keeps_the_capture_s_caches_bounded():
    """A learning-rate schedule: every step multiplies by a new float. Once the caches are full,
    more steps keep no more memory. Measured in a fresh process: in a test worker, what other
    tests left in the caches is evicted meanwhile, and its allocations were never traced."""
    program = textwrap.dedent("""
        import gc, tracemalloc
        from pathlib import Path
        import torch, fusionrt
        from fusionrt import capture

        x = torch.randn(8)

        def steps(first, count):
            for i in range(first, first + count):
                with fusionrt.lazy():
                    x * (1e-3 * (1 + i)) + 1

        mine = [tracemalloc.Filter(True, str(Path(fusionrt.__file__).parent / "*"))]
        tracemalloc.start()
        steps(0, 6000)  # past every bound (4096 signatures, 1024 shapes, 512 plans)
        gc.collect()
        before = tracemalloc.take_snapshot().filter_traces(mine)
        steps(6000, 3000)
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(mine)
        print(len(capture._POINTWISE) == capture._POINTWISE.max_entries,
              sum(stat.size_diff for stat in after.compare_to(before, "filename")))
    """)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    full, grown = run.stdout.split()
    assert full == "True"
    assert int(grown) < 256 * 1024, f"{int(grown) / 2**20:.2f} MiB kept by 3,000 more steps"
