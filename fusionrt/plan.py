"""What the planner hands to the runtime: kernels in order, and the writes they make.

A planned kernel is one of a small tagged union (``FusedLaunch``, ``ExternLaunch``, ``CopyHome``),
frozen once planned; ``fusionrt.steps`` registers how each kind runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .blocks import tensor_uses
from .graph import IndexMap, Leaf, Node, View
from .kernel_ir import FusedKernel, MatmulKernel

Source = Union[Leaf, Node, View]


@dataclass(frozen=True, eq=False)
class KernelInput:
    """A fused kernel's input: ``src``'s data (through ``view``'s layout when set) read at
    ``map`` from the kernel's space, given in the reduced shape when ``reduced``."""

    src: Union[Leaf, Node]
    map: IndexMap
    view: Optional[View] = None
    reduced: bool = False


@dataclass(frozen=True, eq=False, kw_only=True)
class _Launch:
    """What every planned kernel has: what the report names it (``kind``, ``name``), the
    recorded ops it covers in program order, the results it writes, what runs it (``backend``)
    and why (``decision``, for compute-bound ops)."""

    kind: str
    name: str
    nodes: tuple[Node, ...]
    outputs: tuple[Node, ...]
    backend: str
    decision: str = ""


@dataclass(frozen=True, eq=False, kw_only=True)
class FusedLaunch(_Launch):
    """A kernel over ``inputs`` viewed into its space: a fused element-wise or reduction kernel
    (backend ``generated``) or a matmul with its prologues and epilogue, run as the Triton
    template (``template``) or, when it is exactly ``act(a @ b + bias)``, by cuBLASLt
    (``cublaslt``)."""

    kernel: Union[FusedKernel, MatmulKernel]
    inputs: tuple[KernelInput, ...]
    backend: str = "generated"

    def reads(self) -> tuple[Source, ...]:
        return tuple(inp.view or inp.src for inp in self.inputs)


@dataclass(frozen=True, eq=False, kw_only=True)
class ExternLaunch(_Launch):
    """``op`` run by torch's own kernel (cuBLAS, cuDNN, ...); with a ReLU among ``nodes`` after
    a convolution, the convolution's fused kernel."""

    op: Node
    backend: str = "torch"

    def reads(self) -> tuple[Source, ...]:
        return tuple(use.src for use in tensor_uses(self.op.args))


@dataclass(frozen=True, eq=False, kw_only=True)
class CopyHome(_Launch):
    """``outputs[0]``, computed into scratch by an earlier kernel, copied into its home once
    nothing reads the old data there."""

    kind: str = "copy"
    backend: str = "torch"

    def reads(self) -> tuple[Source, ...]:
        return self.outputs


PlannedKernel = Union[FusedLaunch, ExternLaunch, CopyHome]  # each has reads(): what it loads from memory


@dataclass(frozen=True, eq=False)
class PlannedWrite:
    """``node`` written by kernel ``kernel``: into its home tensor when ``home``, else scratch."""

    node: Node
    reason: str
    kernel: int
    home: bool


@dataclass(eq=False)
class Plan:
    kernels: list[PlannedKernel] = field(default_factory=list)
    writes: list[PlannedWrite] = field(default_factory=list)


@dataclass(eq=False)
class Flags:
    """What the planner must know about the world at the flush (the graph knows the rest).

    ``alive`` maps a node whose home storage Python still holds to a key shared by all nodes on
    that storage. ``sync``, ``outputs`` and ``fallback_inputs`` hold root nodes; ``saved`` holds
    the alive nodes whose storage autograd keeps for backward.
    """

    alive: dict[Node, int] = field(default_factory=dict)
    sync: frozenset[Node] = frozenset()
    outputs: frozenset[Node] = frozenset()
    fallback_inputs: frozenset[Node] = frozenset()
    saved: frozenset[Node] = frozenset()  # alive nodes autograd holds for backward


def writes_of(plan: Plan) -> dict[int, list[PlannedWrite]]:
    """Kernel index -> the writes it makes (a node may go to scratch in one, home in a later copy)."""
    writes: dict[int, list[PlannedWrite]] = {}
    for w in plan.writes:
        writes.setdefault(w.kernel, []).append(w)
    return writes
