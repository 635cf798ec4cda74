"""fusionrt: run PyTorch code through a lazy fusing Triton backend and report every global write.

``with fusionrt.lazy() as session:`` records the ops of the block, fuses them into kernels at
each flush and fills ``session.report``; ``fusionrt.measure(fn, *args)`` does the same for one
call and returns ``(result, report)``. docs/semantics.md states what is fused and written.
``fusionrt.jit(fn)`` replays the plan of a function's first call on later calls without
recording them again (docs/replay.md).
"""
from __future__ import annotations

from typing import Any, Callable

from fusionlint.runtime_extra import require_runtime

require_runtime("fusionrt")  # without torch: the extra to install, not a bare ModuleNotFoundError

from .replay import Jitted, jit
from .report import Report, compare
from .session import Session, current

__all__ = ["lazy", "sync", "measure", "jit", "Jitted", "Report", "compare", "Session", "load_ipython_extension"]


def lazy(policy: str = "stream", executor: str = "auto", max_pending: int = 4096) -> Session:
    """A context manager recording the tensor ops of its block; see ``Session``."""
    return Session(policy=policy, executor=executor, max_pending=max_pending)


def sync() -> None:
    """Run every pending op of the current lazy block now (no-op outside one)."""
    from .capture import user_source

    session = current()
    if session is not None:
        session.flush("sync", user_source())


def measure(fn: Callable[..., Any], *args: Any, policy: str = "stream", executor: str = "auto",
            **kwargs: Any) -> tuple[Any, Report]:
    """Call ``fn`` lazily; its locals die at return, so only what it returns counts as alive
    (written with reason ``output``)."""
    with lazy(policy=policy, executor=executor) as session:
        result = fn(*args, **kwargs)
        session.mark_outputs(result)
    return result, session.report


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext fusionrt``: the same ``%%fuse`` magic as ``%load_ext fusionlint``, for notebooks that
    think of it as the runtime's (the magic lives with the linter, which it needs)."""
    from fusionlint.magic import load_ipython_extension as load

    load(ipython)
