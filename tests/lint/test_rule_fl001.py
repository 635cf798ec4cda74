"""FL001 beyond its own examples: views that merge dims known from an earlier view, names rebound."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL001"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "a 4-d view of a masked 5-d view, in an if body, before the softmax after it": """\
import torch
import torch.nn.functional as F

def attention(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, nw: int, heads: int, n: int):
    attn = q.matmul(k.transpose(-2, -1))
    if nw > 1:
        attn = attn.view(attn.size(0) // nw, nw, heads, n, n)
        attn = attn + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, n, n)
    attn = F.softmax(attn, dim=-1)
    return attn
""",
    "a name rebound by its merging view, then by the element-wise work reading it": """\
import torch

def f(x: torch.Tensor, b: torch.Tensor):
    h = x @ b
    h = torch.tanh(h)
    h = h.flatten(1)
    h = h * 2
    return h
""",
    "the masked windows' view, read by an nn.Softmax module": """\
import torch
import torch.nn as nn

class WindowAttention(nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, n: int):
        attn = q @ k.transpose(-2, -1)
        nw = mask.shape[0]
        attn = attn.view(-1, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, n, n)
        return self.softmax(attn)
""",
}
EXPECTED = {
    "the masked windows' view, read by an nn.Softmax module": [(14, 16)],
    "a 4-d view of a masked 5-d view, in an if body, before the softmax after it": [(9, 16)],
    "a name rebound by its merging view, then by the element-wise work reading it": [(6, 9)],
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    assert positions(FLAGGED[name]) == EXPECTED[name]


SILENT = {
    "a view with as many dims as the view its operand was made with": """\
import torch

def f(s: torch.Tensor, m: torch.Tensor, heads: int, n: int):
    a = s.view(-1, heads, n, n)
    a = a + m
    a = a.view(-1, heads, n, n)
    return torch.softmax(a, -1)
""",
    "a rebound name whose old value is read again": """\
import torch

def f(x: torch.Tensor, b: torch.Tensor):
    h = torch.tanh(x @ b)
    g = h
    h = h.flatten(1)
    return h * 2, g
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []
