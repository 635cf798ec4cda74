"""FL003's text test: which compute-bound statements it passes (the engine parses nothing else)."""
from __future__ import annotations

import ast

import pytest

from fusionlint.engine import _LINE, _Texts
from fusionlint.ops import op_tables
from fusionlint.rules.kept_alive_across_compute import KeptAliveAcrossCompute

TEXT_TESTS = {  # a function's body, and the text test's answer on each of its statements
    "work before the op read by work after it": ("a = x * 2\ns = y.sum(-1)\ng = a + 1", [False, True, False]),
    "on one line": ("a = torch.relu(x); s = y @ w; g = a * s", [False, True, False]),
    "nothing computed before the op": ("a = self.proj(x)\ns = y.sum(-1)\ng = a + 1", [False, False, False]),
    "nothing element-wise after the op": ("a = x * 2\ns = y.sum(-1)\ng = self.proj(a)", [False, False, False]),
    "work after the op reading other names": ("a = x * 2\ns = y.sum(-1)\ng = s + 1", [False, False, False]),
    "the op last": ("a = x * 2\ns = a.sum(-1)", [False, False]),
}


@pytest.mark.parametrize("name", sorted(TEXT_TESTS))
def test_the_text_test_passes_only_between_element_wise_work_and_its_reader(name):
    body, expected = TEXT_TESTS[name]
    source = "def f(self, x, y, w):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    statements = ast.parse(source).body[0].body
    texts = _Texts(statements, _LINE.findall(source))
    tables = op_tables()
    assert [KeptAliveAcrossCompute.may_match(texts, i, tables) for i in range(len(statements))] == expected
