"""FL006's text test: which statements it passes (the engine parses nothing else)."""
from __future__ import annotations

import ast

import pytest

from fusionlint.engine import _LINE, _Texts
from fusionlint.ops import op_tables
from fusionlint.rules.compute_bound_sequence import ComputeBoundSequence

TEXT_TESTS = {  # a function's body, and the text test's answer on each of its statements
    "two convolutions with work between": ("h = F.conv2d(x, w1)\nh = h * 2\nh = F.conv2d(h, w2)", [True, False, False]),
    "two convolutions in a row": ("h = F.conv2d(x, w1)\nh = F.conv2d(h, w2)", [False, False]),
    "a convolution and a matmul": ("h = F.conv1d(x, w1)\nh = h * 2\nh = h @ w2", [False, False, False]),
    "a convolution module twice": ("h = self.conv(x)\nh = h * 2\nh = self.conv(h)", [False, False, False]),
}


@pytest.mark.parametrize("name", sorted(TEXT_TESTS))
def test_the_text_test_passes_only_before_a_later_convolution(name):
    body, expected = TEXT_TESTS[name]
    source = "def f(self, x, w1, w2):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    statements = ast.parse(source).body[0].body
    texts = _Texts(statements, _LINE.findall(source))
    tables = op_tables()
    assert [ComputeBoundSequence.may_match(texts, i, tables) for i in range(len(statements))] == expected
