"""Generated kernels cached in memory and on disk, so a second process generates nothing.

The disk cache holds generated *source*, one file per specialization, named by a hash of the
cache key and of the code generator's own source (editing the generator invalidates old files).
Files are written atomically (temp file + rename) and imported from there, which also gives
Triton the real source file it needs; Triton then caches the compiled binary itself.

A module is loaded once per mode: its functions are wrapped in ``JITFunction`` (GPU) or
``InterpretedFunction`` (CPU interpreter) directly instead of through ``@triton.jit``. That
decorator picks one of the two from ``TRITON_INTERPRET`` when it runs (triton 3.6-3.9 read it
through ``triton.knobs.runtime.interpret`` at decoration time), so choosing the class ourselves
lets both executors live in one process without touching the environment.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
import types
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_GENERATOR_FILES = ("lowering.py", "emit.py", "layout.py", "pointwise.py", "reduction.py", "cache.py")


def _generator_fingerprint() -> str:
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in _GENERATOR_FILES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def default_cache_dir() -> Path:
    env = os.environ.get("FUSIONRT_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "fusionrt"
    return base / "kernels"


@dataclass
class CacheStats:
    generated: int = 0   # sources produced by the code generator
    disk_hits: int = 0   # sources read from the disk cache instead
    memory_hits: int = 0  # kernels already loaded in this process


class KernelCache:
    """Key -> loaded kernel function, for one directory."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_cache_dir()
        self.stats = CacheStats()
        self._loaded: dict[tuple[Hashable, bool], Any] = {}
        self._fingerprint = _generator_fingerprint()
        self._lock = threading.Lock()

    def kernel(self, key: Hashable, generate: Callable[[], str], name: str, interpret: bool) -> Any:
        """The kernel function ``name`` of the module for ``key``, generating it on a miss."""
        loaded = self._loaded.get((key, interpret))
        if loaded is not None:
            self.stats.memory_hits += 1
            return loaded
        with self._lock:
            path = self._source_path(key, generate)
            module = _load_module(path, interpret)
            fn = getattr(module, name)
            self._loaded[(key, interpret)] = fn
            return fn

    def _source_path(self, key: Hashable, generate: Callable[[], str]) -> Path:
        digest = hashlib.sha256(repr((self._fingerprint, key)).encode()).hexdigest()[:32]
        path = self.directory / f"k{digest}.py"
        if path.exists():
            self.stats.disk_hits += 1
            return path
        source = generate()
        self.stats.generated += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".py")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def _load_module(path: Path, interpret: bool) -> types.ModuleType:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    wrap = InterpretedFunction if interpret else JITFunction
    name = f"fusionrt_generated_{path.stem}_{'interpret' if interpret else 'jit'}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for attr, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            setattr(module, attr, wrap(value))
    if interpret and hasattr(module, "_to_bf16"):
        module._to_bf16 = module._to_bf16_interpreted  # see lowering.HELPERS
    return module
