"""Executors: several ways to run one plan's fused kernels, with identical write accounting.

The plan decides what is written; an executor only computes the outputs of one ``FusedKernel``
from inputs already viewed into the kernel's iteration space. Matmul, conv and fallback ops run on
torch's own kernels whatever the executor.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from .kernel_ir import FusedKernel, evaluate

EXECUTORS = ("auto", "reference", "interpret", "triton")


class Executor(Protocol):
    name: str

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Return one contiguous tensor per kernel output, in ``kernel.output_shape(i)``."""
        ...


class ReferenceExecutor:
    """Each kernel evaluated with eager aten ops: fast on CPU, the default without a GPU."""

    name = "reference"

    def run(self, kernel: FusedKernel, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return evaluate(kernel, inputs)


def get_executor(name: str = "auto") -> Executor:
    """``auto`` is ``triton`` when CUDA is available, else ``reference``."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if name == "auto":
        name = "triton" if torch.cuda.is_available() else "reference"
    if name == "reference":
        return ReferenceExecutor()
    from .codegen import TritonExecutor  # imports triton only when generated kernels are wanted

    return TritonExecutor(interpret=(name == "interpret"))
