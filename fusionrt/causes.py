"""Why a report has the writes and fallbacks it has: records grouped by line and reason, and the
few causes that explain most of them, each with advice where there is one to give.

A model's report holds hundreds of records that share a handful of causes; reading the causes
first, then the groups, is what keeps a report readable at model size.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report import Fallback, Flush, Write

# Why each write reason writes, and what to do about it (None: nothing the program can change).
# A reason missing here is still grouped and shown, under its own name.
WRITE_CAUSES: dict[str, tuple[str, str | None]] = {
    "alive": ("still referenced from Python at the flush (a variable, a list, a notebook name)",
              "del what is no longer needed, or compute inside a function whose locals die at return"),
    "consumed-later": ("read by a later kernel that could not fuse the producing op", None),
    "view-break": ("viewed in a way the reading block could not fuse",
                   "view the inputs rather than the computed value (fusionlint FL001)"),
    "fallback-input": ("needed as real tensors by ops run eagerly", "fewer fallbacks, fewer of these"),
    "sync": ("read by the host (.item(), bool(), .tolist(), printing)",
             "keep host reads out of tensor work (fusionlint FL004)"),
    "saved-for-backward": ("saved by autograd for the backward pass, which training needs",
                           "for inference, run under torch.no_grad() or torch.inference_mode()"),
}
# Writes eager PyTorch makes too: the results, and what ops run eagerly write. Not a cause to act on.
AS_IN_EAGER = ("output", "fallback")

# Fallback reasons as the capture words them: how to say them in a sentence, and advice.
FALLBACK_CAUSES: dict[str, tuple[str, str | None]] = {
    "requires grad": ("because their inputs require grad",
                      "for inference, run under torch.no_grad() or torch.inference_mode()"),
    "not supported by fusionrt": ("because fusionrt does not record them", None),
    "batch norm in training mode": ("because batch norm is in training mode", "for inference, call model.eval()"),
}

# Ops that only run in training mode; the advice holds whatever the fallback's reason.
TRAINING_MODE_OPS = {"bernoulli_": "dropout", "native_dropout": "dropout", "dropout": "dropout"}

SYNC_FLUSHES = ("item", "bool", "tolist", "cpu", "numpy", "print")


@dataclass(frozen=True)
class WriteGroup:
    """Writes of one source line with one reason."""

    source: str
    reason: str
    count: int
    bytes: int
    ops: tuple[tuple[str, int], ...]  # op and how many of the writes it made, most first


@dataclass(frozen=True)
class FallbackGroup:
    """Fallbacks of one op with one reason."""

    op: str
    reason: str
    count: int
    sources: tuple[tuple[str, int], ...]  # source line and count, most first


@dataclass(frozen=True)
class Cause:
    """One reason behind several records, and what to do about it.

    ``kind`` says what was counted: ``fallbacks`` (``examples`` are the ops), ``writes``
    (``bytes`` is their size) or ``syncs`` (host syncs repeated from one line, ``examples`` is it).
    ``explanation`` finishes a sentence about them; ``advice`` is None where there is none to give.
    """

    kind: str
    reason: str
    count: int
    bytes: int
    examples: tuple[tuple[str, int], ...]
    explanation: str
    advice: str | None


def group_writes(writes: Sequence[Write]) -> list[WriteGroup]:
    """By source line and reason, the most bytes first (first seen first on ties)."""
    groups: dict[tuple[str, str], list[Write]] = {}
    for w in writes:
        groups.setdefault((w.source, w.reason), []).append(w)
    ordered = sorted(groups.items(), key=lambda item: -sum(w.bytes for w in item[1]))
    return [WriteGroup(source, reason, len(ws), sum(w.bytes for w in ws),
                       tuple(Counter(w.op for w in ws).most_common()))
            for (source, reason), ws in ordered]


def group_fallbacks(fallbacks: Sequence[Fallback]) -> list[FallbackGroup]:
    """By op and reason, the most frequent first (first seen first on ties)."""
    groups: dict[tuple[str, str], list[Fallback]] = {}
    for f in fallbacks:
        groups.setdefault((f.op, f.reason), []).append(f)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [FallbackGroup(op, reason, len(fs), tuple(Counter(f.source for f in fs).most_common()))
            for (op, reason), fs in ordered]


def top_causes(writes: Sequence[Write], fallbacks: Sequence[Fallback], flushes: Sequence[Flush],
               limit: int) -> list[Cause]:
    """At most ``limit`` causes, the most records first within each kind: fallbacks come first,
    since they cause writes and flushes of their own; then host syncs repeated from one line; then
    writes by reason, but for those eager PyTorch makes too (``AS_IN_EAGER``)."""
    causes = []
    for kind in (_fallback_causes(fallbacks), _sync_causes(flushes),
                 _write_causes([w for w in writes if w.reason not in AS_IN_EAGER])):
        causes += sorted(kind, key=lambda c: -c.count)
    return causes[:limit]


def _fallback_causes(fallbacks: Sequence[Fallback]) -> list[Cause]:
    by_reason: dict[str, Counter[str]] = {}
    for f in fallbacks:
        by_reason.setdefault(f.reason, Counter())[f.op] += 1
    causes = []
    for reason, ops in by_reason.items():
        explanation, advice = FALLBACK_CAUSES.get(reason, (f"({reason})", None))
        training = sorted({TRAINING_MODE_OPS[op] for op in ops if op in TRAINING_MODE_OPS})
        if advice is None and training:
            advice = f"{' and '.join(training)} is active: for inference, call model.eval()"
        causes.append(Cause("fallbacks", reason, sum(ops.values()), 0, tuple(ops.most_common()), explanation, advice))
    return causes


def _sync_causes(flushes: Sequence[Flush]) -> list[Cause]:
    """A host sync that flushed more than once from one line: a sync in a loop."""
    repeated = Counter((f.reason, f.source) for f in flushes if f.reason in SYNC_FLUSHES)
    return [
        Cause("syncs", reason, count, 0, ((source, count),), "each flushes the stream",
              "read the host once, after the loop (fusionlint FL004)")
        for (reason, source), count in repeated.most_common() if count > 1
    ]


def _write_causes(writes: Sequence[Write]) -> list[Cause]:
    by_reason: dict[str, list[Write]] = {}
    for w in writes:
        by_reason.setdefault(w.reason, []).append(w)
    causes = []
    for reason, ws in by_reason.items():
        explanation, advice = WRITE_CAUSES.get(reason, (f"written because {reason}", None))
        ops = tuple(Counter(w.op for w in ws).most_common())
        causes.append(Cause("writes", reason, len(ws), sum(w.bytes for w in ws), ops, explanation, advice))
    return causes
