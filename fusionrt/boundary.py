"""Where a pending tensor can leave the thread that records it, and what happens there.

The capture sees what one thread does through dispatch. A pending tensor's memory is not written
yet, so four other ways out of that thread would read garbage: another thread (modes are
thread-local), a forked child (it inherits the modes but never flushes), ``to_dlpack`` (a C
function no mode sees) and a ``torch.compile``d function (Dynamo would trace the capture itself).
While any block is open this module flushes at each of them (a thread start, a hand-over through
``queue.Queue.put`` or ``ThreadPoolExecutor.submit``, a fork), guards threads started meanwhile,
and makes compiled functions run as their Python code, so the capture records their ops. A
thread that was already running and reads a shared pending tensor without such a hand-over is
beyond reach: docs/semantics.md says so.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

import torch
import torch.utils.dlpack
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_lock = threading.Lock()
_open_blocks = 0  # in all threads
_patched: set[tuple[Any, str]] = set()
_stance: Any = None  # the compiler stance set while blocks are open, undone at the last exit

# Where a value is handed to a thread that may already be running (no guard there): what this
# thread recorded is written first.
HANDOVERS = (("queue", "Queue", "put"), ("concurrent.futures.thread", "ThreadPoolExecutor", "submit"))


def block_opened() -> None:
    """The first open block installs the wrappers (once per process: installing and removing
    them around every block cost more than recording a small block) and sets the stance."""
    global _open_blocks
    with _lock:
        _open_blocks += 1
        if _open_blocks > 1:
            return
        _compile_eagerly()
        if len(_patched) == 4 + len(HANDOVERS):
            return  # every wrapper is in place
        _patch(threading.Thread, "start", _guarded_start)
        for module, owner, name in HANDOVERS:
            if module in sys.modules:  # not imported yet: no object of it can exist
                _patch(getattr(sys.modules[module], owner), name, _flushing_first)
        _patch(torch.utils.dlpack, "to_dlpack", _flushing_dlpack)
        _patch(torch.utils, "swap_tensors", _flushing_swap)
        _patch(torch, "compile", _compiling_eagerly)


def block_closed() -> None:
    global _open_blocks, _stance
    with _lock:
        _open_blocks -= 1
        if _open_blocks == 0 and _stance is not None:
            _stance.__exit__(None, None, None)
            _stance = None


def _patch(owner: Any, name: str, wrap: Callable[[Callable], Callable]) -> None:
    """Wrap ``owner.name`` once; the wrappers do nothing of their own outside blocks."""
    if (owner, name) not in _patched:
        _patched.add((owner, name))
        setattr(owner, name, wrap(getattr(owner, name)))


def _flushing_first(original: Callable) -> Callable:
    def handover(*args: Any, **kwargs: Any) -> Any:
        _flush_current("thread")
        return original(*args, **kwargs)

    return handover


# -- threads -----------------------------------------------------------------------------------

def _guarded_start(original: Callable) -> Callable:
    def start(thread: threading.Thread) -> None:
        """What this thread recorded so far is written before the new thread can see it; what
        it records later is flushed on the new thread's first read of it (ThreadGuard)."""
        if not _open_blocks:
            return original(thread)
        _flush_current("thread")
        run = thread.run

        def guarded_run() -> None:
            with ThreadGuard():
                run()

        thread.run = guarded_run  # type: ignore[method-assign]
        original(thread)

    return start


class ThreadGuard:
    """In a thread that is in no block: an op or a sync on a tensor pending in another thread's
    block flushes that block first (under its lock). Ops otherwise run as in eager PyTorch."""

    def __enter__(self) -> ThreadGuard:
        self._modes = (_GuardReads(), _GuardSyncs())
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)


def _flush_owners(values: Any) -> None:
    """Flush the blocks of other threads that still owe a tensor in ``values``. When this
    thread is in a block of its own, the ops seen here are that block's own eager work (views,
    fallbacks), and its capture already settles what they read."""
    from .capture import BINDING, _flat, user_source
    from .session import current, flush_owner

    if current() is not None:
        return
    for t in _flat(values):
        if isinstance(t, torch.Tensor):
            binding = t.__dict__.get(BINDING)
            if binding is not None:
                flush_owner(binding, user_source())


class _GuardReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        _flush_owners(list(args) + list(kwargs.values()))
        return func(*args, **kwargs)


class _GuardSyncs(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        _flush_owners(args[:2])
        return func(*args, **(kwargs or {}))


# -- processes ---------------------------------------------------------------------------------

def _flush_current(reason: str) -> None:
    from .capture import user_source
    from .session import current

    session = current()
    if session is not None and not session.passthrough:
        session.flush(reason, user_source())


def _eager_in_child() -> None:
    """A forked child inherits the open blocks' modes but not their threads, nor a way to
    report back: it runs eagerly (what the forking thread recorded was written before fork)."""
    from .session import _live

    for session in list(_live.values()):
        session.lock = threading.RLock()
        session.passthrough = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _flush_current("fork"), after_in_child=_eager_in_child)


# -- functions no mode sees --------------------------------------------------------------------

def _flushing_dlpack(original: Callable) -> Callable:
    def to_dlpack(tensor: torch.Tensor) -> Any:
        _before_memory_access("dlpack", (tensor,))
        return original(tensor)

    return to_dlpack


def _flushing_swap(original: Callable) -> Callable:
    def swap_tensors(t1: torch.Tensor, t2: torch.Tensor) -> None:
        """Swapping two tensors' insides (``Module._apply`` in swap mode) swaps what a pending
        node's home or a remembered leaf stands for: what involves them runs first."""
        _before_memory_access("data", (t1, t2))
        return original(t1, t2)

    return swap_tensors


def _before_memory_access(reason: str, tensors: tuple) -> None:
    from .session import current

    session = current()
    if session is not None:
        session.before_memory_access(reason, tensors, reads_only=False)


def _compiling_eagerly(original: Callable) -> Callable:
    def compile(*args: Any, **kwargs: Any) -> Any:
        compiled = original(*args, **kwargs)
        if _open_blocks:
            with _lock:
                _compile_eagerly()
        return compiled

    return compile


def _compile_eagerly() -> None:
    """Compiled functions run as their Python code while blocks are open: the capture records
    their ops (Dynamo is only asked once something imported it)."""
    global _stance
    if _stance is None and "torch._dynamo" in sys.modules:
        _stance = torch.compiler.set_stance("force_eager")  # in force from here on
