"""aten element-wise op -> Triton expression text, with aten's dtype rules.

Every value lives in registers in its own aten dtype, so each instruction rounds exactly where
eager PyTorch rounds. Half and bfloat16 math runs in float32 ("opmath", as aten's kernels do) and
is rounded back to the instruction's dtype. Functions missing from Triton's core ``tl`` API
(tanh, expm1, log1p, atan, ...) are small device helpers written with core ops only, so the same
text runs on triton 3.6-3.9, on the GPU and under the interpreter (which has no libdevice).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..kernel_ir import Instr

TL_TYPES = {
    torch.bool: "tl.int1", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32", torch.float64: "tl.float64",
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)
# Non-finite constants have no literal: module-level constexprs of every generated module. NaN
# is folded from them, since a NaN global fails Triton's check that globals did not change
# between compilations (nan != nan).
SPECIAL_CONSTANTS = {"inf": "_INF", "-inf": "_NINF", "nan": "(_INF - _INF)"}


class UnsupportedKernel(ValueError):
    """The kernel uses an op or dtype the code generator cannot lower."""


@dataclass(frozen=True)
class Operand:
    """One instruction argument: a register value (``expr`` of ``dtype``) or a Python constant."""

    expr: str | None
    dtype: torch.dtype | None
    value: Any = None

    @property
    def is_tensor(self) -> bool:
        return self.expr is not None


def tl_type(dtype: torch.dtype) -> str:
    try:
        return TL_TYPES[dtype]
    except KeyError:
        raise UnsupportedKernel(f"dtype {dtype} has no Triton lowering") from None


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype aten computes in for results of ``dtype``."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def promote(operands: Sequence[Operand]) -> torch.dtype:
    """aten's promotion for tensors and wrapped Python numbers (numbers only lift the category)."""
    tensors = [o.dtype for o in operands if o.is_tensor]
    result = tensors[0]
    for d in tensors[1:]:
        result = torch.promote_types(result, d)

    def category(d: torch.dtype) -> int:
        return 0 if d == torch.bool else 2 if d.is_floating_point else 1

    for o in operands:
        if o.is_tensor or o.value is None:
            continue
        cat = 0 if isinstance(o.value, bool) else 1 if isinstance(o.value, int) else 2
        if cat > category(result):
            result = torch.get_default_dtype() if cat == 2 else torch.int64
    return result


def const(value: Any, dtype: torch.dtype) -> str:
    """A Python number as a Triton constant of ``dtype``."""
    if dtype == torch.bool:
        return f"tl.full([], {int(bool(value))}, tl.int1)"
    if dtype.is_floating_point:
        value = float(value)
        text = SPECIAL_CONSTANTS.get(str(value), repr(value))
        if dtype == torch.float32 and math.isfinite(value):
            return text
        if dtype in _LOW_PRECISION:  # via float32: triton 3.6's interpreter has no bf16 constants
            return cast(f"tl.full([], {text}, tl.float32)", torch.float32, dtype)
        return f"tl.full([], {text}, {tl_type(dtype)})"
    value = int(value)
    if dtype in (torch.int32, torch.int64) and -2**31 <= value < 2**31:
        return str(value)
    info = torch.iinfo(dtype)  # aten casts the number to the dtype, wrapping around
    value = (value - info.min) % (info.max - info.min + 1) + info.min
    return f"tl.full([], {value}, {tl_type(dtype)})"


def cast(expr: str, src: torch.dtype, dst: torch.dtype) -> str:
    if src == dst:
        return expr
    if dst == torch.bool:
        return f"({expr} != 0)"
    if dst == torch.bfloat16:
        return f"_to_bf16({cast(expr, src, torch.float32)})"
    return f"{expr}.to({tl_type(dst)})"


def as_dtype(o: Operand, dtype: torch.dtype) -> str:
    if o.is_tensor:
        return cast(o.expr, o.dtype, dtype)
    return const(o.value, dtype)


# ---------------------------------------------------------------------------------------------
# Device helpers: added to a generated module only when an expression calls them. Keyed by
# name; each entry is (source, helpers it calls).
HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "_expm1": ("""
def _expm1(x):
    # exp(x) - 1 cancels for small |x|: use its Taylor polynomial there.
    p = x * (1.0 + x * (0.5 + x * (0.16666666666666666 + x * (0.041666666666666664 + x * (
        0.008333333333333333 + x * (0.001388888888888889 + x * (0.0001984126984126984 + x * (
            2.48015873015873e-05 + x * 2.7557319223985893e-06))))))))
    return tl.where(tl.abs(x) < 0.5, p, tl.exp(x) - 1.0)
""", ()),
    "_log1p": ("""
def _log1p(x):
    # log(1 + x) loses x's low bits for small |x|: 2 * atanh(x / (2 + x)) as a series there.
    s = x / (2.0 + x)
    z = s * s
    p = 2.0 * s * (1.0 + z * (0.3333333333333333 + z * (0.2 + z * (0.14285714285714285 + z * (
        0.1111111111111111 + z * (0.09090909090909091 + z * 0.07692307692307693))))))
    return tl.where(tl.abs(x) < 0.5, p, tl.log(1.0 + x))
""", ()),
    "_tanh": ("""
def _tanh(x):
    a = tl.abs(x)
    e = _expm1(2.0 * a)
    t = tl.where(a > 20.0, 1.0, e / (e + 2.0))
    return tl.where(x < 0, -t, t)
""", ("_expm1",)),
    "_atan": ("""
def _atan(x):
    # Cephes atanf: reduce to |t| <= tan(pi/8), then an odd polynomial.
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.41421356237309503
    t = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = t * t
    p = (((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * t + t
    r = base + p
    return tl.where(x < 0, -r, r)
""", ()),
    "_asin": ("""
def _asin(x):
    return _atan(x / tl.sqrt((1.0 - x) * (1.0 + x)))
""", ("_atan",)),
    "_acos": ("""
def _acos(x):
    return 2.0 * _atan(tl.sqrt((1.0 - x) / (1.0 + x)))
""", ("_atan",)),
    "_trunc": ("""
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
""", ()),
    "_round_even": ("""
def _round_even(x, exact):
    # Round half to even; floats beyond `exact` are already integers (and inf/nan pass through).
    f = tl.floor(x)
    d = x - f
    odd = f - 2.0 * tl.floor(0.5 * f)
    r = tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, f + odd))
    return tl.where(tl.abs(x) >= exact, x, r)
""", ()),
    "_fmod": ("""
def _fmod(a, b):
    return a % b
""", ()),
    "_remainder": ("""
def _remainder(a, b):
    # Python's modulo: the result takes the divisor's sign (Triton's % is C's fmod/srem).
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
""", ()),
    "_floor_div_int": ("""
def _floor_div_int(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)
""", ()),
    "_floor_div_float": ("""
def _floor_div_float(a, b):
    # c10's div_floor_floating: exact through fmod, not floor(a / b).
    mod = a % b
    div = tl.math.div_rn(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    return tl.where(b == 0, a / b, tl.where(div == 0, 0.0 * (a / b), fl))
""", ()),
    "_pow": ("""
def _pow(x, y):
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = tl.floor(y) == y
    y_odd = y_int & (tl.abs(y % 2.0) == 1.0)
    r = tl.where(x < 0, tl.where(y_int, tl.where(y_odd, -r, r), _INF - _INF), r)
    return tl.where((y == 0) | (x == 1), 1.0, r)
""", ()),
    "_ipow": ("""
def _ipow(base, exp):
    # Integer power by squaring over every bit; negative exponents as aten: 0 unless |base| == 1.
    result = base * 0 + 1
    b = base
    e = exp
    for _ in range(63):
        result = tl.where((e & 1) != 0, result * b, result)
        b = b * b
        e = e >> 1
    neg = tl.where(base == 1, 1, tl.where(base == -1, tl.where((exp & 1) != 0, -1, 1), 0))
    return tl.where(exp < 0, neg, result)
""", ()),
    "_max_nan": ("""
def _max_nan(a, b):
    return tl.where((a > b) | (a != a), a, b)
""", ()),
    "_min_nan": ("""
def _min_nan(a, b):
    return tl.where((a < b) | (a != a), a, b)
""", ()),
    "_to_bf16": ("""
def _to_bf16(x):
    return x.to(tl.bfloat16)
""", ("_to_bf16_interpreted",)),
    # The interpreter truncates float32 -> bfloat16 (the GPU rounds to nearest even): the loader
    # puts this in _to_bf16's place in interpreted modules. Rounds the bits, then converts exactly.
    "_to_bf16_interpreted": ("""
def _to_bf16_interpreted(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    rounded = (bits & 0xFFFF0000).to(tl.float32, bitcast=True)
    return tl.where(x != x, x, rounded).to(tl.bfloat16)
""", ()),
    "_add_combine": ("""
def _add_combine(a, b):
    return a + b
""", ()),
    "_mul_combine": ("""
def _mul_combine(a, b):
    return a * b
""", ()),
}


def helper_closure(names: set[str]) -> list[str]:
    """Helpers in definition order (callees first) for the given names."""
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for dep in HELPERS[name][1]:
            visit(dep)
        ordered.append(name)

    for name in sorted(names):
        visit(name)
    return ordered


# ---------------------------------------------------------------------------------------------
# Lowerings. Each takes the instruction and its operands and returns (expression, dtype of the
# expression); ``lower`` casts the expression to the instruction's dtype.

Lowering = Callable[[Instr, list[Operand]], tuple[str, torch.dtype]]
_LOWERINGS: dict[str, Lowering] = {}


def _register(*names: str) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        for name in names:
            _LOWERINGS[name] = fn
        return fn
    return deco


def _attr(ins: Instr, name: str, default: Any) -> Any:
    return dict(ins.attrs).get(name, default)


def _arg(ins: Instr, ops: list[Operand], pos: int, name: str, default: Any) -> Any:
    """A scalar parameter given positionally or as a keyword."""
    if pos < len(ops):
        return ops[pos].value
    return _attr(ins, name, default)


def _math(ins: Instr) -> torch.dtype:
    """Compute dtype of a floating-point function: opmath of the (floating) result dtype."""
    if not ins.dtype.is_floating_point:
        raise UnsupportedKernel(f"{ins.op} with non-floating result {ins.dtype}")
    return opmath(ins.dtype)


_FLOAT_UNARY = {
    "exp": "tl.exp({x})", "exp2": "tl.exp2({x})", "expm1": "_expm1({x})", "log": "tl.log({x})",
    "log2": "tl.log2({x})", "log10": "(tl.log({x}) * 0.4342944819032518)", "log1p": "_log1p({x})",
    "sqrt": "tl.sqrt_rn({x})", "rsqrt": "(1.0 / tl.sqrt_rn({x}))", "sin": "tl.sin({x})",
    "cos": "tl.cos({x})", "tan": "(tl.sin({x}) / tl.cos({x}))", "tanh": "_tanh({x})",
    "sinh": "(0.5 * (_expm1({x}) - _expm1(-{x})))", "cosh": "(0.5 * (tl.exp({x}) + tl.exp(-{x})))",
    "asin": "_asin({x})", "acos": "_acos({x})", "atan": "_atan({x})",
    "sigmoid": "(1.0 / (1.0 + tl.exp(-{x})))", "erf": "tl.erf({x})",
    "reciprocal": "(1.0 / {x})", "silu": "({x} / (1.0 + tl.exp(-{x})))",
}


@_register(*_FLOAT_UNARY)
def _float_unary(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    if d == torch.float64 and ins.op in ("sqrt", "rsqrt"):
        return _FLOAT_UNARY[ins.op].replace("sqrt_rn", "sqrt").format(x=x), d
    return _FLOAT_UNARY[ins.op].format(x=x), d


@_register("floor", "ceil", "trunc", "round", "frac")
def _rounding(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    src = ops[0]
    if not ins.dtype.is_floating_point:  # integers are already whole
        return (f"({src.expr} * 0)" if ins.op == "frac" else src.expr), src.dtype
    d = opmath(ins.dtype)
    x = as_dtype(src, d)
    exact = const(2.0 ** (52 if d == torch.float64 else 23), d)
    if ins.op == "round":
        decimals = _arg(ins, ops, 1, "decimals", 0)
        if decimals == 0:
            return f"_round_even({x}, {exact})", d
        scale = const(10.0 ** abs(decimals), d)
        if decimals > 0:
            return f"(_round_even({x} * {scale}, {exact}) / {scale})", d
        return f"(_round_even({x} / {scale}, {exact}) * {scale})", d
    return {"floor": f"tl.floor({x})", "ceil": f"tl.ceil({x})", "trunc": f"_trunc({x})",
            "frac": f"({x} - _trunc({x}))"}[ins.op], d


@_register("add", "sub", "rsub")
def _add(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    if ins.op == "rsub":
        a, b = b, a
    alpha = _arg(ins, ops, 2, "alpha", 1)
    if d == torch.bool:
        return f"({a} | {b})", d
    if alpha != 1:
        b = f"({b} * {const(alpha, d)})"
    return f"({a} {'+' if ins.op == 'add' else '-'} {b})", d


@_register("mul")
def _mul(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    return (f"({a} & {b})" if d == torch.bool else f"({a} * {b})"), d


@_register("square")
def _square(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a = as_dtype(ops[0], d)
    return (a if d == torch.bool else f"({a} * {a})"), d


@_register("div")
def _div(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    mode = _attr(ins, "rounding_mode", None)
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    if mode is None:
        return f"({a} / {b})", d
    if d.is_floating_point:
        # Correctly rounded division: the GPU's default float32 `/` is approximate, and one ulp
        # flips a quotient that lies next to an integer.
        if mode == "floor":
            return f"_floor_div_float({a}, {b})", d
        quotient = f"tl.math.div_rn({a}, {b})"
        if ops[1].is_tensor:
            # aten's trunc kernels (CPU and CUDA) divide two tensors in the result's own type:
            # a half or bfloat16 quotient is rounded to that type before it is truncated.
            quotient = cast(cast(quotient, d, ins.dtype), ins.dtype, d)
        return f"_trunc({quotient})", d
    return (f"({a} // {b})" if mode == "trunc" else f"_floor_div_int({a}, {b})"), d


@_register("floor_divide")
def _floor_divide(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    fn = "_floor_div_float" if d.is_floating_point else "_floor_div_int"
    return f"{fn}({a}, {b})", d


@_register("remainder", "fmod")
def _remainder(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    return f"_{ins.op}({a}, {b})", d


@_register("neg")
def _neg(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    return f"(-{as_dtype(ops[0], d)})", d


@_register("abs")
def _abs(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    x = as_dtype(ops[0], d)
    return (x if d == torch.bool else f"tl.where({x} < 0, -{x}, {x})"), d


@_register("sign")
def _sign(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    x = as_dtype(ops[0], d)
    if d == torch.bool:
        return x, d
    return f"(({x} > 0).to({tl_type(d)}) - ({x} < 0).to({tl_type(d)}))", d


def _nan_max(a: str, b: str, d: torch.dtype) -> str:
    if d == torch.bool:
        return f"({a} | {b})"
    return f"_max_nan({a}, {b})"


def _nan_min(a: str, b: str, d: torch.dtype) -> str:
    if d == torch.bool:
        return f"({a} & {b})"
    return f"_min_nan({a}, {b})"


@_register("maximum", "minimum")
def _maximum(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    return (_nan_max if ins.op == "maximum" else _nan_min)(a, b, d), d


def _clamped(x: str, lo: Operand | None, hi: Operand | None, d: torch.dtype) -> str:
    # aten.clamp: NaN in x propagates; lo > hi gives hi.
    if lo is not None and (lo.is_tensor or lo.value is not None):
        x = _nan_max(x, as_dtype(lo, d), d)
    if hi is not None and (hi.is_tensor or hi.value is not None):
        x = _nan_min(x, as_dtype(hi, d), d)
    return x


def _scalar_operand(ins: Instr, ops: list[Operand], pos: int, name: str) -> Operand | None:
    if pos < len(ops):
        return ops[pos]
    value = _attr(ins, name, None)
    return None if value is None else Operand(None, None, value)


@_register("clamp")
def _clamp(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    lo, hi = _scalar_operand(ins, ops, 1, "min"), _scalar_operand(ins, ops, 2, "max")
    return _clamped(as_dtype(ops[0], d), lo, hi, d), d


@_register("clamp_min", "clamp_max")
def _clamp_one(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    bound = _scalar_operand(ins, ops, 1, ins.op[len("clamp_"):])
    lo, hi = (bound, None) if ins.op == "clamp_min" else (None, bound)
    return _clamped(as_dtype(ops[0], d), lo, hi, d), d


@_register("hardtanh")
def _hardtanh(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    lo = Operand(None, None, _arg(ins, ops, 1, "min_val", -1.0))
    hi = Operand(None, None, _arg(ins, ops, 2, "max_val", 1.0))
    return _clamped(as_dtype(ops[0], d), lo, hi, d), d


@_register("where")
def _where(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = ins.dtype
    cond = as_dtype(ops[0], torch.bool)
    return f"tl.where({cond}, {as_dtype(ops[1], d)}, {as_dtype(ops[2], d)})", d


@_register("lerp")
def _lerp(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    s, e, w = (as_dtype(o, d) for o in ops[:3])
    return (f"tl.where(tl.abs({w}) < 0.5, {s} + {w} * ({e} - {s}), "
            f"{e} - ({e} - {s}) * (1.0 - {w}))"), d


@_register("addcmul", "addcdiv")
def _addc(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    s, t1, t2 = (as_dtype(o, d) for o in ops[:3])
    value = _arg(ins, ops, 3, "value", 1)
    term = f"{t1} * {t2}" if ins.op == "addcmul" else f"{t1} / {t2}"
    if value != 1:
        term = f"{const(value, d)} * {term}"
    return f"({s} + {term})", d


_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@_register(*_COMPARISONS)
def _compare(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(promote(ops[:2]))
    if d.is_floating_point or d == torch.bool:
        a, b = as_dtype(ops[0], d), as_dtype(ops[1], d)
    else:  # an integer constant out of the tensor's range still compares by value
        a, b = (o.expr if o.is_tensor else const(o.value, torch.int64) for o in ops[:2])
    return f"({a} {_COMPARISONS[ins.op]} {b})", torch.bool


@_register("logical_and", "logical_or", "logical_xor", "logical_not")
def _logical(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    a = as_dtype(ops[0], torch.bool)
    if ins.op == "logical_not":
        return f"({a} == 0)", torch.bool
    b = as_dtype(ops[1], torch.bool)
    return f"({a} {dict(logical_and='&', logical_or='|', logical_xor='^')[ins.op]} {b})", torch.bool


@_register("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _bitwise(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = ins.dtype
    if d.is_floating_point:
        raise UnsupportedKernel(f"{ins.op} on {d}")
    a = as_dtype(ops[0], d)
    if ins.op == "bitwise_not":
        return (f"({a} == 0)" if d == torch.bool else f"({a} ^ {const(-1, d)})"), d
    b = as_dtype(ops[1], d)
    return f"({a} {dict(bitwise_and='&', bitwise_or='|', bitwise_xor='^')[ins.op]} {b})", d


@_register("isnan", "isinf")
def _isnan(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    src = ops[0]
    if not src.dtype.is_floating_point:
        return f"({src.expr} != {src.expr})", torch.bool  # always False, in the right shape
    d = opmath(src.dtype)
    x = as_dtype(src, d)
    if ins.op == "isnan":
        return f"({x} != {x})", torch.bool
    return f"(tl.abs({x}) == {const(math.inf, d)})", torch.bool


@_register("nan_to_num")
def _nan_to_num(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    src = ops[0]
    if not src.dtype.is_floating_point:
        return src.expr, src.dtype
    d = opmath(src.dtype)
    finfo = torch.finfo(src.dtype)
    nan = _arg(ins, ops, 1, "nan", 0.0)
    posinf = _arg(ins, ops, 2, "posinf", None)
    neginf = _arg(ins, ops, 3, "neginf", None)
    posinf = finfo.max if posinf is None else posinf
    neginf = finfo.min if neginf is None else neginf
    x = as_dtype(src, d)
    return (f"tl.where({x} != {x}, {const(nan, d)}, tl.where({x} == {const(math.inf, d)}, "
            f"{const(posinf, d)}, tl.where({x} == {const(-math.inf, d)}, {const(neginf, d)}, {x})))"), d


@_register("pow")
def _pow(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    base, exp = ops[0], ops[1]
    d = opmath(ins.dtype)
    if not d.is_floating_point:
        if exp.is_tensor:  # in int64, which wraps back to ``d`` exactly
            wide = torch.int64
            return f"_ipow({as_dtype(base, wide)}, {as_dtype(exp, wide)})", wide
        return _int_power(as_dtype(base, d), int(exp.value), d), d
    if not exp.is_tensor:
        x = as_dtype(base, d)
        special = {2: f"({x} * {x})", 3: f"({x} * {x} * {x})", 1: x, 0.5: f"tl.sqrt_rn({x})",
                   -1: f"(1.0 / {x})", 0: f"({x} * 0.0 + 1.0)"}
        if exp.value in special and not (d == torch.float64 and exp.value == 0.5):
            return special[exp.value], d
    return f"_pow({as_dtype(base, d)}, {as_dtype(exp, d)})", d


def _int_power(x: str, n: int, d: torch.dtype) -> str:
    if n < 0:
        raise UnsupportedKernel("integers to negative integer powers are not allowed")
    terms = [x] * n
    return "(" + " * ".join(terms) + ")" if terms else f"({x} * 0 + 1)"


@_register("relu")
def _relu(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = opmath(ins.dtype)
    x = as_dtype(ops[0], d)
    return f"tl.where({x} < 0, {const(0, d)}, {x})", d


@_register("gelu")
def _gelu(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    if _attr(ins, "approximate", "none") == "tanh":
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return f"(0.5 * {x} * (1.0 + _tanh({inner})))", d
    return f"(0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476)))", d


@_register("hardsigmoid", "hardswish")
def _hard(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    relu6 = f"tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0)"
    if ins.op == "hardsigmoid":
        return f"({relu6} / 6.0)", d
    return f"({x} * {relu6} / 6.0)", d


@_register("leaky_relu")
def _leaky_relu(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    slope = const(_arg(ins, ops, 1, "negative_slope", 0.01), d)
    return f"tl.where({x} > 0, {x}, {x} * {slope})", d


@_register("elu")
def _elu(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    alpha = _arg(ins, ops, 1, "alpha", 1.0)
    scale = _arg(ins, ops, 2, "scale", 1.0)
    input_scale = _arg(ins, ops, 3, "input_scale", 1.0)
    neg = f"{const(alpha * scale, d)} * _expm1({x} * {const(input_scale, d)})"
    return f"tl.where({x} > 0, {x} * {const(scale, d)}, {neg})", d


def _softplus_expr(x: str, beta: float, threshold: float, d: torch.dtype) -> str:
    b = const(beta, d)
    return f"tl.where({x} * {b} > {const(threshold, d)}, {x}, _log1p(tl.exp({x} * {b})) / {b})"


@_register("softplus")
def _softplus(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    beta = _arg(ins, ops, 1, "beta", 1.0)
    threshold = _arg(ins, ops, 2, "threshold", 20.0)
    return _softplus_expr(as_dtype(ops[0], d), beta, threshold, d), d


@_register("mish")
def _mish(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    d = _math(ins)
    x = as_dtype(ops[0], d)
    return f"({x} * _tanh({_softplus_expr(x, 1.0, 20.0, d)}))", d


@_register("clone", "_to_copy")
def _copy(ins: Instr, ops: list[Operand]) -> tuple[str, torch.dtype]:
    return ops[0].expr, ops[0].dtype


def lower(ins: Instr, ops: list[Operand]) -> str:
    """Triton expression computing ``ins`` from its operands, of dtype ``ins.dtype``."""
    fn = _LOWERINGS.get(ins.op)
    if fn is None:
        raise UnsupportedKernel(f"no Triton lowering for aten.{ins.op}")
    tl_type(ins.dtype)
    expr, dtype = fn(ins, ops)
    return cast(expr, dtype, ins.dtype)


def helpers_used(source: str) -> list[str]:
    """Device helpers a kernel body calls, callees first."""
    return helper_closure({name for name in HELPERS if re.search(rf"\b{name}\b", source)})


def lowered_ops() -> frozenset[str]:
    return frozenset(_LOWERINGS)
