"""Triton code generation for fused kernels, and the ``triton`` / ``interpret`` executors.

A ``FusedKernel`` becomes Triton source specialized on its structure, on the pattern of its
tensors' layouts (which are contiguous, which broadcast, 32- or 64-bit indexing) and, for
reductions, on single-pass vs looped; sizes and strides are runtime arguments. Per kernel and
input strides the executor keeps a ready launch plan, so a repeated call only allocates outputs
and launches.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..kernel_ir import FusedKernel, evaluate
from . import pointwise, reduction
from .cache import KernelCache
from .layout import analyze, contiguous_strides, tensor_strides
from .lowering import UnsupportedKernel, lowered_ops

__all__ = ["BlockConfig", "KernelCache", "TritonExecutor", "UnsupportedKernel", "lowered_ops",
           "shared_cache"]


@dataclass(frozen=True)
class BlockConfig:
    """Block-size policy. The interpreter pays per program, so it wants few, large blocks."""

    max_xblock: int = 1024          # element-wise block
    max_single_pass: int = 4096     # longest row kept whole in registers
    tile: int = 4096                # elements per [XBLOCK, RBLOCK] reduction tile
    loop_rblock: int = 2048         # RBLOCK of looped reductions

    @staticmethod
    def for_interpreter() -> BlockConfig:
        return BlockConfig(max_xblock=16384, max_single_pass=16384, tile=16384, loop_rblock=4096)


_shared: dict[str, KernelCache] = {}


def shared_cache() -> KernelCache:
    """One cache per process (per cache directory) for every executor that is not given one."""
    from .cache import default_cache_dir

    directory = default_cache_dir()
    cache = _shared.get(str(directory))
    if cache is None:
        cache = _shared[str(directory)] = KernelCache(directory)
    return cache


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _num_warps(elements: int) -> int:
    return max(1, min(8, elements // 256))


class _Plan:
    """Everything about one launch that does not depend on the input data."""

    def __init__(self, fn: Any, kernel: FusedKernel, scalars: list[int], grid: tuple[int],
                 constants: dict[str, int]) -> None:
        self.fn, self.scalars, self.grid, self.constants = fn, scalars, grid, constants
        self.outputs = [(kernel.output_shape(j), kernel.instrs[o.index].dtype)
                        for j, o in enumerate(kernel.outputs)]

    def __call__(self, inputs: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in self.outputs]
        self.fn[self.grid](*inputs, *outs, *self.scalars, **self.constants)
        return outs


class _KernelEntry:
    """Per kernel: the inputs it expects and its launch plans, one per input strides."""

    def __init__(self, kernel: FusedKernel) -> None:
        self.expected = [(torch.Size(kernel.input_shape(i)), d) for i, d in enumerate(kernel.input_dtypes)]
        self.empty = math.prod(kernel.shape) == 0
        self.plans: dict[tuple, _Plan] = {}


class TritonExecutor:
    """Runs fused kernels as generated Triton code: on CUDA (``triton``) or under Triton's CPU
    interpreter (``interpret``: how CI without a GPU exercises the generator)."""

    def __init__(self, interpret: bool, cache: KernelCache | None = None,
                 blocks: BlockConfig | None = None) -> None:
        self.interpret = interpret
        self.name = "interpret" if interpret else "triton"
        self.cache = cache if cache is not None else shared_cache()
        self.blocks = blocks or (BlockConfig.for_interpreter() if interpret else BlockConfig())
        self._entries: dict[FusedKernel, _KernelEntry] = {}
        self._by_id: dict[int, tuple[weakref.ref, _KernelEntry]] = {}

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Return one contiguous tensor per kernel output, in ``kernel.output_shape(i)``."""
        entry = self._entry(kernel)
        if [(t.shape, t.dtype) for t in inputs] != entry.expected:
            kernel.check_inputs(inputs)
        if not self.interpret and any(not t.is_cuda for t in inputs):
            raise ValueError("the triton executor runs on CUDA tensors; use 'interpret' or "
                             "'reference' for CPU tensors")
        if entry.empty:  # nothing to launch; empty reductions follow aten
            return evaluate(kernel, inputs)
        device = inputs[0].device if inputs else torch.device("cpu" if self.interpret else "cuda")
        strides = tuple(t.stride() for t in inputs)
        plan = entry.plans.get(strides)
        if plan is None:
            plan = entry.plans[strides] = self._plan(kernel, inputs)
        if device.type == "cuda" and device.index != torch.cuda.current_device():
            with torch.cuda.device(device):
                return plan(inputs, device)
        return plan(inputs, device)

    def _entry(self, kernel: FusedKernel) -> _KernelEntry:
        """Found by identity first: hashing a kernel's instructions costs more than the rest of
        a launch's Python side."""
        found = self._by_id.get(id(kernel))
        if found is not None and found[0]() is kernel:
            return found[1]
        entry = self._entries.get(kernel)
        if entry is None:
            entry = self._entries[kernel] = _KernelEntry(kernel)
        by_id = self._by_id
        ref = weakref.ref(kernel, lambda _, key=id(kernel): by_id.pop(key, None))
        by_id[id(kernel)] = (ref, entry)
        return entry

    def _plan(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor]) -> _Plan:
        strides = [tensor_strides(t.shape, t.stride()) for t in inputs]
        for j in range(len(kernel.outputs)):
            shape = kernel.output_shape(j)
            strides.append(tensor_strides(shape, contiguous_strides(shape)))
        layout = analyze(kernel.shape, kernel.reduce_dims, strides)
        pattern = layout.pattern
        scalars = [layout.xnumel, *layout.xsizes]
        b = self.blocks
        if not kernel.reduce_dims:
            xblock = min(b.max_xblock, _pow2(layout.xnumel))
            key = ("pointwise", kernel.structure_key(), pattern)
            fn = self.cache.kernel(key, lambda: pointwise.generate(kernel, pattern),
                                   pointwise.KERNEL_NAME, self.interpret)
            constants = {"XBLOCK": xblock, "num_warps": _num_warps(xblock)}
        else:
            scalars += [layout.rnumel, *layout.rsizes]
            looped = layout.rnumel > b.max_single_pass
            rblock = b.loop_rblock if looped else _pow2(layout.rnumel)
            xblock = min(_pow2(layout.xnumel), max(1, b.tile // rblock))
            key = ("reduction", kernel.structure_key(), pattern, looped)
            fn = self.cache.kernel(key, lambda: reduction.generate(kernel, pattern, looped),
                                   reduction.KERNEL_NAME, self.interpret)
            constants = {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": _num_warps(xblock * rblock)}
        scalars += layout.stride_args()
        grid = (math.ceil(layout.xnumel / xblock),)
        return _Plan(fn, kernel, scalars, grid, constants)
