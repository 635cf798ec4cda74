"""A lazy session: the pending graph, tensor bindings, storage versions, and flushes.

A recorded tensor carries its binding in an attribute (``(epoch, source, version)``); the
session keeps only weak references to tensors it bound, so Python's own reference counting
decides what is alive at a flush and a graph never outlives the tensors that need it.

A pending tensor is a real tensor whose memory is not written yet, so every way of reaching that
memory must flush first: dispatch and the sync methods do (capture.py), an alias made without
dispatch (``nn.Parameter``, ``as_subclass``, ``.data``) is recognised by its storage, and another
thread or a forked child is handled where it starts (boundary.py). A session belongs to the
thread that entered it; its lock lets another thread flush it.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Union

import torch

from . import boundary, log, schedule
from .capture import BINDING, DispatchCapture, SavedForBackward, SyncCapture, _flat
from .graph import IndexMap, Leaf, Node, Use, View
from .plan import Flags
from .report import Fallback, Flush, KernelRecord, Report, Write
from .executors import EXECUTORS, resolve as resolve_executor
from .plan_cache import PLANS, CachedPlan, stream_key
from .runtime import Runner, dtype_name

MAX_PENDING = 4096
# Out-of-place updates that eager PyTorch runs as a copy of ``self`` and the in-place op on the
# copy (ATen's ``self.clone().masked_fill_(...)``, a structured op's ``out.copy_(self)``): two kernels.
COPY_THEN_UPDATE = frozenset({
    "masked_fill", "masked_scatter", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
    "index_fill", "index_put", "index_reduce", "slice_scatter", "select_scatter", "diagonal_scatter",
    "as_strided_scatter",
})
_ids = itertools.count()
_thread = threading.local()  # .session: the block this thread is in
# epoch -> the session whose pending graph it names, for a read from another thread
_live: "weakref.WeakValueDictionary[int, Session]" = weakref.WeakValueDictionary()
FOREIGN_FLUSH_TIMEOUT_S = 60.0


def current() -> Optional[Session]:
    """The lazy block this thread is in (each thread has its own)."""
    return getattr(_thread, "session", None)


_runners: dict[tuple[str, Optional[str]], Runner] = {}


def shared_runner(executor: str) -> Runner:
    """One runner per executor (and kernel cache directory) for the whole process: executors
    keep compiled kernels and launch plans, which a new session per call would rebuild."""
    key = (executor, os.environ.get("FUSIONRT_CACHE_DIR"))
    runner = _runners.get(key)
    if runner is None:
        runner = _runners[key] = Runner(executor)
    return runner


class Session:
    """``with fusionrt.lazy(...) as session:`` records; ``session.report`` tells what ran."""

    def __init__(self, policy: str = "stream", executor: str = "auto",
                 max_pending: int = MAX_PENDING) -> None:
        if policy not in schedule.POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(schedule.POLICIES)}")
        if executor not in EXECUTORS:
            raise ValueError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
        self.policy = policy
        self.executor = executor
        self.max_pending = max_pending
        self.report = Report(policy=policy, executor=executor)
        self.passthrough = False
        self.recorder: Any = None  # set by fusionrt.jit: told of each flush and each op run eagerly
        self.decomposing = 0  # > 0 while one op is recorded as the ops of its decomposition
        self._runner = shared_runner(executor)
        self._modes: tuple = ()
        self._owner: Optional[int] = None  # the thread that entered the block
        self.lock = threading.RLock()  # held while recording or flushing
        self._reset()

    # -- the context -----------------------------------------------------------------------------

    def __enter__(self) -> Session:
        if current() is not None:
            raise RuntimeError("fusionrt.lazy blocks do not nest (this thread is already in one)")
        self._modes = (SyncCapture(self), DispatchCapture(self))
        if torch._C._autograd._saved_tensors_hooks_is_enabled():  # functorch may have turned them off
            self._modes += (SavedForBackward(self),)
        boundary.block_opened()
        for mode in self._modes:
            mode.__enter__()
        _thread.session = self
        self._owner = threading.get_ident()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        from .capture import user_source

        try:
            self.flush("exit", user_source())
        finally:
            _thread.session = None
            for mode in reversed(self._modes):
                mode.__exit__(None, None, None)
            self._modes = ()
            boundary.block_closed()

    @contextlib.contextmanager
    def eager(self) -> Iterator[None]:
        """Ops run as in eager PyTorch (while running a plan, a fallback or a sync's method)."""
        saved, self.passthrough = self.passthrough, True
        try:
            yield
        finally:
            self.passthrough = saved

    def owner_source(self) -> str:
        """The user line the block's own thread is at: on CUDA, autograd runs backward ops on a
        device thread (the dispatch mode reaches it with autograd's thread-local state) whose
        stack has no user frame, while the block's thread waits in ``backward()``."""
        from .capture import UNKNOWN_SOURCE, user_source

        frame = sys._current_frames().get(self._owner) if self._owner != threading.get_ident() else None
        return user_source(frame) if frame is not None else UNKNOWN_SOURCE

    # -- bindings and reads ----------------------------------------------------------------------

    def _reset(self) -> None:
        for ref in getattr(self, "_bound", ()):
            t = ref()
            if t is not None:
                t.__dict__.pop(BINDING, None)
        self.pending: list[Node] = []
        self._bound: list[weakref.ref] = []
        self._leaves: dict[int, tuple[Leaf, torch.Tensor]] = {}
        self._leaf_storages: set[int] = set()
        self._versions: dict[int, int] = {}
        self._homes: dict[int, weakref.ref] = {}  # storage data_ptr -> a pending node's storage
        self._outputs: set[Node] = set()
        self._saved: dict[int, list[weakref.ref]] = {}  # storage -> aliases autograd saved
        _live.pop(getattr(self, "_epoch", -1), None)
        self._epoch = next(_ids)
        _live[self._epoch] = self

    def bind(self, t: torch.Tensor, src: Union[Node, View], ref: Optional[weakref.ref] = None) -> None:
        version = self._versions.get(_storage(t), 0) if self._versions else 0
        t.__dict__[BINDING] = (self._epoch, src, version)
        self._bound.append(ref or weakref.ref(t))

    def binding(self, t: torch.Tensor) -> Optional[Union[Node, View]]:
        """The pending value ``t`` holds, or None when ``t`` is concrete (no flush)."""
        b = t.__dict__.get(BINDING)
        return b[1] if b is not None and b[0] == self._epoch else None

    def read(self, t: torch.Tensor) -> Union[Leaf, Node, View]:
        """What an op reading ``t`` reads; flushes first when ``t`` misses a write into its
        storage (a view taken before the base was written in place, ...), when it is pending in
        another thread's block, or when it aliases a pending result without a binding."""
        b = t.__dict__.get(BINDING)
        versions = self._versions  # empty unless something was written in place
        if b is not None and b[0] == self._epoch:
            if not versions or b[2] == versions.get(_storage(t), 0):
                return b[1]
            self.flush("alias", _source())
        elif b is not None:
            flush_owner(b, _source())
        elif versions and versions.get(_storage(t), 0):
            self.flush("alias", _source())
        entry = self._leaves.get(id(t))
        if entry is None:
            ptr = _storage(t)
            if self._pending_home(ptr):
                self.flush("alias", _source())
            leaf = Leaf(tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, ptr)
            self._leaves[id(t)] = entry = (leaf, t)
            self._leaf_storages.add(ptr)
        return entry[0]

    def refresh(self, tensors: Sequence[torch.Tensor]) -> None:
        """Flush once, before an op reads anything, when one of its inputs is stale: a flush in
        the middle of reading its inputs would leave the reads before it pointing at a graph
        that no longer exists."""
        versions = self._versions
        for t in tensors:
            b = t.__dict__.get(BINDING)
            if b is not None and b[0] == self._epoch:
                stale = bool(versions) and b[2] != versions.get(_storage(t), 0)
            elif b is not None:
                flush_owner(b, _source())  # another thread's block: its graph, not this one
                stale = False
            elif id(t) in self._leaves:
                stale = bool(versions) and versions.get(_storage(t), 0) != 0
            else:
                ptr = _storage(t)
                stale = versions.get(ptr, 0) != 0 or self._pending_home(ptr)
            if stale:
                self.flush("alias", _source())
                return

    def _pending_home(self, ptr: int) -> bool:
        """A pending node's result lands in the storage at ``ptr`` (two live storages never
        share an address, so a live holder is this very storage)."""
        holder = self._homes.get(ptr) if ptr else None
        return holder is not None and holder() is not None

    def owes_write(self, t: torch.Tensor) -> bool:
        """``t``'s memory is still to receive a value this session has recorded."""
        if BINDING in t.__dict__:
            return True
        if not self.pending or t.layout != torch.strided or t.is_nested:
            return False
        ptr = _storage(t)
        return self._pending_home(ptr) or self._versions.get(ptr, 0) != 0

    def holds_pending(self, t: torch.Tensor) -> bool:
        """Reaching ``t``'s memory now would see a value not written yet, or change one that a
        pending op (or a leaf remembered for ``t``) has yet to read."""
        return id(t) in self._leaves or self.owes_write(t)

    def before_memory_access(self, reason: str, tensors: Sequence[Any], reads_only: bool) -> bool:
        """Flush before code reaches these tensors' memory without dispatch, when it would see a
        value not written yet (or, unless ``reads_only``, change one a pending op has yet to
        read). True when it flushed."""
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        pending = self.owes_write if reads_only else self.holds_pending
        if self.passthrough or not any(pending(t) for t in tensors):
            return False
        self.flush(reason, _source(), sync=tensors)
        return True

    def use(self, t: torch.Tensor, shape: tuple[int, ...], recompute: bool = False) -> Use:
        return Use(self.read(t), IndexMap.broadcast(shape, t.shape), recompute)

    def before_write(self, t: torch.Tensor) -> None:
        """A pending op still reads ``t``'s storage as it is now: run it before ``t`` changes."""
        if _storage(t) in self._leaf_storages:
            self.flush("alias", _source())

    def node(self, kind: str, op: str, args: tuple, home: torch.Tensor, source: str, *,
             attrs: tuple = (), dims: frozenset[int] = frozenset(), record: str = "",
             kernel_kind: str = "", in_place: bool = False, eager: bool = True,
             layout: Optional[tuple[tuple[int, ...], tuple[int, ...], int]] = None) -> Node:
        """A pending node whose result lands in ``home`` (a real tensor), bound to it.
        ``layout`` is home's (shape, stride, offset) when the caller knows it already."""
        shape, stride, offset = layout or (tuple(home.shape), home.stride(), home.storage_offset())
        storage = home.untyped_storage()
        ptr = storage.data_ptr() if home.numel() else 0
        if in_place:
            self._versions[ptr] = self._versions.get(ptr, 0) + 1
        elif self._versions:
            self._versions.pop(ptr, None)  # fresh storage: a dead one's versions do not apply
        ref = weakref.ref(home)
        holder = weakref.ref(storage)
        node = Node(len(self.pending), kind, op, args, shape, home.dtype, source,
                    attrs=attrs, dims=dims, stride=stride, offset=offset,
                    record=record, kernel_kind=kernel_kind, home=ref,
                    holder=holder, storage=ptr)
        if ptr:
            self._homes[ptr] = holder
        self.pending.append(node)
        self.bind(home, node, ref)
        if eager and not self.decomposing:
            report = self.report
            report.eager_kernels += 1
            report.eager_writes += 1
            report.eager_bytes_written += node.nbytes
        return node

    def internal(self, kind: str, op: str, args: tuple, shape: tuple[int, ...], dtype: torch.dtype,
                 source: str, *, attrs: tuple = (), dims: frozenset[int] = frozenset()) -> Node:
        """A pending node no Python tensor will ever hold (a step of a decomposition)."""
        node = Node(len(self.pending), kind, op, args, shape, dtype, source, attrs=attrs, dims=dims,
                    stride=_contiguous(shape))
        self.pending.append(node)
        return node

    def count_eager(self, outputs: Sequence[torch.Tensor], op: Any = None) -> None:
        """Eager PyTorch runs one kernel per op and writes each of its outputs; the out-of-place
        form of an update (``op`` in ``COPY_THEN_UPDATE``) first copies its input whole."""
        if self.decomposing:
            return  # the decomposed op is counted once, as eager runs it
        report = self.report
        copies = getattr(op, "_overloadpacket", op).__name__ in COPY_THEN_UPDATE if op is not None else False
        report.eager_kernels += 1 + copies
        report.eager_writes += len(outputs) + copies
        nbytes = [t.numel() * t.element_size() for t in outputs]
        report.eager_bytes_written += sum(nbytes) + (nbytes[0] if copies and nbytes else 0)

    @contextlib.contextmanager
    def decomposition(self) -> Iterator[None]:
        """The ops recorded meanwhile stand for one op: eager counts it once, afterwards."""
        self.decomposing += 1
        try:
            yield
        finally:
            self.decomposing -= 1

    def mark_outputs(self, value: Any) -> None:
        """Tensors in ``value`` are the program's outputs (what ``measure``'s function returns)."""
        for t in _tensors(value):
            src = self.binding(t)
            if src is not None:
                self._outputs.add(src.root if isinstance(src, View) else src)

    def saved_for_backward(self, t: torch.Tensor) -> None:
        """Autograd saved ``t`` (a pending value): while it holds ``t``, a flush writes it."""
        self._saved.setdefault(_storage(t), []).append(weakref.ref(t))

    def after_record(self) -> None:
        if len(self.pending) >= self.max_pending:
            self.flush("pending-bound", _source())

    # -- flushes ---------------------------------------------------------------------------------

    def flush(self, reason: str, source: str, sync: Sequence[Any] = (),
              fallback_inputs: Sequence[Any] = (), always: bool = False) -> None:
        """Plan and run every pending op, write what must be written, forget the graph.
        Without pending ops nothing is recorded, unless ``always`` (a fallback is a flush point)."""
        with self.lock, self.eager():  # nothing the flush itself does is recorded or flushes
            self._flush(reason, source, sync, fallback_inputs, always)

    def _flush(self, reason: str, source: str, sync: Sequence[Any], fallback_inputs: Sequence[Any],
               always: bool) -> None:
        nodes = self.pending
        if not nodes:
            self._reset()
            if always:
                self.report.flushes.append(Flush(reason, source, 0))
            return
        alive = {n: n.storage for n in nodes if n.holder is not None and n.holder() is not None}
        saved = {ptr for ptr, refs in self._saved.items() if any(ref() is not None for ref in refs)}
        flags = Flags(
            alive=alive, sync=self._roots(sync), outputs=frozenset(self._outputs),
            fallback_inputs=self._roots(fallback_inputs),
            saved=frozenset(n for n, ptr in alive.items() if ptr in saved),
        )
        entries = list(self._leaves.values())
        report = self.report
        index = len(report.flushes)
        cached = None
        try:
            key = stream_key(self.policy, nodes, entries, flags)
            cached = PLANS.get(key)
            if cached is None:
                cached = CachedPlan(schedule.plan(nodes, flags, self.policy), tuple(nodes),
                                    tuple(leaf for leaf, _ in entries))
                PLANS.put(key, cached)
                leaves = {leaf: t for leaf, t in entries}
            else:
                leaves = cached.rebind(nodes, [t for _, t in entries])
            if self.recorder is not None:
                with _no_python_dispatch():  # the recorder reads storages: no mode may see it
                    self.recorder.flush(cached, entries)
            with torch.no_grad(), _no_python_dispatch():
                records, writes = self._runner.execute(cached.plan, leaves, len(report.kernel_records), index)
            if records and report.executor == "auto":
                report.executor = resolve_executor("auto", _device_of(leaves, cached.plan))
        finally:
            if cached is not None:
                cached.release()
            self._reset()
        report.flushes.append(Flush(reason, source, len(nodes)))
        report.kernel_records.extend(records)
        report.materialized.extend(writes)
        log.flush_ran(index, report.flushes[-1], records, writes)

    def _roots(self, tensors: Sequence[Any]) -> frozenset[Node]:
        out = set()
        for t in _tensors(list(tensors)):
            src = self.binding(t)
            if src is not None:
                out.add(src.root if isinstance(src, View) else src)
        return frozenset(out)

    def fallback(self, func, args: tuple, kwargs: dict, source: str, reason: str) -> Any:
        """Flush (virtual inputs written), run ``func`` eagerly, record it, continue lazily."""
        inputs = [a for a in _flat(list(args) + list(kwargs.values())) if isinstance(a, torch.Tensor)]
        self.flush("fallback", source, fallback_inputs=inputs, always=True)
        with self.eager():
            out = func(*args, **kwargs)
        self.ran_eagerly(func, args, kwargs, out, factory=False)
        outs = list(_tensors(out))
        name = func._overloadpacket.__name__
        report = self.report
        kernel = len(report.kernel_records)
        writes = [Write(_shape(t), dtype_name(t.dtype), t.numel() * t.element_size(), "fallback",
                        source, kernel, name) for t in outs]
        report.kernel_records.append(KernelRecord(
            kernel, "fallback", name, (name,), (source,),
            sum(t.numel() * t.element_size() for t in inputs), sum(w.bytes for w in writes),
            len(report.flushes) - 1,
        ))
        report.materialized.extend(writes)
        report.fallbacks.append(Fallback(name, source, reason))
        self.count_eager(outs, func)
        return out


    def ran_eagerly(self, func, args: tuple, kwargs: dict, out: Any, factory: bool) -> None:
        """Tell ``fusionrt.jit``'s recorder of an op that ran eagerly (it becomes a step)."""
        if self.recorder is not None:
            with _no_python_dispatch():
                self.recorder.eager(func, args, kwargs, out, factory)

    def view_fallback(self, func, base: torch.Tensor, source: str, reason: str) -> None:
        """A view fusionrt cannot map (``view(dtype)`` of a pending tensor): write ``base``
        first, so the view is of concrete data. A view launches no kernel."""
        self.flush("fallback", source, fallback_inputs=[base], always=True)
        self.report.fallbacks.append(Fallback(func._overloadpacket.__name__, source, reason))


def flush_owner(binding: tuple, source: str) -> None:
    """Write what another thread's block still owes a tensor this thread reads. The owner
    records under its lock, so the flush waits for the op it is in the middle of."""
    owner = _live.get(binding[0])
    if owner is None or owner is current():
        return  # that block has ended (the memory is written), or it is this thread's own
    if not owner.lock.acquire(timeout=FOREIGN_FLUSH_TIMEOUT_S):
        raise RuntimeError("fusionrt: a tensor pending in another thread's lazy block was read while "
                           "that thread waits on this one; call fusionrt.sync() before handing it over")
    try:
        if owner._epoch == binding[0]:
            owner.flush("thread", source)
    finally:
        owner.lock.release()


def _no_python_dispatch() -> contextlib.ExitStack:
    """Plain eager ops while a plan runs: no mode sees them (``passthrough`` would still pay a
    Python round trip through both modes for every op of every kernel)."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch._C.DisableTorchFunction())
    stack.enter_context(torch._C._DisableTorchDispatch())
    return stack


def _source() -> str:
    from .capture import user_source

    return user_source()


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.numel() else 0


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    """A nested tensor's irregular dims have no size: they read -1."""
    if not t.is_nested:
        return tuple(t.shape)
    sizes = []
    for d in range(t.dim()):
        try:
            sizes.append(t.size(d))
        except RuntimeError:
            sizes.append(-1)
    return tuple(sizes)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, n = [], 1
    for s in reversed(shape):
        strides.append(n)
        n *= max(s, 1)
    return tuple(reversed(strides))


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _device_of(leaves: dict, plan: Any) -> torch.device:
    for t in leaves.values():
        return t.device
    for k in plan.kernels:
        for n in k.outputs:
            if n.home is not None and (t := n.home()) is not None:
                return t.device
    return torch.device("cpu")
