"""FL004 beyond its own examples: where a sync counts as inside tensor work, and where not."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL004"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "to-cpu between work": """\
import torch

def f(x: torch.Tensor):
    a = torch.relu(x)
    host = a.to("cpu")
    return a * 2, host
""",
    "guard nested in a branch, and-ed with a flag": """\
import torch

def f(x: torch.Tensor, training: bool):
    h = x * 2 + 1
    if training:
        if training and not torch.isfinite(h).all():
            h = h.clamp(-1, 1)
    return h + 1
""",
    "f-string print in a loop at module level (a notebook cell)": """\
import torch

h = torch.randn(8)
for step in range(3):
    h = torch.tanh(h * 2)
    print(f"step {step}: {h.abs().mean()}")
""",
    "a chain of syncs is one finding": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)
    arr = (h * 2).cpu().numpy()
    return h + 1, arr
""",
    "for over .tolist() between work": """\
import torch

def f(x: torch.Tensor, sizes: torch.Tensor):
    h = torch.sigmoid(x)
    for n in sizes.cumsum(0).tolist():
        h = h + n
    return h
""",
}
EXPECTED = {
    "to-cpu between work": [(5, 12)],
    "guard nested in a branch, and-ed with a flag": [(6, 29)],
    "f-string print in a loop at module level (a notebook cell)": [(6, 5)],
    "for over .tolist() between work": [(5, 14)],
    "a chain of syncs is one finding": [(5, 11)],
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    assert positions(FLAGGED[name]) == EXPECTED[name]


SILENT = {
    "sync in a nested function is that function's business": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)

    def peak() -> float:
        return h.amax().item()

    return h * 2, peak
""",
    "a check before any work": """\
import torch

def f(x: torch.Tensor):
    if torch.isnan(x).any():
        raise ValueError("nan input")
    return torch.relu(x) * 2
""",
    "a bare flag of unknown type is not a tensor": """\
import torch

def forward(x, use_cache=None):
    h = torch.relu(x)
    if use_cache:
        h = h + 1
    return h * 2
""",
    "only syncs after the work, in a loop that only reads": """\
import torch

def f(x: torch.Tensor):
    probs = torch.softmax(x, -1)
    out = []
    while len(out) < 3:
        out.append(float(probs[len(out)].sum()))
    return out
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []
