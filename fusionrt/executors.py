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


def resolve(name: str, device: torch.device) -> str:
    """``auto`` means generated Triton kernels for CUDA tensors and eager aten for CPU ones."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if name == "auto":
        return "triton" if device.type == "cuda" else "reference"
    return name


def get_executor(name: str, device: torch.device = torch.device("cpu")) -> Executor:
    name = resolve(name, device)
    if name == "reference":
        return ReferenceExecutor()
    from .codegen import TritonExecutor  # imports triton only when generated kernels are wanted

    return TritonExecutor(interpret=(name == "interpret"))
