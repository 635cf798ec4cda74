"""FL051 beyond its own examples: the dims of each spelling renumbered, and its fix run against the
original."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions

torch = pytest.importorskip("torch")

SPELLINGS = """\
import torch


def spellings(x: torch.Tensor, m: torch.Tensor):
    a = x.sum(1).sum(1)
    b = x.sum(dim=(0, 2)).sum(dim=0)
    c = torch.mean(x.mean(-3), -1)
    d = (x * 2).amin(-1, keepdim=True).amin(-3, keepdim=True)
    e = torch.sum(x * m, 1).sum(1)
    f = x.nansum(-2).nansum()
    g = (m > 0).sum(-1, dtype=torch.int16).sum(-1, dtype=torch.int32)
    h = x.mean(0, keepdim=True).mean()
    return a, b, c, d, e, f, g, h
"""

FIXED = """\
import torch


def spellings(x: torch.Tensor, m: torch.Tensor):
    a = x.sum((1, 2))
    b = x.sum((0, 1, 2))
    c = torch.mean(x, (-3, -1))
    d = (x * 2).amin((-3, -1), keepdim=True)
    e = (x * m).sum((1, 2))
    f = x.nansum()
    g = (m > 0).sum((-2, -1), dtype=torch.int32)
    h = x.mean()
    return a, b, c, d, e, f, g, h
"""


def test_each_spelling_becomes_one_reduction_over_the_same_dims():
    result = lint_source(SPELLINGS, "m.py", LintOptions(codes=frozenset({"FL051"}), fix=FixMode.UNSAFE))
    assert not result.errors
    assert sorted(f.line for f in result.fixed) == [5, 6, 7, 8, 9, 10, 11, 12]
    assert result.source == FIXED
    before, after = {}, {}
    exec(SPELLINGS, before)
    exec(FIXED, after)
    x, m = torch.randn(3, 4, 5, 6), torch.randn(3, 4, 5, 6)
    for got, want in zip(after["spellings"](x, m), before["spellings"](x, m)):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want)


def test_dims_that_cannot_be_renumbered_or_differ_in_keepdim_are_left_alone():
    source = """\
import torch


def f(x: torch.Tensor, d: int):
    return (
        x.sum(1).sum(-1),
        x.sum(d).sum(1),
        x.sum(1, keepdim=True).sum(1),
        x.sum(1, dtype=torch.float64).sum(1),
        x.sum(-1).mean(-1),
        x.amax(1).amin(1),
    )
"""
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL051"})))
    assert not result.findings
