"""The compile pool's workers compile real Triton kernels for a GPU target into Triton's disk
cache, from plain data sent over their pipes; a job that fails is reported, not fatal."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("triton")

from fusionrt.codegen import compile_pool  # noqa: E402

SOURCE = b'''
import triton
import triton.language as tl

def scale(x_ptr, y_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * FACTOR, mask=offs < n)
'''


def job(factor: int, source: bytes = SOURCE) -> compile_pool._Job:
    from triton.backends.compiler import GPUTarget

    compile = {"signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "FACTOR": "constexpr",
                             "BLOCK": "constexpr"},
               "constants": {(3,): factor, (4,): 128}, "configs": [{}], "num_warps": 4, "num_stages": 2}
    return compile_pool._Job(source, "test-kernel", "scale", compile, GPUTarget("cuda", 90, 32))


@pytest.fixture
def triton_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # the workers inherit it
    return tmp_path


def test_workers_compile_kernels_into_the_disk_cache(triton_cache):
    pool = compile_pool._Pool(2)
    try:
        assert pool.run([job(2), job(3), job(5)]) == 0
        cubins = list(triton_cache.rglob("*.cubin"))
        assert len(cubins) == 3
        broken = job(7, SOURCE.replace(b"tl.load", b"tl.no_such_op"))
        assert pool.run([broken, job(11)]) == 1  # reported, and the worker goes on
        assert len(list(triton_cache.rglob("*.cubin"))) == 4
    finally:
        pool.close()


def test_worker_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(compile_pool.ENV, "3")
    assert compile_pool.workers_wanted() == 3
    monkeypatch.setenv(compile_pool.ENV, "0")
    assert compile_pool.workers_wanted() == 0
    monkeypatch.setenv(compile_pool.ENV, "many")
    with pytest.raises(ValueError, match=compile_pool.ENV):
        compile_pool.workers_wanted()
    monkeypatch.delenv(compile_pool.ENV)
    assert 0 <= compile_pool.workers_wanted() <= min(compile_pool.MAX_WORKERS, os.cpu_count() or 1)
