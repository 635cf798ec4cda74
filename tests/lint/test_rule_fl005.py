"""FL005 beyond its own examples: which stores keep a fusable value alive, and which do not."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

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
