"""Reduction kernels (prologue, reductions over any dims, epilogue) shared by CPU and GPU tests."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fusionrt.kernel_ir import FusedKernel, Input, Instr, Value

from .codegen_cases import kernel_of

F32, F16, BF16, I32, I64, BOOL = (torch.float32, torch.float16, torch.bfloat16, torch.int32,
                                  torch.int64, torch.bool)
Case = tuple[str, FusedKernel, Callable[[torch.Generator, str], list[torch.Tensor]]]


def _sum_dtype(dtype: torch.dtype) -> torch.dtype:
    return I64 if dtype in (BOOL, I32, I64) else dtype


def _rand(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, device: str) -> torch.Tensor:
    if dtype == BOOL:
        t = torch.rand(shape, generator=gen) > 0.5
    elif dtype.is_floating_point:
        t = torch.randn(shape, generator=gen)
    else:
        t = torch.randint(-5, 6, tuple(shape), generator=gen)
    return t.to(device=device, dtype=dtype)


def one_reduction(op: str, shape: Sequence[int], dims: Sequence[int], dtype: torch.dtype,
                  make_input: Callable[[torch.Tensor], torch.Tensor] | None = None,
                  storage_shape: Sequence[int] | None = None) -> Case:
    """``op(x * 1 + 0)`` style: a prologue, the reduction, and an epilogue using both levels."""
    out_dtype = _sum_dtype(dtype) if op == "sum" else dtype
    if op == "prod" and dtype in (BOOL, I32):
        out_dtype = I64
    instrs = [Instr(op, (Input(0),), out_dtype)]
    kernel = kernel_of(shape, (dtype,), instrs, outputs=[0], reduce_dims=dims)

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        x = _rand(storage_shape or shape, dtype, gen, device)
        if op == "prod" and dtype.is_floating_point:
            x = (x.float().abs() * 0.5 + 0.75).to(dtype)  # keep products finite and exact-ish
        return [make_input(x) if make_input else x]

    name = f"{op}-{tuple(shape)}-dims{tuple(dims)}-{str(dtype)[6:]}"
    return name, kernel, inputs


def softmax(shape: Sequence[int], dim: int, dtype: torch.dtype, scale: float = 0.125) -> Case:
    """softmax(x * scale + mask) over ``dim`` in fp32 math, cast back (two reductions)."""
    instrs = [
        Instr("_to_copy", (Input(0),), F32, (("dtype", F32),)),
        Instr("mul", (Value(0), scale), F32),
        Instr("add", (Value(1), Input(1)), F32),            # mask broadcast over rows
        Instr("amax", (Value(2),), F32),
        Instr("sub", (Value(2), Value(3)), F32),
        Instr("exp", (Value(4),), F32),
        Instr("sum", (Value(5),), F32),
        Instr("div", (Value(5), Value(6)), F32),
        Instr("_to_copy", (Value(7),), dtype, (("dtype", dtype),)),
    ]
    kernel = kernel_of(shape, (dtype, F32), instrs, outputs=[8], reduce_dims=(dim,))

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        mask_shape = [1] * len(shape)
        mask_shape[dim] = shape[dim]
        mask = torch.where(torch.rand(mask_shape, generator=gen) > 0.2, 0.0, -1e4).to(device)
        return [_rand(shape, dtype, gen, device), mask.expand(*shape)]

    return f"softmax-{tuple(shape)}-dim{dim}-{str(dtype)[6:]}", kernel, inputs


def layer_norm(shape: Sequence[int], dims: Sequence[int], dtype: torch.dtype) -> Case:
    """layer_norm(x + residual) * w + b with mean and var: outputs y (full), mean and rstd
    (reduced); w, b broadcast over the kept dims."""
    instrs = [
        Instr("add", (Input(0), Input(1)), dtype),
        Instr("_to_copy", (Value(0),), F32, (("dtype", F32),)),
        Instr("mean", (Value(1),), F32),
        Instr("sub", (Value(1), Value(2)), F32),
        Instr("mul", (Value(3), Value(3)), F32),
        Instr("mean", (Value(4),), F32),
        Instr("add", (Value(5), 1e-5), F32),
        Instr("rsqrt", (Value(6),), F32),
        Instr("mul", (Value(3), Value(7)), F32),
        Instr("mul", (Value(8), Input(2)), F32),
        Instr("add", (Value(9), Input(3)), F32),
        Instr("_to_copy", (Value(10),), dtype, (("dtype", dtype),)),
    ]
    kernel = kernel_of(shape, (dtype, dtype, F32, F32), instrs, outputs=[11, 2, 7], reduce_dims=dims)

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        param_shape = [n if d in dims else 1 for d, n in enumerate(shape)]
        w = torch.randn(param_shape, generator=gen).to(device).expand(*shape)
        b = torch.randn(param_shape, generator=gen).to(device).expand(*shape)
        return [_rand(shape, dtype, gen, device) * 3 + 1, _rand(shape, dtype, gen, device), w, b]

    return f"layer_norm-{tuple(shape)}-dims{tuple(dims)}-{str(dtype)[6:]}", kernel, inputs


def normalize_with_reduced_inputs(shape: Sequence[int], dims: Sequence[int]) -> Case:
    """(x - mean) * rstd with mean/rstd given in the reduced shape, plus var recomputed: a
    kernel whose full instructions read reduced inputs, and a reduced output computed from both."""
    instrs = [
        Instr("sub", (Input(0), Input(1)), F32),
        Instr("mul", (Value(0), Input(2)), F32),
        Instr("square", (Value(0),), F32),
        Instr("sum", (Value(2),), F32),
        Instr("mul", (Value(3), Input(2)), F32),   # reduced * reduced input
    ]
    kernel = kernel_of(shape, (F32, F32, F32), instrs, outputs=[1, 4], reduce_dims=dims,
                       reduced_inputs=(1, 2))

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        reduced = [1 if d in dims else n for d, n in enumerate(shape)]
        return [torch.randn(shape, generator=gen).to(device),
                torch.randn(reduced, generator=gen).to(device),
                torch.rand(reduced, generator=gen).to(device) + 0.5]

    return f"reduced-inputs-{tuple(shape)}-dims{tuple(dims)}", kernel, inputs


def clone_pattern(shape: Sequence[int]) -> Case:
    """Burn's clone example as one kernel: a = x*2; b = y+1; t3 = sum(a); out = t3 + a*b."""
    instrs = [Instr("mul", (Input(0), 2), F32), Instr("add", (Input(1), 1), F32),
              Instr("sum", (Value(0),), F32), Instr("mul", (Value(0), Value(1)), F32),
              Instr("add", (Value(2), Value(3)), F32)]
    kernel = kernel_of(shape, (F32, F32), instrs, outputs=[4, 2, 0], reduce_dims=(len(shape) - 1,))

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        return [torch.randn(shape, generator=gen).to(device), torch.randn(shape, generator=gen).to(device)]

    return f"clone-pattern-{tuple(shape)}", kernel, inputs


def standard_cases(small: bool = True) -> list[Case]:
    """The reduction patterns every executor must get right. ``small``: interpreter sizes."""
    s = (lambda *shape: shape) if small else (lambda *shape: tuple(n * 16 + 1 for n in shape))
    cases = [
        one_reduction("sum", s(6, 37), (1,), F32),
        one_reduction("sum", s(37, 6), (0,), F32),
        one_reduction("sum", (3, 4, 5, 6), (1, 2), F32),
        one_reduction("sum", (3, 4, 5), (0, 2), F32),
        one_reduction("sum", (3, 4, 5), (0, 1, 2), F32),
        one_reduction("sum", s(5, 9), (1,), F32, make_input=lambda x: x.t().contiguous().t()),
        one_reduction("sum", s(5, 9), (0,), F32, make_input=lambda x: x.t().contiguous().t()),
        one_reduction("sum", (4, 1, 7), (1,), F32),
        one_reduction("mean", s(4, 33), (1,), F16),
        one_reduction("sum", s(4, 33), (1,), BF16),
        one_reduction("mean", (4, 6, 5), (0, 2), BF16),
        one_reduction("amax", s(6, 19), (1,), F32),
        one_reduction("amin", (6, 19), (0,), F16),
        one_reduction("prod", (6, 7), (1,), F32),
        one_reduction("sum", (6, 19), (1,), I32),
        one_reduction("sum", (6, 19), (0,), BOOL),
        one_reduction("amax", (6, 19), (1,), I64),
        one_reduction("amax", (6, 19), (1,), BOOL),
        one_reduction("prod", (6, 5), (1,), I32),
        one_reduction("sum", (4, 9), (1,), F32, make_input=lambda x: x.expand(4, 9), storage_shape=(1, 9)),
        one_reduction("sum", (4, 9), (0,), F32, make_input=lambda x: x.expand(4, 9), storage_shape=(1, 9)),
        one_reduction("sum", (4, 9), (1,), F32, make_input=lambda x: x.expand(4, 9), storage_shape=(4, 1)),
        softmax(s(4, 50), 1, F32),
        softmax((3, 16, 5), 1, F16),
        softmax(s(3, 40), 1, BF16),
        layer_norm(s(5, 48), (1,), F32),
        layer_norm((3, 8, 6), (1, 2), BF16),
        layer_norm((6, 3, 4), (0,), F16),
        normalize_with_reduced_inputs((4, 10), (1,)),
        normalize_with_reduced_inputs((4, 3, 10), (0, 2)),
        clone_pattern(s(6, 20)),
    ]
    return cases


def bias_gradient(shape: tuple[int, int]) -> Case:
    """A backward pass's bias gradient: the element-wise gradient (a full output) and its
    column sum in fp32, cast back to bf16."""
    instrs = [Instr("mul", (Input(0), Input(1)), BF16), Instr("_to_copy", (Value(0),), F32, (("dtype", F32),)),
              Instr("sum", (Value(1),), F32), Instr("_to_copy", (Value(2),), BF16, (("dtype", BF16),))]
    kernel = kernel_of(shape, (BF16, BF16), instrs, outputs=[0, 3], reduce_dims=(0,))

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        return [torch.randn(shape, generator=gen).to(device, BF16), torch.randn(shape, generator=gen).to(device, BF16)]

    return f"bias-gradient-{shape}", kernel, inputs


def nan_case() -> Case:
    """amax/amin/sum propagate NaN like aten."""
    kernel = kernel_of((4, 9), (F32,), [Instr("amax", (Input(0),), F32), Instr("amin", (Input(0),), F32),
                                        Instr("sum", (Input(0),), F32)], outputs=[0, 1, 2],
                       reduce_dims=(1,))

    def inputs(gen: torch.Generator, device: str) -> list[torch.Tensor]:
        x = torch.randn(4, 9, generator=gen)
        x[1, 3] = float("nan")
        x[2, 0] = float("inf")
        return [x.to(device)]

    return "nan-propagation", kernel, inputs
