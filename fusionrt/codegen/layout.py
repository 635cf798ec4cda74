"""How a kernel's tensors are laid over its iteration space: the host-side half of indexing.

The iteration space is split into kept dims ("X", one flat outer index ``x``) and reduced dims
("R", one flat inner index ``r``; none for element-wise kernels). Within each group the dims are
put in the order the tensors lie in memory (the outputs' first, as TensorIterator reorders
them), so neighbouring lanes touch neighbouring addresses: a channels-last tensor iterated in
its logical NCHW order would read 2-byte elements C apart. Size-1 dims are dropped and
neighbouring dims that every tensor walks contiguously are merged, so a contiguous (or
channels-last) problem becomes one X dim and one R dim whatever its rank. What remains decides the
generated code: a tensor is read at ``x * rnumel + r`` (``flat``), at ``x`` (``xflat``: a
reduced tensor laid out like the outputs) or through its strides, with stride-0 dims left out.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

FLAT = "flat"
XFLAT = "xflat"
# Per tensor: FLAT, XFLAT, or one bool per collapsed dim (X dims then R dims): stride != 0.
Access = Union[str, tuple[bool, ...]]


@dataclass(frozen=True)
class Layout:
    xsizes: tuple[int, ...]
    rsizes: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]  # per tensor, over xsizes + rsizes

    @property
    def xnumel(self) -> int:
        return math.prod(self.xsizes)

    @property
    def rnumel(self) -> int:
        return math.prod(self.rsizes)

    @property
    def index_bits(self) -> int:
        """32 unless an index or offset can pass 2**31 - 1 (64-bit index math is slower)."""
        sizes = self.xsizes + self.rsizes
        reach = max([self.xnumel * self.rnumel] + [
            sum((n - 1) * s for n, s in zip(sizes, st)) for st in self.strides])
        return 32 if reach < 2**31 else 64

    @property
    def kept_dims_contiguous(self) -> bool:
        """Most tensors read along the reduced dims walk memory fastest along a kept dim (a
        reduction over the outer dims, ``sum(0)`` of a row-major matrix)."""
        nx = len(self.xsizes)
        votes = 0
        for st in self.strides:
            if any(st[nx:]):
                fastest = min((s, d) for d, s in enumerate(st) if s)[1]
                votes += 1 if fastest < nx else -1
        return votes > 0

    def access(self, tensor: int) -> Access:
        st = self.strides[tensor]
        nx = len(self.xsizes)
        if all(s == 0 for s in st[nx:]) and st[:nx] == contiguous_strides(self.xsizes):
            return XFLAT  # also every tensor when nothing is left to reduce: no rindex needed
        if st == contiguous_strides(self.xsizes + self.rsizes):
            return FLAT
        return tuple(s != 0 for s in st)

    @property
    def pattern(self) -> tuple:
        """What the generated source depends on (sizes and strides are runtime arguments)."""
        return (len(self.xsizes), len(self.rsizes), self.index_bits,
                tuple(self.access(t) for t in range(len(self.strides))))

    def stride_args(self) -> list[int]:
        """Nonzero strides of the tensors read through strides, in argument order."""
        args: list[int] = []
        for t, st in enumerate(self.strides):
            if isinstance(self.access(t), tuple):
                args.extend(s for s in st if s != 0)
        return args


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    strides = []
    step = 1
    for n in reversed(sizes):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _collapse(dims: list[tuple[int, list[int]]]) -> list[tuple[int, list[int]]]:
    """Merge neighbours (outer, inner) that every tensor walks as one: outer stride = inner * size."""
    merged: list[tuple[int, list[int]]] = []
    for size, strides in dims:
        if merged:
            psize, pstrides = merged[-1]
            if all(ps == s * size for ps, s in zip(pstrides, strides)):
                merged[-1] = (psize * size, strides)
                continue
        merged.append((size, strides))
    return merged


def _memory_order(dims: list[int], strides: Sequence[Sequence[int]]) -> list[int]:
    """Outer to inner by stride, asking the last tensors (the outputs) first; dims no tensor
    tells apart keep their logical order."""
    def compare(a: int, b: int) -> int:
        for st in reversed(strides):
            if st[a] and st[b] and st[a] != st[b]:
                return -1 if st[a] > st[b] else 1
        return -1 if a < b else 1

    return sorted(dims, key=functools.cmp_to_key(compare))


def analyze(shape: Sequence[int], reduce_dims: Sequence[int],
            strides: Sequence[Sequence[int]]) -> Layout:
    """``strides``: per tensor (outputs last), one stride per dim of ``shape`` (0 where it
    broadcasts)."""
    def group(dims: list[int]) -> list[tuple[int, list[int]]]:
        dims = _memory_order([d for d in dims if shape[d] != 1], strides)
        return _collapse([(shape[d], [st[d] for st in strides]) for d in dims])

    reduced = set(reduce_dims)
    xdims = group([d for d in range(len(shape)) if d not in reduced])
    rdims = group([d for d in range(len(shape)) if d in reduced])
    dims = xdims + rdims
    return Layout(
        xsizes=tuple(n for n, _ in xdims),
        rsizes=tuple(n for n, _ in rdims),
        strides=tuple(tuple(st[t] for _, st in dims) for t in range(len(strides))),
    )


def tensor_strides(size: Sequence[int], stride: Sequence[int]) -> tuple[int, ...]:
    """A tensor's strides over the iteration space: 0 where it is broadcast (size 1 < extent)."""
    return tuple(0 if n == 1 else s for n, s in zip(size, stride))
