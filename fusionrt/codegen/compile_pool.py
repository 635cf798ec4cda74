"""Compiling a plan's new kernels in worker processes before its first launches.

Triton compiles a kernel at its first launch, in the launching process, one kernel after
another: a whole model's first call spent about half its time there. Compiling holds the GIL
(threads gave no speed-up), so, as Inductor does, the kernels a plan is about to launch for the
first time are compiled by a pool of worker processes into Triton's disk cache, where each
launch then finds its binary. What a worker compiles is exactly what the launch will ask for:
Triton's own binder specializes each launch's arguments, in a warm-up whose compile hook records
the specialization instead of compiling.

The workers are plain interpreters (``python -m fusionrt.codegen.compile_worker``) talking over
pipes: ``multiprocessing`` would import the user's main script again in each of them. They
start in the background when a CUDA graph is first compiled (``start``), so that starting them
overlaps Dynamo's and AOTAutograd's tracing. ``FUSIONRT_COMPILE_WORKERS`` sets their number (0:
compile in the launching process, as Triton does). Nothing here decides a result: a kernel a
worker could not compile is compiled at its launch, as without the pool.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Optional

log = logging.getLogger("fusionrt.codegen")

ENV = "FUSIONRT_COMPILE_WORKERS"
MAX_WORKERS = 16

_collecting: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar("fusionrt_first_launches", default=None)


def workers_wanted() -> int:
    """How many workers: ``FUSIONRT_COMPILE_WORKERS``, else one per core up to ``MAX_WORKERS``
    (none on a single core: a worker would only add its start-up)."""
    value = os.environ.get(ENV)
    if value is not None:
        try:
            return max(0, int(value))
        except ValueError:
            raise ValueError(f"{ENV} must be a whole number of worker processes, not {value!r}") from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_WORKERS, cores) if cores > 1 else 0


@contextlib.contextmanager
def first_launches() -> Iterator[list]:
    """Collect the launches bound inside the block (see ``note_launch``)."""
    launches: list = []
    token = _collecting.set(launches)
    try:
        yield launches
    finally:
        _collecting.reset(token)


def note_launch(launch: Any) -> None:
    """Called for each launch bound: remembered when a plan is being bound for its first run."""
    launches = _collecting.get()
    if launches is not None:
        launches.append(launch)


class _Job:
    """What a worker needs to compile one specialization: the kernel's module source and name,
    and Triton's compile arguments, all plain data."""

    def __init__(self, source: bytes, origin: str, name: str, compile: dict[str, Any], target: Any) -> None:
        self.source, self.origin, self.name, self.target = source, origin, name, target
        self.signature = compile["signature"]
        self.constants = compile["constants"]
        self.attrs = compile["configs"][0]
        self.options = {k: compile[k] for k in ("num_warps", "num_ctas", "num_stages", "enable_fp_fusion",
                                                 "launch_cooperative_grid", "extern_libs") if compile.get(k) is not None}


def compile_ahead(launches: Sequence[Any]) -> int:
    """Compile the kernels of ``launches`` that are not compiled yet, in the pool, before they
    launch; the number compiled there."""
    pending = [launch for launch in launches
               if not launch.spec.interpret and launch.spec._compiled.get(launch._key) is None]
    if len(pending) < 2:
        return 0
    jobs = _jobs(pending)
    if len(jobs) < 2:
        return 0
    pool = _pool()
    if pool is None:
        return 0
    start = time.perf_counter()
    failed = pool.run(jobs)
    log.info("compiled %d kernels in %d worker processes in %.2f s%s", len(jobs) - failed, pool.size,
             time.perf_counter() - start, f" ({failed} left to their launch)" if failed else "")
    return len(jobs) - failed


def _jobs(launches: Sequence[Any]) -> list[_Job]:
    """Each distinct specialization among ``launches`` (on the GPU, not compiled by fusionrt
    yet) that Triton would compile at its launch: one it has in memory calls no hook."""
    from triton import knobs
    from triton.runtime import driver

    jobs: dict[Any, _Job] = {}
    current: list[Any] = []

    def record(*, key: Any, fn: Any, compile: dict[str, Any], **_: Any) -> bool:
        spec = current[0]
        origin = getattr(fn.jit_function, "fusionrt_source", None)
        if origin is not None and (id(spec.fn), key) not in jobs:
            jobs[id(spec.fn), key] = _Job(*origin, compile, target)
        return True  # compile nothing now

    target = driver.active.get_current_target()
    previous = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = record
    try:
        for launch in launches:
            spec = launch.spec
            current[:] = [spec]
            spec.fn.warmup(*launch.args, grid=spec.grid, **spec.constants)
    finally:
        knobs.runtime.jit_cache_hook = previous
    return list(jobs.values())


class _Worker:
    """One compile process and its pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "fusionrt.codegen.compile_worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def compile(self, job: _Job) -> bool:
        assert self.process.stdin is not None and self.process.stdout is not None
        send(self.process.stdin, job)
        ok, message = receive(self.process.stdout)
        if not ok:
            log.debug("a compile worker failed on %s: %s", job.name, message)
        return ok

    def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=5)


class _Pool:
    """Workers started once per process, each used by one thread at a time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._threads = ThreadPoolExecutor(size, thread_name_prefix="fusionrt-compile")
        for _ in range(size):
            self._threads.submit(lambda: self._idle.put(_Worker()))

    def run(self, jobs: list[_Job]) -> int:
        """Compile ``jobs``; how many failed."""
        return sum(not ok for ok in self._threads.map(self._compile, jobs))

    def _compile(self, job: _Job) -> bool:
        worker = self._idle.get()
        try:
            ok = worker.compile(job)
        except (OSError, EOFError, pickle.PickleError, struct.error):  # the worker died: start another
            worker.close()
            worker = _Worker()
            ok = False
        self._idle.put(worker)
        return ok

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get().close()


_POOL: Optional[_Pool] = None
_POOL_LOCK = threading.Lock()


def start() -> None:
    """Start the workers now, in the background (they take a few seconds to import)."""
    _pool()


def _pool() -> Optional[_Pool]:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            size = workers_wanted()
            if size == 0:
                return None
            _POOL = _Pool(size)
            import atexit

            atexit.register(_POOL.close)
        return _POOL


def send(stream: BinaryIO, value: Any) -> None:
    data = pickle.dumps(value)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the other side closed the pipe")
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))
