"""FL008 beyond its own examples: which reductions can move above a compute-bound op."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL008"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "a mean next to F.linear, through a name": """\
import torch
import torch.nn.functional as F

def f(x: torch.Tensor, w: torch.Tensor):
    a = torch.relu(x)
    y = F.linear(a, w)
    m = a.mean(-1, keepdim=True)
    out = y * m
    return out
""",
    "a reduction of an input, across unrelated statements": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = torch.matmul(x, w)
    c = b * 2
    return h + c + x.amax(-1, keepdim=True)
""",
}
EXPECTED = {
    "a mean next to F.linear, through a name": [(7, 9)],
    "a reduction of an input, across unrelated statements": [(6, 20)],
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    assert positions(FLAGGED[name]) == EXPECTED[name]


SILENT = {
    "the input is reassigned between the op and the reduction": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    x = torch.tanh(x)
    return h + x.sum(-1, keepdim=True)
""",
    "the reduction sits in a loop the op is outside of": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    for _ in range(2):
        h = h + x.sum(-1, keepdim=True)
    return h
""",
    "a convolution, which does not take its input's producer on read": """\
import torch
import torch.nn.functional as F

def f(x: torch.Tensor, w: torch.Tensor):
    a = torch.relu(x)
    y = F.conv2d(a, w)
    return y * a.mean((2, 3), keepdim=True)
""",
    "no compute-bound op before it": """\
import torch

def f(x: torch.Tensor):
    a = torch.tanh(x)
    return a * a.sum(-1, keepdim=True)
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []


def test_fix_moves_the_reduction_above_the_op():
    options = LintOptions(codes=frozenset({"FL008"}), fix=FixMode.UNSAFE)
    result = lint_source(FLAGGED["a mean next to F.linear, through a name"], "m.py", options)
    assert "    m = a.mean(-1, keepdim=True)\n    y = F.linear(a, w)\n    out = y * m\n" in result.source
