"""Runs a plan: views inputs into each kernel's space, calls the executor or torch, fills storage.

The plan has already decided every write; this module only carries them out and turns them into
report records, so the counts are the same whatever executor computes the values.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .executors import Executor, get_executor
from .graph import Leaf, Node, Use, View, numel
from .plan import KernelInput, Plan, PlannedKernel
from .report import KernelRecord, Write


class Runner:
    """Executes plans of one session, numbering kernels across its flushes."""

    def __init__(self, executor: str) -> None:
        self.executor = executor
        self._executors: dict[torch.device, Executor] = {}

    def _executor(self, device: torch.device) -> Executor:
        if device not in self._executors:
            self._executors[device] = get_executor(self.executor, device)
        return self._executors[device]

    def execute(self, plan: Plan, leaves: Mapping[Leaf, torch.Tensor], first_kernel: int,
                flush: int) -> tuple[list[KernelRecord], list[Write]]:
        buffers: dict[Node, torch.Tensor] = {}
        writes_of: dict[int, list] = {}
        for w in plan.writes:
            writes_of.setdefault(w.kernel, []).append(w)
        records: list[KernelRecord] = []
        writes: list[Write] = []
        for k, planned in enumerate(plan.kernels):
            kernel_writes = writes_of.get(k, [])
            home = {w.node for w in kernel_writes if w.home}
            if planned.kernel is not None:
                read = self._fused(planned, leaves, buffers, home)
            elif planned.extern is not None:
                read = self._extern(planned, leaves, buffers, home)
            else:  # a result computed into scratch, copied home once nothing reads the old data
                (node,) = planned.outputs
                home_tensor(node).copy_(buffers[node])
                read = node.nbytes
            index = first_kernel + k
            for w in kernel_writes:
                writes.append(Write(tuple(w.node.shape), dtype_name(w.node.dtype), w.node.nbytes,
                                    w.reason, w.node.source, index, w.node.record or w.node.op))
            records.append(KernelRecord(
                index, planned.kind, planned.name,
                tuple(n.record or n.op for n in planned.nodes),
                tuple(dict.fromkeys(n.source for n in planned.nodes)),
                read, sum(w.node.nbytes for w in kernel_writes), flush,
            ))
        return records, writes

    def _fused(self, planned: PlannedKernel, leaves: Mapping[Leaf, torch.Tensor],
               buffers: dict[Node, torch.Tensor], home: set[Node]) -> int:
        kernel = planned.kernel
        inputs = [_load(inp, kernel.input_shape(i), leaves, buffers) for i, inp in enumerate(planned.inputs)]
        device = inputs[0].device if inputs else torch.device("cpu")
        results = self._executor(device).run(kernel, inputs)
        for node, value in zip(planned.outputs, results):
            if value.numel() != numel(node.shape):  # a full-size value computed at reduced level
                value = value.expand(kernel.shape)
            _store(node, value.reshape(node.shape), buffers, node in home)
        return sum(_distinct_bytes(t) for t in inputs)

    def _extern(self, planned: PlannedKernel, leaves: Mapping[Leaf, torch.Tensor],
                buffers: dict[Node, torch.Tensor], home: set[Node]) -> int:
        node = planned.extern
        read: list[torch.Tensor] = []

        def arg(a: Any) -> Any:
            if isinstance(a, Use):
                t = _data(a.src, leaves, buffers)
                read.append(t)
                return t
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a

        attrs = dict(node.attrs)
        func = attrs.pop("func")
        out = func(*arg(node.args), **attrs)
        _store(node, out, buffers, node in home)
        return sum(_distinct_bytes(t) for t in read)


def _data(src: Any, leaves: Mapping[Leaf, torch.Tensor], buffers: dict[Node, torch.Tensor]) -> torch.Tensor:
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
    t = _data(inp.view or inp.src, leaves, buffers)
    strides, offset = inp.map.strides(t.stride(), t.storage_offset())
    return t.as_strided(shape, strides, offset)


def _store(node: Node, value: torch.Tensor, buffers: dict[Node, torch.Tensor], home: bool) -> None:
    """Keep a result in ``node``'s layout: in its home tensor, or in scratch laid out alike
    (views of it are read by their strides relative to that layout)."""
    if home:
        target = home_tensor(node)
        target.copy_(value)
        buffers[node] = target
    elif value.stride() == node.stride or not node.stride:
        buffers[node] = value
    else:
        buffers[node] = torch.empty_strided(node.shape, node.stride, dtype=node.dtype,
                                            device=value.device).copy_(value)


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
