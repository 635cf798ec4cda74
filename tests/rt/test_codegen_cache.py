"""The kernel cache: a second run in the same or in a new process generates no source."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from fusionrt.codegen import KernelCache, TritonExecutor
from fusionrt.codegen.cache import default_cache_dir

from .codegen_cases import assert_matches
from .reduction_cases import softmax

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import torch
    sys.path.insert(0, sys.argv[1])
    from rt.reduction_cases import softmax
    from fusionrt.codegen import TritonExecutor, shared_cache
    warnings.simplefilter("ignore", RuntimeWarning)
    _, kernel, make_inputs = softmax((4, 24), 1, torch.float32)
    inputs = make_inputs(torch.Generator().manual_seed(0), "cpu")
    TritonExecutor(interpret=True).run(kernel, inputs)
    TritonExecutor(interpret=True).run(kernel, [inputs[0].t().contiguous().t(), inputs[1]])
    s = shared_cache().stats
    print(json.dumps({"generated": s.generated, "disk_hits": s.disk_hits}))
""")


def _run_process(cache_dir: Path) -> dict:
    env = dict(os.environ, FUSIONRT_CACHE_DIR=str(cache_dir))
    tests_dir = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", SCRIPT, tests_dir], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_generates_nothing(tmp_path):
    first = _run_process(tmp_path)
    second = _run_process(tmp_path)
    assert first == {"generated": 2, "disk_hits": 0}  # contiguous and transposed specializations
    assert second == {"generated": 0, "disk_hits": 2}
    files = sorted(p.name for p in (tmp_path / "kernels").iterdir())
    assert len(files) == 2 and all(f.endswith(".py") and not f.startswith(".tmp") for f in files)


def test_memory_then_disk_hits_in_one_process(tmp_path):
    _, kernel, make_inputs = softmax((3, 10), 1, torch.float32)
    inputs = make_inputs(torch.Generator().manual_seed(1), "cpu")
    cache = KernelCache(tmp_path)
    first = TritonExecutor(interpret=True, cache=cache)
    first.run(kernel, inputs)
    TritonExecutor(interpret=True, cache=cache).run(kernel, inputs)  # a new executor, same cache
    assert (cache.stats.generated, cache.stats.memory_hits) == (1, 1)
    fresh = KernelCache(tmp_path)  # what a new process sees
    out = TritonExecutor(interpret=True, cache=fresh).run(kernel, inputs)
    assert (fresh.stats.generated, fresh.stats.disk_hits) == (0, 1)
    assert_matches(kernel, out, inputs)


def test_plans_are_reused_for_repeated_calls(tmp_path):
    _, kernel, make_inputs = softmax((3, 10), 1, torch.float32)
    cache = KernelCache(tmp_path)
    ex = TritonExecutor(interpret=True, cache=cache)
    for seed in range(3):
        inputs = make_inputs(torch.Generator().manual_seed(seed), "cpu")
        assert_matches(kernel, ex.run(kernel, inputs), inputs)
    assert cache.stats.generated == 1 and cache.stats.memory_hits == 0  # plan hit, not even a lookup


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONRT_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "kernels"
    monkeypatch.delenv("FUSIONRT_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "fusionrt" / "kernels"
