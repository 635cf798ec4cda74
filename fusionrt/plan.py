"""What the planner hands to the runtime: kernels in order, and the writes they make."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .graph import IndexMap, Leaf, Node, View
from .kernel_ir import FusedKernel, MatmulKernel


@dataclass(frozen=True, eq=False)
class KernelInput:
    """A fused kernel's input: ``src``'s data (through ``view``'s layout when set) read at
    ``map`` from the kernel's space, given in the reduced shape when ``reduced``."""

    src: Union[Leaf, Node]
    map: IndexMap
    view: Optional[View] = None
    reduced: bool = False


@dataclass(eq=False)
class PlannedKernel:
    """One launch. ``kernel`` is set for fused and reduction kernels and for the matmul template;
    ``extern`` for an op run on torch's own kernel; a ``copy`` kernel copies ``outputs[0]`` from
    scratch into its home. ``backend`` says what runs it (``generated``: a generated element-wise
    or reduction kernel; ``template``: the Triton matmul template; ``torch``: torch's kernel,
    i.e. cuBLAS or cuDNN on a GPU) and ``decision`` why, for compute-bound ops."""

    kind: str
    name: str
    nodes: tuple[Node, ...]  # the recorded ops it covers, in program order
    outputs: tuple[Node, ...]
    kernel: Optional[Union[FusedKernel, MatmulKernel]] = None
    inputs: tuple[KernelInput, ...] = ()
    extern: Optional[Node] = None
    backend: str = "generated"
    decision: str = ""


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
    that storage. ``sync``, ``outputs`` and ``fallback_inputs`` hold root nodes.
    """

    alive: dict[Node, int] = field(default_factory=dict)
    sync: frozenset[Node] = frozenset()
    outputs: frozenset[Node] = frozenset()
    fallback_inputs: frozenset[Node] = frozenset()
