"""The recorded graph: concrete leaves, pending nodes, views of nodes, and the index maps between.

An ``IndexMap`` says which element of a source a consumer reads at each of its indices: for every
source dim ``d``, ``j[d] = offset[d] + sum(coef[d][k] * i[k])``. Broadcasting and every simple
view (permute, slice, select, unsqueeze, expand, splitting reshapes) are such maps, and they
compose, so a chain of views of a recorded value is one map, and a load of a concrete tensor
through it is plain strides. Normalized: coefficients and offsets of size-1 dims are 0, so two
maps that read the same elements compare equal.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch

Shape = tuple[int, ...]


@dataclass(frozen=True)
class IndexMap:
    src: Shape  # the consumer's index space
    dst: Shape  # the shape of what is read
    offset: tuple[int, ...]
    coef: tuple[tuple[int, ...], ...]  # [dst dim][src dim]
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Maps key the planner's memo tables and caches: hash the nested tuples once.
        object.__setattr__(self, "_hash", hash((self.src, self.dst, self.offset, self.coef)))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def make(src: Shape, dst: Shape, offset, coef) -> IndexMap:
        offset = tuple(0 if dst[d] == 1 else o for d, o in enumerate(offset))
        coef = tuple(
            tuple(0 if dst[d] == 1 or src[k] == 1 else c for k, c in enumerate(row))
            for d, row in enumerate(coef)
        )
        return IndexMap(tuple(src), tuple(dst), offset, coef)

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def identity(shape: Shape) -> IndexMap:
        n = len(shape)
        return IndexMap.make(shape, shape, (0,) * n,
                             tuple(tuple(int(d == k) for k in range(n)) for d in range(n)))

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def broadcast(src: Shape, dst: Shape) -> IndexMap:
        """How an operand of shape ``dst`` is read by an op of shape ``src`` (right-aligned)."""
        lead = len(src) - len(dst)
        coef = tuple(tuple(int(k == d + lead) for k in range(len(src))) for d in range(len(dst)))
        return IndexMap.make(src, dst, (0,) * len(dst), coef)

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def squeeze_fit(src: Shape, dst: Shape, skip: frozenset[int] = frozenset()) -> Optional[IndexMap]:
        """The map pairing the non-1 dims of ``dst`` in order with the non-1 dims of ``src``
        outside ``skip`` (a value laid out like the space, up to size-1 dims); None if none."""
        src_dims = [k for k, n in enumerate(src) if n != 1 and k not in skip]
        dst_dims = [d for d, n in enumerate(dst) if n != 1]
        if [src[k] for k in src_dims] != [dst[d] for d in dst_dims]:
            return None
        pair = dict(zip(dst_dims, src_dims))
        coef = tuple(tuple(int(pair.get(d) == k) for k in range(len(src))) for d in range(len(dst)))
        return IndexMap.make(src, dst, (0,) * len(dst), coef)

    @functools.lru_cache(maxsize=4096)
    def compose(self, outer: IndexMap) -> IndexMap:
        """``self`` after ``outer``: read through ``outer`` first (outer.dst == self.src)."""
        offset = [o + sum(row[j] * outer.offset[j] for j in range(len(outer.dst)))
                  for o, row in zip(self.offset, self.coef)]
        coef = [[sum(row[j] * outer.coef[j][k] for j in range(len(outer.dst)))
                 for k in range(len(outer.src))] for row in self.coef]
        return IndexMap.make(outer.src, self.dst, offset, coef)

    def ignores(self, dims: frozenset[int]) -> bool:
        return all(row[k] == 0 for row in self.coef for k in dims)

    def strides(self, stride: tuple[int, ...], storage_offset: int) -> tuple[tuple[int, ...], int]:
        """Strides and storage offset over ``src`` of a tensor of shape ``dst`` read through it."""
        out = tuple(sum(stride[d] * self.coef[d][k] for d in range(len(self.dst)))
                    for k in range(len(self.src)))
        return out, storage_offset + sum(s * o for s, o in zip(stride, self.offset))


def view_map(root_shape: Shape, root_stride: tuple[int, ...], root_offset: int,
             shape: Shape, stride: tuple[int, ...], offset: int) -> Optional[IndexMap]:
    """The affine map from a view's index to its root's index, or None when the view is not
    simple (it merges dims of the root, or walks memory no single root dim explains)."""
    dims = sorted((d for d, n in enumerate(root_shape) if n != 1), key=lambda d: -root_stride[d])
    if len({root_stride[d] for d in dims}) != len(dims):
        return None  # overlapping root layout: no unique index per address
    start = [0] * len(root_shape)
    rest = offset - root_offset
    for d in dims:
        start[d], rest = divmod(rest, root_stride[d])
    if rest or any(s < 0 for s in start):
        return None
    coef = [[0] * len(shape) for _ in root_shape]
    for k, (n, st) in enumerate(zip(shape, stride)):
        if n == 1 or st == 0:
            continue
        d = next((d for d in dims if root_stride[d] <= st and st % root_stride[d] == 0), None)
        if d is None:
            return None
        coef[d][k] = st // root_stride[d]
    for d, n in enumerate(root_shape):
        if start[d] + sum(c * (shape[k] - 1) for k, c in enumerate(coef[d])) >= n:
            return None
    return IndexMap.make(shape, root_shape, start, coef)


@dataclass(eq=False)
class Leaf:
    """A concrete tensor read by pending ops; the session holds the tensor until the flush."""

    shape: Shape
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    storage: int  # data_ptr of its storage while held

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * self.dtype.itemsize


@dataclass(eq=False, slots=True, weakref_slot=True)
class Node:
    """A recorded op that has not run. ``kind`` is pointwise, reduction or extern.

    ``stride``/``offset`` are its home layout (eager's); ``home`` is a weak reference to the real
    tensor that receives it, ``holder`` to that tensor's storage, which lives exactly as long as
    some tensor uses it (its home, a view, an alias made by ``reshape``).
    """

    id: int
    kind: str
    op: str
    args: tuple[Any, ...]
    shape: Shape
    dtype: torch.dtype
    source: str
    attrs: tuple[tuple[str, Any], ...] = ()
    dims: frozenset[int] = frozenset()  # reduced dims of the input (reductions)
    stride: tuple[int, ...] = ()
    offset: int = 0
    record: str = ""  # the aten op the user's code called, for the report
    kernel_kind: str = ""  # extern only: matmul, conv or copy
    home: Optional[weakref.ref] = field(default=None, repr=False)
    holder: Optional[weakref.ref] = field(default=None, repr=False)
    storage: int = 0

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * self.dtype.itemsize


@dataclass(eq=False)
class View:
    """A view of a pending node's storage: ``map`` reads the root, or None (not simple)."""

    root: Node
    shape: Shape
    stride: tuple[int, ...]
    offset: int
    map: Optional[IndexMap]


Source = Union[Leaf, Node, View]


@dataclass(frozen=True, eq=False)
class Use:
    """An operand: ``src`` read at ``map`` (consumer index -> ``src`` index). ``recompute``:
    a decomposition re-reads its input after a reduction, recomputing it if it is in-block."""

    src: Source
    map: IndexMap
    recompute: bool = False


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


