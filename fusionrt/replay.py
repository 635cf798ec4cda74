"""``fusionrt.jit``: call a function lazily once, then replay its plan without recording.

Recording costs tens of microseconds per op (a Python round trip through two dispatch modes per
op); a small program called in a loop pays that on every call even when the plan cache skips
planning. ``jit`` records the first call for given argument metadata, checks that the call is a
pure function of its tensor arguments (one flush at exit, no fallback, no host sync, reads no
tensor but its arguments, keeps nothing alive but its result), and from then on runs the cached
plan on the new arguments directly: allocate the results, launch the kernels, return. Any call
whose guards miss, or whose recorded call was not replayable, records as ``measure`` does.
docs/replay.md states what the guards cover and what they do not.
"""
from __future__ import annotations

import functools
import gc
import weakref
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any, Callable, Optional, Union

import torch

from .executors import Executor, get_executor
from .graph import Leaf, Node, View
from .plan import Plan
from .plan_cache import CachedPlan
from .report import Report
from .session import Session, current
from .steps import build_steps, scratch

MAX_PROGRAMS = 64  # argument signatures remembered per function
Layout = tuple[tuple[int, ...], tuple[int, ...], int]  # shape, stride, storage offset


class NotReplayable(Exception):
    """Why a recorded call cannot be replayed; the function records on every such call."""


@dataclass
class JitStats:
    recordings: int = 0
    replays: int = 0
    last_recording: str = ""  # why the last recorded call did not replay


def jit(fn: Optional[Callable[..., Any]] = None, *, policy: str = "speed",
        executor: str = "auto") -> Any:
    """``fusionrt.jit(fn)``, ``fusionrt.jit(module)`` or ``@fusionrt.jit(executor=...)``: a
    callable that behaves like ``fn`` and keeps the report of its last call in ``.report``. A
    module's parameters and buffers are read as arguments: each call reads the current ones."""
    if fn is None:
        return lambda f: Jitted(f, policy=policy, executor=executor)
    return Jitted(fn, policy=policy, executor=executor)


class Jitted:
    """``fn`` recorded once per argument signature and replayed while its guards hold."""

    def __init__(self, fn: Callable[..., Any], policy: str = "speed", executor: str = "auto") -> None:
        Session(policy=policy, executor=executor)  # validates both names now, not at the first call
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        if self.module is None:
            functools.update_wrapper(self, fn)
        self.fn = fn
        self.policy = policy
        self.executor = executor
        self.report: Optional[Report] = None
        self.stats = JitStats()
        self._programs: dict[Any, Union[_Program, str]] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current() is not None:  # inside a lazy block its ops join that block
            return self.fn(*args, **kwargs)
        tensors: list[torch.Tensor] = []
        if self.module is None:
            key = _guard_key(args, kwargs, tensors)
        else:  # parameters and buffers after the arguments, guarded alike, plus the mode
            state = (*self.module.parameters(), *self.module.buffers(), self.module.training)
            key = _guard_key((args, state), kwargs, tensors)
        found = self._programs.get(key) if key is not None else None
        if isinstance(found, _Program):
            return self._replay(found, tensors)
        return self._record(args, kwargs, key, tensors, found)

    def call_boxed(self, args: list[Any]) -> Any:
        """``self(*args)`` that takes the list and empties it (AOTAutograd's boxed calling
        convention, as Inductor's generated code does): a replay then holds the only reference
        the call gets to each argument and drops it after the argument's last reader, so the
        activations a backward graph receives are freed as it goes, as eager frees them."""
        if current() is not None or self.module is not None:
            return self(*args)
        tensors: list[torch.Tensor] = []
        key = _guard_key(tuple(args), {}, tensors)
        found = self._programs.get(key) if key is not None else None
        if isinstance(found, _Program):
            args.clear()
            return self._replay(found, tensors)
        return self._record(tuple(args), {}, key, tensors, found)

    def _replay(self, program: _Program, tensors: list[torch.Tensor]) -> Any:
        result, self.report = program.run(tensors)
        self.stats.replays += 1
        return result

    def _record(self, args: tuple, kwargs: dict, key: Any, tensors: list[torch.Tensor],
                why_not: Optional[str]) -> Any:
        session = Session(policy=self.policy, executor=self.executor)
        recorder = session.recorder = ProgramRecorder(tensors)
        with session:
            result = self.fn(*args, **kwargs)
            session.mark_outputs(result)
        self.report = session.report
        self.stats.recordings += 1
        if key is None:
            self.stats.last_recording = "arguments that cannot be guarded"
        elif why_not is not None:
            self.stats.last_recording = f"not replayable: {why_not}"
        else:
            self.stats.last_recording = "first call with these argument metadata"
            if len(self._programs) < MAX_PROGRAMS:
                try:
                    self._programs[key] = recorder.finish(session, result)
                except NotReplayable as why:
                    self._programs[key] = str(why)
        return result


# -- guards ------------------------------------------------------------------------------------

def _guard_key(args: tuple, kwargs: dict, tensors: list[torch.Tensor]) -> Optional[tuple]:
    """What the recorded call depended on among the arguments: each tensor's type, layout,
    dtype, device, requires_grad and which arguments share storage; every other argument's value
    (floats by their bits). None when an argument is of a type whose value cannot be guarded."""
    parts: list[Any] = [global_state()]
    storages: dict[int, int] = {}
    if not all(_guard(a, parts, storages, tensors) for a in args) or (kwargs and not _guard(kwargs, parts, storages, tensors)):
        return None
    return tuple(parts)


def _guard(v: Any, parts: list[Any], storages: dict[int, int], tensors: list[torch.Tensor]) -> bool:
    """Appends what ``v`` contributes to a guard key. A module-level function, not a closure
    that calls itself: that closure would sit in a reference cycle holding the call's tensors
    until the next full collection (a training forward's activations, for one)."""
    if isinstance(v, torch.Tensor):
        ptr = v.untyped_storage().data_ptr()
        parts.append((type(v), v.shape, v.stride(), v.storage_offset(), v.dtype, v.device,
                      v.requires_grad, storages.setdefault(ptr, len(storages))))
        tensors.append(v)
    elif v is None or isinstance(v, (bool, int, str)):
        parts.append((type(v), v))
    elif isinstance(v, float):
        parts.append((float, v.hex()))
    elif isinstance(v, (tuple, list)):
        parts.append((type(v), len(v)))
        return all(_guard(x, parts, storages, tensors) for x in v)
    elif isinstance(v, dict) and all(isinstance(k, str) for k in v):
        parts.append((dict, tuple(v)))
        return all(_guard(x, parts, storages, tensors) for x in v.values())
    else:
        return False
    return True


def global_state() -> tuple:
    """The state outside the arguments that changes what a recorded call computes: grad and
    inference mode, autocast (ops reach the capture already cast), the default dtype (factories
    and Python scalars), and the switches that pick matmul/convolution algorithms. Read through
    torch._C's getters: the torch.backends attributes cost ~1 us each, on every jit call."""
    C = torch._C
    autocast = C._is_any_autocast_enabled() and (
        tuple((torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")),
        torch.is_autocast_cache_enabled())
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), autocast, torch.get_default_dtype(),
            C._get_deterministic_algorithms(), C._get_float32_matmul_precision(), C._get_cublas_allow_tf32(),
            C._get_cublas_allow_fp16_reduced_precision_reduction(),
            C._get_cublas_allow_bf16_reduced_precision_reduction(), C._get_cudnn_enabled(),
            C._get_cudnn_allow_tf32(), C._get_cudnn_deterministic(), C._get_cudnn_benchmark())


# -- the replayable program --------------------------------------------------------------------

# Where a replayed tensor's storage comes from: an argument ("arg"), a storage the call creates
# ("fresh"), or a constant the call made outside dispatch ("const": torch.tensor(3.0)); its index.
Slot = tuple[str, int]
Ref = tuple[Slot, Optional[Layout], torch.dtype]  # a tensor as a slot and, unless whole, a layout
REPLAYABLE_FLUSHES = {"exit", "fallback", "alias", "pending-bound"}  # not host syncs: data-dependent
MAX_CONSTANT_BYTES = 1 << 20  # a constant is copied when read; a larger one is not replayed


@dataclass(frozen=True)
class _Read:
    """A tensor argument of an op run eagerly: read from its slot at each replay."""

    ref: Ref


class ProgramRecorder:
    """Turns one recorded call into a ``_Program`` as it runs: each flush and each op run
    eagerly (a fallback, a factory) becomes a step, every tensor a step reads is resolved to an
    argument, a storage an earlier step made, or a constant, the moment it is read (holding
    nothing but weak references, so what the call keeps alive is still its own). A tensor of
    none of these that is still alive when the call returns is a global, a closure or a module's
    parameter: its value may change between calls, so the call is not replayable."""

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        self.why_not: Optional[str] = None
        self.steps: list[Any] = []
        self.fresh: list[tuple] = []  # storages the call creates: (shape, stride, dtype, device)
        self._holders: list[weakref.ref] = []  # each fresh storage, to see what outlives the call
        self._made_by: list[str] = []  # what made each fresh storage, for the reason a call is refused
        self.constants: list[Optional[torch.Tensor]] = []  # a copy of each constant's storage
        self._constant_holders: list[weakref.ref] = []
        self._slots: dict[int, tuple[Slot, weakref.ref]] = {}  # storage data_ptr -> slot, its storage
        self.args = tensors
        self._arg_layouts = [_layout(t) for t in tensors]
        for i, t in enumerate(tensors):
            if t.numel():  # an empty one holds no data (and may share its null pointer with others)
                self._slots.setdefault(_ptr(t), (("arg", i), weakref.ref(t.untyped_storage())))

    def refuse(self, why: str) -> None:
        self.why_not = self.why_not or why

    # -- events (called by the session while the call records) -----------------------------

    def flush(self, cached: CachedPlan, entries: list[tuple[Leaf, torch.Tensor]]) -> None:
        """A flush about to run ``cached`` over the leaves ``entries`` (this flush's own)."""
        if self.why_not is not None:
            return
        try:
            # the plan reads its own leaves: the cached ones, one per leaf of this flush
            leaf_refs = [(leaf, self._ref(t)) for leaf, (_, t) in zip(cached.leaves, entries)]
            homes: dict[Node, Slot] = {}
            for w in cached.plan.writes:
                if w.home:
                    storage = w.node.holder()
                    found = self._slots.get(storage.data_ptr())
                    if found is not None and found[1]() is storage:
                        homes[w.node] = found[0]
                    else:
                        homes[w.node] = self._new_slot(storage, _allocation(cached.nodes, storage),
                                                       f"{w.node.record or w.node.op} at {w.node.source}")
            self.steps.append(_FlushStep(cached.plan, leaf_refs, homes))
        except NotReplayable as why:
            self.refuse(str(why))

    def eager(self, func: Any, args: tuple, kwargs: dict, out: Any, factory: bool) -> None:
        """An op run eagerly: replayed by calling it again on the same slots."""
        if self.why_not is not None:
            return
        init = _LIKE_FACTORIES.get(func)
        if init is not None and out.numel():  # its argument is read for its layout only, which `out` has
            t = out
            layout = (tuple(t.shape), t.stride(), t.dtype, t.device)
            self.steps.append(_LikeStep(init, args[1:], layout, self._new_slot(t.untyped_storage(), layout,
                                                                                func._overloadpacket.__name__)))
            return
        try:
            template = _eager_template((args, kwargs), self)
            outs: list[Optional[Slot]] = []  # None: an input written in place, or an empty tensor
            for t in _tree_tensors(out):
                storage = t.untyped_storage()
                found = self._slots.get(storage.data_ptr()) if t.numel() else None
                if t.numel() == 0 or (found is not None and found[1]() is storage):
                    outs.append(None)  # an empty tensor is never read: a later step reading it refuses
                elif t.storage_offset() != 0 or storage.nbytes() < t.numel() * t.element_size():
                    raise NotReplayable(f"{func._overloadpacket.__name__} returns a view")
                else:
                    outs.append(self._new_slot(storage, (tuple(t.shape), t.stride(), t.dtype, t.device),
                                               func._overloadpacket.__name__))
            self.steps.append(_EagerStep(func, template, outs))
        except NotReplayable as why:
            self.refuse(str(why))

    # -- the end of the call --------------------------------------------------------------------

    def finish(self, session: Session, result: Any) -> _Program:
        report = session.report
        odd = [f.reason for f in report.flushes if f.reason not in REPLAYABLE_FLUSHES]
        if odd:
            self.refuse(f"host syncs ({', '.join(dict.fromkeys(odd))})")
        if any(_layout(t) != layout for t, layout in zip(self.args, self._arg_layouts)):
            self.refuse("changes an argument's shape or strides")
        if self.why_not is not None:
            raise NotReplayable(self.why_not)
        if not self.steps:
            raise NotReplayable("no ops")
        out_ptrs = {_ptr(t) for t in _tree_tensors(result)}
        if any(h() is not None and h().data_ptr() not in out_ptrs for h in (*self._holders, *self._constant_holders)):
            gc.collect()  # frames caught in a reference cycle (hooks, closures) hold tensors until collected
        for holder, made_by, (shape, _, dtype, _) in zip(self._holders, self._made_by, self.fresh):
            storage = holder()
            if storage is not None and storage.data_ptr() not in out_ptrs:
                raise NotReplayable(f"keeps a tensor alive that it does not return ({tuple(shape)} "
                                    f"{str(dtype).removeprefix('torch.')}, made by {made_by})")
        for holder, copy in zip(self._constant_holders, self.constants):
            if holder() is not None:
                raise NotReplayable("reads a tensor that is not one of its arguments (a global, a closure "
                                    "or a module's parameter: pass it, or jit the module)")
            if copy is None:
                raise NotReplayable("reads a large tensor it made outside dispatch")
        return _Program(self.steps, self.fresh, self.constants, self._template(result), report,
                        session.executor)

    # -- slots ------------------------------------------------------------------------------------

    def _new_slot(self, storage: Any, allocation: tuple, made_by: str) -> Slot:
        slot = ("fresh", len(self.fresh))
        self.fresh.append(allocation)
        self._made_by.append(made_by)
        self._holders.append(weakref.ref(storage))
        self._slots[storage.data_ptr()] = (slot, self._holders[-1])
        return slot

    def _ref(self, t: torch.Tensor) -> Ref:
        if t.numel() == 0:
            return self._empty(t), None, t.dtype
        storage = t.untyped_storage()
        found = self._slots.get(storage.data_ptr())
        slot = found[0] if found is not None and found[1]() is storage else self._constant(t, storage)
        kind, i = slot
        if kind == "arg" and t is self.args[i]:
            return slot, None, t.dtype
        base_dtype = {"arg": lambda: self.args[i].dtype, "const": lambda: self.constants[i].dtype,
                      "fresh": lambda: self.fresh[i][2]}[kind]()
        if base_dtype != t.dtype:
            raise NotReplayable("reads a tensor's bytes as another dtype")
        return slot, (tuple(t.shape), t.stride(), t.storage_offset()), t.dtype

    def _constant(self, t: torch.Tensor, storage: Any) -> Slot:
        """A storage that is neither an argument nor made by a step: a copy of it, in case it
        was made outside dispatch during the call (``finish`` decides)."""
        copy = None
        if storage.nbytes() <= MAX_CONSTANT_BYTES and storage.nbytes() % t.element_size() == 0:
            copy = torch.empty(0, dtype=t.dtype, device=t.device).set_(
                storage.clone(), 0, (storage.nbytes() // t.element_size(),), (1,))
        slot = ("const", len(self.constants))
        self.constants.append(copy)
        self._constant_holders.append(weakref.ref(storage))
        self._slots[storage.data_ptr()] = (slot, self._constant_holders[-1])
        return slot

    def _empty(self, t: torch.Tensor) -> Slot:
        """An empty tensor holds no data: a new one of its layout stands for it in each call (a
        new one, so that no caller can change what a later call returns)."""
        slot = ("fresh", len(self.fresh))
        self.fresh.append((tuple(t.shape), t.stride(), t.dtype, t.device))
        self._made_by.append("an empty tensor")
        self._holders.append(_held_by_no_one)
        return slot

    def _template(self, value: Any) -> Any:
        """The result as a recipe: each tensor a slot (with a layout unless it is the argument)."""
        if isinstance(value, torch.Tensor):
            try:
                return ("tensor", self._ref(value))
            except NotReplayable:
                raise NotReplayable("returns a tensor that is neither an argument nor computed by its ops") from None
        if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
            return (type(value), [self._template(v) for v in value])
        if isinstance(value, dict) and type(value) is dict:
            return (dict, list(value), [self._template(v) for v in value.values()])
        if value is None or isinstance(value, (bool, int, float, str)):
            return ("const", value)
        raise NotReplayable(f"returns a {type(value).__name__}")


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _layout(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset()


def _held_by_no_one() -> None:
    """The holder of a storage no one outside the program can hold (see ``finish``)."""
    return None


def _eager_template(value: Any, recorder: ProgramRecorder) -> Any:
    if isinstance(value, torch.Tensor):
        return _Read(recorder._ref(value))
    if isinstance(value, (list, tuple)):
        return type(value)(_eager_template(v, recorder) for v in value)
    if isinstance(value, dict):
        return {k: _eager_template(v, recorder) for k, v in value.items()}
    return value


class _Program:
    """One recorded call, ready to run on new arguments with the same guards: its steps (plans
    and ops run eagerly) in order, over slots that are the arguments or storages it creates."""

    def __init__(self, steps: list[Any], fresh: list[tuple], constants: list[torch.Tensor],
                 output: Any, report: Report, executor: str) -> None:
        self.steps = steps
        self.fresh = fresh
        self.constants = constants
        self.output = output
        self.report = report
        self.executor = executor
        self._executors: dict[torch.device, Executor] = {}
        self.frees = _last_uses(steps, output)  # step index -> slots no later step touches

    def run(self, tensors: list[torch.Tensor]) -> tuple[Any, Report]:
        bases: list[Optional[torch.Tensor]] = [None] * len(self.fresh)
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
            for step, done in zip(self.steps, self.frees):
                step.run(self, tensors, bases)
                for kind, i in done:  # as eager frees an intermediate once Python drops it
                    if kind == "fresh":
                        bases[i] = None
                    else:  # an argument: freed here only where the caller handed over the list
                        tensors[i] = None
        return self._rebuild(self.output, tensors, bases), self.report

    def executor_for(self, device: torch.device) -> Executor:
        found = self._executors.get(device)
        if found is None:
            found = self._executors[device] = get_executor(self.executor, device)
        return found

    def base(self, slot: Slot, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> torch.Tensor:
        kind, i = slot
        if kind == "arg":
            return tensors[i]
        if kind == "const":
            return self.constants[i]
        base = bases[i]
        if base is None:
            shape, stride, dtype, device = self.fresh[i]
            base = bases[i] = torch.empty_strided(shape, stride, dtype=dtype, device=device)
        return base

    def tensor(self, ref: Ref, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> torch.Tensor:
        slot, layout, _ = ref
        t = self.base(slot, tensors, bases)
        if layout is None or (tuple(t.shape), t.stride(), t.storage_offset()) == layout:
            return t
        return t.as_strided(*layout)

    def _rebuild(self, template: Any, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> Any:
        kind = template[0]
        if kind == "tensor":
            return self.tensor(template[1], tensors, bases)
        if kind == "const":
            return template[1]
        if kind is dict:
            return dict(zip(template[1], (self._rebuild(v, tensors, bases) for v in template[2])))
        return kind(self._rebuild(v, tensors, bases) for v in template[1])


def _last_uses(steps: list[Any], output: Any) -> list[list[Slot]]:
    """For each step, the argument and fresh slots it is the last to touch (the result's are kept)."""
    kept = set(_template_slots(output, result=True))
    last: dict[Slot, int] = {}
    for j, step in enumerate(steps):
        for slot in step.slots():
            if slot[0] != "const":
                last[slot] = j
    frees: list[list[Slot]] = [[] for _ in steps]
    for slot, j in last.items():
        if slot not in kept:
            frees[j].append(slot)
    return frees


def _template_slots(value: Any, result: bool = False) -> Iterator[Slot]:
    """The slots a template reads: an eager step's arguments, or (``result``) the result's recipe."""
    if isinstance(value, _Read):
        yield value.ref[0]
    elif result and isinstance(value, tuple) and len(value) == 2 and value[0] == "tensor":
        yield value[1][0]
    elif isinstance(value, dict):
        for v in value.values():
            yield from _template_slots(v, result)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _template_slots(v, result)


aten = torch.ops.aten
# A ``*_like`` factory is new memory in its argument's layout, then filled as ATen fills it
# (``rand_like`` is ``empty_like(self).uniform_(0, 1)``): the argument is read for its layout
# only, so a replay allocates that layout and fills it, reading no tensor at all.
_LIKE_FACTORIES: dict[Any, Callable[..., Any]] = {
    aten.empty_like.default: lambda t: t,
    aten.zeros_like.default: lambda t: t.zero_(),
    aten.ones_like.default: lambda t: t.fill_(1),
    aten.full_like.default: lambda t, value: t.fill_(value),
    aten.rand_like.default: lambda t: t.uniform_(0, 1),
    aten.randn_like.default: lambda t: t.normal_(0, 1),
    aten.randint_like.default: lambda t, high: t.random_(0, high),
    aten.randint_like.low_dtype: lambda t, low, high: t.random_(low, high),
}


class _LikeStep:
    """A ``*_like`` factory (see ``_LIKE_FACTORIES``), its result allocated in the recorded layout."""

    def __init__(self, init: Callable[..., Any], args: tuple, layout: tuple, slot: Slot) -> None:
        self.init, self.args, self.layout, self.slot = init, args, layout, slot

    def slots(self) -> Iterator[Slot]:
        yield self.slot

    def run(self, program: _Program, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> None:
        shape, stride, dtype, device = self.layout
        bases[self.slot[1]] = self.init(torch.empty_strided(shape, stride, dtype=dtype, device=device), *self.args)


class _EagerStep:
    """An op the recording ran eagerly (a fallback, a factory), called again on its slots."""

    def __init__(self, func: Any, template: Any, outs: list[Optional[Slot]]) -> None:
        self.func = func
        self.template = template
        self.outs = outs

    def slots(self) -> Iterator[Slot]:
        yield from _template_slots(self.template)
        yield from (slot for slot in self.outs if slot is not None)

    def run(self, program: _Program, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> None:
        args, kwargs = self._arguments(self.template, program, tensors, bases)
        for slot, t in zip(self.outs, _tree_tensors(self.func(*args, **kwargs))):
            if slot is not None:
                bases[slot[1]] = t

    def _arguments(self, value: Any, program: _Program, tensors: list[torch.Tensor],
                   bases: list[Optional[torch.Tensor]]) -> Any:
        if isinstance(value, _Read):
            return program.tensor(value.ref, tensors, bases)
        if isinstance(value, (list, tuple)):
            return type(value)(self._arguments(v, program, tensors, bases) for v in value)
        if isinstance(value, dict):
            return {k: self._arguments(v, program, tensors, bases) for k, v in value.items()}
        return value


def _last_readers(plan: Plan) -> list[list[Node]]:
    """For each kernel, the nodes it is the last to produce or read."""
    last: dict[Node, int] = {}
    for k, planned in enumerate(plan.kernels):
        for node in planned.outputs:
            last[node] = k
        for src in planned.reads():
            root = src.root if isinstance(src, View) else src
            if isinstance(root, Node):
                last[root] = k
    drops: list[list[Node]] = [[] for _ in plan.kernels]
    for node, k in last.items():
        drops[k].append(node)
    return drops


class _FlushStep:
    """One flush's plan, run through the steps the runtime runs it with, minus what is the same
    on every call: no report records (the plan decides them, so every replay shares the
    recorded report object), and each buffer dropped after the last kernel that reads it."""

    def __init__(self, plan: Plan, leaf_refs: list[tuple[Leaf, Ref]], homes: dict[Node, Slot]) -> None:
        self.plan = plan
        self.leaf_refs = leaf_refs  # each leaf the plan reads <- its slot (and layout)
        self.homes = homes  # node written home -> its slot
        self.steps = build_steps(plan)
        self._drops = _last_readers(plan)  # kernel -> nodes whose buffers no later kernel reads

    def slots(self) -> Iterator[Slot]:
        yield from (ref[0] for _, ref in self.leaf_refs)
        yield from self.homes.values()

    def run(self, program: _Program, tensors: list[torch.Tensor], bases: list[Optional[torch.Tensor]]) -> None:
        env = _Replay(self, program, tensors, bases)
        buffers = env.buffers
        for step, drops in zip(self.steps, self._drops):
            step.bind(env)[0]()
            for node in drops:  # scratch goes as soon as nothing reads it
                buffers.pop(node, None)


class _Replay:
    """Where a replayed flush finds its tensors: leaves and homes are slots of the call. A home
    in a storage the call creates is allocated when first written, so a result computed there
    is its home, not a copy of it; the result torch allocates for an extern op becomes its
    scratch, or such a home, when laid out like it."""

    replays = True

    def __init__(self, flush: _FlushStep, program: _Program, tensors: list[torch.Tensor],
                 bases: list[Optional[torch.Tensor]]) -> None:
        self.leaves = {leaf: program.tensor(ref, tensors, bases) for leaf, ref in flush.leaf_refs}
        self.buffers: dict[Node, torch.Tensor] = {}
        self.executor = program.executor_for
        self.homes = flush.homes
        self.program, self.tensors, self.bases = program, tensors, bases

    def destination(self, node: Node, home: bool, device: torch.device) -> torch.Tensor:
        if not home:
            return scratch(node, device)
        base = self.program.base(self.homes[node], self.tensors, self.bases)
        if (tuple(base.shape), base.stride(), base.storage_offset()) == (node.shape, node.stride, node.offset):
            return base
        return base.as_strided(node.shape, node.stride, node.offset)

    def adopts(self, node: Node, home: bool) -> bool:
        if not home:
            return True
        kind, i = self.homes[node]
        return kind == "fresh" and self.bases[i] is None and node.offset == 0 and (
            self.program.fresh[i][:3] == (node.shape, node.stride, node.dtype))

    def adopt(self, node: Node, home: bool, value: torch.Tensor) -> None:
        if (value.stride() != node.stride and node.stride) or (home and value.storage_offset() != 0):
            self.buffers[node] = self.destination(node, home, value.device).copy_(value)
            return
        if home:
            self.bases[self.homes[node][1]] = value
        self.buffers[node] = value


def _allocation(nodes: tuple[Node, ...], storage: Any) -> tuple:
    """How to allocate a storage the call created: like the node that created it, which must
    span all of it (a storage made by a factory and only partly overwritten is not replayable)."""
    creator = next(n for n in nodes if n.holder is not None and n.holder() is storage)
    span = 1 + sum((n - 1) * s for n, s in zip(creator.shape, creator.stride))
    if creator.offset != 0 or span * creator.dtype.itemsize != storage.nbytes():
        raise NotReplayable("writes into part of a tensor it created without recording")
    return creator.shape, creator.stride, creator.dtype, storage.device


def _tree_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tree_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tree_tensors(v)]
    return []
