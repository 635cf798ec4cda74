"""Launching a generated kernel: decided once per (kernel, layouts), little work per call.

A ``Spec`` holds what depends only on a kernel and its tensors' layouts: the function, the grid,
the size and stride arguments, the block sizes. ``Spec.bind`` pairs it with concrete tensors into
a ``Launch``, a call without arguments that can be repeated (a bound plan, a benchmark); a
``BoundKernel`` adds the outputs, and its ``Relauncher`` launches the same spec over a replayed
plan's new tensors. A ``SplitSpec`` is a split reduction's pair of specs over the same tensors
and a workspace it allocates per launch (``codegen.reduction``): it binds, relaunches and
launches by address as one.

On the GPU the first launch of a specialization goes through ``JITFunction``, which compiles or
finds the binary Triton specialized for those arguments (the sizes and strides, fixed per spec,
and whether each pointer is 16-byte aligned). Later launches with the same specialization call
that binary's launcher directly: ``JITFunction.run`` re-binds the arguments and rebuilds its
cache key on every call, which costs more than the launch itself. Triton 3.6-3.9 launch a
compiled kernel the same way (grid, stream, function, metadata, hooks, then every parameter
including constexprs), and launch hooks (profilers) keep the ``JITFunction`` path.
"""
from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from ..kernel_ir import FusedKernel, MatmulKernel, evaluate


class Spec:
    """One kernel function with its grid and the arguments that follow the tensors."""

    def __init__(self, fn: Any, grid: tuple[int, ...], scalars: Sequence[int], constants: dict[str, int],
                 interpret: bool) -> None:
        from triton import knobs  # triton is optional: imported by the paths that launch
        from triton.runtime import driver

        self.fn, self.grid, self.scalars, self.constants = fn, grid, tuple(scalars), constants
        self.hooks, self.driver = knobs.runtime, driver
        self.grid3 = (*grid, 1, 1)[:3]
        self.interpret = interpret
        # Parameters after the positional ones are the block-size constexprs, in order.
        self.constexprs = tuple(v for k, v in constants.items() if k not in ("num_warps", "num_stages"))
        self._compiled: dict[tuple, Any] = {}  # (device, pointer alignments) -> CompiledKernel

    def bind(self, tensors: Sequence[torch.Tensor]) -> Launch:
        """A launch over ``tensors`` (inputs then outputs, viewed as the spec expects); one whose
        kernel is not compiled yet waits in ``_UNCOMPILED`` for ``compile_new``."""
        launch = Launch(self, tuple(tensors))
        if not self.interpret and launch._key not in self._compiled:
            _UNCOMPILED.append(weakref.ref(launch))
        return launch

    def over(self, tensors: tuple[torch.Tensor, ...], key: tuple) -> Launch:
        """A launch over tensors laid out and aligned as ``key`` says (a replay's: checked before)."""
        return Launch(self, tensors, key)

    def by_address(self, key: tuple) -> AddressLaunch | None:
        """The launch over raw addresses for ``key``, once its kernel is compiled."""
        kernel = None if self.interpret else self._compiled.get(key)
        return None if kernel is None else AddressLaunch(self, kernel, key)

    def launch_jit(self, args: tuple, key: tuple) -> Any:
        """Launch through ``JITFunction``; remember the compiled binary it used."""
        kernel = self.fn.run(*args, grid=self.grid, warmup=False, **self.constants)
        if hasattr(kernel, "result"):  # triton 3.6 may hand back a compile future
            kernel = kernel.result()
        self._compiled[key] = kernel
        return kernel


class Launch:
    """One kernel launch over fixed tensors: ``launch()`` runs it again."""

    __slots__ = ("spec", "tensors", "args", "params", "device", "_key", "_kernel", "__weakref__")

    def __init__(self, spec: Spec, tensors: tuple[torch.Tensor, ...], key: tuple | None = None) -> None:
        self.spec = spec
        self.tensors = tensors
        self.args = (*tensors, *spec.scalars)
        self.params = (*self.args, *spec.constexprs)
        self.device = tensors[0].device if tensors else torch.device("cpu")
        self._key = key or (self.device.index, tuple(t.data_ptr() % 16 == 0 for t in tensors))
        self._kernel: Any = None

    def __call__(self) -> None:
        spec = self.spec
        if spec.interpret:
            spec.fn[spec.grid](*self.args, **spec.constants)
            return
        if _hooked(spec.hooks.launch_enter_hook) or _hooked(spec.hooks.launch_exit_hook):
            spec.launch_jit(self.args, self._key)
            return
        kernel = self._kernel
        if kernel is None:
            kernel = spec._compiled.get(self._key)
            if kernel is None:
                spec.launch_jit(self.args, self._key)
                return
            self._kernel = kernel
        g0, g1, g2 = spec.grid3
        kernel.run(g0, g1, g2, spec.driver.active.get_current_stream(self.device.index), kernel.function,
                   kernel.packed_metadata, None, None, None, *self.params)


class SplitSpec:
    """A split reduction: ``partial`` then ``finish``, each over the kernel's tensors followed by
    one workspace per reduction (``workspace``: its elements and dtype), allocated for each launch
    on the launch's stream, so launches never share one."""

    def __init__(self, partial: Spec, finish: Spec, workspace: Sequence[tuple[int, torch.dtype]]) -> None:
        self.partial, self.finish, self.workspace = partial, finish, tuple(workspace)

    def _workspace(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        return tuple(torch.empty(n, dtype=dtype, device=device) for n, dtype in self.workspace)

    def bind(self, tensors: Sequence[torch.Tensor]) -> SplitLaunch:
        tensors = tuple(tensors)
        every = (*tensors, *self._workspace(tensors[0].device))
        return SplitLaunch(self, tensors, self.partial.bind(every), self.finish.bind(every))

    def over(self, tensors: tuple[torch.Tensor, ...], key: tuple) -> SplitLaunch:
        every = (*tensors, *self._workspace(tensors[0].device))
        inner = _with_workspace(key, len(self.workspace))
        return SplitLaunch(self, tensors, Launch(self.partial, every, inner), Launch(self.finish, every, inner), key)

    def by_address(self, key: tuple) -> SplitAddressLaunch | None:
        inner = _with_workspace(key, len(self.workspace))
        partial, finish = self.partial.by_address(inner), self.finish.by_address(inner)
        return None if partial is None or finish is None else SplitAddressLaunch(self, partial, finish, key)


def _with_workspace(key: tuple, count: int) -> tuple:
    """The inner launches' key: a fresh workspace is always 16-byte aligned."""
    return (key[0], (*key[1], *(True,) * count))


class SplitLaunch:
    """A split reduction's two launches over fixed tensors and one workspace."""

    __slots__ = ("spec", "tensors", "device", "_key", "steps", "__weakref__")

    def __init__(self, spec: SplitSpec, tensors: tuple[torch.Tensor, ...], partial: Launch, finish: Launch,
                 key: tuple | None = None) -> None:
        self.spec, self.tensors, self.device, self.steps = spec, tensors, partial.device, (partial, finish)
        self._key = key or (partial._key[0], partial._key[1][:len(tensors)])

    def __call__(self) -> None:
        for step in self.steps:
            step()


class SplitAddressLaunch:
    """``SplitLaunch`` over addresses (see ``AddressLaunch``), with a workspace per launch."""

    __slots__ = ("spec", "partial", "finish", "aligned")

    def __init__(self, spec: SplitSpec, partial: AddressLaunch, finish: AddressLaunch, key: tuple) -> None:
        self.spec, self.partial, self.finish, self.aligned = spec, partial, finish, key[1]

    def ready(self) -> bool:
        return self.partial.ready()

    def __call__(self, addresses: Sequence[int]) -> None:
        workspace = self.spec._workspace(torch.device("cuda", self.partial.device))
        every = [*addresses, *(w.data_ptr() for w in workspace)]
        self.partial(every)
        self.finish(every)


# Launches bound since the last ``compile_new`` whose kernel was not compiled then (weakly: a
# replay binds one and launches it at once, and nothing may hold its tensors).
_UNCOMPILED: list[weakref.ref[Launch]] = []
COMPILE_THREADS = int(os.environ.get("FUSIONRT_COMPILE_THREADS", min(16, os.cpu_count() or 1)))


def compile_new() -> None:
    """Compile the kernels that the launches bound since the last call will need, all at once.

    Triton compiles a kernel at its first launch, one after another: a plan's first run spent
    most of a whole model's first call there (ptxas and the C compiler of each launcher are
    processes, LLVM's passes C++). Under Triton's ``AsyncCompileMode`` a thread pool compiles
    them together, then builds their launchers; a kernel whose compile fails here compiles
    again at its launch, which raises the error where it belongs."""
    todo: dict[tuple, Launch] = {}
    for ref in _UNCOMPILED:
        launch = ref()
        if launch is not None and launch._key not in launch.spec._compiled:
            todo.setdefault((id(launch.spec), launch._key), launch)
    _UNCOMPILED.clear()
    if len(todo) < 2 or COMPILE_THREADS < 2:
        return
    try:
        from triton import AsyncCompileMode, FutureKernel
    except ImportError:  # a Triton without it compiles each kernel at its launch
        return
    if _hooked(todo[next(iter(todo))].spec.hooks.launch_enter_hook):
        return  # a profiler's hook sees each compile at its launch, as without this
    with ThreadPoolExecutor(min(COMPILE_THREADS, len(todo))) as pool:
        with AsyncCompileMode(pool, ignore_errors=True):
            futures = [(launch, launch.spec.fn.run(*launch.args, grid=launch.spec.grid, warmup=True,
                                                   **launch.spec.constants)) for launch in todo.values()]
        # leaving the mode waited for every compile; a failed one left no kernel
        compiled = [(launch, future.kernel if isinstance(future, FutureKernel) else future)
                    for launch, future in futures]
        compiled = [(launch, kernel) for launch, kernel in compiled if kernel is not None]
        loaded = list(pool.map(_load, compiled))
    for (launch, kernel), ok in zip(compiled, loaded):
        if ok:
            launch.spec._compiled[launch._key] = kernel


def _load(item: tuple[Launch, Any]) -> bool:
    """Load a compiled kernel on its device and build its launcher (a C compile per signature);
    False where that fails (too much shared memory: the launch raises it)."""
    launch, kernel = item
    try:
        with torch.cuda.device(launch.device):
            kernel._init_handles()
    except Exception:
        return False
    return True


def _hooked(hook: Any) -> bool:
    """A launch hook is set: Triton 3.6 keeps an empty ``HookChain`` there by default, which
    calls nothing (treating it as set sent every launch through ``JITFunction.run``)."""
    return hook is not None and bool(getattr(hook, "calls", True))


class BoundKernel:
    """A kernel bound to its tensors: calling it launches and returns the output tensors."""

    __slots__ = ("launch", "outputs", "kernel", "inputs")

    def __init__(self, launch: Launch | SplitLaunch | None, outputs: list[torch.Tensor],
                 kernel: FusedKernel | MatmulKernel,
                 inputs: list[torch.Tensor]) -> None:
        self.launch, self.outputs, self.kernel, self.inputs = launch, outputs, kernel, inputs

    def __call__(self) -> list[torch.Tensor]:
        _launch(self.launch, self.kernel, self.inputs, self.outputs)
        return self.outputs

    def relauncher(self) -> Relauncher:
        """What relaunching this kernel over other tensors needs, without holding these."""
        launch = self.launch
        layouts = [(o.shape, o.stride(), o.dtype, o.device) for o in self.outputs]
        return Relauncher(self.kernel, None if launch is None else launch.spec,
                          None if launch is None else launch._key, layouts)


class Relauncher:
    """A bound kernel's launch over new tensors with the bound ones' layouts and alignment (a
    missing output is allocated like the bound one): a replayed plan re-examines no argument."""

    __slots__ = ("kernel", "spec", "key", "layouts")

    def __init__(self, kernel: FusedKernel | MatmulKernel, spec: Spec | SplitSpec | None, key: tuple | None,
                 layouts: list[tuple]) -> None:
        self.kernel, self.spec, self.key, self.layouts = kernel, spec, key, layouts

    def __call__(self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
        outs = [torch.empty_strided(shape, stride, dtype=dtype, device=device) if out is None else out
                for out, (shape, stride, dtype, device) in zip(outputs, self.layouts)]
        launch = None if self.spec is None else self.spec.over((*inputs, *outs), self.key)
        _launch(launch, self.kernel, inputs, outs)
        return outs

    def by_address(self) -> AddressLaunch | SplitAddressLaunch | None:
        """The compiled kernel's launch over raw device addresses, or None where a launch must
        go through ``Launch`` (interpreted, nothing to launch, not compiled yet)."""
        return None if self.spec is None else self.spec.by_address(self.key)


class AddressLaunch:
    """A compiled kernel launched over addresses: what a replay that fixed every tensor's layout
    needs to pass, without a tensor view per argument. Triton's launcher takes an int as a
    pointer as it is (it checks nothing), so the caller keeps the guarantees ``Launch`` checks:
    the device is the current one, and each address is as aligned as the compiled kernel assumed
    (``aligned``). A launch hook (a profiler) sends the caller back to ``Launch``."""

    __slots__ = ("spec", "run", "function", "metadata", "grid", "tail", "device", "aligned")

    def __init__(self, spec: Spec, kernel: Any, key: tuple) -> None:
        self.spec, self.run, self.function, self.metadata = spec, kernel.run, kernel.function, kernel.packed_metadata
        self.grid, self.tail = spec.grid3, (*spec.scalars, *spec.constexprs)
        self.device, self.aligned = key[0], key[1]

    def ready(self) -> bool:
        """Launching by address is what a ``Launch`` would do now: same device, no hook."""
        hooks = self.spec.hooks
        return (torch.cuda.current_device() == self.device and not _hooked(hooks.launch_enter_hook)
                and not _hooked(hooks.launch_exit_hook))

    def __call__(self, addresses: Sequence[int]) -> None:
        g0, g1, g2 = self.grid
        self.run(g0, g1, g2, self.spec.driver.active.get_current_stream(self.device), self.function,
                 self.metadata, None, None, None, *addresses, *self.tail)


def _launch(launch: Launch | SplitLaunch | None, kernel: FusedKernel | MatmulKernel, inputs: Sequence[torch.Tensor],
            outputs: list[torch.Tensor]) -> None:
    if launch is None:  # nothing to launch (an empty result): aten's answer
        evaluate(kernel, inputs, outputs)
    elif launch.device.type == "cuda" and launch.device.index != torch.cuda.current_device():
        with torch.cuda.device(launch.device):
            launch()
    else:
        launch()
