"""Plans of repeated op streams, reused without planning again.

A program that runs the same code on new tensors records the same stream at every flush. The
planner reads nothing but the stream and the flags taken at the flush, so the stream's
*relative* form (Burn keys its plan cache the same way) decides the plan: ops, attributes,
scalars, shapes, strides and dtypes of every node, how each argument reads its source (leaves
and nodes numbered by position, views by their layout and index map), the leaves' layouts and
devices, which storages are shared, and the liveness, sync, output and fallback flags. Source
lines are not part of the key: they only label the report.

On a hit the cached plan is *rebound*: its nodes take the current nodes' storages and source
lines, and its leaves stand for the current leaf tensors. The runtime then runs it exactly as it
runs a fresh plan, so a replayed flush launches the same kernels and reports the same writes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import torch

from .bounded import LRUCache
from .graph import Leaf, Node, Use
from .plan import Flags, Plan

MAX_ENTRIES = 512


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    uncacheable: int = 0  # streams with an unhashable attribute: planned every time


@dataclass(eq=False)
class CachedPlan:
    """A plan over the nodes and leaves of the flush that made it."""

    plan: Plan
    nodes: tuple[Node, ...]
    leaves: tuple[Leaf, ...]

    def rebind(self, nodes: Sequence[Node], leaf_tensors: Sequence[torch.Tensor]) -> dict[Leaf, torch.Tensor]:
        """Point the plan at the current flush: each cached node writes where its counterpart
        lives and reports its line; returns the leaves mapping the runtime reads."""
        for old, new in zip(self.nodes, nodes):
            old.holder, old.home, old.storage, old.source = new.holder, new.home, new.storage, new.source
        return dict(zip(self.leaves, leaf_tensors))

    def release(self) -> None:
        """Forget the tensors of the flush that ran it: a weak reference kept in the cache would
        make them impossible to ``torch.utils.swap_tensors`` for as long as the plan is cached."""
        for node in self.nodes:
            node.holder = node.home = None


class PlanCache:
    """Relative stream key -> ``CachedPlan``, least recently used first out."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.stats = CacheStats()
        self._plans: LRUCache[CachedPlan] = LRUCache(max_entries)

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans = LRUCache(self.max_entries)
        self.stats = CacheStats()

    def get(self, key: tuple) -> Optional[CachedPlan]:
        try:
            found = self._plans.get(key)
        except TypeError:  # an unhashable attribute: plan every time
            self.stats.uncacheable += 1
            return None
        if found is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return found

    def put(self, key: tuple, entry: CachedPlan) -> None:
        try:
            self._plans.put(key, entry)
        except TypeError:
            pass


PLANS = PlanCache()


def stream_key(policy: str, nodes: Sequence[Node], leaves: Sequence[tuple[Leaf, torch.Tensor]],
               flags: Flags) -> tuple:
    """The relative form of a flush (unhashable when some attribute is)."""
    storages: dict[int, int] = {}
    leaf_ids: dict[Leaf, int] = {}
    parts: list[Any] = [policy]
    for leaf, t in leaves:
        leaf_ids[leaf] = len(leaf_ids)
        parts.append((leaf.shape, leaf.stride, leaf.offset, leaf.dtype, t.device,
                      storages.setdefault(leaf.storage, len(storages))))
    alive, sync, outputs, fallback_inputs, saved = (flags.alive, flags.sync, flags.outputs, flags.fallback_inputs,
                                                    flags.saved)

    def arg(a: Any) -> Any:
        if isinstance(a, Use):
            src = a.src
            if isinstance(src, Node):
                ref: Any = src.id
            elif isinstance(src, Leaf):
                ref = ("leaf", leaf_ids[src])
            else:
                ref = ("view", src.root.id, src.shape, src.stride, src.offset, src.map)
            return (ref, a.map, a.recompute)
        if isinstance(a, float):
            return (float, a.hex())  # 0.0 == -0.0 and nan != nan, yet they compute differently
        if isinstance(a, (list, tuple)):
            return (type(a), tuple(arg(x) for x in a))
        return (type(a), a)

    for n in nodes:
        # Which nodes (and leaves) write one storage. A live storage is known by its address; a
        # dead one by its weak reference, one per storage object, since the allocator may have
        # given a freed temporary's address to a later, unrelated result.
        storage = None
        if n.storage:
            live = n.holder is not None and n.holder() is not None
            storage = storages.setdefault(n.storage if live else ("dead", id(n.holder)), len(storages))
        parts.append((
            n.kind, n.op, n.record, n.kernel_kind, n.shape, n.stride, n.offset, n.dtype, n.dims,
            tuple((k, arg(v)) for k, v in n.attrs) if n.attrs else (),
            tuple(arg(a) for a in n.args),
            storage, n in alive, n in sync, n in outputs, n in fallback_inputs, n in saved,
        ))
    return tuple(parts)
