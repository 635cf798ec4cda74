"""FL025 beyond its own examples: each spelling's fix, run against the original."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions

torch = pytest.importorskip("torch")

SPELLINGS = """\
import torch


def spellings(x: torch.Tensor, dist: torch.Tensor, dim: int):
    a = (-dist).max(1)[0] + x.max(dim).values
    b = torch.argmin(-dist, 1, keepdim=True)
    e = (-x ** 2).max(1).indices
    _, idx = torch.max(x, 1, True)
    return a, b, e, idx
"""

FIXED = """\
import torch


def spellings(x: torch.Tensor, dist: torch.Tensor, dim: int):
    a = (-dist.amin(1)) + x.amax(dim)
    b = torch.argmax(dist, 1, keepdim=True)
    e = (x ** 2).argmin(1)
    idx = torch.argmax(x, 1, True)
    return a, b, e, idx
"""


def test_each_spelling_is_fixed_to_the_op_that_computes_the_output_used():
    result = lint_source(SPELLINGS, "m.py", LintOptions(codes=frozenset({"FL025"}), fix=FixMode.UNSAFE))
    assert not result.errors
    assert sorted(f.line for f in result.fixed) == [5, 5, 6, 7, 8]
    assert result.source == FIXED
    before, after = {}, {}
    exec(SPELLINGS, before)
    exec(FIXED, after)
    x, dist = torch.randn(16, 32), torch.randn(16, 32)
    torch.testing.assert_close(after["spellings"](x, dist, 1), before["spellings"](x, dist, 1))
