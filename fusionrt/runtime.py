"""Runs a plan: views inputs into each kernel's space, calls the executor or torch, fills storage.

The plan has already decided every write; this module only carries them out and turns them into
report records, so the counts are the same whatever executor computes the values. A plan is
first bound to its tensors (inputs viewed, destinations allocated, each launch prepared) and
then run; every kernel writes its results straight into their home tensors or scratch, so a
materialized write is one pass over memory.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Optional

import torch

from .executors import Executor, get_executor, require
from .graph import Leaf, Node, Use, View, numel
from .kernel_ir import MatmulKernel
from .plan import KernelInput, Plan, PlannedKernel, PlannedWrite
from .report import KernelRecord, Write


class BoundPlan:
    """A plan bound to concrete tensors: every launch's arguments resolved and every
    destination allocated, so calling it only launches kernels (again, if called again)."""

    def __init__(self, steps: list[Callable[[], Any]], read: list[int]) -> None:
        self.steps = steps
        self.read = read  # bytes each kernel reads

    def __call__(self) -> None:
        for step in self.steps:
            step()


class Runner:
    """Executes plans of one session, numbering kernels across its flushes."""

    def __init__(self, executor: str) -> None:
        require(executor)  # a missing triton fails when the session starts, not at its first flush
        self.executor = executor
        self._executors: dict[torch.device, Executor] = {}

    def _executor(self, device: torch.device) -> Executor:
        if device not in self._executors:
            self._executors[device] = get_executor(self.executor, device)
        return self._executors[device]

    def execute(self, plan: Plan, leaves: Mapping[Leaf, torch.Tensor], first_kernel: int,
                flush: int) -> tuple[list[KernelRecord], list[Write]]:
        bound = self.bind(plan, leaves)
        bound()
        writes_by_kernel = writes_of(plan)
        records: list[KernelRecord] = []
        writes: list[Write] = []
        for k, planned in enumerate(plan.kernels):
            kernel_writes = writes_by_kernel.get(k, [])
            index = first_kernel + k
            for w in kernel_writes:
                writes.append(Write(tuple(w.node.shape), dtype_name(w.node.dtype), w.node.nbytes,
                                    w.reason, w.node.source, index, w.node.record or w.node.op))
            records.append(KernelRecord(
                index, planned.kind, planned.name,
                tuple(n.record or n.op for n in planned.nodes),
                tuple(dict.fromkeys(n.source for n in planned.nodes)),
                bound.read[k], sum(w.node.nbytes for w in kernel_writes), flush,
                planned.backend, planned.decision,
            ))
        return records, writes

    def bind(self, plan: Plan, leaves: Mapping[Leaf, torch.Tensor]) -> BoundPlan:
        """Resolve every kernel's inputs and destinations (home tensors, or scratch laid out
        like them); nothing runs until the result is called."""
        buffers: dict[Node, torch.Tensor] = {}
        writes = writes_of(plan)
        steps: list[Callable[[], Any]] = []
        read: list[int] = []
        for k, planned in enumerate(plan.kernels):
            home = {w.node for w in writes.get(k, []) if w.home}
            if planned.kernel is not None:
                step, n = self._fused(planned, leaves, buffers, home)
            elif planned.extern is not None:
                step, n = self._extern(planned, leaves, buffers, home)
            else:  # a result computed into scratch, copied home once nothing reads the old data
                (node,) = planned.outputs
                step, n = functools.partial(home_tensor(node).copy_, buffers[node]), node.nbytes
            steps.append(step)
            read.append(n)
        return BoundPlan(steps, read)

    def _fused(self, planned: PlannedKernel, leaves: Mapping[Leaf, torch.Tensor],
               buffers: dict[Node, torch.Tensor], home: set[Node]) -> tuple[Callable[[], Any], int]:
        """The kernel writes each result straight into its destination; only a result it cannot
        write in place (see ``_clobbers``, or a full-size value computed at reduced level) is
        computed aside and copied."""
        kernel = planned.kernel
        inputs = [_load(inp, kernel.input_shape(i), leaves, buffers) for i, inp in enumerate(planned.inputs)]
        device = inputs[0].device if inputs else _device(planned.outputs)
        read = sum(_distinct_bytes(t) for t in inputs)
        if planned.backend == "cublaslt":
            (node,) = planned.outputs
            target = buffers[node] = _destination(node, node in home, device)
            if _clobbers(target, inputs) or not target.is_contiguous():
                return (lambda: target.copy_(cublaslt_matmul(kernel, inputs))), read
            return functools.partial(cublaslt_matmul, kernel, inputs, target), read
        outputs: list[Optional[torch.Tensor]] = []
        targets: list[torch.Tensor] = []
        copies: list[tuple[int, torch.Tensor]] = []
        for j, node in enumerate(planned.outputs):
            target = _destination(node, node in home, device)
            buffers[node] = target
            shape = kernel.output_shape(j)
            if numel(shape) == numel(node.shape) and not copies and not _clobbers(target, inputs + targets):
                outputs.append(_viewed_as(target, shape))
            else:  # computed aside, copied in output order after the kernel
                outputs.append(None)
                copies.append((j, target))
            targets.append(target)
        compute = self._executor(device).bind(kernel, inputs, outputs)
        if not copies:
            return compute, read

        def compute_and_copy() -> None:
            results = compute()
            for j, target in copies:
                value = results[j]
                if value.numel() != target.numel():
                    value = value.expand(kernel.shape)
                target.copy_(_viewed_as(value, tuple(target.shape)))

        return compute_and_copy, read

    def _extern(self, planned: PlannedKernel, leaves: Mapping[Leaf, torch.Tensor],
                buffers: dict[Node, torch.Tensor], home: set[Node]) -> tuple[Callable[[], Any], int]:
        """torch's kernel, through its ``out=`` variant straight into the destination."""
        node = planned.extern
        read: list[torch.Tensor] = []

        def arg(a: Any) -> Any:
            if isinstance(a, Use):
                t = tensor_of(a.src, leaves, buffers)
                read.append(t)
                return t
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a

        func, attrs = extern_call(planned)
        args = arg(node.args)
        (result,) = planned.outputs
        target = _destination(result, result in home, read[0].device if read else _device((node,)))
        buffers[result] = target
        out_variant = getattr(getattr(func, "overloadpacket", None), "out", None)
        if out_variant is not None and not _clobbers(target, read):
            step = functools.partial(out_variant, *args, **attrs, out=target)
        else:
            def step() -> None:
                target.copy_(func(*args, **attrs))
        return step, sum(_distinct_bytes(t) for t in read)


def cublaslt_matmul(kernel: MatmulKernel, inputs: list[torch.Tensor], out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A matmul kernel the planner gave to cuBLASLt (``act(a @ b + bias)``, see
    ``backends.cublaslt_activation``) through torch's ``_addmm_activation``: on CUDA one cuBLAS
    kernel with the bias and activation in its epilogue; elsewhere addmm, then the activation."""
    a, b, bias = inputs
    gelu = kernel.epilogue.instrs[-1].op == "gelu"
    row = bias[0]  # the bias input is broadcast over the rows: its first row is the vector
    if out is None:
        return torch._addmm_activation(row, a, b, use_gelu=gelu)
    return torch._addmm_activation(row, a, b, use_gelu=gelu, out=out)


def extern_call(planned: PlannedKernel) -> tuple[Callable[..., torch.Tensor], dict[str, Any]]:
    """The torch function and keyword arguments that compute an extern kernel's result from its
    op's arguments: the op itself, or the convolution with its ReLU fused."""
    attrs = dict(planned.extern.attrs)
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


def writes_of(plan: Plan) -> dict[int, list[PlannedWrite]]:
    """Kernel index -> the writes it makes (a node may go to scratch in one, home in a later copy)."""
    writes: dict[int, list[PlannedWrite]] = {}
    for w in plan.writes:
        writes.setdefault(w.kernel, []).append(w)
    return writes


def _destination(node: Node, home: bool, device: torch.device) -> torch.Tensor:
    """Where a result is written: its home tensor, or scratch in its layout (views of it are
    read by their strides relative to that layout)."""
    if home:
        return home_tensor(node)
    return torch.empty_strided(node.shape, node.stride, dtype=node.dtype, device=device)


def tensor_of(src: Any, leaves: Mapping[Leaf, torch.Tensor], buffers: dict[Node, torch.Tensor]) -> torch.Tensor:
    """The concrete tensor behind a leaf, a computed node, or a view of a computed node."""
    if isinstance(src, Leaf):
        return leaves[src]
    if isinstance(src, View):
        root = buffers[src.root]
        return root.as_strided(src.shape, src.stride,
                               root.storage_offset() + src.offset - src.root.offset)
    return buffers[src]


def _load(inp: KernelInput, shape: tuple[int, ...], leaves: Mapping[Leaf, torch.Tensor],
          buffers: dict[Node, torch.Tensor]) -> torch.Tensor:
    t = tensor_of(inp.view or inp.src, leaves, buffers)
    strides, offset = inp.map.strides(t.stride(), t.storage_offset())
    return t.as_strided(shape, strides, offset)


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
    for node in nodes:
        storage = node.holder() if node.holder is not None else None
        if storage is not None:
            return storage.device
    return torch.device("cpu")


def home_tensor(node: Node) -> torch.Tensor:
    """Where ``node`` lands: its region of its (alive) storage; the home tensor itself may have
    died (``buf[1:7].copy_(x)``, or ``reshape`` output aliasing a dead ``bmm`` result)."""
    storage = node.holder()
    target = torch.empty(0, dtype=node.dtype, device=storage.device)
    return target.set_(storage, node.offset, node.shape, node.stride)


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes a kernel loads for an input: broadcast (stride-0) dims are read once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride:
            n *= size
    return (n if t.numel() else 0) * t.element_size()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
