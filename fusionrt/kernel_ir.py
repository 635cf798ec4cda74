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
from typing import Any, Optional, Union

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


def evaluate(kernel: Union[FusedKernel, MatmulKernel], inputs: Sequence[torch.Tensor],
             outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> list[torch.Tensor]:
    """Run a kernel with eager aten ops: the ``reference`` executor, and the IR's definition.

    Returns one tensor per output, in ``output_shape``: written into ``outputs`` where given (any
    strides), else new and contiguous.
    """
    if isinstance(kernel, MatmulKernel):
        return evaluate_matmul(kernel, inputs, outputs)
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
        out = outputs[i] if outputs is not None else None
        if out is None:
            out = torch.empty(kernel.output_shape(i), dtype=v.dtype, device=device)
        results.append(out.copy_(v))
    return results


@dataclass(frozen=True)
class MatmulKernel:
    """``epilogue(a(...) @ b(...), ...)``: a matmul template with element-wise ops fused on read
    (each operand is the one output of its prologue kernel, computed while it is loaded) and on
    write (the epilogue kernel, whose input 0 is the product).

    Operands are ``[M, K]`` and ``[K, N]`` or batched ``[B, M, K]`` and ``[B, K, N]``; the
    product has the epilogue's shape. ``product_dtype`` is the operands' dtype for ``mm``/``bmm``
    (eager rounds the product before any later op) or float32 for a low-precision ``addmm``,
    whose bias is added before the one rounding, as cuBLAS does. The kernel's inputs are the
    prologues' inputs, then the epilogue's inputs after the product, flattened in that order.
    """

    a: FusedKernel
    b: FusedKernel
    epilogue: FusedKernel
    product_dtype: torch.dtype

    def __post_init__(self) -> None:
        a, b, e = self.a, self.b, self.epilogue
        if len(a.outputs) != 1 or len(b.outputs) != 1 or a.reduce_dims or b.reduce_dims or e.reduce_dims:
            raise ValueError("prologues compute one element-wise operand each; the epilogue is element-wise")
        if self.operand_dtype != b.instrs[b.outputs[0].index].dtype:
            raise ValueError("matmul operands of different dtypes")
        batch, k = a.shape[:-2], a.shape[-1]
        if len(a.shape) not in (2, 3) or b.shape != (*batch, k, b.shape[-1]):
            raise ValueError(f"operands {a.shape} and {b.shape} do not multiply")
        if e.shape != (*batch, a.shape[-2], b.shape[-1]) or e.input_dtypes[:1] != (self.product_dtype,):
            raise ValueError(f"epilogue over {e.shape} does not take the {self.product_dtype} product")

    @property
    def operand_dtype(self) -> torch.dtype:
        return self.a.instrs[self.a.outputs[0].index].dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.epilogue.shape

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self.epilogue.outputs

    @property
    def instrs(self) -> tuple[Instr, ...]:
        """The epilogue's, which ``outputs`` index (as a ``FusedKernel``'s do)."""
        return self.epilogue.instrs

    @property
    def parts(self) -> tuple[tuple[FusedKernel, int], ...]:
        """(kernel, index of its first own input) for the two prologues and the epilogue."""
        na, nb = len(self.a.input_dtypes), len(self.b.input_dtypes)
        return ((self.a, 0), (self.b, na), (self.epilogue, na + nb - 1))

    @property
    def input_dtypes(self) -> tuple[torch.dtype, ...]:
        return self.a.input_dtypes + self.b.input_dtypes + self.epilogue.input_dtypes[1:]

    def input_shape(self, index: int) -> tuple[int, ...]:
        na, nb = len(self.a.input_dtypes), len(self.b.input_dtypes)
        if index < na:
            return self.a.input_shape(index)
        if index < na + nb:
            return self.b.input_shape(index - na)
        return self.epilogue.input_shape(index - na - nb + 1)

    def output_shape(self, output: int) -> tuple[int, ...]:
        return self.epilogue.output_shape(output)

    def split_inputs(self, inputs: Sequence[Any]) -> tuple[list, list, list]:
        """The flat inputs as (a's, b's, the epilogue's after the product)."""
        na, nb = len(self.a.input_dtypes), len(self.b.input_dtypes)
        return list(inputs[:na]), list(inputs[na:na + nb]), list(inputs[na + nb:])

    check_inputs = FusedKernel.check_inputs  # the same guard: it reads only input_dtypes/input_shape

    def structure_key(self) -> tuple:
        return ("matmul", self.a.structure_key(), self.b.structure_key(), self.epilogue.structure_key(),
                self.product_dtype)


def plain_operand(kernel: FusedKernel) -> bool:
    """A prologue that only loads its operand (the common case: nothing fused on read)."""
    (ins,) = kernel.instrs if len(kernel.instrs) == 1 else (None,)
    return (ins is not None and ins.op == "clone" and ins.args == (Input(0),)
            and len(kernel.input_dtypes) == 1 and not kernel.reduced_inputs)


def identity_kernel(shape: tuple[int, ...], dtype: torch.dtype) -> FusedKernel:
    """A kernel that outputs its one input: a plain operand, or an epilogue that only stores."""
    return FusedKernel(shape, (dtype,), (Instr("clone", (Input(0),), dtype),), (Value(0),))


def evaluate_matmul(kernel: MatmulKernel, inputs: Sequence[torch.Tensor],
                    outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> list[torch.Tensor]:
    """The template's definition with eager ops: what the ``reference`` executor runs."""
    kernel.check_inputs(inputs)
    ins_a, ins_b, ins_e = kernel.split_inputs(inputs)
    a = ins_a[0] if plain_operand(kernel.a) else evaluate(kernel.a, ins_a)[0]
    b = ins_b[0] if plain_operand(kernel.b) else evaluate(kernel.b, ins_b)[0]
    if kernel.product_dtype != a.dtype:
        a, b = a.to(kernel.product_dtype), b.to(kernel.product_dtype)
    product = torch.matmul(a, b)
    if plain_operand(kernel.epilogue):
        out = outputs[0] if outputs is not None else None
        return [product.contiguous() if out is None else out.copy_(product)]
    return evaluate(kernel.epilogue, [product, *ins_e], outputs)
