"""A block: the nodes of one future kernel, as the planner groups them and emission reads them."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from .graph import IndexMap, Node, Use


class Block:
    """An open or closed block: the nodes of one future kernel and where each sits in it."""

    def __init__(self, space: tuple[int, ...], kind: str = "fused") -> None:
        self.space = space
        self.kind = kind  # fused | reduction | matmul | conv | copy
        self.template = False  # a matmul planned as the template: its epilogue may join it
        self.dims: Optional[frozenset[int]] = None
        self.phase = 0
        self.nodes: list[Node] = []
        self.canon: dict[Node, IndexMap] = {}
        self.phase_of: dict[Node, int] = {}
        self.reduced: set[Node] = set()
        # matmul blocks: the element-wise block before it (whose values it computes on read),
        # what each operand computed on read loads (0: left, 1: right), what its epilogue loads
        self.producer: Optional[Block] = None
        self.prologue_loads: dict[int, list[tuple[Any, IndexMap]]] = {}
        self.epilogue_loads: dict[tuple[int, IndexMap], tuple[Any, IndexMap]] = {}
        # the speed policy: values of other kernels this block computes from their inputs rather
        # than load, and what the block loads so far (so recomputing costs only new loads)
        self.recomputes: set[Node] = set()
        self.loads: dict[tuple[int, IndexMap], tuple[Any, IndexMap]] = {}

    @property
    def fusible(self) -> bool:
        return self.kind in ("fused", "reduction") or self.template

    @property
    def real_dims(self) -> frozenset[int]:
        """Reduce dims that have extent: only they make a value 'reduced'."""
        return frozenset(d for d in self.dims or () if self.space[d] != 1)

    def add(self, node: Node, canon: IndexMap, reduced: bool) -> None:
        self.nodes.append(node)
        self.canon[node] = canon
        self.phase_of[node] = self.phase
        if reduced:
            self.reduced.add(node)


def tensor_uses(args: Any) -> Iterator[Use]:
    """Every ``Use`` in an argument tree (extern ops take lists of tensors)."""
    for a in args:
        if isinstance(a, Use):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from tensor_uses(a)


def matmul_operands(node: Node) -> tuple[Optional[Use], Use, Use, Any, Any]:
    """(bias, left, right, beta, alpha) of ``mm``, ``bmm``, ``addmm`` and ``baddbmm``."""
    if node.op in ("mm", "bmm"):
        a, b = node.args[:2]
        return None, a, b, 0, 1
    attrs = dict(node.attrs)
    bias, a, b = node.args[:3]
    return bias, a, b, attrs.get("beta", 1), attrs.get("alpha", 1)
