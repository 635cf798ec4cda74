"""Launching a generated kernel: decided once per (kernel, layouts), little work per call.

A ``Spec`` holds what depends only on a kernel and its tensors' layouts: the function, the grid,
the size and stride arguments, the block sizes. ``Spec.bind`` pairs it with concrete tensors into
a ``Launch``, a call without arguments that can be repeated (a replayed plan, a benchmark).

On the GPU the first launch of a specialization goes through ``JITFunction``, which compiles or
finds the binary Triton specialized for those arguments (the sizes and strides, fixed per spec,
and whether each pointer is 16-byte aligned). Later launches with the same specialization call
that binary's launcher directly: ``JITFunction.run`` re-binds the arguments and rebuilds its
cache key on every call, which costs more than the launch itself. Triton 3.6-3.9 launch a
compiled kernel the same way (grid, stream, function, metadata, hooks, then every parameter
including constexprs), and launch hooks (profilers) keep the ``JITFunction`` path.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from triton import knobs
from triton.runtime import driver


class Spec:
    """One kernel function with its grid and the arguments that follow the tensors."""

    def __init__(self, fn: Any, grid: tuple[int], scalars: Sequence[int], constants: dict[str, int],
                 interpret: bool) -> None:
        self.fn, self.grid, self.scalars, self.constants = fn, grid, tuple(scalars), constants
        self.interpret = interpret
        # Parameters after the positional ones are the block-size constexprs, in order.
        self.constexprs = tuple(v for k, v in constants.items() if k not in ("num_warps", "num_stages"))
        self._compiled: dict[tuple, Any] = {}  # (device, pointer alignments) -> CompiledKernel

    def bind(self, tensors: Sequence[torch.Tensor]) -> Launch:
        """A launch over ``tensors`` (inputs then outputs, viewed as the spec expects)."""
        return Launch(self, tuple(tensors))

    def launch_jit(self, args: tuple, key: tuple) -> Any:
        """Launch through ``JITFunction``; remember the compiled binary it used."""
        kernel = self.fn.run(*args, grid=self.grid, warmup=False, **self.constants)
        if hasattr(kernel, "result"):  # triton 3.6 may hand back a compile future
            kernel = kernel.result()
        self._compiled[key] = kernel
        return kernel


class Launch:
    """One kernel launch over fixed tensors: ``launch()`` runs it again."""

    __slots__ = ("spec", "tensors", "args", "_direct", "_key", "device")

    def __init__(self, spec: Spec, tensors: tuple[torch.Tensor, ...]) -> None:
        self.spec = spec
        self.tensors = tensors
        self.args = (*tensors, *spec.scalars)
        self.device = tensors[0].device if tensors else torch.device("cpu")
        self._direct: Any = None
        self._key = (self.device.index, tuple(t.data_ptr() % 16 == 0 for t in tensors))

    def __call__(self) -> None:
        spec = self.spec
        if spec.interpret:
            spec.fn[spec.grid](*self.args, **spec.constants)
            return
        hooks = knobs.runtime
        if hooks.launch_enter_hook is not None or hooks.launch_exit_hook is not None:
            spec.launch_jit(self.args, self._key)
            return
        if self._direct is not None:
            self._direct()
            return
        kernel = spec._compiled.get(self._key)
        if kernel is None:
            spec.launch_jit(self.args, self._key)
            return
        self._direct = _direct_launcher(kernel, spec, self.args, self.device.index)
        self._direct()


def _direct_launcher(kernel: Any, spec: Spec, args: tuple, device: int) -> Any:
    """A closure calling the compiled kernel's launcher with everything precomputed."""
    run, function, packed = kernel.run, kernel.function, kernel.packed_metadata
    stream_of = driver.active.get_current_stream
    g0 = spec.grid[0]
    params = (*args, *spec.constexprs)

    def launch() -> None:
        run(g0, 1, 1, stream_of(device), function, packed, None, None, None, *params)

    return launch
