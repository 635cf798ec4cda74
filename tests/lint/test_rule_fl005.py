"""FL005 beyond its own examples: which stores keep a fusable value alive, and which do not."""
from __future__ import annotations

import ast

import pytest

from fusionlint.engine import _LINE, _Texts, lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.kept_alive_by_container import KeptAliveByContainer

OPTIONS = LintOptions(codes=frozenset({"FL005"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "extend with a view, a dict that is only stored into": ("""\
import torch

def f(x: torch.Tensor, y: torch.Tensor):
    log = {}
    h = torch.sigmoid(x) * y
    log["h"] = h.T
    out = torch.relu(h).sum(-1)
    return out
""", [(6, 5)]),
    "a list parameter, read again by the next iteration": ("""\
import torch

def f(x: torch.Tensor, keep: list):
    h = x
    while len(keep) < 4:
        h = torch.exp(-h * h)
        keep.extend([h])
    return h
""", [(7, 9)]),
    "an attribute of another object": ("""\
import torch

def f(x: torch.Tensor, probe):
    g = torch.tanh(x + 1)
    probe.value = g
    return g * x
""", [(5, 5)]),
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    source, expected = FLAGGED[name]
    assert positions(source) == expected


SILENT = {
    "the next use is a matmul: written anyway": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor, trace: list):
    h = torch.relu(x * 2)
    trace.append(h)
    return h @ w
""",
    "the value is a parameter (concrete already)": """\
import torch

def f(x: torch.Tensor, trace: list):
    trace.append(x)
    return x * 2
""",
    "the value came from a branch": """\
import torch

def f(x: torch.Tensor, flag: bool, trace: list):
    h = x * 2
    if flag:
        h = x @ x
    trace.append(h)
    return h + 1
""",
    "the list is read back for compute": """\
import torch

def f(x: torch.Tensor):
    parts = []
    h = torch.relu(x)
    parts.append(h)
    out = h * 2
    return out + parts[0]
""",
    "the stored value is an input of a later unknown call": """\
import torch

def f(x: torch.Tensor, layer, trace: list):
    h = torch.relu(x)
    trace.append(h)
    return layer(h) + h
""",
    "the name escapes into a closure": """\
import torch

def f(x: torch.Tensor, trace: list):
    h = torch.relu(x)
    trace.append(h)
    g = lambda: h
    return h * 2, g
""",
    "an object that is returned carries its values to the caller": """\
import torch

def f(x: torch.Tensor, make_output):
    out = make_output()
    h = torch.relu(x)
    out.hidden = h
    out.result = h * 2
    return out
""",
    "writing into a tensor is in-place, not a container": """\
import torch

def f(x: torch.Tensor):
    out = torch.empty(4, 8)
    h = torch.relu(x)
    out[0] = h
    return h * 2, out
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []


TEXT_TESTS = {  # a function's body, and the text test's answer on each of its statements
    "a stored name assigned element-wise work": ("h = torch.sigmoid(x) * 2\ncache.append(h)", [False, True]),
    "a stored name assigned after a semicolon": ("a = 1; h = -x\nself.last = h", [False, False, True]),
    "a stored name assigned a layer's output": ("h = self.layer(x)\ncache.append(h)", [False, False]),
    "a stored name assigned an attribute read": ("h = x.shape\ncache.append(h)", [False, False]),
    "a stored name assigned a subscript": ("h = x[0] * 2\ncache.append(h)", [False, False]),
    "a stored name assigned a name": ("h = x\ncache.append(h)", [False, False]),
    "a stored name assigned a scaled number": ("n = d // 2\nself.n = n", [False, True]),
}


@pytest.mark.parametrize("name", sorted(TEXT_TESTS))
def test_the_text_test_passes_only_where_the_block_assigns_the_stored_name_element_wise_work(name):
    body, expected = TEXT_TESTS[name]
    source = "def f(self, x, cache, d):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    statements = ast.parse(source).body[0].body
    texts = _Texts(statements, _LINE.findall(source))
    tables = op_tables()
    assert [KeptAliveByContainer.may_match(texts, i, tables) for i in range(len(statements))] == expected
