"""Run a function eagerly and under fusionrt on the same fresh inputs, and compare everything.

Shared by test_differential.py and test_opinfo.py. Inputs are cloned for each run, so in-place
programs see the same data; mutated inputs are compared too. Tolerances are the ones fusion may
legitimately change (docs/semantics.md, section 7): none for exact dtypes, reassociation for
float32 reductions, one rounding of a half-precision intermediate.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

import fusionrt
from fusionrt.report import WRITE_REASONS

LOW_PRECISION = (torch.float16, torch.bfloat16)


def rand(*shape: int, dtype: torch.dtype = torch.float32, generator: torch.Generator | None = None
         ) -> torch.Tensor:
    """Fresh random data, never zeros: normal floats, integers in [-9, 9], random bools."""
    t = torch.randn(shape, generator=generator)
    if dtype == torch.bool:
        return t > 0
    if dtype.is_floating_point:
        return t.to(dtype)
    return (t * 4).clamp(-9, 9).to(dtype)


def tolerance(dtype: torch.dtype, low_precision_inside: bool = False) -> dict[str, float]:
    if dtype in LOW_PRECISION or low_precision_inside:
        return {"atol": 2e-2, "rtol": 2e-2}
    if dtype == torch.float32:
        return {"atol": 2e-5, "rtol": 2e-5}
    if dtype == torch.float64:
        return {"atol": 1e-10, "rtol": 1e-10}
    return {"atol": 0, "rtol": 0}


def clone_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone_tree(v) for v in value)
    return value


def assert_same(got: Any, expected: Any, low_precision_inside: bool = False, what: str = "result") -> None:
    """Same structure, shapes, dtypes and values (NaN where eager has NaN)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
        torch.testing.assert_close(got, expected, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}",
                                   **tolerance(expected.dtype, low_precision_inside))
    elif isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, low_precision_inside, f"{what}[{i}]")
    else:
        assert got == expected or (got != got and expected != expected), f"{what}: {got} != {expected}"


def assert_consistent(report: fusionrt.Report) -> None:
    """What every report must satisfy whatever the program: each write has a known reason, and
    the bytes written are exactly the bytes of the listed writes."""
    assert all(w.reason in WRITE_REASONS for w in report.materialized)
    assert report.bytes_written == sum(w.bytes for w in report.materialized)
    assert all(f.reason for f in report.fallbacks)


def run_both(fn: Callable[..., Any], *inputs: Any, executor: str = "reference",
             low_precision_inside: bool = False) -> fusionrt.Report:
    """``fn(*inputs)`` eagerly and through ``fusionrt.measure``; results and mutated inputs
    must match. Eager's exception, if any, must come back unchanged (same type)."""
    eager_inputs, lazy_inputs = clone_tree(inputs), clone_tree(inputs)
    try:
        expected = fn(*eager_inputs)
    except Exception as exc:  # noqa: BLE001 - the lazy run must raise the same
        try:
            fusionrt.measure(fn, *lazy_inputs, executor=executor)
        except type(exc):
            return fusionrt.Report()
        raise AssertionError(f"eager raised {type(exc).__name__}: {exc}; fusionrt did not")
    got, report = fusionrt.measure(fn, *lazy_inputs, executor=executor)
    assert_same(got, expected, low_precision_inside)
    assert_same(lazy_inputs, eager_inputs, low_precision_inside, "inputs after the call")
    assert_consistent(report)
    return report
