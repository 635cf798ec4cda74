"""fusionrt's loggers and the ``FUSIONRT_LOG`` switch that turns them on.

``logging.getLogger("fusionrt")`` has one child per stage that says something: ``fusionrt.schedule``
logs each flush's plan (why it flushed, its kernels with their ops and source lines, its writes)
and ``fusionrt.codegen`` each Triton kernel loaded (generated or read from the disk cache). They
propagate like any library's loggers, so ``logging`` configuration (or pytest's ``caplog``) sees
them. ``FUSIONRT_LOG`` switches them on from the environment, as ``TORCH_LOGS`` does for torch,
printing to stderr: ``plans``, ``kernels``, ``cudagraphs`` (why a compiled graph is not served
by a CUDA graph; comma-separated), or ``debug`` for both in full
(every write of a plan, every kernel's source text).
"""
from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Sequence

from .report import Flush, KernelRecord, Write, display_source, human_bytes

ENV = "FUSIONRT_LOG"
ROOT = logging.getLogger("fusionrt")
PLANS = logging.getLogger("fusionrt.schedule")
KERNELS = logging.getLogger("fusionrt.codegen")
# FUSIONRT_LOG's words -> (logger, level)
SWITCHES = {
    "plans": (PLANS, logging.INFO),
    "kernels": (KERNELS, logging.INFO),
    "cudagraphs": (logging.getLogger("fusionrt.cudagraphs"), logging.INFO),
    "debug": (ROOT, logging.DEBUG),
}


def configure(spec: str) -> None:
    """Apply a ``FUSIONRT_LOG`` value: set the named loggers' levels and print them to stderr.

    The handler is fusionrt's own and does not propagate, so a program that also configures
    the root logger sees each line once."""
    words = [w.strip().lower() for w in spec.split(",") if w.strip()]
    unknown = [w for w in words if w not in SWITCHES]
    if unknown:
        warnings.warn(f"{ENV}: unknown {', '.join(map(repr, unknown))}; expected a comma-separated list of "
                      f"{', '.join(SWITCHES)}", RuntimeWarning)
    known = [w for w in words if w in SWITCHES]
    if not known:
        return
    for word in known:
        logger, level = SWITCHES[word]
        logger.setLevel(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    ROOT.addHandler(handler)
    ROOT.propagate = False


def flush_ran(index: int, flush: Flush, kernels: Sequence[KernelRecord], writes: Sequence[Write]) -> None:
    """One flush's plan: a line for the flush, one per kernel, and at DEBUG one per write."""
    if not PLANS.isEnabledFor(logging.INFO):
        return
    written = sum(w.bytes for w in writes)
    lines = [f"flush {index} ({flush.reason} at {display_source(flush.source)}): ops {flush.ops}, "
             f"kernels {len(kernels)}, writes {len(writes)} ({human_bytes(written)})"]
    by_kernel: dict[int, list[Write]] = {}
    for w in writes:
        by_kernel.setdefault(w.kernel, []).append(w)
    for k in kernels:
        backend = f" [{k.backend}]" if k.backend else ""
        sources = ", ".join(display_source(s) for s in k.sources)
        kernel_writes = by_kernel.get(k.index, [])
        reasons = ", ".join(sorted({w.reason for w in kernel_writes})) or "nothing"
        lines.append(f"  kernel {k.index} {k.kind} {k.name}{backend}: {' '.join(k.ops)} from {sources}; "
                     f"reads {human_bytes(k.bytes_read)}, writes {human_bytes(k.bytes_written)} ({reasons})")
        if PLANS.isEnabledFor(logging.DEBUG):
            lines.extend(f"    write {tuple(w.shape)} {w.dtype} {human_bytes(w.bytes)} {w.reason} "
                         f"{w.op} from {display_source(w.source)}" for w in kernel_writes)
    PLANS.info("\n".join(lines))


configure(os.environ.get(ENV, ""))
