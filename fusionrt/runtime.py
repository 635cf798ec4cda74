"""Runs a plan the first time: binds its steps to the flush's tensors, launches, reports.

The plan has already decided every write; this module only carries them out (through
``steps``, which replays share) and turns them into report records, so the counts are the same
whatever executor computes the values. A plan is first bound to its tensors (inputs viewed,
destinations allocated, each launch prepared) and then run.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from .executors import Executor, get_executor, require
from .graph import Leaf, Node
from .kernel_sources import for_planned
from .plan import Plan, writes_of
from .report import KernelRecord, Write
from .steps import build_steps, scratch


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
        run = _FirstRun(leaves, self._executor)
        bound = []
        for planned, step in zip(plan.kernels, build_steps(plan)):
            with for_planned(planned):  # the kernels it loads are logged and dumped as its own
                bound.append(step.bind(run))
        for executor in self._executors.values():
            executor.compile_bound()
        return BoundPlan([call for call, _ in bound], [sum(_distinct_bytes(t) for t in read) for _, read in bound])


class _FirstRun:
    """A flush's own tensors: its leaves, and each result's home in the storage Python holds."""

    replays = False

    def __init__(self, leaves: Mapping[Leaf, torch.Tensor], executor: Callable[[torch.device], Executor]) -> None:
        self.leaves = leaves
        self.buffers: dict[Node, torch.Tensor] = {}
        self.executor = executor

    def destination(self, node: Node, home: bool, device: torch.device) -> torch.Tensor:
        return home_tensor(node) if home else scratch(node, device)

    def adopts(self, node: Node, home: bool) -> bool:
        return False  # every destination exists before the first kernel runs


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
