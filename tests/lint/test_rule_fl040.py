"""FL040 beyond its own examples: the forms of real code (SAM's per-token MLPs, a per-channel
convolution, per-channel statistics, an in-place scale per channel), the message naming the
batched op, and look-alikes that must stay silent (recurrences, unknown calls, lists, syncs)."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.loop_over_slices import LoopOverSlices

OPTIONS = LintOptions(codes=frozenset({"FL040"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


MASK_DECODER = """\
from typing import List

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x)


class MaskDecoder(nn.Module):
    def __init__(self, d: int, n: int):
        super().__init__()
        self.num_mask_tokens = n
        self.output_hypernetworks_mlps = nn.ModuleList([MLP(d) for i in range(n)])

    def forward(self, hs: torch.Tensor):
        mask_tokens_out = hs[:, 1 : (1 + self.num_mask_tokens), :]
        hyper_in_list: List[torch.Tensor] = []
        for i in range(self.num_mask_tokens):
            hyper_in_list.append(self.output_hypernetworks_mlps[i](mask_tokens_out[:, i, :]))
        return torch.stack(hyper_in_list, dim=1)
"""


def test_a_module_list_run_per_token_is_flagged_with_stacked_weights_advice():
    [(line, message)] = findings(MASK_DECODER)
    assert line == 26
    assert message.startswith("one `ModuleList` module per slice in a Python loop: stack their weights once")


def test_a_convolution_per_channel_names_the_folded_batch():
    source = """\
import torch
import torch.nn.functional as F


def per_channel(inputs: torch.Tensor, kernel_weight, kernel_bias):
    return torch.cat(
        [F.conv2d(inputs[:, channel].unsqueeze(1), kernel_weight, kernel_bias, padding=0)
         for channel in range(inputs.shape[1])],
        dim=1,
    )
"""
    assert findings(source) == [(6, "the same convolution once per slice in a Python loop: fold the slices into "
                                    "the batch (or `groups=`) and convolve once")]


def test_statistics_per_channel_written_by_index_are_flagged():
    source = """\
import torch


def stats(x: torch.Tensor):
    mean_list = torch.zeros([3, 64])
    var_list = torch.zeros([3, 64])
    for i in range(3):
        mean_list[i] = torch.mean(x[:, i], dim=0)
        var_list[i] = torch.var(x[:, i], dim=0)
    return mean_list, var_list
"""
    assert findings(source) == [(8, "the same tensor work once per slice in a Python loop: run it once on the "
                                    "whole tensor, it broadcasts along the looped dim")]


def test_an_in_place_scale_per_channel_by_a_tensor_element_is_flagged():
    source = """\
import torch


def scale(features: torch.Tensor, sigmas: torch.Tensor):
    for i in range(features.size(1)):
        features[:, i, ...] /= sigmas[i]
    return features
"""
    assert [line for line, _ in findings(source)] == [6]


def test_a_matmul_per_slice_with_a_stacked_weight_and_temporaries():
    source = """\
import torch


def heads(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    outs = []
    for i in range(w.shape[0]):
        h = x[:, i] @ w[i]
        h = torch.relu(h + b[i])
        outs.append(h)
    return torch.stack(outs, dim=1)
"""
    [(line, message)] = findings(source)
    assert line == 9 and "`bmm` for a weight sliced by the index" in message


@pytest.mark.parametrize("body", [
    # a recurrence through a name, an accumulator, a neighbouring slice
    "    h = x[:, 0]\n    for i in range(x.shape[1]):\n        h = torch.tanh(x[:, i] * w + h)\n    return h\n",
    "    acc = 0\n    for i in range(x.shape[1]):\n        acc += x[:, i] * w\n    return acc\n",
    "    y = x.clone()\n    for i in range(1, x.shape[1]):\n        y[:, i] = y[:, i - 1] * 0.9 + x[:, i]\n    return y\n",
    # a list of weights would be stacked on every call; a Python list is written, not a tensor
    "    return torch.stack([x[:, i] @ ws[i] for i in range(len(ws))], 1)\n",
    "    steps = [1] * 4\n    for i in range(len(steps)):\n        steps[i] += 1\n    return steps\n",
    # an unknown function; a host sync deciding; the index used as a number
    "    return torch.stack([helper(x[:, i]) for i in range(x.shape[1])], 1)\n",
    "    outs = []\n    for i in range(x.shape[1]):\n        if x[:, i].sum().item() > 0:\n"
    "            outs.append(x[:, i] * 2)\n    return torch.cat(outs)\n",
    "    return torch.stack([x[:, i] * i for i in range(x.shape[1])], 1)\n",
    # slices copied only; a list read before it is joined; not joined at all
    "    return torch.stack([x[:, i] for i in range(x.shape[1])], -1)\n",
    "    outs = []\n    for i in range(x.shape[1]):\n        outs.append(x[:, i] * w)\n    n = len(outs)\n"
    "    return torch.stack(outs, 1), n\n",
    "    outs = []\n    for i in range(x.shape[1]):\n        outs.append(x[:, i] * w)\n    return outs\n",
    # a batch norm per slice keeps each slice's statistics; a range of one
    "    return torch.stack([F.batch_norm(t, w, w, training=True) for t in x.unbind(1)], 1)\n",
    "    y = torch.empty_like(x)\n    for i in range(1):\n        y[:, i] = x[:, i] * w\n    return y\n",
])
def test_look_alikes_stay_silent(body):
    source = ("import torch\nimport torch.nn.functional as F\n\n\n"
              "def f(x: torch.Tensor, w: torch.Tensor, ws: list, helper):\n" + body)
    assert findings(source) == []


@pytest.mark.parametrize("text,expected", [
    ("out[:, i] = torch.sigmoid(x[:, i] * w)", True),
    ("outs.append(self.mlps[i](tokens[:, i, :]))", True),
    ("y = F.conv2d(x[..., c:c + 1], k)", True),
    ("for frame in frames.unbind(1):", True),
    ("y = x[:, 0] * 2", False),
    ("x = torch.cat([a, b], dim=1)", False),
    ("for i in range(n):", False),
])
def test_text_test(text, expected):
    ops = op_tables()
    assert LoopOverSlices.may_match([text], 0, ops) is expected
    if expected:
        assert LoopOverSlices.needle(ops).search(text)
