"""fusionrt against eager PyTorch on fresh random inputs: every element-wise op on odd layouts and
dtypes, the composites, minimized regressions, and random programs.

The random programs mix element-wise ops, views, reductions, composites, in-place writes (through
views too), ``out=``, deletions, host syncs, externs and fallbacks; each is checked variable by
variable against eager. They found every bug in the regression section; a failing seed prints its
program, which is plain Python to paste into a test.
"""
from __future__ import annotations

import contextlib
import io
import random
import zlib

import pytest
import torch
import torch.nn.functional as F

import fusionrt
from fusionrt.kernel_ir import POINTWISE_OPS

from .differential import LOW_PRECISION, assert_consistent, assert_same, rand, run_both

# Eager's own warnings, which the programs trigger on purpose (and fusionrt's fallbacks repeat).
pytestmark = [pytest.mark.filterwarnings("ignore:An output with one or more elements was resized"),
              pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")]

# -- every element-wise op, on every layout and dtype --------------------------------------------

# aten op -> a program using it on x (and y, of x's shape or broadcast against it).
POINTWISE_PROGRAMS = {
    "add": lambda x, y: x + y, "sub": lambda x, y: torch.sub(x, y, alpha=2) if x.dtype != torch.bool else x ^ y,
    "rsub": lambda x, y: torch.rsub(x, 3), "mul": lambda x, y: x * y,
    "div": lambda x, y: (x / (y.abs() + 1), torch.div(x, 3, rounding_mode="floor"),
                         torch.div(x, -2, rounding_mode="trunc")),
    "neg": lambda x, y: -x if x.dtype != torch.bool else ~x, "abs": lambda x, y: x.abs(),
    "reciprocal": lambda x, y: (x.abs() + 1).reciprocal(),
    "pow": lambda x, y: (x.abs() ** 2, 2 ** x.clamp(-3, 3), x.abs().pow(y.abs().clamp(0, 2))),
    "remainder": lambda x, y: torch.remainder(x, 3), "fmod": lambda x, y: torch.fmod(x, -3),
    "floor_divide": lambda x, y: torch.floor_divide(x, 4),
    "maximum": lambda x, y: torch.maximum(x, y), "minimum": lambda x, y: torch.minimum(x, y),
    "clamp": lambda x, y: (x.clamp(-1, 2), x.clamp(min=y)), "clamp_min": lambda x, y: x.clamp_min(0),
    "clamp_max": lambda x, y: x.clamp_max(1), "where": lambda x, y: torch.where(x > y, x, y),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3), "addcmul": lambda x, y: torch.addcmul(x, y, y, value=0.5),
    "addcdiv": lambda x, y: torch.addcdiv(x, y, y.abs() + 1), "square": lambda x, y: x.square(),
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= 0, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
    "logical_and": lambda x, y: x.logical_and(y), "logical_or": lambda x, y: x.logical_or(y),
    "logical_xor": lambda x, y: x.logical_xor(y), "logical_not": lambda x, y: x.logical_not(),
    "bitwise_and": lambda x, y: x & y, "bitwise_or": lambda x, y: x | y,
    "bitwise_xor": lambda x, y: x ^ y, "bitwise_not": lambda x, y: ~x,
    "isnan": lambda x, y: (x / x).isnan(), "isinf": lambda x, y: (x / 0).isinf(),
    "nan_to_num": lambda x, y: (x / x.round()).nan_to_num(posinf=5.0),
    **{name: (lambda f: lambda x, y: f(x))(getattr(torch, name)) for name in (
        "exp", "exp2", "expm1", "sin", "cos", "tan", "tanh", "sinh", "cosh", "atan", "sigmoid",
        "erf", "floor", "ceil", "round", "trunc", "sign", "frac")},
    **{name: (lambda f: lambda x, y: f(x.abs() + 0.5))(getattr(torch, name)) for name in (
        "log", "log2", "log10", "log1p", "sqrt", "rsqrt")},
    "asin": lambda x, y: torch.asin(x.clamp(-1, 1)), "acos": lambda x, y: torch.acos(x.clamp(-1, 1)),
    "relu": lambda x, y: x.relu(), "gelu": lambda x, y: (F.gelu(x), F.gelu(x, approximate="tanh")),
    "silu": lambda x, y: F.silu(x), "hardtanh": lambda x, y: F.hardtanh(x, -0.5, 0.5),
    "hardsigmoid": lambda x, y: F.hardsigmoid(x), "hardswish": lambda x, y: F.hardswish(x),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.2), "elu": lambda x, y: F.elu(x, 0.7),
    "softplus": lambda x, y: F.softplus(x, beta=2.0), "mish": lambda x, y: F.mish(x),
    "clone": lambda x, y: x.clone().permute(*reversed(range(x.dim()))), "_to_copy": lambda x, y: (x.to(torch.float32), x.to(torch.int32)),
}

# name -> (shape of x, shape of y, how x is laid out). Views of x are taken inside the program,
# once on the concrete input and once on a pending value (absorbed into the consumer's kernel).
LAYOUTS = {
    "contiguous": ((5, 7), (5, 7), lambda t: t),
    "broadcast-row": ((5, 7), (7,), lambda t: t),
    "broadcast-outer": ((5, 1), (1, 7), lambda t: t),
    "0-d-operand": ((5, 7), (), lambda t: t),
    "transposed": ((7, 5), (5, 7), lambda t: t.t()),
    "strided": ((5, 14), (5, 7), lambda t: t[:, ::2]),
    "expanded": ((1, 7), (5, 7), lambda t: t.expand(5, 7)),
    "offset-slice": ((6, 7), (5, 7), lambda t: t[1:]),
    "primes-3d": ((3, 11, 13), (11, 1), lambda t: t),
    "size-1": ((1, 1), (1,), lambda t: t),
    "empty": ((0, 7), (7,), lambda t: t),
    "0-d": ((), (), lambda t: t),
}
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool]


def test_the_programs_cover_every_pointwise_op():
    assert set(POINTWISE_PROGRAMS) == POINTWISE_OPS


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(POINTWISE_PROGRAMS))
def test_pointwise_op_on_every_layout(op, dtype):
    program = POINTWISE_PROGRAMS[op]
    gen = torch.Generator().manual_seed(zlib.crc32(f"{op} {dtype}".encode()))
    for layout, (x_shape, y_shape, view) in LAYOUTS.items():
        x, y = rand(*x_shape, dtype=dtype, generator=gen), rand(*y_shape, dtype=dtype, generator=gen)
        for where in ("concrete", "pending"):
            if where == "concrete":
                def fn(x, y):
                    return program(view(x), y)
            else:
                def fn(x, y):
                    return program(view(x.clone()), y.clone())
            try:
                run_both(fn, x, y)
            except AssertionError as exc:
                raise AssertionError(f"{op} {dtype} {layout} ({where} input): {exc}") from None


# -- composites --------------------------------------------------------------------------------

W, B = rand(13), rand(13)
W1, W2 = rand(32, 13), rand(13, 32)


def gelu_mlp(x):
    return F.linear(F.gelu(F.linear(x, W1)), W2)


def attention(x):
    scores = (x @ x.mT) / x.shape[-1] ** 0.5
    mask = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).triu(1)
    return F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ x


def residual_block(x):
    h = F.layer_norm(x, (13,), W, B)
    return x + gelu_mlp(h) * 0.5


COMPOSITES = {
    "softmax_last": lambda x: F.softmax(x, -1),
    "softmax_first": lambda x: F.softmax(x * 2, 0),
    "log_softmax": lambda x: F.log_softmax(x, -1),
    "log_softmax_dtype": lambda x: F.log_softmax(x, 0, dtype=torch.float32),
    "layer_norm": lambda x: F.layer_norm(x, (13,)),
    "layer_norm_affine": lambda x: F.layer_norm(x + 1, (13,), W, B),
    "rms_norm": lambda x: F.rms_norm(x, (13,), W.to(x.dtype)),
    "var_std": lambda x: (x.var(-1), x.std(0, correction=0), x.var(keepdim=True)),
    "var_mean": lambda x: torch.var_mean(x, -1, keepdim=True),
    "reductions": lambda x: (x.sum(-1), x.mean(0, keepdim=True), x.amax(-1), x.amin(0), (x * 0.1).prod(-1)),
    "full_reduction_epilogue": lambda x: x - x.mean(),
    "gelu_mlp": gelu_mlp,
    "attention_masked": attention,
    "residual_block": residual_block,
}
COMPOSITE_INPUTS = {
    "rows": lambda g, d: rand(6, 13, dtype=d, generator=g),
    "single-row": lambda g, d: rand(1, 13, dtype=d, generator=g),
    "transposed": lambda g, d: rand(13, 6, dtype=d, generator=g).t(),
    "batched-primes": lambda g, d: rand(3, 7, 13, dtype=d, generator=g),
    "expanded": lambda g, d: rand(1, 13, dtype=d, generator=g).expand(5, 13),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite(name, dtype):
    program = COMPOSITES[name]
    gen = torch.Generator().manual_seed(7)
    for layout, make in COMPOSITE_INPUTS.items():
        x = make(gen, dtype)
        for fn in (program, lambda t: program(t * 1)):  # concrete input, then a pending one
            if dtype != torch.float32 and name in ("gelu_mlp", "residual_block"):
                fn = (lambda f: lambda t: f(t.float()))(fn)  # the weights are float32
            try:
                run_both(fn, x)
            except AssertionError as exc:
                raise AssertionError(f"{name} {dtype} {layout}: {exc}") from None


def test_composites_fuse_into_one_kernel():
    x = rand(6, 13)
    for name in ("softmax_last", "log_softmax", "layer_norm_affine", "rms_norm", "var_mean"):
        report = run_both(COMPOSITES[name], x)
        assert report.kernels == 1, (name, report.summary())


# -- regressions: each a bug the random programs found, minimized ------------------------------

def test_an_input_made_stale_by_a_write_through_a_view_is_read_after_the_flush():
    def prog(x):
        xt = x.t()
        xt.add_(1.0)  # x's storage written through a view: x itself is now stale
        return xt @ x  # reading x flushes; xt, read before it, must be read again after it
    run_both(prog, rand(2, 5))


def test_a_reshape_alias_keeps_its_storage_alive():
    def prog(x):
        y = x.mT @ x  # a 3-d matmul: bmm into a temporary, then an aliasing _unsafe_view
        return torch.cumsum(y, -1), y  # the fallback reads y: the bmm's storage must be filled
    run_both(prog, rand(1, 1, 3, dtype=torch.float32))


def test_a_reduction_of_a_value_broadcast_along_its_dims():
    def prog(x):
        e = x.clone().expand(2, 5)
        return F.softmax(e, 0), e.std(0, keepdim=True), e.sum(0)
    run_both(prog, rand(5))


def test_a_value_and_a_reduced_value_of_one_block_keep_their_levels():
    def prog(x):
        e0 = x.clone()
        e3 = e0.expand(2, 2)
        return e3.std(0, keepdim=True), torch.maximum(e0, x * 1)
    run_both(prog, rand(2))


def test_a_late_home_write_does_not_undo_a_later_write_into_its_storage():
    def prog(x):
        e0 = x.clone()
        e2 = F.layer_norm(e0.mT, (2,))
        e3 = e2.amax(0)
        e7 = e3.add(e2, alpha=2)  # read before the write below: its kernel needs the old e3
        e9 = e7.permute(1, 0)
        e3[..., :1].add_(3)
        return e3, torch.where(torch.tanh(e2) > e9, e9, e2)
    run_both(prog, rand(2, 1))


def test_in_place_ops_whose_result_depends_on_eager_iteration_order_run_eagerly():
    def reads_what_it_writes(x):
        e0 = x.clone()
        e0.add_(e0.mT.narrow(-1, 1, 1))  # eager's result depends on its iteration order
        return e0

    def out_overlaps_an_input(x):
        e1 = x.clone()[:, :, 0]
        torch.mul(e1, e1.mT.diagonal(), out=e1)
        return e1

    def copy_into_itself_expanded(x):
        e2 = x.clone().expand(2, 7, 3, 1)
        e2.copy_(e2)  # an overlapping target: eager's copy_ to itself is a no-op
        return e2

    for prog in (reads_what_it_writes, out_overlaps_an_input, copy_into_itself_expanded):
        for dtype in (torch.float32, torch.int64):
            report = run_both(prog, rand(7, 3, 1, dtype=dtype))
            assert len(report.fallbacks) == 1, (prog.__name__, report.fallbacks)


def test_out_that_eager_resizes_and_out_that_eager_rejects():
    report = run_both(lambda x, y: torch.add(x, y, out=torch.empty(1, 3)), rand(3, 1), rand(1, 3))
    assert [f.op for f in report.fallbacks] == ["add"]

    def overlapping_out(x):
        z = x.clone().expand(2, 7, 3)
        torch.mul(z, z, out=z)
        return z
    with pytest.raises(RuntimeError, match="single memory location"):
        overlapping_out(rand(7, 3))
    run_both(overlapping_out, rand(7, 3))  # raises eager's own error (the fallback kept out=)


def test_matmuls_in_place_and_into_out_are_the_product_copied_home():
    def merge(w, b, a):  # a low-rank update merged into a weight, as adapters do
        w = w.clone()
        w.addmm_(b * 2, a * 3, beta=0.5, alpha=-2.0)
        return w

    def batched(w, b, a):
        w = w.clone()
        w.baddbmm_(b.unsqueeze(0).expand(3, -1, -1), a.unsqueeze(0).expand(3, -1, -1), alpha=0.25)
        return w

    def into_out(w, b, a):
        out = torch.empty(b.shape[0], a.shape[1])
        torch.mm(b, a * 2, out=out)
        return out + w

    def reads_its_target(w, b, a):
        w = w.clone()
        w.addmm_(w, w * 2)
        return w

    w, b, a = rand(6, 6), rand(6, 4), rand(4, 6)
    for prog, target in ((merge, w), (batched, rand(3, 6, 6)), (into_out, w)):
        report = run_both(prog, target, b, a)
        assert not report.fallbacks, (prog.__name__, report.fallbacks)
    # eager's product into one of its own operands depends on its loop order (and on the size): eager runs it
    assert [f.op for f in run_both(reads_its_target, w, b, a).fallbacks] == ["addmm_"]
    def merge_into_input(w, b, a):
        w.addmm_(b * 2, a * 3)
        return w

    def beta_zero_ignores_nan(w, b, a):
        w = w.clone()
        w[0, 0] = float("nan")
        w.addmm_(b, a, beta=0, alpha=2)
        return w

    report = run_both(beta_zero_ignores_nan, w, b, a)
    assert not report.fallbacks
    report = run_both(merge_into_input, w, b, a)  # as w += (b * 2) @ (a * 3): the update is the product's epilogue
    assert report.kernels == 1 and report.eager_kernels == 3


def test_logit_logsigmoid_and_entr_fuse_as_their_decompositions():
    def prog(p, x):
        q = p.sigmoid()
        return torch.logit(q * 0.9, 1e-6) + 1, F.logsigmoid(x * 2) * 3, torch.special.entr(torch.cat([q * 0, -q, q], 1))
    report = run_both(prog, rand(4, 6), rand(4, 6))
    assert not report.fallbacks


def test_a_bitcast_view_of_a_pending_tensor():
    def prog(x):
        y = x * 2
        return y.view(torch.int32) + 1, torch.sigmoid(y.view(torch.int32)), y[0].view(torch.int16)
    report = run_both(prog, rand(3, 4))
    assert {f.op for f in report.fallbacks} == {"view"}


def test_reductions_of_0_d_tensors_and_dims_given_as_minus_one():
    run_both(lambda x: (x.var(-1), x.sum(-1), (x * 2).mean(), x.std(0)), rand())


def test_complex_tensors_run_eagerly_with_every_executor():
    x = torch.randn(4, dtype=torch.complex64)
    for executor in ("reference", "interpret"):
        report = run_both(lambda t: (t * 2 + 1).sum(), x, executor=executor)
        assert report.fallbacks and all("complex" in f.reason for f in report.fallbacks)


def test_a_cast_that_names_its_own_device_is_recorded():
    report = run_both(lambda x: x.to("cpu", torch.float16) * 2, rand(4, 3))
    assert not report.fallbacks and report.kernels == 1


def test_fill_setitem_triu_tril_cumsum_fall_back_with_correct_results():
    def prog(x):
        a = x * 2
        a[0] = 1.5                  # fill_ on a view of a pending tensor
        a[:, 1].fill_(-2.0)
        b = torch.triu(a) + torch.tril(x, -1)
        c = torch.cumsum(b, 1)
        x[x > 0] = 0.25             # index_put_ with a boolean mask, on an input
        return a, b, c
    report = run_both(prog, rand(4, 5))
    assert {"fill_", "triu", "tril", "cumsum", "index_put_"} <= {f.op for f in report.fallbacks}


def test_fallback_outputs_are_counted_as_writes():
    x = rand(4, 5)
    report = run_both(lambda t: torch.cumsum(t * 2, 0) + 1, x)
    fallback_writes = [w for w in report.materialized if w.reason == "fallback"]
    assert [(w.op, w.shape, w.bytes) for w in fallback_writes] == [("cumsum", (4, 5), 80)]
    (kernel,) = [k for k in report.kernel_records if k.kind == "fallback"]
    assert fallback_writes[0].kernel == kernel.index and kernel.bytes_written == 80
    assert report.writes == 3  # t * 2 (fallback-input), cumsum (fallback), + 1 (output)


# -- random programs ---------------------------------------------------------------------------

UNARY = ["torch.tanh({v})", "torch.sigmoid({v})", "torch.sin({v})", "torch.relu({v})", "{v} * 0.5",
         "{v} + 1", "-{v}", "F.gelu({v})", "{v}.abs()", "torch.clamp({v}, -0.5, 0.7)", "{v}.exp()",
         "({v} > 0)", "{v}.to(torch.float16)", "{v}.float()", "{v}.to(torch.int32)",
         "torch.where({v} > 0, {v}, 0.1)"]
BINARY = ["{v} + {w}", "{v} - {w}", "{v} * {w}", "torch.maximum({v}, {w})",
          "torch.where({v} > {w}, {v}, {w})", "{v}.add({w}, alpha=2)"]
VIEWS = ["{v}.t()", "{v}.unsqueeze(-1)", "{v}.unsqueeze(0)", "{v}.squeeze()", "{v}[..., ::2]",
         "{v}[1:]", "{v}.flatten()", "{v}.reshape(-1, {v}.shape[-1])", "{v}.expand(2, *{v}.shape)",
         "{v}[0]", "{v}.transpose(0, -1)", "{v}.permute(*reversed(range({v}.dim())))",
         "{v}.contiguous()", "{v}.view(-1)", "{v}[:, None]", "{v}.mT", "{v}.view(torch.int32)",
         "{v}.unfold(-1, 2, 1)", "{v}.diagonal()", "{v}.narrow(-1, 1, 1)", "{v}.split(2, -1)[-1]",
         "{v}.unbind(0)[0]", "{v}.chunk(2)[0]", "{v}.as_strided((2, 2), (1, 1))",
         "{v}.unflatten(-1, ({v}.shape[-1], 1))"]
REDUCTIONS = ["{v}.sum({d})", "{v}.mean({d}, keepdim=True)", "{v}.amax({d})", "{v}.var({d})",
              "{v}.sum()", "{v}.std({d}, keepdim=True)", "torch.softmax({v}, {d})",
              "F.log_softmax({v}, {d})", "F.layer_norm({v}, {v}.shape[-1:])", "{v}.prod({d})",
              "{v}.sum({d}, dtype=torch.float64)"]
IN_PLACE = ["{v}.mul_(0.9)", "{v}.add_({w})", "{v}[0].mul_(2)", "{v}[..., :1].add_(3)", "{v}[0] = 1.5",
            "{v}.copy_({w})", "{v}.clamp_(-1, 1)", "{v}.zero_()", "{v}.fill_(2.0)", "{v}.relu_()",
            "{v}.sub_({w}.sum())", "torch.mul({v}, {w}, out={v})", "{v}.t().mul_(3)", "{v}[:1] = {w}[:1]",
            "{v}[{v} > 0] = 0.5"]
OTHER = ["del {v}", "{n} = {v} * ({v}.abs().sum() >= 0).item()", "fusionrt.sync()", "{n} = {v} @ {w}",
         "{n} = torch.cat([{v}, {w}], 0)", "{n} = torch.cumsum({v}, -1)", "{n} = torch.tril({v})",
         "{n} = {v}.clone()", "print({v}.sum().shape)", "{n} = {v}.masked_fill({v} > 0, -1.0)",
         "{n} = torch.stack([{v}, {w}])", "{n} = {v}[torch.tensor([0])]",
         "{n} = torch.add({v}, {w}, out=torch.empty_like({v}))", "{n} = {v}.max()",
         "{n} = {v}.sort()[0]", "{n} = torch.zeros_like({v}).add_({w})"]
KINDS = [("{n} = ", UNARY, 3), ("{n} = ", BINARY, 3), ("{n} = ", VIEWS, 3), ("{n} = ", REDUCTIONS, 2),
         ("", IN_PLACE, 2), ("", OTHER, 1)]
PROGRAM_DTYPES = [torch.float32] * 4 + [torch.float16, torch.bfloat16, torch.int64, torch.float64]


def _exec(lines: list[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    env = {"x": x, "torch": torch, "F": F, "fusionrt": fusionrt}
    with contextlib.redirect_stdout(io.StringIO()):
        exec("\n".join(lines), env)
    return {k: v for k, v in env.items() if isinstance(v, torch.Tensor)}


def random_program(seed: int) -> tuple[torch.Tensor, list[str], str]:
    """An input, a program over it (each candidate line is kept only if it runs eagerly after
    the lines before it, so every program is valid eager code), and its last live variable."""
    rng = random.Random(seed)
    shape = tuple(rng.choice([1, 2, 3, 5, 7]) for _ in range(rng.choice([1, 2, 2, 3])))
    x = rand(*shape, dtype=rng.choice(PROGRAM_DTYPES), generator=torch.Generator().manual_seed(seed))
    lines = ["e0 = x", "e1 = x.mT" if len(shape) >= 2 else "e1 = x * 1"]
    names = ["e0", "e1"]
    live = list(_exec(lines, x.clone()))
    for _ in range(rng.choice([4, 8, 14])):
        n = f"e{len(names)}"
        prefix, table, _ = rng.choices(KINDS, weights=[k[2] for k in KINDS])[0]
        choices = [name for name in names if name in live] or ["x"]
        line = (prefix + rng.choice(table)).format(
            n=n, v=rng.choice(choices), w=rng.choice(choices), d=rng.choice([0, -1, 1]))
        try:
            live = list(_exec(lines + [line], x.clone()))
        except Exception:  # noqa: BLE001 - eager rejects it (shapes, dtypes): try another line
            continue
        lines.append(line)
        if line.startswith(n + " "):
            names.append(n)
    return x, lines, next(name for name in reversed(names) if name in live)


def check_random_program(seed: int, executor: str = "reference") -> fusionrt.Report:
    x, lines, _ = random_program(seed)
    expected = _exec(lines, x.clone())
    with fusionrt.lazy(executor=executor) as session:
        got = _exec(lines, x.clone())
    program = "\n".join(lines)
    assert got.keys() == expected.keys(), program
    for name, value in expected.items():
        try:
            assert_same(got[name], value, low_precision_inside=x.dtype in LOW_PRECISION, what=name)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, x {tuple(x.shape)} {x.dtype}:\n{program}\n{exc}") from None
    assert_consistent(session.report)
    return session.report


@pytest.mark.parametrize("chunk", range(8))
def test_random_programs(chunk):
    for seed in range(chunk * 40, chunk * 40 + 40):
        check_random_program(seed)


def test_random_programs_as_functions_only_their_result_alive():
    """The same programs inside a function given to ``measure``: locals die at return."""
    for seed in range(60):
        x, lines, last = random_program(seed)
        source = "def program(x):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {last}\n"
        env = {"torch": torch, "F": F, "fusionrt": fusionrt}
        exec(source, env)
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                run_both(env["program"], x, low_precision_inside=x.dtype in LOW_PRECISION)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}:\n{source}\n{exc}") from None


@pytest.mark.slow
def test_random_programs_under_the_interpreter_plan_and_count_alike():
    """Generated Triton kernels (TRITON_INTERPRET=1) on a few programs: same values, same counts."""
    for seed in (3, 11, 24, 58):
        reference = check_random_program(seed, "reference")
        interpret = check_random_program(seed, "interpret")
        assert _counts(reference) == _counts(interpret), seed


def _counts(report: fusionrt.Report) -> tuple:
    return (report.kernels, report.writes, report.bytes_written, report.bytes_read,
            [(w.reason, w.shape, w.op) for w in report.materialized], [f.op for f in report.fallbacks])
