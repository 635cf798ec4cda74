"""Where a loaded Triton kernel's source goes besides the cache: the ``fusionrt.codegen`` log and
the ``FUSIONRT_DEBUG_DIR`` folder, each naming the planned kernel it was loaded for.

The kernel cache names its files by hashes and keeps them across runs; a user reading a slow or
wrong kernel needs its source next to its plan. The runtime says which planned kernel it is
binding (``for_planned``); the cache reports each source it loads (``loaded``), generated or read
from disk. ``FUSIONRT_DEBUG_DIR=/path`` then receives one file per source, named after the planned
kernel and the source's hash, whose header comment gives the kernel's name, kind, backend, ops
and source lines; the rest is the source exactly as it runs. A source shared by several planned
kernels of one structure is loaded, so written, once: for the first of them.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .log import KERNELS
from .report import display_source

if TYPE_CHECKING:
    from .plan import PlannedKernel

ENV = "FUSIONRT_DEBUG_DIR"

_planned: ContextVar[Optional[PlannedKernel]] = ContextVar("fusionrt_planned_kernel", default=None)


@contextlib.contextmanager
def for_planned(planned: PlannedKernel) -> Iterator[None]:
    """Kernels loaded inside the block are ``planned``'s."""
    token = _planned.set(planned)
    try:
        yield
    finally:
        _planned.reset(token)


def loaded(source: bytes, function: str, origin: str, generated: bool) -> None:
    """Log a kernel the cache just loaded and copy it into the debug folder when one is set."""
    directory = os.environ.get(ENV)
    if not directory and not KERNELS.isEnabledFor(logging.INFO):
        return
    text = source.decode()
    planned = _planned.get()
    if planned is None:
        kernel = "no planned kernel (the executor was called directly)"
        ops = sources = ""
    else:
        kernel = f"{planned.name} ({planned.kind}, backend {planned.backend})"
        ops = " ".join(n.record or n.op for n in planned.nodes)
        sources = ", ".join(display_source(s) for s in dict.fromkeys(n.source for n in planned.nodes))
    lines = text.count("\n")
    KERNELS.log(logging.INFO if generated else logging.DEBUG, "%s %s (%d lines) for %s: %s from %s; cache %s",
                "generated" if generated else "read from the disk cache", function, lines, kernel, ops, sources,
                origin)
    KERNELS.debug("%s", text)
    if directory:
        header = [f"planned kernel: {kernel}", f"ops: {ops}", f"source lines: {sources}",
                  f"Triton function: {function} ({lines} lines)", f"cache: {origin}"]
        name = re.sub(r"[^A-Za-z0-9_]+", "_", planned.name if planned is not None else function)[:80]
        path = Path(directory) / f"{name}-{hashlib.sha256(source).hexdigest()[:12]}.py"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"# {line}\n" for line in header) + "\n" + text, encoding="utf-8")
        except OSError as exc:  # a debugging aid never fails the run it watches
            warnings.warn(f"fusionrt: cannot write {path} ({exc})", RuntimeWarning)
