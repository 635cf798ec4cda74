"""A report as a Chrome trace (the JSON that Perfetto and chrome://tracing open): its kernels and
writes on a timeline.

The report records what ran, not how long it took, so the timeline is a proxy: each kernel lasts
as many microseconds as it moves KiB (read + written), one after the other in launch order. Wide
slices are the kernels that move the most memory, which is what fusion saves; the trace's
``otherData.timeline`` says so, so no one reads the widths as times. Tracks: ``kernels`` (one
"X" slice per kernel, with its ops, bytes and source lines), ``writes`` (an instant per
materialized write at the end of its kernel, with its reason and source), ``flushes`` (an instant
where each flush starts) and a ``bytes written`` counter.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import Flush, Report, Write

PROXY = ("proxy, not measured: each kernel lasts 1 us per KiB it reads and writes, in launch order "
         "(the report records no durations)")
_PID = 1
_TRACKS = {"kernels": 1, "writes": 2, "flushes": 3}


def chrome_trace(report: Report) -> dict[str, Any]:
    """The trace event JSON object (``traceEvents``, ``otherData``) for ``report``."""
    events: list[dict[str, Any]] = [
        _meta("process_name", 0, {"name": f"fusionrt (policy {report.policy}, executor {report.executor})"}),
        *(_meta("thread_name", tid, {"name": name}) for name, tid in _TRACKS.items()),
    ]
    writes_by_kernel: dict[int, list[Write]] = {}
    for w in report.materialized:
        writes_by_kernel.setdefault(w.kernel, []).append(w)
    now, written, flushes_shown = 0.0, 0, 0
    for k in report.kernel_records:
        while flushes_shown <= min(k.flush, len(report.flushes) - 1):
            events.append(_flush(report.flushes[flushes_shown], flushes_shown, now))
            flushes_shown += 1
        duration = (k.bytes_read + k.bytes_written) / 1024
        events.append({
            "name": k.name, "cat": k.kind, "ph": "X", "pid": _PID, "tid": _TRACKS["kernels"],
            "ts": now, "dur": duration,
            "args": {"index": k.index, "kind": k.kind, "backend": k.backend, "decision": k.decision,
                     "ops": list(k.ops), "bytes_read": k.bytes_read, "bytes_written": k.bytes_written,
                     "sources": list(k.sources), "flush": k.flush},
        })
        now += duration
        for w in writes_by_kernel.get(k.index, []):
            written += w.bytes
            events.append({
                "name": f"{w.reason} {w.op}", "cat": "write", "ph": "i", "s": "t", "pid": _PID,
                "tid": _TRACKS["writes"], "ts": now,
                "args": {"shape": list(w.shape), "dtype": w.dtype, "bytes": w.bytes, "reason": w.reason,
                         "source": w.source, "op": w.op, "kernel": w.kernel},
            })
        events.append({"name": "bytes written", "ph": "C", "pid": _PID, "ts": now, "args": {"bytes": written}})
    events.extend(_flush(f, i, now) for i, f in enumerate(report.flushes) if i >= flushes_shown)
    return {
        "traceEvents": events,
        "otherData": {"timeline": PROXY, "kernels": report.kernels, "writes": report.writes,
                      "bytes_written": report.bytes_written, "bytes_read": report.bytes_read},
    }


def _flush(flush: Flush, index: int, ts: float) -> dict[str, Any]:
    """An instant across the process where a flush's kernels start."""
    return {"name": f"flush {flush.reason}", "cat": "flush", "ph": "i", "s": "p", "pid": _PID,
            "tid": _TRACKS["flushes"], "ts": ts,
            "args": {"index": index, "reason": flush.reason, "source": flush.source, "ops": flush.ops}}


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": _PID, "tid": tid, "args": args}
