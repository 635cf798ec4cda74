"""FL001 on element-wise work after a ``torch.cat``: where it is flagged, and why the look-alikes
are not, measured under fusionrt (the pieces' work done before the cat must save there, and the
look-alikes' must not)."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

torch = pytest.importorskip("torch")
import fusionrt  # noqa: E402

OPTIONS = LintOptions(codes=frozenset({"FL001"}))


def findings(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


def counts(source: str, *args: torch.Tensor) -> tuple[object, tuple[int, int, int]]:
    namespace: dict = {}
    exec(compile(source, "m.py", "exec"), namespace)
    out, report = fusionrt.measure(namespace["f"], *args, executor="reference")
    return out, (report.writes, report.bytes_written, report.kernels)


# (source, arguments' shapes, the same work moved into the pieces)
FLAGGED = {
    "a scale after a cat of sin and cos (x_transformers)": ("""\
import torch

def f(pos: torch.Tensor, inv_freq: torch.Tensor, scale: torch.Tensor):
    emb = torch.einsum("i, j -> i j", pos, inv_freq)
    emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
    return emb * scale
""", [(128,), (32,), (1,)], """\
import torch

def f(pos: torch.Tensor, inv_freq: torch.Tensor, scale: torch.Tensor):
    emb = torch.einsum("i, j -> i j", pos, inv_freq)
    return torch.cat((emb.sin() * scale, emb.cos() * scale), dim=-1)
""", (6, 12)),
    "a positional embedding added after a cat of a mean and the tokens (open_clip)": ("""\
import torch

def f(x: torch.Tensor, pos: torch.Tensor):
    x = x.flatten(2).permute(2, 0, 1)
    x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
    x = x + pos[:, None, :].to(x.dtype)
    return x
""", [(2, 64, 7, 7), (50, 64)], """\
import torch

def f(x: torch.Tensor, pos: torch.Tensor):
    x = x.flatten(2).permute(2, 0, 1)
    return torch.cat([x.mean(dim=0, keepdim=True) + pos[:1, None, :], x + pos[1:, None, :]], dim=0)
""", (6, 9)),
    "an activation of a cat of two projections, returned": ("""\
import torch
import torch.nn.functional as F

def f(a: torch.Tensor, b: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor):
    return F.gelu(torch.cat([b @ w2, a @ w1], dim=-1))
""", [(64, 32), (64, 32), (32, 32), (32, 32)], """\
import torch
import torch.nn.functional as F

def f(a: torch.Tensor, b: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor):
    return torch.cat([F.gelu(b @ w2), F.gelu(a @ w1)], dim=-1)
""", (5, 12)),
}

LOOK_ALIKES = {
    "a cat of inputs: one copy kernel either way": ("""\
import torch

def f(a: torch.Tensor, b: torch.Tensor):
    return torch.cat((a, b), dim=-1) * 0.5
""", [(128, 32), (128, 32)], """\
import torch

def f(a: torch.Tensor, b: torch.Tensor):
    return torch.cat((a * 0.5, b * 0.5), dim=-1)
"""),
    "a rotary rotate-half: more arithmetic reads the product": ("""\
import torch

def f(h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    h = h.transpose(0, 1)
    r = torch.cat((-h[..., 16:], h[..., :16]), dim=-1)
    return h * cos + r * sin
""", [(64, 4, 32), (4, 1, 32), (4, 1, 32)], """\
import torch

def f(h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    h = h.transpose(0, 1)
    return h * cos + torch.cat((-h[..., 16:] * sin[..., :16], h[..., :16] * sin[..., 16:]), dim=-1)
"""),
    "a sum a softmax reads next (Pegasus-X's blocked attention)": ("""\
import torch

def f(q: torch.Tensor, gk: torch.Tensor, lk: torch.Tensor, m: torch.Tensor):
    g = torch.einsum("bhnkf,bhgf->bhnkg", q, gk)
    l = torch.einsum("bhnkf,bhnxf->bhnkx", q, lk)
    w = torch.cat([g, l], dim=-1)
    w = w + m[:, None, :, None, :]
    return w.softmax(-1)
""", [(2, 2, 3, 8, 16), (2, 2, 4, 16), (2, 2, 3, 8, 16), (2, 3, 12)], """\
import torch

def f(q: torch.Tensor, gk: torch.Tensor, lk: torch.Tensor, m: torch.Tensor):
    g = torch.einsum("bhnkf,bhgf->bhnkg", q, gk)
    l = torch.einsum("bhnkf,bhnxf->bhnkx", q, lk)
    w = torch.cat([g + m[:, None, :, None, :4], l + m[:, None, :, None, 4:]], dim=-1)
    return w.softmax(-1)
"""),
    "a masked_fill whose mask is sliced for each piece": ("""\
import torch

def f(x: torch.Tensor, mask: torch.Tensor):
    x = torch.cat([torch.tanh(x[:, :1]), x[:, 1:] - 0.97 * x[:, :-1]], dim=1)
    return x.masked_fill(mask > 0, 0.0)
""", [(4, 256), (4, 256)], """\
import torch

def f(x: torch.Tensor, mask: torch.Tensor):
    first = torch.tanh(x[:, :1]).masked_fill(mask[:, :1] > 0, 0.0)
    return torch.cat([first, (x[:, 1:] - 0.97 * x[:, :-1]).masked_fill(mask[:, 1:] > 0, 0.0)], dim=1)
"""),
}


def _saves(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    return all(a <= b for a, b in zip(after, before)) and any(a < b for a, b in zip(after, before))


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged_where_moving_the_work_into_the_pieces_saves(name):
    source, shapes, moved, at = FLAGGED[name]
    assert findings(source) == [at]
    assert findings(moved) == []
    args = [torch.randn(*shape) for shape in shapes]
    (out, before), (out_moved, after) = counts(source, *args), counts(moved, *args)
    torch.testing.assert_close(out_moved, out)
    assert _saves(before, after), f"{before} -> {after}"


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_look_alikes_are_not_flagged_and_would_not_save(name):
    source, shapes, moved = LOOK_ALIKES[name]
    assert findings(source) == []
    args = [torch.randn(*shape) for shape in shapes]
    (out, before), (out_moved, after) = counts(source, *args), counts(moved, *args)
    torch.testing.assert_close(out_moved, out)
    assert not _saves(before, after), f"{before} -> {after}"
