"""Per-call caches stay bounded when every call brings new shapes or new float scalars (a dynamic
batch size, a learning-rate schedule), in entries and in memory."""
from __future__ import annotations

import gc
import linecache
import threading
import tracemalloc

import pytest
import torch

import fusionrt.codegen as codegen
from fusionrt import shapes
from fusionrt.bounded import LRUCache
from fusionrt.codegen import KernelCache, TritonExecutor, cache as kernel_cache, matmul
from fusionrt.kernel_ir import MatmulKernel, identity_kernel

from .codegen_cases import assert_matches
from .reduction_cases import softmax

aten = torch.ops.aten


def test_lru_forgets_the_least_recently_used():
    lru: LRUCache[int] = LRUCache(3)
    for k in "abc":
        lru.put(k, ord(k))
    assert lru.get("a") == ord("a")  # now the most recent
    lru.put("d", 4)
    assert lru.get("b") is None and [lru.get(k) for k in "acd"] == [ord("a"), ord("c"), 4]
    lru.put("a", 0)  # replacing counts as a use and does not grow it
    assert len(lru) == 3 and lru.get("a") == 0 and lru.get("zz", -1) == -1
    with pytest.raises(TypeError):
        lru.get(["unhashable"])
    with pytest.raises(ValueError):
        LRUCache(0)


def test_lru_from_two_threads():
    lru: LRUCache[int] = LRUCache(64)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(20_000):
                k = (i * 7 + seed) % 200
                found = lru.get(k)
                assert found is None or found == k * k
                lru.put(k, k * k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(lru) == 64


def _memory(call, n: int, more: int) -> tuple[int, int]:
    """Bytes allocated by ``n`` calls and still held, then by ``more`` calls more (after warming
    up: the first meta kernel imports half of torch)."""
    for i in range(100):
        call(i)
    gc.collect()
    tracemalloc.start()
    try:
        held = []
        for start, stop in ((0, n), (n, n + more)):
            for i in range(start, stop):
                call(10**6 + i)
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0])
        return held[0], held[1] - held[0]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("what", ["new shapes", "new float scalars"])
def test_shape_inference_cache_is_bounded(what):
    x = torch.empty(8, 16, device="meta")

    def call(i: int) -> None:
        if what == "new shapes":
            t = torch.empty(2, i + 1, 16, device="meta")
            shapes.infer(aten.add.Tensor, (t, t), {})
        else:
            shapes.infer(aten.mul.Tensor, (x, 1e-3 * (1 + i)), {})  # a learning-rate schedule

    more = 2 * shapes._cache.max_entries  # every entry replaced twice
    held, grown = _memory(call, 10_000, more)
    assert len(shapes._cache) == shapes._cache.max_entries
    assert held < 4 * 2**20, f"{held / 2**20:.2f} MiB held after 10,000 calls"
    assert grown < 128 * 1024, f"{grown / 2**20:.2f} MiB more after {more} calls more"


def test_generated_kernels_with_a_new_constant_per_call_are_bounded(tmp_path, monkeypatch):
    """Each scale is a new kernel (constants are part of the source): loaded kernels, launch
    state and the source pinned for Triton all stay at the bound."""
    monkeypatch.setattr(kernel_cache, "MAX_LOADED", 4)
    monkeypatch.setattr(codegen, "MAX_KERNELS", 4)
    cache = KernelCache(tmp_path)
    ex = TritonExecutor(interpret=True, cache=cache)
    for i in range(12):
        _, kernel, make_inputs = softmax((3, 10), 1, torch.float32, scale=0.01 * (i + 1))
        inputs = make_inputs(torch.Generator().manual_seed(i), "cpu")
        assert_matches(kernel, ex.run(kernel, inputs), inputs)
        del kernel, inputs
    gc.collect()
    assert cache.stats.generated == 12
    assert len(cache._loaded) == 4 and len(ex._entries) == 4 and len(ex._by_id) <= 4
    pinned = [name for name in linecache.cache if name.startswith(str(tmp_path))]
    assert len(pinned) <= 5  # the loaded four, and the one Triton's registry keeps last
    del ex, cache
    gc.collect()
    assert len([name for name in linecache.cache if name.startswith(str(tmp_path))]) <= 1


def test_matmul_launch_specs_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(matmul, "MAX_SPECS", 3)
    ex = TritonExecutor(interpret=True, cache=KernelCache(tmp_path))
    gen = torch.Generator().manual_seed(0)
    for m in range(1, 9):
        kernel = MatmulKernel(identity_kernel((m, 8), torch.float32), identity_kernel((8, 5), torch.float32),
                              identity_kernel((m, 5), torch.float32), torch.float32)
        a, b = torch.randn(m, 8, generator=gen), torch.randn(8, 5, generator=gen)
        (got,) = ex.run(kernel, [a, b])
        torch.testing.assert_close(got, a @ b, atol=1e-4, rtol=1e-4)
    assert len(ex.matmul._specs) == 3
