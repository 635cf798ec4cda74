"""Executors: several ways to run one plan's fused kernels, with identical write accounting.

The plan decides what is written; an executor only computes the outputs of one ``FusedKernel``
from inputs already viewed into the kernel's iteration space. Matmul, conv and fallback ops run on
torch's own kernels whatever the executor.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Optional, Protocol

import torch

from .kernel_ir import FusedKernel, evaluate

class Executor(Protocol):
    name: str

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
            outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> list[torch.Tensor]:
        """Compute one tensor per kernel output, in ``kernel.output_shape(i)``, and return them.
        ``outputs`` gives where to write them (any non-overlapping strides: the runtime passes
        home tensors and scratch laid out like them); a None entry, or no list, means a new
        contiguous tensor."""
        ...

    def bind(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
             outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> Callable[[], list[torch.Tensor]]:
        """``run`` prepared once for these tensors: each call computes the kernel again and
        returns its output tensors."""
        ...

    def compile_bound(self) -> None:
        """Get ready every kernel bound since the last call, together (a plan's first run
        binds all its kernels before it launches any)."""
        ...


class ReferenceExecutor:
    """Each kernel evaluated with eager aten ops: fast on CPU, the default without a GPU."""

    name = "reference"

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
            outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> list[torch.Tensor]:
        return evaluate(kernel, inputs, outputs)

    def bind(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor],
             outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> Callable[[], list[torch.Tensor]]:
        return functools.partial(self.run, kernel, inputs, outputs)

    def compile_bound(self) -> None:
        """Nothing to compile: aten's kernels."""


class MissingTriton(ImportError):
    """An executor that runs generated kernels was asked for where triton is not installed."""


@functools.cache
def triton_available() -> bool:
    """Triton is optional (it has no wheels for macOS or Windows): only generated kernels need it."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


# name -> (makes the executor, needs triton); "auto" picks one per device (``resolve``).
_REGISTRY: dict[str, tuple[Callable[[], Executor], bool]] = {}


def register_executor(name: str, make: Callable[[], Executor], *, needs_triton: bool = False) -> None:
    """Make ``make()`` the executor called ``name`` (the model: Inductor's backend registry)."""
    _REGISTRY[name] = (make, needs_triton)


def _generated(interpret: bool) -> Executor:
    from .codegen import TritonExecutor  # imports triton only when generated kernels are wanted

    return TritonExecutor(interpret=interpret)


register_executor("reference", ReferenceExecutor)
register_executor("interpret", functools.partial(_generated, True), needs_triton=True)
register_executor("triton", functools.partial(_generated, False), needs_triton=True)
EXECUTORS = ("auto", *_REGISTRY)


def require(name: str) -> None:
    """Fail at once, in one line, when executor ``name`` needs triton and it is missing."""
    if name in _REGISTRY and _REGISTRY[name][1] and not triton_available():
        raise MissingTriton(f"fusionrt: the {name!r} executor needs triton (pip install triton)")


def resolve(name: str, device: torch.device) -> str:
    """``auto`` means generated Triton kernels for CUDA tensors and eager aten for CPU ones (and
    for CUDA ones too when triton is missing)."""
    if name != "auto" and name not in _REGISTRY:
        raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if name == "auto":
        return "triton" if device.type == "cuda" and triton_available() else "reference"
    return name


def get_executor(name: str, device: torch.device = torch.device("cpu")) -> Executor:
    name = resolve(name, device)
    require(name)
    return _REGISTRY[name][0]()
