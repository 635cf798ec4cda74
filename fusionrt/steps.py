"""Launch steps: how each planned kernel runs, shared by a plan's first run and its replays.

``build_steps`` turns each kernel of a plan into a step, found in a registry by the kernel's type
and backend (as Inductor registers a scheduling backend per device). A step is bound to an
``Env``, which says where this run's tensors are, and returns a call that only launches: a first
run binds every step before it runs any (``Runner.bind``), a replay binds and runs them one by one
so that it can drop each buffer after its last reader. Either way each result is written straight
into its destination, its home or scratch laid out like it, so a materialized write is one pass
over memory: only a result that would overwrite data the kernel still reads is computed aside and
copied after it, and in a replay the result torch allocates for an extern op may become its
destination where nothing is allocated yet.

A step decides at its first bind which results go aside and, in a replay, keeps the generated
kernel's launch: the runtime builds new steps for every flush, and a replay's guards hold every
layout and which tensors share storage, so what held at the first bind holds at every later one.
From then on a compiled kernel is launched over addresses (``_ByAddress``): a training step
launches hundreds of kernels, and making a view per input cost more than the launch.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Protocol

import torch

from .executors import Executor
from .graph import Leaf, Node, Use, View, numel
from .kernel_ir import MatmulKernel
from .plan import CopyHome, ExternLaunch, FusedLaunch, KernelInput, Plan, writes_of

Bound = tuple[Callable[[], Any], Sequence[torch.Tensor]]  # the launch, and the tensors it reads


class Env(Protocol):
    """Where one run of a plan finds its tensors."""

    leaves: Mapping[Leaf, torch.Tensor]
    buffers: dict[Node, torch.Tensor]  # each result computed so far, in its destination
    replays: bool  # the same steps are bound again at every call: keep what relaunches a kernel

    def destination(self, node: Node, home: bool, device: torch.device) -> torch.Tensor:
        """Where ``node`` is written: its home, or scratch in its layout (views of it are read by
        their strides relative to that layout)."""
        ...

    def executor(self, device: torch.device) -> Executor:
        ...

    def adopts(self, node: Node, home: bool) -> bool:
        """New memory that torch allocates for ``node`` may become its destination: nothing is
        allocated there yet, and the step runs as soon as it is bound (a replay)."""
        ...

    def adopt(self, node: Node, home: bool, value: torch.Tensor) -> None:
        """``value`` (new memory, where ``adopts``) as ``node``'s result: its destination when
        laid out like it, else copied there."""
        ...


class Step(Protocol):
    def bind(self, env: Env) -> Bound:
        ...


_STEPS: dict[tuple[type, str], Callable[[Any, frozenset[Node]], Step]] = {}


def register(kind: type, *backends: str) -> Callable[[Any], Any]:
    """Make the decorated class the step of planned kernels of type ``kind`` run by ``backends``."""

    def add(step: Any) -> Any:
        for backend in backends:
            _STEPS[kind, backend] = step
        return step

    return add


def build_steps(plan: Plan) -> list[Step]:
    """One step per kernel of ``plan``, in order."""
    writes = writes_of(plan)
    steps = []
    for k, planned in enumerate(plan.kernels):
        home = frozenset(w.node for w in writes.get(k, []) if w.home)
        steps.append(_STEPS[type(planned), planned.backend](planned, home))
    return steps


class _KernelStep:
    """A ``FusedLaunch``: its inputs viewed into the kernel's space."""

    def __init__(self, planned: FusedLaunch, home: frozenset[Node]) -> None:
        self.planned = planned
        self.home = home
        self.shapes = [planned.kernel.input_shape(i) for i in range(len(planned.inputs))]
        self._views: dict[tuple, Optional[tuple]] = {}  # (input, layout read) -> strides, offset

    def inputs(self, env: Env) -> list[torch.Tensor]:
        return [self._view(inp, shape, env) for inp, shape in zip(self.planned.inputs, self.shapes)]

    def _view(self, inp: KernelInput, shape: tuple[int, ...], env: Env) -> torch.Tensor:
        t = tensor_of(inp.view or inp.src, env.leaves, env.buffers)
        key = (inp, t.stride(), t.storage_offset())
        if key not in self._views:
            strides, offset = inp.map.strides(t.stride(), t.storage_offset())
            same = tuple(t.shape) == shape and t.stride() == strides and t.storage_offset() == offset
            self._views[key] = None if same else (strides, offset)
        layout = self._views[key]
        return t if layout is None else t.as_strided(shape, *layout)


@register(FusedLaunch, "generated", "template")
class FusedStep(_KernelStep):
    """A generated kernel, run by the session's executor. The results from the first one it
    cannot write in place on (see ``_clobbers``, or a full-size value computed at reduced level)
    are computed aside and copied after the kernel, in output order."""

    def __init__(self, planned: FusedLaunch, home: frozenset[Node]) -> None:
        super().__init__(planned, home)
        self._aside: Optional[int] = None  # the first output computed aside (len(outputs): none)
        self._relaunch: Any = None
        self._by_address: Optional[_ByAddress] = None

    def bind(self, env: Env) -> Bound:
        if self._by_address is not None and self._by_address.launch.ready():
            bound = self._by_address.bind(env)
            if bound is not None:
                return bound
        planned, kernel = self.planned, self.planned.kernel
        inputs = self.inputs(env)
        device = inputs[0].device if inputs else _device(planned.outputs)
        targets = []
        for node in planned.outputs:
            target = env.buffers[node] = env.destination(node, node in self.home, device)
            targets.append(target)
        if self._aside is None:
            self._aside = next((j for j, (node, target) in enumerate(zip(planned.outputs, targets))
                                if numel(kernel.output_shape(j)) != numel(node.shape)
                                or _clobbers(target, inputs + targets[:j])), len(targets))
        aside = self._aside
        outputs = [_viewed_as(t, kernel.output_shape(j)) if j < aside else None for j, t in enumerate(targets)]
        compute = self._launch(env, device, inputs, outputs)
        if aside == len(targets):
            if self._relaunch is not None and self._by_address is None:
                self._by_address = _ByAddress.of(self, env, inputs, device)
            return compute, inputs

        def compute_and_copy() -> None:
            results = compute()
            for j in range(aside, len(targets)):
                value, target = results[j], targets[j]
                if value.numel() != target.numel():
                    value = value.expand(kernel.shape)
                target.copy_(_viewed_as(value, tuple(target.shape)))

        return compute_and_copy, inputs

    def _launch(self, env: Env, device: torch.device, inputs: list[torch.Tensor],
                outputs: list[Optional[torch.Tensor]]) -> Callable[[], list[torch.Tensor]]:
        """The executor's bound kernel; in a replay, a generated kernel is bound once and then
        relaunched over the new tensors (its guards hold their layouts)."""
        if self._relaunch is not None:
            return functools.partial(self._relaunch, inputs, outputs)
        bound = env.executor(device).bind(self.planned.kernel, inputs, outputs)
        if env.replays and hasattr(bound, "relauncher"):  # the reference executor evaluates anew
            self._relaunch = bound.relauncher()
        return bound


class _ByAddress:
    """A replayed ``FusedStep`` launched over addresses: each input is read at the byte offset
    from the tensor it is viewed from that the first replay found, so no view is made. A replay's
    guards fix every layout; where one differs anyway (or an address is less aligned than the
    kernel was compiled for) ``bind`` returns None and the step binds as before."""

    __slots__ = ("reads", "outputs", "launch", "device")

    def __init__(self, reads: list[tuple[Any, bool, tuple, int]], outputs: list[tuple[Node, bool]],
                 launch: Any, device: torch.device) -> None:
        self.reads, self.outputs, self.launch, self.device = reads, outputs, launch, device

    @classmethod
    def of(cls, step: FusedStep, env: Env, inputs: list[torch.Tensor], device: torch.device) -> Optional[_ByAddress]:
        launch = step._relaunch.by_address()
        if launch is None:
            return None
        reads = []
        for inp, view in zip(step.planned.inputs, inputs):
            src = inp.view or inp.src
            base = src.root if isinstance(src, View) else src
            t = env.leaves[base] if isinstance(base, Leaf) else env.buffers[base]
            if t.untyped_storage().data_ptr() != view.untyped_storage().data_ptr():
                return None
            delta = (view.storage_offset() - t.storage_offset()) * view.element_size()
            reads.append((base, isinstance(base, Leaf), (t.stride(), t.storage_offset()), delta))
        return cls(reads, [(node, node in step.home) for node in step.planned.outputs], launch, device)

    def bind(self, env: Env) -> Optional[Bound]:
        leaves, buffers = env.leaves, env.buffers
        addresses = []
        for base, is_leaf, layout, delta in self.reads:
            t = leaves[base] if is_leaf else buffers[base]
            if (t.stride(), t.storage_offset()) != layout:
                return None
            addresses.append(t.data_ptr() + delta)
        for node, home in self.outputs:
            target = buffers[node] = env.destination(node, home, self.device)
            addresses.append(target.data_ptr())
        if any(aligned and address % 16 for address, aligned in zip(addresses, self.launch.aligned)):
            return None
        return functools.partial(self.launch, addresses), ()


@register(FusedLaunch, "cublaslt")
class CublasLtStep(_KernelStep):
    """A matmul kernel the planner gave to cuBLASLt (see ``backends.cublaslt_activation``)."""

    def __init__(self, planned: FusedLaunch, home: frozenset[Node]) -> None:
        super().__init__(planned, home)
        self._aside: Optional[bool] = None

    def bind(self, env: Env) -> Bound:
        kernel = self.planned.kernel
        inputs = self.inputs(env)
        (node,) = self.planned.outputs
        target = env.buffers[node] = env.destination(node, node in self.home, inputs[0].device)
        if self._aside is None:
            self._aside = _clobbers(target, inputs) or not target.is_contiguous()
        if self._aside:
            return (lambda: target.copy_(cublaslt_matmul(kernel, inputs))), inputs
        return functools.partial(cublaslt_matmul, kernel, inputs, target), inputs


@register(ExternLaunch, "torch")
class ExternStep:
    """torch's kernel: its result becomes the destination where nothing is allocated there yet
    (an ``out=`` variant may compute aside and copy, as convolution's does), else it writes
    through its ``out=`` variant straight into the destination. Only the tensors among its
    arguments change between runs, so the rest is copied from a template (walking the whole
    argument tree each call cost more than a small convolution)."""

    def __init__(self, planned: ExternLaunch, home: frozenset[Node]) -> None:
        self.planned = planned
        self.home = home
        self.func, self.attrs = extern_call(planned)
        self.out_variant = getattr(getattr(self.func, "overloadpacket", None), "out", None)
        args = planned.op.args
        self.template = list(args)
        self.slots = [(i, a) for i, a in enumerate(args) if _reads_tensor(a)]
        self._aside: Optional[bool] = None

    def bind(self, env: Env) -> Bound:
        read: list[torch.Tensor] = []
        args = self.template.copy()
        for i, a in self.slots:
            args[i] = _resolve(a, env, read)
        (result,) = self.planned.outputs
        home = result in self.home
        func, attrs = self.func, self.attrs
        if env.adopts(result, home):  # torch's own result is the destination: no copy, whatever the op

            def compute_and_adopt() -> None:
                env.adopt(result, home, func(*args, **attrs))

            return compute_and_adopt, read
        device = read[0].device if read else _device((self.planned.op,))
        target = env.buffers[result] = env.destination(result, home, device)
        if self._aside is None:
            self._aside = self.out_variant is None or _clobbers(target, read)
        if not self._aside:
            return functools.partial(self.out_variant, *args, **attrs, out=target), read

        def compute_and_copy() -> None:
            target.copy_(func(*args, **attrs))

        return compute_and_copy, read


@register(CopyHome, "torch")
class CopyStep:
    """A result computed into scratch, copied home once nothing reads the old data."""

    def __init__(self, planned: CopyHome, home: frozenset[Node]) -> None:
        (self.node,) = planned.outputs

    def bind(self, env: Env) -> Bound:
        scratch = env.buffers[self.node]
        return functools.partial(env.destination(self.node, True, scratch.device).copy_, scratch), [scratch]


def _reads_tensor(arg: Any) -> bool:
    if isinstance(arg, (list, tuple)):
        return any(_reads_tensor(a) for a in arg)
    return isinstance(arg, Use)


def _resolve(arg: Any, env: Env, read: list[torch.Tensor]) -> Any:
    """An extern argument with each ``Use`` replaced by its tensor (appended to ``read``)."""
    if isinstance(arg, Use):
        t = tensor_of(arg.src, env.leaves, env.buffers)
        read.append(t)
        return t
    if isinstance(arg, (list, tuple)):
        return type(arg)(_resolve(a, env, read) for a in arg)
    return arg


def scratch(node: Node, device: torch.device) -> torch.Tensor:
    """New memory laid out like ``node``'s home."""
    return torch.empty_strided(node.shape, node.stride, dtype=node.dtype, device=device)


def cublaslt_matmul(kernel: MatmulKernel, inputs: list[torch.Tensor], out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``act(a @ b + bias)`` through torch's ``_addmm_activation``: on CUDA one cuBLAS kernel
    with the bias and activation in its epilogue; elsewhere addmm, then the activation."""
    a, b, bias = inputs
    gelu = kernel.epilogue.instrs[-1].op == "gelu"
    row = bias[0]  # the bias input is broadcast over the rows: its first row is the vector
    if out is None:
        return torch._addmm_activation(row, a, b, use_gelu=gelu)
    return torch._addmm_activation(row, a, b, use_gelu=gelu, out=out)


def extern_call(planned: ExternLaunch) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    """The torch function and keyword arguments that compute an extern kernel's result from its
    op's arguments: the op itself, or the convolution with its ReLU fused."""
    attrs = dict(planned.op.attrs)
    func = attrs.pop("func")
    if len(planned.nodes) > 1:  # the planner fuses only a ReLU after a convolution
        return conv_relu, attrs
    return func, attrs


def conv_relu(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: Any, padding: Any,
              dilation: Any, transposed: bool, output_padding: Any, groups: int) -> torch.Tensor:
    """``relu(convolution(...))`` in one cuDNN kernel where cuDNN fuses it (2-d, not transposed,
    half, bfloat16 or float32 on CUDA); elsewhere the convolution, then an in-place ReLU."""
    if (input.is_cuda and not transposed and input.dim() == 4 and torch.backends.cudnn.enabled
            and input.dtype in (torch.float16, torch.bfloat16, torch.float32)
            and hasattr(torch, "cudnn_convolution_relu") and torch.backends.cudnn.is_available()):
        return torch.cudnn_convolution_relu(input, weight, bias, stride, padding, dilation, groups)
    return torch.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                             groups).relu_()


def tensor_of(src: Any, leaves: Mapping[Leaf, torch.Tensor], buffers: Mapping[Node, torch.Tensor]) -> torch.Tensor:
    """The concrete tensor behind a leaf, a computed node, or a view of a computed node."""
    if isinstance(src, Leaf):
        return leaves[src]
    if isinstance(src, View):
        root = buffers[src.root]
        return root.as_strided(src.shape, src.stride,
                               root.storage_offset() + src.offset - src.root.offset)
    return buffers[src]


def _viewed_as(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``t`` viewed in ``shape``, which has ``t``'s sizes once size-1 dims are dropped."""
    if tuple(t.shape) == shape:
        return t
    strides = iter([s for n, s in zip(t.shape, t.stride()) if n != 1])
    return t.as_strided(shape, [next(strides) if n != 1 else 0 for n in shape], t.storage_offset())


def _clobbers(target: torch.Tensor, others: list[torch.Tensor]) -> bool:
    """Writing ``target`` while the kernel runs could change what it reads, or race with
    another of its writes: it shares storage with one of ``others`` (inputs, earlier outputs)
    at anything but exactly its own elements (an in-place element-wise op reads and writes the
    same element in the same program, which is safe)."""
    if not target.numel():
        return False
    ptr = target.untyped_storage().data_ptr()
    layout = _elements(target)
    return any(t.numel() and t.untyped_storage().data_ptr() == ptr and _elements(t) != layout for t in others)


def _elements(t: torch.Tensor) -> tuple:
    sizes = tuple(n for n in t.shape if n != 1)
    return sizes, tuple(s for n, s in zip(t.shape, t.stride()) if n != 1), t.storage_offset()


def _device(nodes: tuple[Node, ...]) -> torch.device:
    """The device of the first node whose storage is alive (the CPU if none is)."""
    for node in nodes:
        storage = node.holder() if node.holder is not None else None
        if storage is not None:
            return storage.device
    return torch.device("cpu")
