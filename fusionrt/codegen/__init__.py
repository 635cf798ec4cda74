"""Triton code generation for fused kernels, and the ``triton`` / ``interpret`` executors.

A ``FusedKernel`` becomes Triton source specialized on its structure, on the pattern of its
tensors' layouts (which are contiguous, which broadcast, 32- or 64-bit indexing), on whether its
blocks divide the sizes (masks or none) and, for reductions, on single-pass vs looped; sizes and
strides are runtime arguments. Results are written straight into the tensors the caller gives,
whatever their strides. Per kernel and tensor strides the executor keeps a launch ``Spec``, so a
repeated call only binds tensors and launches.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import torch

from ..bounded import LRUCache
from ..kernel_ir import FusedKernel, MatmulKernel
from . import pointwise, reduction
from .cache import KernelCache
from .config import BlockConfig, Choice, Split, pointwise_choice, reduction_choice, split_choice
from .emit import Indexing
from .launch import BoundKernel, Launch, Spec, SplitSpec, compile_new
from .layout import Layout, analyze, tensor_strides
from .lowering import UnsupportedKernel, lowered_ops
from .matmul import MatmulRunner

__all__ = ["BlockConfig", "BoundKernel", "KernelCache", "Launch", "TritonExecutor", "UnsupportedKernel",
           "launch_arguments", "lowered_ops", "shared_cache"]

_shared: dict[str, KernelCache] = {}

# Kernels whose launch state an executor keeps: a kernel is per shape and per scalar constant,
# so a program whose shapes or scalars change on every call meets new ones every call.
MAX_KERNELS = 1024


def shared_cache() -> KernelCache:
    """One cache per process (per cache directory) for every executor that is not given one."""
    from .cache import default_cache_dir

    directory = default_cache_dir()
    cache = _shared.get(str(directory))
    if cache is None:
        cache = _shared[str(directory)] = KernelCache(directory)
    return cache


class _KernelEntry:
    """Per kernel: the inputs it expects, its outputs' dtypes and shapes, and its launch specs,
    one per layout of its tensors."""

    def __init__(self, kernel: FusedKernel) -> None:
        self.expected = [(torch.Size(kernel.input_shape(i)), d) for i, d in enumerate(kernel.input_dtypes)]
        self.outputs = [(kernel.output_shape(j), kernel.instrs[o.index].dtype)
                        for j, o in enumerate(kernel.outputs)]
        self.empty = math.prod(kernel.shape) == 0
        self.specs: dict[tuple, Spec] = {}


class TritonExecutor:
    """Runs fused kernels as generated Triton code: on CUDA (``triton``) or under Triton's CPU
    interpreter (``interpret``: how CI without a GPU exercises the generator)."""

    def __init__(self, interpret: bool, cache: KernelCache | None = None,
                 blocks: BlockConfig | None = None) -> None:
        self.interpret = interpret
        self.name = "interpret" if interpret else "triton"
        self.cache = cache if cache is not None else shared_cache()
        self.blocks = blocks or (BlockConfig.for_interpreter() if interpret else BlockConfig())
        self._entries: LRUCache[_KernelEntry] = LRUCache(MAX_KERNELS)
        self._by_id: dict[int, tuple[weakref.ref, _KernelEntry]] = {}
        self.matmul = MatmulRunner(interpret, self.cache)

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
            outputs: Sequence[torch.Tensor | None] | None = None) -> list[torch.Tensor]:
        """Compute the kernel's outputs into ``outputs`` (tensors in ``kernel.output_shape(i)``,
        any non-overlapping strides; None entries, or no list, are allocated contiguous) and
        return them."""
        return self.bind(kernel, inputs, outputs)()

    def bind(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
             outputs: Sequence[torch.Tensor | None] | None = None) -> BoundKernel:
        """``run`` prepared for these tensors: outputs allocated, the launch's arguments built
        and its variant chosen once; each call launches again."""
        if isinstance(kernel, MatmulKernel):
            return self.matmul.bind(kernel, inputs, outputs)
        entry = self._entry(kernel)
        if [(t.shape, t.dtype) for t in inputs] != entry.expected:
            kernel.check_inputs(inputs)
        if not self.interpret and any(not t.is_cuda for t in inputs):
            raise ValueError("the triton executor runs on CUDA tensors; use 'interpret' or "
                             "'reference' for CPU tensors")
        outs = list(outputs) if outputs is not None else [None] * len(entry.outputs)
        given = [t for t in (*inputs, *outs) if t is not None]
        device = given[0].device if given else torch.device("cpu" if self.interpret else "cuda")
        for j, (shape, dtype) in enumerate(entry.outputs):
            if outs[j] is None:
                outs[j] = torch.empty(shape, dtype=dtype, device=device)
            elif tuple(outs[j].shape) != shape or outs[j].dtype != dtype:
                raise ValueError(f"output {j}: expected {shape} {dtype}, got {tuple(outs[j].shape)} {outs[j].dtype}")
        if entry.empty:  # nothing to launch; empty reductions follow aten
            return BoundKernel(None, outs, kernel, list(inputs))
        key = (tuple(t.stride() for t in inputs), tuple(t.stride() for t in outs))
        spec = entry.specs.get(key)
        if spec is None:
            spec = entry.specs[key] = self._spec(kernel, inputs, outs)
        return BoundKernel(spec.bind((*inputs, *outs)), outs, kernel, list(inputs))

    def compile_bound(self) -> None:
        """The kernels of the launches bound since the last call compile together, on threads
        (Triton would compile each at its first launch, one after another)."""
        if not self.interpret:
            compile_new()
            self.matmul.finish_tuning()

    def _entry(self, kernel: FusedKernel) -> _KernelEntry:
        """Found by identity first: hashing a kernel's instructions costs more than the rest of
        a launch's Python side."""
        found = self._by_id.get(id(kernel))
        if found is not None and found[0]() is kernel:
            return found[1]
        entry = self._entries.get(kernel)
        if entry is None:
            entry = _KernelEntry(kernel)
            self._entries.put(kernel, entry)
        by_id = self._by_id
        ref = weakref.ref(kernel, lambda _, key=id(kernel): by_id.pop(key, None))
        by_id[id(kernel)] = (ref, entry)
        return entry

    def _spec(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
              outputs: Sequence[torch.Tensor]) -> Spec | SplitSpec:
        strides = [tensor_strides(t.shape, t.stride()) for t in (*inputs, *outputs)]
        layout = analyze(kernel.shape, kernel.reduce_dims, strides)
        pattern = layout.pattern
        if not kernel.reduce_dims:
            choice = pointwise_choice(layout, self.blocks)
            key = ("pointwise", kernel.structure_key(), pattern, choice.variant)
            fn = self.cache.kernel(key, lambda: pointwise.generate(kernel, pattern, choice.xmask),
                                   pointwise.KERNEL_NAME, self.interpret)
        else:
            choice = reduction_choice(layout, self.blocks)
            split = split_choice(layout, choice, self.blocks)
            if split is not None and reduction.splittable(kernel):
                return self._split_spec(kernel, layout, choice, split)
            key = ("reduction", kernel.structure_key(), pattern, choice.variant)
            fn = self.cache.kernel(
                key, lambda: reduction.generate(kernel, pattern, choice.looped, choice.xmask, choice.rmask),
                reduction.KERNEL_NAME, self.interpret)
        scalars, constants = launch_arguments(layout, len(kernel.input_dtypes), choice)
        grid = (math.ceil(layout.xnumel / choice.xblock),)
        return Spec(fn, grid, scalars, constants, self.interpret)

    def _split_spec(self, kernel: FusedKernel, layout: Layout, choice: Choice, split: Split) -> SplitSpec:
        pattern, structure = layout.pattern, kernel.structure_key()
        partial = self.cache.kernel(
            ("reduction-partial", structure, pattern, choice.variant),
            lambda: reduction.generate_partial(kernel, pattern, choice.xmask, choice.rmask),
            reduction.PARTIAL_NAME, self.interpret)
        finish_choice = Choice(False, split.xblock, split.sblock, split.num_warps, 1,
                               layout.xnumel % split.xblock != 0, True)
        finish = self.cache.kernel(
            ("reduction-finish", structure, pattern, finish_choice.xmask),
            lambda: reduction.generate_finish(kernel, pattern, finish_choice.xmask),
            reduction.FINISH_NAME, self.interpret)
        n = len(kernel.input_dtypes)
        scalars, constants = launch_arguments(layout, n, choice, (split.rchunk, split.chunks))
        _, finish_constants = launch_arguments(layout, n, finish_choice)
        x_programs = math.ceil(layout.xnumel / choice.xblock)
        workspace = [(split.chunks * layout.xnumel, dtype) for dtype in reduction.workspace_dtypes(kernel)]
        return SplitSpec(Spec(partial, (x_programs, split.chunks), scalars, constants, self.interpret),
                         Spec(finish, (math.ceil(layout.xnumel / split.xblock),), scalars, finish_constants,
                              self.interpret),
                         workspace)


def launch_arguments(layout: Layout, n_inputs: int, choice: Choice,
                     extra: Sequence[int] = ()) -> tuple[list[int], dict[str, int]]:
    """The arguments after the tensors: runtime sizes and strides (then ``extra``), and the
    constexprs (block sizes, sizes the index math divides by) with the launch options, in
    parameter order."""
    ix = Indexing(layout.pattern, n_inputs, reduction=bool(choice.rblock))
    sizes = dict(zip(ix.sizes(), [layout.xnumel, *layout.xsizes, layout.rnumel, *layout.rsizes]))
    static = ix.static_sizes()
    scalars = [n for name, n in sizes.items() if name not in static] + layout.stride_args() + list(extra)
    blocks = {k: v for k, v in choice.constants.items() if k.endswith("BLOCK")}
    options = {k: v for k, v in choice.constants.items() if not k.endswith("BLOCK")}
    return scalars, {**blocks, **{name: sizes[name] for name in static}, **options}
