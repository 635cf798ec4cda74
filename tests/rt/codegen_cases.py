"""Kernel-building helpers and the op-by-op cases shared by the CPU and GPU codegen tests."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from fusionrt.kernel_ir import POINTWISE_OPS, FusedKernel, Input, Instr, Value, evaluate

# Named inputs every element-wise case may read, in kernel input order:
# x, y: general values; p: positive; u: in (-0.9, 0.9); n: nonzero (|n| >= 0.5 for floats);
# t: tiny (|t| < 1e-3); w: wide with exact halves; s: with nan/inf; c: bool condition.
NAMES = ("x", "y", "p", "u", "n", "t", "w", "s", "c")
X, Y, P, U, N, T, W, S, C = (Input(i) for i in range(len(NAMES)))
F16_TO = (("dtype", torch.float16),)

# op -> list of (args, attrs). Each variant becomes one output of one big kernel per dtype.
CASES: dict[str, list[tuple[tuple, tuple]]] = {
    "add": [((X, Y), ()), ((X, Y), (("alpha", 2),)), ((X, 1.5), ()), ((X, 3), ())],
    "sub": [((X, Y), ()), ((X, 2), ())],
    "rsub": [((X, Y), ()), ((X, 3), ())],
    "mul": [((X, Y), ()), ((X, 0.5), ()), ((X, 3), ())],
    "div": [((X, N), ()), ((X, N), (("rounding_mode", "trunc"),)),
            ((X, N), (("rounding_mode", "floor"),)), ((X, 2.0), ())],
    "neg": [((X,), ())], "abs": [((X,), ())], "reciprocal": [((N,), ())],
    "pow": [((P, Y), ()), ((X, 2), ()), ((X, 3), ()), ((P, 0.5), ()), ((N, -1), ()),
            ((P, 2.5), ()), ((2.0, U), ()), ((X, P), ())],
    "remainder": [((X, N), ()), ((X, 2), ())],
    "fmod": [((X, N), ()), ((X, 2), ())],
    "floor_divide": [((X, N), ())],
    "maximum": [((X, Y), ()), ((X, S), ())], "minimum": [((X, Y), ()), ((S, X), ())],
    "clamp": [((X, -1, 1), ()), ((X, None, 0), ()), ((S, -1), ()), ((X, U, Y), ())],
    "clamp_min": [((X, 0), ())], "clamp_max": [((X, 0), ())],
    "where": [((C, X, Y), ()), ((C, X, 0), ()), ((C, 1, Y), ()), ((C, 2.5, -1.5), ())],
    "lerp": [((X, Y, 0.3), ()), ((X, Y, U), ())],
    "addcmul": [((X, Y, U), ()), ((X, Y, U), (("value", 2),))],
    "addcdiv": [((X, Y, N), ()), ((X, Y, N), (("value", 2),))],
    "square": [((X,), ())],
    "eq": [((X, Y), ()), ((W, 0.5), ())], "ne": [((X, Y), ())], "lt": [((X, Y), ())],
    "le": [((X, 0), ())], "gt": [((X, Y), ())], "ge": [((X, 0.25), ())],
    "logical_and": [((X, C), ())], "logical_or": [((X, Y), ())], "logical_xor": [((X, C), ())],
    "logical_not": [((X,), ())],
    "bitwise_and": [((X, Y), ())], "bitwise_or": [((X, Y), ())], "bitwise_xor": [((X, Y), ())],
    "bitwise_not": [((X,), ())],
    "isnan": [((S,), ())], "isinf": [((S,), ())],
    "nan_to_num": [((S,), ()), ((S, 1.0, 2.0, -2.0), ())],
    "exp": [((X,), ())], "exp2": [((X,), ())], "expm1": [((X,), ()), ((T,), ())],
    "log": [((P,), ())], "log2": [((P,), ())], "log10": [((P,), ())],
    "log1p": [((U,), ()), ((T,), ()), ((P,), ())],
    "sqrt": [((P,), ())], "rsqrt": [((P,), ())],
    "sin": [((X,), ())], "cos": [((X,), ())], "tan": [((U,), ())],
    "tanh": [((X,), ()), ((T,), ()), ((W,), ())], "sinh": [((X,), ()), ((T,), ())],
    "cosh": [((X,), ())], "asin": [((U,), ())], "acos": [((U,), ())], "atan": [((W,), ()), ((T,), ())],
    "sigmoid": [((X,), ())], "erf": [((X,), ())],
    "floor": [((W,), ())], "ceil": [((W,), ())], "round": [((W,), ()), ((X,), (("decimals", 1),))],
    "trunc": [((W,), ())], "sign": [((X,), ())], "frac": [((W,), ())],
    "relu": [((X,), ()), ((S,), ())], "gelu": [((X,), ()), ((X,), (("approximate", "tanh"),))],
    "silu": [((X,), ())], "hardtanh": [((W,), ()), ((X, -0.5, 0.5), ())],
    "hardsigmoid": [((W,), ())], "hardswish": [((W,), ())],
    "leaky_relu": [((X,), ()), ((X, 0.2), ())], "elu": [((X,), ()), ((X, 0.5), ())],
    "softplus": [((X,), ()), ((X, 2.0, 1.0), ())], "mish": [((X,), ())],
    "clone": [((X,), ())],
    "_to_copy": [((X,), (("dtype", torch.float32),)), ((X,), F16_TO), ((W,), (("dtype", torch.int32),)),
                 ((X,), (("dtype", torch.bool),)), ((C,), (("dtype", torch.bfloat16),)),
                 ((X,), (("dtype", torch.int64),))],
}
assert set(CASES) == POINTWISE_OPS, set(CASES) ^ POINTWISE_OPS


def named_inputs(dtype: torch.dtype, shape: Sequence[int], gen: torch.Generator,
                 device: str = "cpu") -> list[torch.Tensor]:
    """Fresh random inputs (never zeros) for every name in ``NAMES``."""
    def rand(lo: float, hi: float) -> torch.Tensor:
        return torch.rand(shape, generator=gen) * (hi - lo) + lo

    if dtype == torch.bool:
        vals = [torch.rand(shape, generator=gen) > 0.5 for _ in NAMES]
    elif dtype.is_floating_point:
        x = torch.randn(shape, generator=gen) * 2
        n = rand(0.5, 3.0) * torch.where(torch.rand(shape, generator=gen) > 0.5, 1.0, -1.0)
        w = torch.round(torch.randn(shape, generator=gen) * 8) / 2  # exact halves and wholes
        w = w + rand(-0.1, 0.1) * (torch.rand(shape, generator=gen) > 0.5)
        s = torch.randn(shape, generator=gen).flatten()
        s[::3] = torch.tensor([math.nan, math.inf, -math.inf])[torch.arange(0, s.numel(), 3) % 3]
        vals = [x, torch.randn(shape, generator=gen) * 2, rand(0.3, 3.0), rand(-0.9, 0.9), n,
                torch.randn(shape, generator=gen) * 1e-3, w, s.reshape(shape), None]
    else:
        info = torch.iinfo(dtype)
        lo = max(info.min, -6)

        def ints(a: int, b: int) -> torch.Tensor:
            return torch.randint(a, b, tuple(shape), generator=gen)

        n = ints(1, 6) * torch.where(torch.rand(shape, generator=gen) > 0.5, 1, -1 if lo < 0 else 1)
        vals = [ints(lo, 7), ints(lo, 7), ints(1, 4), ints(max(lo, -1), 2), n, ints(lo, 7),
                ints(lo, 7), ints(lo, 7), None]
    vals[-1] = torch.rand(shape, generator=gen) > 0.5
    return [v.to(device=device, dtype=dtype if i < len(NAMES) - 1 else torch.bool)
            for i, v in enumerate(vals)]


def eager_dtype(op: str, args: tuple, attrs: tuple, inputs: Sequence[torch.Tensor]) -> torch.dtype | None:
    """The dtype eager aten gives, or None when aten rejects the op for these dtypes."""
    real = [inputs[a.index] if isinstance(a, Input) else a for a in args]
    try:
        out = getattr(torch.ops.aten, op)(*real, **dict(attrs))
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    return out.dtype


def op_kernel(dtype: torch.dtype, inputs: Sequence[torch.Tensor],
              ops: Sequence[str] = tuple(CASES)) -> tuple[FusedKernel, list[str]]:
    """One element-wise kernel computing every supported case of ``ops`` for ``dtype``: one
    output per case. Returns the kernel and a label per output."""
    instrs, labels = [], []
    for op in ops:
        for args, attrs in CASES[op]:
            out_dtype = eager_dtype(op, args, attrs, inputs)
            if out_dtype is None:
                continue
            instrs.append(Instr(op, args, out_dtype, attrs))
            labels.append(f"{op}{args}{dict(attrs) or ''}")
    kernel = FusedKernel(shape=tuple(inputs[0].shape), input_dtypes=tuple(t.dtype for t in inputs),
                         instrs=tuple(instrs), outputs=tuple(Value(i) for i in range(len(instrs))))
    return kernel, labels


def tolerance(dtype: torch.dtype, gpu: bool = False, reduced: int = 1) -> dict[str, Any]:
    """What fusion legitimately changes: a few ulps of the compute dtype (GPU math functions are
    approximate to a few float32 ulps), and for a float32 sum of ``reduced`` terms in another
    order, an absolute error growing like sqrt(reduced) (measured on the H100: 3.4e-5 on a
    4,097-term column sum, 6.5e-5 on 4,096-term row sums of magnitude ~100)."""
    if dtype == torch.float32 and gpu and reduced > 1:
        return dict(rtol=1e-4, atol=1e-5 * max(1.0, reduced ** 0.5 / 4))
    if dtype == torch.float16:
        return dict(rtol=2e-3, atol=1e-4)
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1e-3)
    if dtype == torch.float32:
        return dict(rtol=1e-4, atol=1e-5) if gpu else dict(rtol=2e-5, atol=1e-6)
    return dict(rtol=0, atol=0)


def assert_matches(kernel: FusedKernel, got: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                   labels: Sequence[str] | None = None, gpu: bool = False,
                   reference_device: str | None = None) -> None:
    """Every output equals ``evaluate()``'s, i.e. eager aten's on the inputs' own device unless
    ``reference_device`` names another (same shape, dtype, contiguity), listing all failures. The
    device matters: CUDA eager supports ops (``abs`` on bool) that the CPU kernels lack."""
    ref_inputs = [t.to(reference_device) for t in inputs] if reference_device else inputs
    reduced = math.prod(kernel.shape[d] for d in getattr(kernel, "reduce_dims", ()))
    expected = [e.cpu() for e in evaluate(kernel, ref_inputs)]
    assert len(got) == len(expected)
    failures = []
    for i, (g, e) in enumerate(zip(got, expected)):
        label = labels[i] if labels else f"output {i}"
        g = g.cpu()
        if g.shape != e.shape or g.dtype != e.dtype or not g.is_contiguous():
            failures.append(f"{label}: got {tuple(g.shape)} {g.dtype}, want {tuple(e.shape)} {e.dtype}")
            continue
        try:
            torch.testing.assert_close(g, e, equal_nan=True, **tolerance(e.dtype, gpu, reduced))
        except AssertionError as err:
            failures.append(f"{label}: {str(err).splitlines()[0]} {str(err).splitlines()[-3:]}")
    assert not failures, "\n".join(failures)


def kernel_of(shape: Sequence[int], input_dtypes: Sequence[torch.dtype], instrs: Sequence[Instr],
              outputs: Sequence[int], reduce_dims: Sequence[int] = (),
              reduced_inputs: Sequence[int] = ()) -> FusedKernel:
    return FusedKernel(shape=tuple(shape), input_dtypes=tuple(input_dtypes), instrs=tuple(instrs),
                       outputs=tuple(Value(i) for i in outputs), reduce_dims=tuple(reduce_dims),
                       reduced_inputs=frozenset(reduced_inputs))


def check_direct_writes(device: str, executor: str) -> None:
    """Kernels write home results straight into place: in place on an input, through a
    transposed view of it, into a strided slice (``out=``), and a result a later kernel reads.
    The tensors afterwards equal eager's."""
    import fusionrt

    def program(x: torch.Tensor, y: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        x.mul_(2).add_(y)                  # reads and writes x element for element
        x.t().add_(1)                      # a transposed view of the same storage
        torch.add(x, y, out=buf[:, 1:5])   # a strided slice of another tensor
        z = (x * y).sum(-1, keepdim=True)
        return z + x

    gen = torch.Generator().manual_seed(23)
    x, y, buf = torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen), torch.zeros(4, 6)
    xe, be = x.clone(), buf.clone()
    want = program(xe, y, be)
    xd, yd, bd = x.to(device), y.to(device), buf.to(device)
    out, _ = fusionrt.measure(program, xd, yd, bd, executor=executor)
    for got, expected in ((out, want), (xd, xe), (bd, be)):
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
