"""FL041 beyond its own examples: the forms of real code (a repeated reduction across lines of a
forward, a repeated einsum, a count read twice around a loop's writes), the message quoting the
call, and look-alikes that must stay silent (rebound or written operands, arms of an if, assert
messages, one-line suites, attributes after unknown calls, element-wise repeats)."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL041"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


def test_a_reduction_repeated_in_a_forward_is_flagged_at_the_second():
    source = """\
import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        blurred = torch.tanh(x)
        c = torch.amax(blurred, dim=(-2, -1), keepdim=True)
        y = x * c
        s = torch.amax(blurred, dim=(-2, -1), keepdim=True)
        return y + s
"""
    [(line, message)] = findings(source)
    assert line == 10
    assert message.startswith("`torch.amax(blurred, dim=(-2, -1), keepdim=True)` computed again from the same values")


def test_a_repeated_einsum_and_a_repeated_matmul_are_flagged():
    source = """\
import torch


def project(a: torch.Tensor, b: torch.Tensor, n: torch.Tensor, w: torch.Tensor):
    proj = torch.einsum("bij,bjk->bik", a, b) / n
    angles = torch.acos(torch.einsum("bij,bjk->bik", a, b) / n)
    h = torch.relu(a @ w)
    g = torch.sigmoid(a @ w)
    return proj, angles, h * g
"""
    assert [line for line, _ in findings(source)] == [6, 8]


def test_the_outermost_repeat_is_reported_once():
    source = """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    p = torch.softmax(x @ w, dim=-1).sum(-1)
    q = torch.softmax(x @ w, dim=-1).sum(-1)
    return p, q
"""
    [(line, message)] = findings(source)
    assert line == 6 and message.startswith("`torch.softmax(x @ w, dim=-1).sum(-1)`")


def test_a_count_read_twice_around_writes_of_other_tensors_is_flagged():
    source = """\
import torch


def pool(x: torch.Tensor, mask: torch.Tensor, cluster: torch.Tensor):
    j = int(mask.sum())
    cluster[mask] = torch.arange(j)
    out = x * 2
    if int(mask.sum()) > 0:
        out = out + 1
    return out, cluster
"""
    assert [line for line, _ in findings(source)] == [8]


def test_look_alikes_stay_silent():
    source = """\
import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, flag: bool):
        a = x.sum(-1)
        x += 1
        b = x.sum(-1)
        c = y.mean()
        y[0] = 0
        d = y.mean()
        assert y.max() < 10, y.max().item()
        e = y.max()
        if flag: f = x.amax()
        g = x.amax()
        n = self.weight.norm()
        self.update()
        m = self.weight.norm()
        for i in range(3):
            s = x.std()
        t = x.std()
        u = x.exp() + x.exp()
        v, k = x.var(), [x.var() for _ in range(2)]
        return a, b, c, d, e, f, g, n, m, s, t, u, v, k
"""
    assert findings(source) == []


def test_a_name_rebound_by_a_loop_between_stays_silent():
    source = """\
import torch


def f(x: torch.Tensor, layers: list):
    before = x.norm()
    for w in layers:
        x = x @ w
    after = x.norm()
    return before, after
"""
    assert findings(source) == []


def test_a_product_transposed_is_flagged_in_every_spelling():
    source = """\
import torch


def logits(text: torch.Tensor, audio: torch.Tensor, st, sa):
    per_text = torch.matmul(text, audio.t()) * st
    per_audio = torch.matmul(audio, text.t()) * sa
    return per_text, per_audio


def phasor(p: torch.Tensor):
    real_imag = torch.matmul(p[..., 0], p[..., 1].transpose(-2, -1))
    imag_real = torch.matmul(p[..., 1], p[..., 0].transpose(-2, -1))
    return real_imag, imag_real


def methods(x: torch.Tensor, y: torch.Tensor):
    a = x.matmul(y.mT)
    b = y @ x.mT
    return a, b
"""
    found = findings(source)
    assert [line for line, _ in found] == [6, 12, 18]
    assert all("is the transpose of a product computed above" in message for _, message in found)


def test_a_gram_matrix_and_a_transposed_product_of_changed_values_stay_silent():
    source = """\
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    g = x @ x.T
    h = x @ x.t()
    b = x @ y.T
    y = y * 2
    c = y @ x.T
    s = torch.matmul(x, y.transpose(0, 1))
    t = torch.matmul(y, x.transpose(0, 1))
    return g, h, b, c, s, t
"""
    assert findings(source) == []
