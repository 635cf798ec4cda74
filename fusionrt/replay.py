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
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import torch

from .executors import Executor, get_executor
from .graph import Leaf, Node, Use, numel
from .plan import KernelInput, Plan
from .report import Report
from .runtime import cublaslt_matmul, extern_call, tensor_of
from .session import FlushTrace, Session, current

MAX_PROGRAMS = 64  # argument signatures remembered per function
Layout = tuple[tuple[int, ...], tuple[int, ...], int]  # shape, stride, storage offset


class NotReplayable(Exception):
    """Why a recorded call cannot be replayed; the function records on every such call."""


@dataclass
class JitStats:
    recordings: int = 0
    replays: int = 0
    last_recording: str = ""  # why the last recorded call did not replay


def jit(fn: Optional[Callable[..., Any]] = None, *, policy: str = "stream",
        executor: str = "auto") -> Any:
    """``fusionrt.jit(fn)`` or ``@fusionrt.jit(executor=...)``: a callable that behaves like
    ``fn`` and keeps the report of its last call in ``.report``."""
    if fn is None:
        return lambda f: Jitted(f, policy=policy, executor=executor)
    return Jitted(fn, policy=policy, executor=executor)


class Jitted:
    """``fn`` recorded once per argument signature and replayed while its guards hold."""

    def __init__(self, fn: Callable[..., Any], policy: str = "stream", executor: str = "auto") -> None:
        Session(policy=policy, executor=executor)  # validates both names now, not at the first call
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
        key = _guard_key(args, kwargs, tensors)
        found = self._programs.get(key) if key is not None else None
        if isinstance(found, _Program):
            result, self.report = found.run(tensors)
            self.stats.replays += 1
            return result
        return self._record(args, kwargs, key, tensors, found)

    def _record(self, args: tuple, kwargs: dict, key: Any, tensors: list[torch.Tensor],
                why_not: Optional[str]) -> Any:
        session = Session(policy=self.policy, executor=self.executor)
        session.traces = []
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
                    self._programs[key] = _Program.build(session, tensors, result)
                except NotReplayable as why:
                    self._programs[key] = str(why)
        return result


# -- guards ------------------------------------------------------------------------------------

def _guard_key(args: tuple, kwargs: dict, tensors: list[torch.Tensor]) -> Optional[tuple]:
    """What the recorded call depended on among the arguments: each tensor's type, layout,
    dtype, device, requires_grad and which arguments share storage; every other argument's value
    (floats by their bits). None when an argument is of a type whose value cannot be guarded."""
    storages: dict[int, int] = {}
    parts: list[Any] = [global_state()]

    def visit(v: Any) -> bool:
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
            return all(visit(x) for x in v)
        elif isinstance(v, dict) and all(isinstance(k, str) for k in v):
            parts.append((dict, tuple(v)))
            return all(visit(x) for x in v.values())
        else:
            return False
        return True

    if not all(visit(a) for a in args) or (kwargs and not visit(kwargs)):
        return None
    return tuple(parts)


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

class _Program:
    """One recorded call, ready to run on new arguments with the same guards.

    It runs the recorded plan the way the runtime does, minus what is the same on every call:
    no report records (the plan decides them, so every replay shares the recorded report
    object), input views computed once, and a result computed into fresh memory laid out like
    its home becomes that home instead of being copied there.
    """

    def __init__(self, plan: Plan, leaf_args: list[tuple[Leaf, int, Optional[Layout]]],
                 fresh: list[tuple], homes: dict[Node, tuple[bool, int]], output: Any, report: Report,
                 executor: str) -> None:
        self.plan = plan
        self.leaf_args = leaf_args  # each leaf the plan reads <- argument index (a view: its layout)
        self.fresh = fresh  # storages the call creates: (shape, stride, dtype, device) of each
        self.homes = homes  # node written home -> (in a fresh storage?, storage or argument index)
        self.output = output  # the result as a recipe (see _template)
        self.report = report
        self.executor = executor
        self._executors: dict[torch.device, Executor] = {}
        self._views: dict[tuple, Optional[tuple]] = {}  # (input, layout read) -> strides, offset
        self._externs = {k.extern: (*extern_call(k), _argument_builder(k.extern.args))
                         for k in plan.kernels if k.extern is not None}
        self._relaunchers: dict[int, Any] = {}  # kernel index -> its Relauncher, after one run

    @staticmethod
    def build(session: Session, tensors: list[torch.Tensor], result: Any) -> _Program:
        report = session.report
        if report.fallbacks:
            raise NotReplayable(f"fallback ({report.fallbacks[0].op}: {report.fallbacks[0].reason})")
        if [f.reason for f in report.flushes] != ["exit"] or len(session.traces or ()) != 1:
            reasons = ", ".join(f.reason for f in report.flushes) or "no ops"
            raise NotReplayable(f"flushes other than one at exit ({reasons})")
        trace: FlushTrace = session.traces[0]
        args_of: dict[int, int] = {}
        for i, t in enumerate(tensors):
            if t.numel() == 0:
                raise NotReplayable("an empty tensor argument")
            args_of.setdefault(t.untyped_storage().data_ptr(), i)

        cached = trace.plan
        leaf_args = []  # the plan reads its own leaves: the cached ones, one per leaf of this call
        for leaf, (_, t) in zip(cached.leaves, trace.leaves):
            i = args_of.get(t.untyped_storage().data_ptr())
            if i is None or t.numel() == 0:
                raise NotReplayable("reads a tensor that is not one of its arguments")
            same = t is tensors[i]
            leaf_args.append((leaf, i, None if same else (leaf.shape, leaf.stride, leaf.offset)))

        out_ptrs = {t.untyped_storage().data_ptr() for t in _tree_tensors(result)}
        for ptr in trace.flags.alive.values():
            if ptr not in args_of and ptr not in out_ptrs:
                raise NotReplayable("keeps a tensor alive that it does not return")

        fresh: list = []
        fresh_of: dict[int, int] = {}  # storage data_ptr -> index in fresh
        homes: dict[Node, tuple[bool, int]] = {}
        for w in cached.plan.writes:
            if not w.home:
                continue
            storage = w.node.holder()
            ptr = storage.data_ptr()
            if ptr in args_of:
                homes[w.node] = (False, args_of[ptr])
                continue
            if ptr not in fresh_of:
                fresh_of[ptr] = len(fresh)
                fresh.append(_allocation(cached.nodes, storage))
            homes[w.node] = (True, fresh_of[ptr])
        bases_of = {ptr: fresh[g] for ptr, g in fresh_of.items()}
        output = _template(result, tensors, args_of, fresh_of, bases_of)
        return _Program(cached.plan, leaf_args, fresh, homes, output, report, session.executor)

    def run(self, tensors: list[torch.Tensor]) -> tuple[Any, Report]:
        bases: list[Optional[torch.Tensor]] = [None] * len(self.fresh)
        leaves = {leaf: tensors[i] if layout is None else tensors[i].as_strided(*layout)
                  for leaf, i, layout in self.leaf_args}
        buffers: dict[Node, torch.Tensor] = {}
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
            for k, planned in enumerate(self.plan.kernels):
                if planned.kernel is not None:
                    kernel = planned.kernel
                    inputs = [self._input(inp, kernel.input_shape(i), leaves, buffers)
                              for i, inp in enumerate(planned.inputs)]
                    if planned.backend == "cublaslt":
                        outs = [cublaslt_matmul(kernel, inputs)]
                    else:
                        outs = self._launch(k, kernel, inputs)
                    for node, value in zip(planned.outputs, outs):
                        if value.numel() != numel(node.shape):  # a full-size value computed at reduced level
                            value = value.expand(kernel.shape)
                        self._store(node, value.reshape(node.shape), buffers, bases, tensors)
                elif planned.extern is not None:
                    node = planned.extern
                    func, kwargs, arguments = self._externs[node]
                    out = func(*arguments(leaves, buffers), **kwargs)
                    self._store(planned.outputs[0], out, buffers, bases, tensors)
                else:  # a scratch result copied home once nothing reads the old data
                    (node,) = planned.outputs
                    self._home(node, bases, tensors).copy_(buffers[node])
        return _rebuild(self.output, tensors, bases), self.report

    def _launch(self, k: int, kernel: Any, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Kernel ``k``'s outputs, computed into new tensors. Generated kernels are bound once
        and relaunched: the guards hold the inputs' layouts, so nothing else is re-examined."""
        relaunch = self._relaunchers.get(k)
        if relaunch is not None:
            return relaunch(inputs)
        bound = self._executor(inputs[0].device if inputs else _CPU).bind(kernel, inputs)
        outs = bound()
        if hasattr(bound, "relauncher"):  # the reference executor evaluates anew each time
            self._relaunchers[k] = bound.relauncher()
        return outs

    def _executor(self, device: torch.device) -> Executor:
        found = self._executors.get(device)
        if found is None:
            found = self._executors[device] = get_executor(self.executor, device)
        return found

    def _input(self, inp: KernelInput, shape: tuple[int, ...], leaves: dict[Leaf, torch.Tensor],
               buffers: dict[Node, torch.Tensor]) -> torch.Tensor:
        t = tensor_of(inp.view or inp.src, leaves, buffers)
        key = (inp, t.stride(), t.storage_offset())
        if key not in self._views:
            strides, offset = inp.map.strides(t.stride(), t.storage_offset())
            same = tuple(t.shape) == shape and t.stride() == strides and t.storage_offset() == offset
            self._views[key] = None if same else (strides, offset)
        layout = self._views[key]
        return t if layout is None else t.as_strided(shape, *layout)

    def _store(self, node: Node, value: torch.Tensor, buffers: dict[Node, torch.Tensor],
               bases: list[Optional[torch.Tensor]], tensors: list[torch.Tensor]) -> None:
        home = self.homes.get(node)
        if home is None:  # scratch, laid out like the node: views of it are read by its strides
            if value.stride() != node.stride and node.stride:
                value = torch.empty_strided(node.shape, node.stride, dtype=node.dtype,
                                            device=value.device).copy_(value)
            buffers[node] = value
            return
        is_fresh, i = home
        if (is_fresh and bases[i] is None and value.stride() == node.stride and node.offset == 0
                and value.storage_offset() == 0 and self.fresh[i][:3] == (node.shape, node.stride, node.dtype)):
            bases[i] = buffers[node] = value  # computed in place of the storage it would be copied to
            return
        target = self._home(node, bases, tensors)
        target.copy_(value)
        buffers[node] = target

    def _home(self, node: Node, bases: list[Optional[torch.Tensor]], tensors: list[torch.Tensor]) -> torch.Tensor:
        is_fresh, i = self.homes[node]
        if is_fresh:
            base = bases[i]
            if base is None:
                shape, stride, dtype, device = self.fresh[i]
                base = bases[i] = torch.empty_strided(shape, stride, dtype=dtype, device=device)
        else:
            base = tensors[i]
        if (tuple(base.shape), base.stride(), base.storage_offset()) == (node.shape, node.stride, node.offset):
            return base
        return base.as_strided(node.shape, node.stride, node.offset)


_CPU = torch.device("cpu")


def _argument_builder(args: tuple) -> Callable[[dict[Leaf, torch.Tensor], dict[Node, torch.Tensor]], list]:
    """An extern op's arguments for one call: only its tensors change between calls, so the
    rest is copied from a template (walking the whole argument tree each call cost more than
    a small convolution)."""
    template = list(args)
    slots = [(i, a) for i, a in enumerate(args) if isinstance(a, Use) or (
        isinstance(a, (list, tuple)) and any(isinstance(x, Use) for x in _flat_args(a)))]

    def build(leaves: dict[Leaf, torch.Tensor], buffers: dict[Node, torch.Tensor]) -> list:
        values = template.copy()
        for i, a in slots:
            values[i] = tensor_of(a.src, leaves, buffers) if isinstance(a, Use) else _extern_args(a, leaves, buffers)
        return values

    return build


def _flat_args(args: Any) -> list:
    if isinstance(args, (list, tuple)):
        return [x for a in args for x in _flat_args(a)]
    return [args]


def _extern_args(args: Any, leaves: dict[Leaf, torch.Tensor], buffers: dict[Node, torch.Tensor]) -> Any:
    if isinstance(args, Use):
        return tensor_of(args.src, leaves, buffers)
    if isinstance(args, (list, tuple)):
        return type(args)(_extern_args(a, leaves, buffers) for a in args)
    return args


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


def _template(value: Any, tensors: list[torch.Tensor], args_of: dict[int, int],
              fresh_of: dict[int, int], bases: dict[int, tuple]) -> Any:
    """The result as a recipe: each tensor an argument, a new storage, or a view of either."""
    if isinstance(value, torch.Tensor):
        for i, t in enumerate(tensors):
            if value is t:
                return ("arg", i, None)
        if value.numel() == 0:
            raise NotReplayable("returns an empty tensor")
        ptr = value.untyped_storage().data_ptr()
        layout = (tuple(value.shape), value.stride(), value.storage_offset())
        if ptr in args_of:
            return ("arg", args_of[ptr], layout)
        if ptr in fresh_of:
            shape, stride, dtype, _ = bases[ptr]
            same = layout == (shape, stride, 0) and value.dtype == dtype
            if value.dtype != dtype:
                raise NotReplayable("returns a reinterpreted view of a result")
            return ("fresh", fresh_of[ptr], None if same else layout)
        raise NotReplayable("returns a tensor that is neither an argument nor computed by its ops")
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return (type(value), [_template(v, tensors, args_of, fresh_of, bases) for v in value])
    if isinstance(value, dict) and type(value) is dict:
        return (dict, list(value), [_template(v, tensors, args_of, fresh_of, bases) for v in value.values()])
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("const", value)
    raise NotReplayable(f"returns a {type(value).__name__}")


def _rebuild(template: Any, tensors: list[torch.Tensor], bases: list[torch.Tensor]) -> Any:
    kind = template[0]
    if kind == "arg" or kind == "fresh":
        t = tensors[template[1]] if kind == "arg" else bases[template[1]]
        layout = template[2]
        return t if layout is None else t.as_strided(*layout)
    if kind == "const":
        return template[1]
    if kind is dict:
        return dict(zip(template[1], (_rebuild(v, tensors, bases) for v in template[2])))
    return kind(_rebuild(v, tensors, bases) for v in template[1])
