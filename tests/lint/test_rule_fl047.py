"""FL047 beyond its own examples: the forms of real code (work handed to every layer of a loop over
layers, an attribute read in a loop that calls only its layers, a blend's ``1 - w`` in a scan,
``if``/``else`` expressions on a flag), the message, and look-alikes that must stay silent (operands
the loop changes, attributes after a method call, module calls, iteration-dependent branches)."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL047"}))


def findings(source: str) -> list[tuple[int, int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column, f.message) for f in result.findings]


def test_work_handed_to_every_layer_is_flagged():
    source = """\
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(4))

    def forward(self, x, memory, pos):
        for layer in self.layers:
            x = layer(x, memory + pos)
            x = x + self.pos_embed * 2
        for i in range(3):
            x = self.layers[i](x) * memory.sum(-1, keepdim=True)
        return x
"""
    found = findings(source)
    assert [(line, column) for line, column, _ in found] == [(12, 26), (13, 21), (15, 37)]
    assert found[0][2].startswith("`memory + pos` reads nothing the loop changes, yet runs on every iteration")


def test_a_blend_in_a_scan_and_a_flagged_conditional_expression():
    source = """\
import torch


def scan(x: torch.Tensor, w: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, use_pos: bool):
    acc = x[0]
    for ix in range(x.shape[0]):
        acc = (w * x[ix]) + ((1.0 - w) * acc)
        k = torch.tanh(acc) @ (memory + pos if use_pos else memory).T
    return acc, k
"""
    assert [(line, column) for line, column, _ in findings(source)] == [(7, 31), (8, 32)]
    # the blend's 1 - w is read by element-wise work alone (fused under fusionrt); the sum by a matmul
    places = [f.pays_in for f in lint_source(source, "m.py", OPTIONS).findings]
    assert places == [("eager",), ("fusionrt", "eager")]


def test_a_mask_rebuilt_per_step_pays_in_eager_a_sum_handed_to_a_layer_in_both():
    source = """\
import torch


def refine(x: torch.Tensor, lengths: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, layers):
    T = x.shape[1]
    for layer in layers:
        mask = torch.arange(T)[None, :] < lengths[:, None]
        x = torch.where(mask[..., None], layer(x, memory + pos), x)
    return x
"""
    found = lint_source(source, "m.py", OPTIONS).findings
    assert [(f.line, f.column, f.pays_in) for f in found] == [(7, 16, ("eager",)), (8, 51, ("fusionrt", "eager"))]


def test_operands_the_loop_changes_stay_silent():
    source = """\
import torch


def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, xs: list, n: int):
    for i in range(n):
        y = a[i] + b
        a.add_(1)
    for x in xs:
        z = x * b
    for _ in range(n):
        c = b * 2
        torch.mul(a, 2, out=b)
    for _ in range(n):
        if (a > 0).any():
            break
        a = a - 1
        d = a.exp()
    for j in range(n):
        e = torch.sigmoid(b) if j % 2 else b
    for _ in range(n):
        g = a.sum() * 2
        a += 1
    return y, z, c, d, e, g
"""
    assert findings(source) == []


def test_attributes_after_unknown_code_module_calls_and_branches_stay_silent():
    source = """\
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor, n: int):
        for layer in self.layers:
            self.update()
            x = layer(x) + self.bias * 2
        for i in range(n):
            h = self.norm(m) + 1
            if i == 0:
                k = m.sum()
            else:
                k = m.mean()
        for _ in range(n):
            s = torch.dropout(m, 0.1, True) * 2
            v = m.view(-1).float()
            buf = torch.zeros(n) + 1
            buf[0] = 2
        return x, h, k, s, v, buf
"""
    assert findings(source) == []


def test_python_numbers_and_a_while_loop_of_a_counter_stay_silent():
    source = """\
import torch


def f(x: torch.Tensor, n: int, d: int):
    while n > 0:
        scale = d ** -0.5
        x = x * scale
        n -= 1
    return x
"""
    assert findings(source) == []
