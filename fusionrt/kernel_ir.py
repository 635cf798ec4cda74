"""The fused-kernel IR: the one thing the scheduler hands to an executor.

A ``FusedKernel`` is a straight-line program over one iteration space ``shape``. Every input
arrives already viewed into that space (broadcast dims have stride 0; views of concrete tensors
are only strides), so a kernel never deals with views itself. Each value is *full* (one element
per index of ``shape``) or *reduced* (one element per index of ``shape`` with every dim in
``reduce_dims`` set to 1). A reduction instruction turns a full value into a reduced one; full
instructions may read reduced values (broadcast along ``reduce_dims``). That is how a prologue,
several reductions over the same dims and an epilogue (softmax, layer_norm) form one kernel.
A kernel without ``reduce_dims`` is a plain element-wise kernel.

Instruction ops are aten overload-packet names with aten's own semantics and argument order
(``add``, ``mul``, ``where``, ``gelu`` with ``approximate`` in ``attrs``, ``_to_copy`` with
``dtype`` in ``attrs``, ...). So the reference executor *is* aten, op for op, and a code
generator needs one lowering per name. Python scalars among the arguments are constants with
aten's wrapped-number promotion rules; ``dtype`` is the result dtype eager PyTorch gives.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Union

import torch

REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod"})

# The element-wise vocabulary: every name here is an aten op that the capture may emit into a
# fused kernel and every executor must run. Adding a name means adding its lowering too.
POINTWISE_OPS = frozenset({
    # arithmetic
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "reciprocal", "pow", "remainder", "fmod",
    "floor_divide", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "where", "lerp",
    "addcmul", "addcdiv", "square",
    # comparisons and logic
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "isnan", "isinf", "nan_to_num",
    # math
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
    "tanh", "sinh", "cosh", "asin", "acos", "atan", "sigmoid", "erf", "floor", "ceil", "round",
    "trunc", "sign", "frac",
    # activations
    "relu", "gelu", "silu", "hardtanh", "hardsigmoid", "hardswish", "leaky_relu", "elu",
    "softplus", "mish",
    # copies and casts
    "clone", "_to_copy",
})


@dataclass(frozen=True)
class Input:
    """The kernel's ``index``-th input tensor."""

    index: int


@dataclass(frozen=True)
class Value:
    """The result of the kernel's ``index``-th instruction."""

    index: int


Ref = Union[Input, Value, bool, int, float]


@dataclass(frozen=True)
class Instr:
    op: str
    args: tuple[Ref, ...]
    dtype: torch.dtype
    attrs: tuple[tuple[str, Any], ...] = ()  # keyword arguments of the aten op, hashable values

    @property
    def is_reduction(self) -> bool:
        return self.op in REDUCTIONS


@dataclass(frozen=True)
class FusedKernel:
    shape: tuple[int, ...]
    input_dtypes: tuple[torch.dtype, ...]
    instrs: tuple[Instr, ...]
    outputs: tuple[Value, ...]
    reduce_dims: tuple[int, ...] = ()  # sorted, non-negative
    reduced_inputs: frozenset[int] = frozenset()  # inputs given in the reduced (keepdim) shape

    def __post_init__(self) -> None:
        self.levels  # validates eagerly: a malformed kernel is a scheduler bug, caught at build

    @property
    def reduced_shape(self) -> tuple[int, ...]:
        return tuple(1 if d in self.reduce_dims else n for d, n in enumerate(self.shape))

    @cached_property
    def levels(self) -> tuple[bool, ...]:
        """Per instruction: True when its value is reduced."""
        levels: list[bool] = []
        for i, ins in enumerate(self.instrs):
            arg_levels = []
            for a in ins.args:
                if isinstance(a, Input):
                    if not 0 <= a.index < len(self.input_dtypes):
                        raise ValueError(f"instr {i} ({ins.op}) reads missing input {a.index}")
                    arg_levels.append(a.index in self.reduced_inputs)
                elif isinstance(a, Value):
                    if not 0 <= a.index < i:
                        raise ValueError(f"instr {i} ({ins.op}) reads value {a.index} before it exists")
                    arg_levels.append(levels[a.index])
            if ins.is_reduction:
                if not self.reduce_dims:
                    raise ValueError(f"instr {i} reduces but the kernel has no reduce_dims")
                if arg_levels != [False]:
                    raise ValueError(f"instr {i} ({ins.op}) must reduce exactly one full value")
                levels.append(True)
            else:
                levels.append(all(arg_levels))
        for out in self.outputs:
            if not 0 <= out.index < len(self.instrs):
                raise ValueError(f"output reads missing value {out.index}")
        return tuple(levels)

    def output_shape(self, output: int) -> tuple[int, ...]:
        return self.reduced_shape if self.levels[self.outputs[output].index] else self.shape

    def input_shape(self, index: int) -> tuple[int, ...]:
        return self.reduced_shape if index in self.reduced_inputs else self.shape

    def check_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        """Every executor's guard: inputs must already be viewed into the kernel's space."""
        if len(inputs) != len(self.input_dtypes):
            raise ValueError(f"kernel takes {len(self.input_dtypes)} inputs, got {len(inputs)}")
        for i, t in enumerate(inputs):
            if tuple(t.shape) != self.input_shape(i) or t.dtype != self.input_dtypes[i]:
                raise ValueError(f"input {i}: expected {self.input_shape(i)} {self.input_dtypes[i]},"
                                 f" got {tuple(t.shape)} {t.dtype}")

    def structure_key(self) -> tuple:
        """What a compiled kernel depends on besides sizes and strides (its cache key's core)."""
        return (len(self.shape), self.reduce_dims, self.input_dtypes, self.reduced_inputs,
                self.instrs, self.outputs)


def _reduce(ins: Instr, x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    kwargs = dict(ins.attrs)
    if ins.op == "prod":  # aten.prod reduces one dim at a time
        for d in sorted(dims, reverse=True):
            x = torch.ops.aten.prod(x, d, True, **kwargs)
        return x
    return getattr(torch.ops.aten, ins.op)(x, list(dims), True, **kwargs)


def evaluate(kernel: FusedKernel, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Run a kernel with eager aten ops: the ``reference`` executor, and the IR's definition.

    Returns one contiguous tensor per output, in ``output_shape``.
    """
    kernel.check_inputs(inputs)
    values: list[Any] = []

    def get(ref: Ref) -> Any:
        if isinstance(ref, Input):
            return inputs[ref.index]
        if isinstance(ref, Value):
            return values[ref.index]
        return ref

    for ins in kernel.instrs:
        args = [get(a) for a in ins.args]
        if ins.is_reduction:
            out = _reduce(ins, args[0], kernel.reduce_dims)
        else:
            out = getattr(torch.ops.aten, ins.op)(*args, **dict(ins.attrs))
        values.append(out if out.dtype == ins.dtype else out.to(ins.dtype))

    device = inputs[0].device if inputs else torch.device("cpu")
    results = []
    for i, ref in enumerate(kernel.outputs):
        v = values[ref.index]
        out = torch.empty(kernel.output_shape(i), dtype=v.dtype, device=device)
        results.append(out.copy_(v))
    return results
