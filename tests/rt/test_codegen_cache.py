"""The kernel cache: a second run in the same or in a new process generates no source."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
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


def _entry(directory: Path) -> Path:
    (path,) = directory.glob("k*.py")
    return path


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _first_run(directory: Path) -> tuple:
    """Softmax generated once into ``directory``: the kernel, its inputs and its one file."""
    _, kernel, make_inputs = softmax((3, 10), 1, torch.float32)
    inputs = make_inputs(torch.Generator().manual_seed(2), "cpu")
    TritonExecutor(interpret=True, cache=KernelCache(directory)).run(kernel, inputs)
    return kernel, inputs, _entry(directory)


def test_entries_are_named_by_their_content(tmp_path):
    _, _, path = _first_run(tmp_path)
    assert path.name.endswith(f"-{_digest(path.read_bytes())}.py")
    assert path.stat().st_mode & 0o077 == 0  # written private, as mkstemp creates it


def test_a_changed_entry_is_not_run_and_is_rebuilt(tmp_path):
    kernel, inputs, path = _first_run(tmp_path)
    marker = tmp_path / "marker"
    with path.open("a") as f:
        f.write(f"\nopen({str(marker)!r}, 'w').write('ran')\n")
    cache = KernelCache(tmp_path)
    out = TritonExecutor(interpret=True, cache=cache).run(kernel, inputs)
    assert not marker.exists()
    assert (cache.stats.rejected, cache.stats.generated, cache.stats.disk_hits) == (1, 1, 0)
    assert_matches(kernel, out, inputs)
    assert _entry(tmp_path) == path and "marker" not in path.read_text()  # replaced in place


def test_a_truncated_entry_is_rebuilt_once(tmp_path):
    kernel, inputs, path = _first_run(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    cache = KernelCache(tmp_path)
    out = TritonExecutor(interpret=True, cache=cache).run(kernel, inputs)
    assert (cache.stats.rejected, cache.stats.generated) == (1, 1)
    assert_matches(kernel, out, inputs)
    assert path.read_bytes() == data
    later = KernelCache(tmp_path)  # the next run is a plain disk hit again
    assert_matches(kernel, TritonExecutor(interpret=True, cache=later).run(kernel, inputs), inputs)
    assert (later.stats.disk_hits, later.stats.generated, later.stats.rejected) == (1, 0, 0)


def _plant(path: Path, marker: Path) -> Path:
    """A file for the same key whose name matches its (hostile) content."""
    planted = path.read_bytes() + f"\nopen({str(marker)!r}, 'w').write('ran')\n".encode()
    prefix = path.name[: path.name.rindex("-") + 1]
    target = path.with_name(f"{prefix}{_digest(planted)}.py")
    path.unlink()
    target.write_bytes(planted)
    return target


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("how", ["group-writable", "world-writable", "another owner"])
def test_a_file_others_could_write_is_never_run(tmp_path, how):
    kernel, inputs, path = _first_run(tmp_path)
    marker = tmp_path / "marker"
    planted = _plant(path, marker)
    if how == "another owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a file away")
        os.chown(planted, 65534, 65534)
    else:
        planted.chmod(0o620 if how == "group-writable" else 0o602)
    cache = KernelCache(tmp_path)
    out = TritonExecutor(interpret=True, cache=cache).run(kernel, inputs)
    assert not marker.exists()
    assert (cache.stats.rejected, cache.stats.generated) == (1, 1)
    assert_matches(kernel, out, inputs)
    assert path.exists()  # the rebuilt entry, next to the untouched planted one


@pytest.mark.skipif(os.name != "posix", reason="POSIX links")
def test_writes_replace_a_link_instead_of_following_it(tmp_path):
    kernel, inputs, path = _first_run(tmp_path / "cache")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path.unlink()
    path.symlink_to(victim)  # e.g. planted by whoever could write the folder
    cache = KernelCache(tmp_path / "cache")
    assert_matches(kernel, TritonExecutor(interpret=True, cache=cache).run(kernel, inputs), inputs)
    assert victim.read_text() == "keep me"
    assert not path.is_symlink() and cache.stats.rejected == 1


def _unwritable(tmp_path: Path) -> Path:
    """A cache folder that cannot be created: it lies below a regular file (which stops root
    too); without root, the file's folder is read-only as well."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    if os.name == "posix" and os.geteuid() != 0:
        tmp_path.chmod(0o500)
    return blocker / "cache" / "kernels"


def test_an_unwritable_folder_keeps_kernels_in_memory_with_one_warning(tmp_path):
    cache = KernelCache(_unwritable(tmp_path))
    ex = TritonExecutor(interpret=True, cache=cache)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for shape in ((3, 10), (5, 33)):  # two kernels, two failed writes' worth
                for scale in (0.125, 0.5):
                    _, kernel, make_inputs = softmax(shape, 1, torch.float32, scale)
                    inputs = make_inputs(torch.Generator().manual_seed(3), "cpu")
                    assert_matches(kernel, ex.run(kernel, inputs), inputs)
    finally:
        tmp_path.chmod(0o700)
    ours = [w for w in caught if "kernel cache" in str(w.message)]
    assert len(ours) == 1 and issubclass(ours[0].category, RuntimeWarning)
    assert "generated kernels stay in memory" in str(ours[0].message)
    assert cache.stats.generated == 2  # one source per scale (sizes are arguments)


def test_an_unwritable_cache_dir_in_a_new_process(tmp_path):
    """``FUSIONRT_CACHE_DIR`` that cannot be used: the run works and warns once, no traceback."""
    env = dict(os.environ, FUSIONRT_CACHE_DIR=str(_unwritable(tmp_path).parent))
    tests_dir = str(Path(__file__).resolve().parents[1])
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT.replace('warnings.simplefilter("ignore", RuntimeWarning)',
                                                                   ""), tests_dir],
                             env=env, capture_output=True, text=True)
    finally:
        tmp_path.chmod(0o700)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"generated": 2, "disk_hits": 0}
    assert out.stderr.count("RuntimeWarning: fusionrt: cannot write the kernel cache") == 1
    assert "Traceback" not in out.stderr

