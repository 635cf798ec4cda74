"""FL015 beyond its own examples: which constants are made by hand, and where the fix keeps the dtype."""
from __future__ import annotations

import pytest
import torch

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL015"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


def fixed(source: str) -> str | None:
    return lint_source(source, "m.py", LintOptions(codes=frozenset({"FL015"}), fix=FixMode.UNSAFE)).source


LOSS = """\
import torch


def ground_truth(n: int, device, dtype, scale, bias):
    labels = -torch.ones((n, n), device=device, dtype=dtype)
    ramp = scale * torch.ones(n, 4, dtype=dtype)
    shifted = torch.zeros(size=(n,), dtype=dtype) + bias
    plain = torch.ones(n, n) * scale
    return labels, ramp, shifted, plain
"""


def test_the_fix_keeps_the_factory_keywords_and_dtype():
    assert positions(LOSS) == [(5, 14), (6, 12), (7, 15), (8, 13)]
    source = fixed(LOSS)
    assert "labels = torch.full((n, n), -1.0, device=device, dtype=dtype)" in source
    assert "ramp = torch.full((n, 4), scale, dtype=dtype)" in source
    assert "shifted = torch.full((n,), bias, dtype=dtype)" in source
    assert "plain = torch.ones(n, n) * scale" in source  # no dtype: `full` would take an int's


def test_the_fixed_constants_equal_the_originals():
    namespace: dict = {}
    exec(compile(fixed(LOSS), "m.py", "exec"), namespace)
    after = namespace["ground_truth"](5, "cpu", torch.float64, 2.5, -0.5)
    exec(compile(LOSS, "m.py", "exec"), namespace)
    before = namespace["ground_truth"](5, "cpu", torch.float64, 2.5, -0.5)
    for a, b in zip(after, before):
        torch.testing.assert_close(a, b)


SILENT = {
    "a product with a tensor": """\
import torch


def f(x: torch.Tensor):
    return torch.ones(4, 4) * x.sum(), torch.zeros(4) + x[:4]
""",
    "a factory of another module": """\
import numpy as np
import torch


def f(n: int):
    return np.ones((n, n)) * 2, torch.ones(n) - 1
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []


LIKE = """\
import torch


def f(x: torch.Tensor, iou_pred: torch.Tensor, gain: torch.Tensor, enc: torch.Tensor, scale: float):
    a = 10.0 * iou_pred.new_ones(iou_pred.shape[0], 1)
    b = torch.ones_like(x) * scale
    c = torch.min(gain, 5.0 * torch.ones_like(gain))
    d = enc.new_zeros(4).fill_(3).long()
    e = torch.zeros(4, 4).fill_(2.0)
    g = torch.zeros_like(x) + 1
    return a, b, c, d, e, g
"""


def test_constants_like_a_tensor_and_filled_factories_are_reported_without_a_fix():
    assert positions(LIKE) == [(5, 9), (6, 9), (7, 25), (8, 9), (9, 9), (10, 9)]
    assert fixed(LIKE) in (None, LIKE)


LIKE_SILENT = """\
import torch


def f(x: torch.Tensor, sigma, scale: torch.Tensor, values: list):
    a = sigma(x) * x.new_ones([x.shape[0]])  # a call's result may be a 0-d tensor: a broadcast, not a fill
    b = torch.ones_like(x) * x
    c = torch.ones_like(x) * scale
    d = torch.zeros_like(x) * 2
    e = x.new_zeros(4).fill_(values[0])
    f = torch.empty(4).fill_(1.0)  # one write already
    return a, b, c, d, e, f
"""


def test_a_fill_by_a_tensor_or_a_call_is_silent():
    assert positions(LIKE_SILENT) == []
