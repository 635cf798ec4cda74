"""Generated kernels cached in memory and on disk, so a second process generates nothing.

The disk cache holds generated *source*, one file per specialization, named
``k<key hash>-<source hash>.py``: the key hash covers the cache key and the code generator's own
source (editing the generator invalidates old files), the source hash the file's bytes. Anyone
who can write the folder could leave a file there, and a crash can leave a truncated one, so a
file runs only when it is a regular file of this user that no one else may write and its bytes
hash to its name; any other is generated again and replaced. The bytes checked are the bytes
run, and Triton reads them back from ``linecache`` (it reads a function's source when wrapping
it, the interpreter again at its first call), never from the file, which may change meanwhile.
Files are written whole (a new temp file, then a rename). A folder that cannot be written leaves
kernels in memory, with one warning.

A module is loaded once per mode: its functions are wrapped in ``JITFunction`` (GPU) or
``InterpretedFunction`` (CPU interpreter) directly instead of through ``@triton.jit``. That
decorator picks one of the two from ``TRITON_INTERPRET`` when it runs (triton 3.6-3.9 read it
through ``triton.knobs.runtime.interpret`` at decoration time), so choosing the class ourselves
lets both executors live in one process without touching the environment.
"""
from __future__ import annotations

import hashlib
import itertools
import linecache
import os
import stat
import tempfile
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import kernel_sources
from ..bounded import LRUCache

_GENERATOR_FILES = ("lowering.py", "emit.py", "layout.py", "pointwise.py", "reduction.py", "cache.py")

# Loaded kernels kept per cache: each holds Triton's compiled binaries, and kernels whose
# constants change per call (a learning-rate schedule) would otherwise pile up.
MAX_LOADED = 512


def _generator_fingerprint() -> str:
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in _GENERATOR_FILES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def default_cache_dir() -> Path:
    env = os.environ.get("FUSIONRT_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "fusionrt"
    return base / "kernels"


@dataclass
class CacheStats:
    generated: int = 0   # sources produced by the code generator
    disk_hits: int = 0   # sources read from the disk cache instead
    memory_hits: int = 0  # kernels already loaded in this process
    rejected: int = 0    # files found for a key but not run (not ours, or not matching their name)


class KernelCache:
    """Key -> loaded kernel function, for one directory."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_cache_dir()
        self.stats = CacheStats()
        self._loaded: LRUCache[Any] = LRUCache(MAX_LOADED)
        self._fingerprint = _generator_fingerprint()
        self._lock = threading.Lock()
        self._writable = True  # until a write fails; then new kernels stay in memory

    def kernel(self, key: Hashable, generate: Callable[[], str], name: str, interpret: bool) -> Any:
        """The kernel function ``name`` of the module for ``key``, generating it on a miss."""
        loaded = self._loaded.get((key, interpret))
        if loaded is not None:
            self.stats.memory_hits += 1
            return loaded
        with self._lock:
            source, origin, generated = self._source(key, generate)
            fn = _load(source, origin, name, interpret)
            self._loaded.put((key, interpret), fn)
            kernel_sources.loaded(source, name, origin, generated)
            return fn

    def _source(self, key: Hashable, generate: Callable[[], str]) -> tuple[bytes, str, bool]:
        """The module's source, where it comes from (a trusted file of the folder, or new
        source, stored there when the folder can be written) and whether it is new."""
        prefix = "k" + _digest(repr((self._fingerprint, key)).encode()) + "-"
        try:
            names = [n for n in os.listdir(self.directory) if n.startswith(prefix) and n.endswith(".py")]
        except OSError:  # no folder yet, or one we cannot list
            names = []
        for name in names:
            data = _read_own_file(self.directory / name)
            if data is not None and name == f"{prefix}{_digest(data)}.py":
                self.stats.disk_hits += 1
                return data, str(self.directory / name), False
            self.stats.rejected += 1
        source = generate().encode()
        self.stats.generated += 1
        path = self.directory / f"{prefix}{_digest(source)}.py"
        if self._writable:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                write_atomic(path, source)
                return source, str(path), True
            except OSError as exc:
                self._writable = False
                warnings.warn(f"fusionrt: cannot write the kernel cache {self.directory} ({exc}); "
                              "generated kernels stay in memory", RuntimeWarning)
        return source, f"<memory>/{path.name}", True


def _read_own_file(path: Path) -> bytes | None:
    """The file's bytes if only this user can have written them: a regular file (not a link, not
    a FIFO that would block), owned by this user, not writable by group or others."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if os.name == "posix" and (st.st_uid != os.geteuid() or st.st_mode & 0o022):
            return None
        return f.read()


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole or is left as it was: a new temp file (created exclusively,
    never through a link), then a rename over ``path`` (which replaces a link, not its target)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_loads = itertools.count()


def _load(source: bytes, origin: str, name: str, interpret: bool) -> Any:
    """Run ``source`` as a new module, wrap its functions for the mode and return ``name``.

    The text is pinned in ``linecache`` under a name of this load's own, for as long as the
    kernel lives: that is where Triton reads the functions' source back."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    mode = "interpret" if interpret else "jit"
    filename = f"{origin}#{mode}{next(_loads)}"
    text = source.decode()
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    # One module name per mode: Triton registers every JITFunction under its module and name
    # for good, so names of their own would keep each kernel ever loaded alive.
    module = types.ModuleType(f"fusionrt_generated_{mode}")
    exec(compile(text, filename, "exec"), module.__dict__)
    for attr, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            if interpret:
                value = InterpretedFunction(value)
                value.rewritten_fn = {}  # its own: triton's class-wide one keeps every function run
            else:
                value = JITFunction(value)
            setattr(module, attr, value)
    if interpret and hasattr(module, "_to_bf16"):
        module._to_bf16 = module._to_bf16_interpreted  # see lowering.HELPERS
    fn = getattr(module, name)
    weakref.finalize(fn, linecache.cache.pop, filename, None)
    return fn
