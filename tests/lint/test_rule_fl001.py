"""FL001 beyond its own examples: views that merge dims known from an earlier view, names rebound."""
from __future__ import annotations

import ast

import pytest

from fusionlint.engine import _LINE, _Texts, lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.view_breaks_fused_block import ViewBreaksFusedBlock

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


TEXT_TESTS = {  # a function's body, and the text test's answer on each of its statements
    "a view of a name assigned element-wise work": ("h = torch.sigmoid(x)\ng = h.flatten(1)", [False, True]),
    "a view of a name assigned a cast": ("h = x.float()\ng = h.reshape(-1, d)", [False, True]),
    "a view of a name assigned a layer's output": ("h = self.dense(x)\ng = h.view(-1, d)", [False, False]),
    "a view of a name assigned on the same line": ("a = 1; h = x * 2\ng = h.view(-1)", [False, False, True]),
    "a view of inline arithmetic": ("g = (x * 2).view(-1)", [True]),
    "a view of a parenthesized name assigned arithmetic": ("h = x * 2\ng = (h).view(-1)", [False, True]),
    "a function view of a parenthesized name assigned arithmetic": ("h = x * 2\ng = torch.flatten((h), 1)", [False, True]),
    "a concatenation with a comment before its pieces": ("e = torch.cat(  # pieces\n    [a, b], -1)", [True]),
    "a view of a layer's output": ("g = self.proj(x).view(*shape)", [False]),
    "a view in a conditional expression": ("g = a if c else (x * y).view(-1)", [True]),
    "a view of a tuple's item": ("g = (x, y)[0].view(-1)", [False]),
    "a function view of arithmetic": ("g = torch.flatten(x * y, 1)", [True]),
    "a function view of an input": ("g = torch.flatten(x, 1)", [False]),
    "a concatenation returned": ("return torch.cat((-x2, x1), dim=-1)", [False]),
    "a concatenation returned scaled": ("return torch.cat((a, b), -1) * s", [True]),
    "a concatenation assigned": ("e = torch.cat([a, b], -1)", [True]),
    "a concatenation of a list built elsewhere": ("e = torch.cat(pieces, -1)", [False]),
}


@pytest.mark.parametrize("name", sorted(TEXT_TESTS))
def test_the_text_test_passes_only_where_a_view_may_read_computed_work(name):
    body, expected = TEXT_TESTS[name]
    source = "def f(self, x, y, a, b, c, d, s, shape, pieces, x1, x2):\n" + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
    statements = ast.parse(source).body[0].body
    texts = _Texts(statements, _LINE.findall(source))
    tables = op_tables()
    assert [ViewBreaksFusedBlock.may_match(texts, i, tables) for i in range(len(statements))] == expected
