"""PyTorch's own OpInfo sample inputs (a test suite we did not write) through fusionrt.

Every element-wise, reduction and composite OpInfo whose aten op fusionrt claims runs a bounded,
deterministic set of its samples per dtype through ``fusionrt.measure`` (``reference`` executor)
and must equal eager: shape and dtype exactly, values within what fusion may change. For every
sample, each aten op that fusionrt cannot record must show up as a fallback (never a wrong
answer), and an OpInfo fusionrt claims must be recorded without fallbacks on some sample.
The unary, binary and reduction OpInfos it does not claim are checked the same way: right
result, the op named among the fallbacks. A small subset also runs the generated Triton kernels
(``interpret``) and must plan and count exactly as ``reference``.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest", reason="PyTorch's OpInfo database imports only with expecttest")
from torch.testing._internal.common_methods_invocations import (  # noqa: E402
    binary_ufuncs,
    op_db,
    reduction_ops,
    unary_ufuncs,
)
from torch.utils._python_dispatch import TorchDispatchMode
from triton.runtime.errors import InterpreterError

import fusionrt
from fusionrt.capture import COMPOSITE_OPS, DECOMPOSED_ALWAYS, EXTERN_KINDS, FACTORY_OPS, POINTWISE_OPS, REDUCTION_OPS

from .differential import assert_consistent, assert_same

CLAIMED = POINTWISE_OPS | REDUCTION_OPS | {"softmax", "log_softmax", "layer_norm", "rms_norm", "var",
                                           "std", "var_mean", "linalg_vector_norm"}
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)
SAMPLES_PER_DTYPE = 6
UNCLAIMED_SAMPLES = 2

pytestmark = [pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0"),
              pytest.mark.filterwarnings("ignore:.*is deprecated"),
              pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered")]


def aten_name(op) -> str:
    """The aten op an OpInfo tests (``nn.functional.gelu`` -> ``gelu``, ``masked.sum`` -> ``sum``)."""
    return op.aten_name if op.aten_name in CLAIMED else op.name.split(".")[-1]


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


ELEMENTWISE_AND_REDUCTIONS = [op for op in unary_ufuncs + binary_ufuncs + reduction_ops
                              if not op.name.startswith("_refs.")]
CLAIMED_OPINFOS = [op for op in op_db
                   if not op.name.startswith("_refs.") and aten_name(op) in CLAIMED
                   and any(dtype in op.supported_dtypes("cpu") for dtype in DTYPES)]
UNCLAIMED_OPINFOS = [op for op in ELEMENTWISE_AND_REDUCTIONS if aten_name(op) not in CLAIMED]


class DispatchLog(TorchDispatchMode):
    """The aten ops a call reaches, as fusionrt's dispatch mode would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.funcs: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.funcs.add(func)
        return func(*args, **(kwargs or {}))


def recordable(func) -> bool:
    """What the capture records instead of running (docs/semantics.md, section 2)."""
    name = func._overloadpacket.__name__
    if func.is_view or name in ("_unsafe_view", "_local_scalar_dense") or name in FACTORY_OPS:
        return True
    if func._schema.is_mutable:
        base = name[:-1] if name.endswith("_") else name
        return base in POINTWISE_OPS or base == "copy" or func._overloadname == "out"
    return name in POINTWISE_OPS | REDUCTION_OPS | COMPOSITE_OPS | EXTERN_KINDS.keys() or func in DECOMPOSED_ALWAYS


def samples(op, dtype: torch.dtype, count: int) -> list:
    """``count`` samples spread evenly over the OpInfo's list (which starts with 0-d inputs)."""
    torch.manual_seed(0)
    every = list(op.sample_inputs("cpu", dtype))
    return every[::max(1, len(every) // count)][:count]


def check_sample(op, sample, executor: str = "reference") -> fusionrt.Report | None:
    """One sample, eager against fusionrt; None when eager itself rejects it."""
    def call():
        return op.op(sample.input, *sample.args, **sample.kwargs)

    log = DispatchLog()
    try:
        with log:
            expected = call()
    except Exception:  # noqa: BLE001 - a sample eager rejects on CPU: nothing to compare
        return None
    got, report = fusionrt.measure(call, executor=executor)
    low = sample.input.dtype in (torch.float16, torch.bfloat16) if isinstance(sample.input, torch.Tensor) else False
    assert_same(got, expected, low_precision_inside=low)
    assert_consistent(report)
    unsupported = {f._overloadpacket.__name__ for f in log.funcs if not recordable(f)}
    assert unsupported <= {f.op for f in report.fallbacks}, (unsupported, report.fallbacks)
    return report


@pytest.mark.parametrize("op", CLAIMED_OPINFOS, ids=op_id)
def test_claimed_opinfo_samples_match_eager(op):
    recorded_without_fallback = False
    for dtype in DTYPES:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for i, sample in enumerate(samples(op, dtype, SAMPLES_PER_DTYPE)):
            try:
                report = check_sample(op, sample)
            except AssertionError as exc:
                raise AssertionError(f"{op_id(op)} {dtype} sample {i}: {sample}\n{exc}") from None
            if report is not None and report.kernels and not report.fallbacks:
                recorded_without_fallback = True
    assert recorded_without_fallback, f"{op_id(op)}: every sample fell back"


@pytest.mark.parametrize("op", UNCLAIMED_OPINFOS, ids=op_id)
def test_unclaimed_opinfo_samples_fall_back_with_eager_results(op):
    dtype = torch.float32 if torch.float32 in op.supported_dtypes("cpu") else torch.int64
    for i, sample in enumerate(samples(op, dtype, UNCLAIMED_SAMPLES)):
        try:
            check_sample(op, sample)
        except AssertionError as exc:
            raise AssertionError(f"{op_id(op)} {dtype} sample {i}: {sample}\n{exc}") from None


def test_the_opinfo_database_covers_what_fusionrt_claims():
    names = {aten_name(op) for op in CLAIMED_OPINFOS}
    assert len(CLAIMED_OPINFOS) >= 80 and len(UNCLAIMED_OPINFOS) >= 120
    assert POINTWISE_OPS - names <= {"_to_copy"}  # a cast has no OpInfo; test_differential has it
    assert REDUCTION_OPS <= names


# -- the generated kernels: same results, same plan -------------------------------------------

BROADCAST_LOAD_BUG = pytest.mark.xfail(
    strict=True, raises=InterpreterError,
    reason="codegen: a floating-point operand broadcast to the kernel (a 0-d or size-1 tensor) "
           "makes logical_and/pow kernels fail under TRITON_INTERPRET=1 (numpy bitwise op on "
           "floats); repro: torch.logical_and(torch.randn(5), torch.tensor(3.6))")
INTERPRETED = [
    ("add", "plain"), ("mul", "broadcast"), ("where", "plain"), ("sigmoid", "plain"),
    ("nn.functional.gelu", "plain"), ("clamp", "plain"), ("sum", "plain"), ("amax", "plain"),
    ("softmax", "plain"), ("nn.functional.layer_norm", "plain"), ("var", "plain"),
    pytest.param("logical_and", "broadcast", marks=BROADCAST_LOAD_BUG),
    pytest.param("pow", "broadcast", marks=BROADCAST_LOAD_BUG),
]


def pick(op, dtype: torch.dtype, kind: str):
    """The first sample with a multi-element input, and for ``broadcast`` a second tensor operand
    of one element (read through stride-0 dims)."""
    for sample in samples(op, dtype, 1000):
        operands = [a for a in sample.args if isinstance(a, torch.Tensor)]
        if sample.input.numel() > 1 and (kind == "plain" or any(a.numel() == 1 for a in operands)):
            return sample
    raise LookupError(f"{op.name} has no {kind} sample")


@pytest.mark.parametrize("name, kind", INTERPRETED)
def test_generated_kernels_on_opinfo_samples(name, kind):
    op = next(op for op in CLAIMED_OPINFOS if op.name == name)
    for dtype in (torch.float32, torch.float16):
        sample = pick(op, dtype, kind)
        reference = check_sample(op, sample, "reference")
        interpret = check_sample(op, sample, "interpret")
        assert reference.kernels >= 1 and not reference.fallbacks
        assert counts(reference) == counts(interpret)


def counts(report: fusionrt.Report) -> tuple:
    return (report.kernels, report.writes, report.bytes_written, report.bytes_read,
            [(w.reason, w.shape, w.op) for w in report.materialized])
