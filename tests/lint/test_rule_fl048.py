"""FL048 beyond its own examples: the forms of real code (a hierarchical quantizer's reconstruction,
a loss summed over discriminators in place, a mask or-ed over hops, a validity mask and-ed from
ones), the message naming the accumulator and its operator, and look-alikes that must stay silent
(the zeros read before the add, a term that is a buffer rewritten in place, a host number, a dtype
of its own, an add in a branch, an accumulator started by a Python number or by numpy)."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL048"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


def test_a_hierarchical_reconstruction_read_after_the_add_is_flagged():
    source = """\
import torch
import torch.nn.functional as F


def forward(x: torch.Tensor, codebooks: torch.Tensor):
    residual = x
    reconstruction = torch.zeros_like(x)
    cumulative = []
    all_indices = []
    for cb in codebooks:
        down = F.adaptive_avg_pool1d(residual, 16)
        quantized = F.interpolate(down, size=x.shape[-1], mode="linear")
        reconstruction = reconstruction + quantized
        residual = residual - quantized
        cumulative.append(reconstruction)
    return reconstruction, cumulative
"""
    found = findings(source)
    assert [line for line, _ in found] == [7]
    assert found[0][1].startswith("`reconstruction` starts as a tensor of zeros that every iteration of the loop "
                                  "combines with a term by `+`:")


def test_losses_summed_in_place_masks_or_ed_and_and_ed_are_flagged():
    source = """\
from typing import List

import torch


def generator_loss(disc_outputs: List[torch.Tensor]):
    loss = torch.zeros(1, device=disc_outputs[0].device, dtype=disc_outputs[0].dtype)
    gen_losses = []
    for dg in disc_outputs:
        l = torch.mean(torch.clamp(1 - dg, min=0))
        gen_losses.append(l)
        loss += l
    return loss, gen_losses


def any_nan(tensors: List[torch.Tensor]):
    nan_idxs = torch.zeros(len(tensors[0]), dtype=torch.bool, device=tensors[0].device)
    for tensor in tensors:
        nan_idxs |= torch.any(torch.isnan(tensor.flatten(start_dim=1)), dim=1)
    return nan_idxs


def inside(s: torch.Tensor, steps: int):
    alive = torch.ones_like(s, dtype=torch.bool)
    for _ in range(steps):
        alive = alive & (s > 0)
        s = s - 1
    return alive
"""
    found = findings(source)
    assert [line for line, _ in found] == [7, 17, 24]
    assert "by `+`, in place (also a fusion boundary under fusionrt)" in found[0][1]
    assert "by `|`, in place" in found[1][1]
    assert found[2][1].startswith("`alive` starts as a tensor of ones that every iteration of the loop combines "
                                  "with a term by `&`:")


def test_look_alikes_stay_silent():
    source = """\
import numpy as np
import torch


def f(xs: list, w: torch.Tensor, row: torch.Tensor, hops: int):
    edge_mask = torch.zeros_like(row, dtype=torch.bool)
    node_mask = torch.zeros_like(row, dtype=torch.bool)
    preserved = torch.zeros_like(edge_mask)
    for _ in range(hops):
        torch.index_select(node_mask, 0, row, out=edge_mask)
        preserved |= edge_mask
    h = torch.zeros_like(w)
    for x in xs:
        h = h + torch.tanh(h @ w)
    count = torch.zeros((), dtype=torch.int64)
    for x in xs:
        count += x.numel()
    wide = torch.zeros(4, dtype=torch.float64)
    for x in xs:
        wide += x
    part = torch.zeros_like(w)
    for i, x in enumerate(xs):
        if i % 2:
            part = part + x
    early = torch.zeros_like(w)
    for x in xs:
        if x is None:
            break
        early += x
    total = 0.0
    for x in xs:
        total = total + x
    acc = np.zeros(3)
    for x in xs:
        acc += x
    scale = torch.ones_like(w)
    for x in xs:
        scale = scale - x
    return preserved, h, count, wide, part, early, total, acc, scale
"""
    assert findings(source) == []


def test_a_start_read_between_it_and_the_loop_or_by_the_loop_header_is_not_flagged():
    source = """\
import torch


def g(xs: list, w: torch.Tensor):
    acc = torch.zeros_like(w)
    acc[0] = 1.0
    for x in xs:
        acc += x
    m = torch.zeros_like(w)
    while m.sum() < 10:
        m = m + w
    return acc, m
"""
    assert findings(source) == []
