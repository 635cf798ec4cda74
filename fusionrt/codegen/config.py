"""Block sizes, warps and the single-pass/looped choice for one launch, from its layout.

Modelled on Inductor's untuned defaults (``triton_heuristics``: pointwise, persistent and looped
reductions), which land within a few percent of the copy bandwidth on an H100 for the shapes of
issue 4. Element-wise kernels take 1024-element blocks, 256 elements per warp. A row that fits
``max_single_pass`` is reduced in registers (*single pass*): rows of 256 elements or more get a
program each, shorter rows share one (up to ``tile`` elements), and a reduction whose kept dims
are the contiguous ones (``sum(0)`` of a row-major matrix) walks 64 columns per program so its
loads coalesce. Longer rows loop over ``loop_rblock``-wide tiles. Reductions get one warp per
256 tile elements (2 to 8: on an H100, softmax over rows of 1024 bf16 runs at 0.185 ms with 4
warps and 0.235 ms with 8, the 8 elements per thread filling 16-byte loads; rows of 4096 are the
same from 4 to 16 warps) and one pipeline stage: their loads feed no ``tl.dot``, and software
pipelining them only costs shared memory.

A reduction that would launch fewer than ``split_below`` programs over long rows (the column sums
of a backward pass: a bias gradient of 768 columns is 12 programs of 64 columns over every row;
a whole-tensor sum is one program) leaves most of the GPU idle. Its rows are split into chunks,
each program reading at least ``min_work`` elements, up to ``split_programs`` programs in all:
each reduces its chunk into a small workspace, and a second kernel combines the chunks (``Split``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .layout import Layout


@dataclass(frozen=True)
class BlockConfig:
    """Block-size policy. The interpreter pays per program, so it wants few, large blocks."""

    max_xblock: int = 1024          # element-wise block
    max_single_pass: int = 4096     # longest row kept whole in registers
    tile: int = 4096                # elements per [XBLOCK, RBLOCK] tile of short rows
    one_row_from: int = 256         # single-pass rows this long get a program each
    loop_rblock: int = 2048         # RBLOCK of looped reductions
    loop_tile: int = 2048           # elements per looped tile (rows per program: tile / RBLOCK)
    outer_xblock: int = 64          # kept elements per program when the kept dims are contiguous
    max_warps: int = 8
    split_below: int = 128          # reductions with fewer programs than this split their rows
    split_programs: int = 512       # programs of a split reduction, at most
    min_work: int = 16384           # elements each program of a split reduction reads, at least

    @staticmethod
    def for_interpreter() -> BlockConfig:
        return BlockConfig(max_xblock=16384, max_single_pass=16384, tile=16384, one_row_from=1 << 62,
                           loop_rblock=4096, loop_tile=16384, outer_xblock=16384, split_below=0)


@dataclass(frozen=True)
class Choice:
    """What one launch runs: the variant (looped, which masks) and its constexprs."""

    looped: bool
    xblock: int
    rblock: int          # 0 for element-wise kernels
    num_warps: int
    num_stages: int
    xmask: bool          # some block runs past xnumel
    rmask: bool          # some tile runs past rnumel

    @property
    def constants(self) -> dict[str, int]:
        blocks = {"XBLOCK": self.xblock}
        if self.rblock:
            blocks["RBLOCK"] = self.rblock
        return {**blocks, "num_warps": self.num_warps, "num_stages": self.num_stages}

    @property
    def variant(self) -> tuple[bool, bool, bool]:
        """The part of the choice the generated source depends on."""
        return (self.looped, self.xmask, self.rmask)


def pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _warps(elements: int, per_warp: int, low: int, high: int) -> int:
    return max(low, min(high, pow2(max(1, elements // per_warp))))


def pointwise_choice(layout: Layout, b: BlockConfig) -> Choice:
    xblock = min(b.max_xblock, pow2(layout.xnumel))
    return Choice(False, xblock, 0, _warps(xblock, 256, 1, b.max_warps), 1, layout.xnumel % xblock != 0, False)


def reduction_choice(layout: Layout, b: BlockConfig) -> Choice:
    xnumel, rnumel = layout.xnumel, layout.rnumel
    if layout.kept_dims_contiguous:
        xblock = min(pow2(xnumel), b.outer_xblock)
        looped = rnumel > b.max_single_pass or pow2(rnumel) * xblock > b.tile
        rblock = min(b.loop_rblock, max(1, b.loop_tile // xblock)) if looped else pow2(rnumel)
    else:
        looped = rnumel > b.max_single_pass
        rblock = b.loop_rblock if looped else pow2(rnumel)
        if looped:
            rows = b.loop_tile // rblock
        else:
            rows = 1 if rblock >= b.one_row_from else b.tile // rblock
        xblock = min(pow2(xnumel), max(1, rows))
    return Choice(looped, xblock, rblock, _warps(xblock * rblock, 256, 2, b.max_warps), 1,
                  xnumel % xblock != 0, rnumel % rblock != 0)


@dataclass(frozen=True)
class Split:
    """A reduction split over its rows: ``chunks`` programs per row block each reduce ``rchunk``
    elements (a multiple of the looped tile, so a tile never straddles two chunks), then one
    program per ``xblock`` rows of the finishing kernel combines the chunks (``sblock`` wide)."""

    chunks: int
    rchunk: int
    xblock: int
    sblock: int
    num_warps: int


def split_choice(layout: Layout, choice: Choice, b: BlockConfig) -> Split | None:
    """How to split a looped reduction that leaves the GPU idle (None: run it as chosen)."""
    programs = -(-layout.xnumel // choice.xblock)
    if not choice.looped or programs >= b.split_below:
        return None
    chunks = min(b.split_programs // programs, choice.xblock * layout.rnumel // b.min_work)
    if chunks < 2:
        return None
    step = -(-layout.rnumel // chunks)
    rchunk = -(-step // choice.rblock) * choice.rblock
    chunks = -(-layout.rnumel // rchunk)
    if chunks < 2:
        return None
    sblock = pow2(chunks)
    xblock = min(pow2(layout.xnumel), max(1, b.tile // sblock))
    return Split(chunks, rchunk, xblock, sblock, _warps(xblock * sblock, 256, 1, b.max_warps))
