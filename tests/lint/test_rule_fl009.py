"""FL009 beyond its own examples: which matmuls are similarity matrices, and the fix's operand."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL009"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


ATTENTION = """\
import torch

def attend(query: torch.Tensor, key: torch.Tensor, scaling: float):
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    return torch.softmax(attn_weights, -1)
"""


def test_flagged_on_the_transformers_attention_scores():
    assert positions(ATTENTION) == [(4, 20)]


def test_fix_scales_the_query():
    result = lint_source(ATTENTION, "m.py", LintOptions(codes=frozenset({"FL009"}), fix=FixMode.UNSAFE))
    assert "attn_weights = torch.matmul(query * scaling, key.transpose(2, 3))\n" in result.source


@pytest.mark.parametrize(
    "equation,flagged",
    [
        ("... i d, ... j d -> ... i j", True),
        ("bhqd, bhkd -> bhqk", True),
        ("b h i d, b j d -> b h i j", True),  # keys shared by the heads
        ("v b ... d, l b ... d -> v l b ...", False),  # the result drops d but keeps the leading dims
        ("b n d, d e -> b n e", False),  # a projection
        ("b i d, b j d -> b i j d", False),  # nothing summed
    ],
)
def test_einsum_similarity(equation, flagged):
    source = f"""\
import torch

def f(q: torch.Tensor, k: torch.Tensor):
    return torch.einsum("{equation}", q, k) * 0.5
"""
    assert bool(positions(source)) is flagged


@pytest.mark.parametrize(
    "kv,flagged",
    [
        ("'b h j d'", True),
        ("'b j d' if k.ndim == 3 else 'b h j d'", True),
        ("'b j d' if k.ndim == 3 else 'b h d j'", False),  # one of the equations is no similarity
        ("str(k.ndim)", False),  # unknown
    ],
)
def test_einsum_equation_built_by_an_f_string(kv, flagged):
    source = f"""\
import torch

def f(q: torch.Tensor, k: torch.Tensor, scale: float):
    kv = {kv}
    sim = torch.einsum(f'b h i d, {{kv}} -> b h i j', q, k)
    sim = sim * scale
    return sim.softmax(-1)
"""
    assert bool(positions(source)) is flagged


def test_a_matmul_without_a_transposed_operand_is_silent():
    source = """\
import torch

def f(q: torch.Tensor, k: torch.Tensor):
    return torch.matmul(q, k) / 8 + (q @ k.T.contiguous()) * 2
"""
    assert positions(source) == []


@pytest.mark.parametrize(
    "line,winner",
    [
        ("torch.matmul(q, k.transpose(-1, -2)) * 0.125 + mask", "FL013"),  # torch.add(mask, ..., alpha=0.125)
        ("torch.bmm(q, k.transpose(1, 2)) * 0.125 + mask", "FL012"),  # torch.baddbmm
        ("torch.matmul(q, k.transpose(-1, -2)) * 0.125", "FL009"),
    ],
)
def test_yields_to_the_rules_that_fuse_the_scale_into_one_kernel(line, winner):
    source = f"""\
import torch

def scores(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor):
    return {line}
"""
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL009"})))
    assert [f.code for f in result.findings] == ([winner] if winner == "FL009" else [])
    everything = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL009", "FL012", "FL013"})))
    assert [f.code for f in everything.findings] == [winner]


LATER = {
    "after_if": """\
import torch


def scores(q: torch.Tensor, k: torch.Tensor, scale: float, l2: bool) -> torch.Tensor:
    if not l2:
        sim = q @ k.transpose(-1, -2)
    else:
        sim = -torch.cdist(q, k)
    sim = sim * scale
    return sim.softmax(-1)
""",
    "read_between": """\
import torch


def scores(q: torch.Tensor, k: torch.Tensor, scale: float):
    sim = q @ k.transpose(-1, -2)
    raw = sim.amax(-1)
    sim = sim * scale
    return sim.softmax(-1), raw
""",
    "scale_changes": """\
import torch


def scores(q: torch.Tensor, k: torch.Tensor, scale: float):
    sim = q @ k.transpose(-1, -2)
    scale = scale * 2
    sim = sim * scale
    return sim.softmax(-1)
""",
    "projection": """\
import torch


def proj(x: torch.Tensor, w: torch.Tensor, scale: float):
    h = x @ w
    h = h * scale
    return h
""",
}


@pytest.mark.parametrize("name, expected", [
    ("after_if", [(9, 11)]), ("read_between", []), ("scale_changes", [(7, 11)]), ("projection", []),
])
def test_a_scale_in_a_later_statement(name, expected):
    """Flagged without a fix after the ``if`` whose arm made the scores (the other arm's value is
    scaled too) and where the factor is computed between (it must move above the matmul: the
    scores cannot be read in between, since the rescale is their first reader); silent where the
    unscaled scores are read first, or the matmul is a projection."""
    assert positions(LATER[name]) == expected
    fixed = lint_source(LATER[name], "m.py", LintOptions(codes=frozenset({"FL009"}), fix=FixMode.UNSAFE))
    assert fixed.source is None


@pytest.mark.parametrize(
    "body,expected",
    [
        ("sim = q @ k.transpose(-1, -2)\n    sim /= math.sqrt(k.shape[-1])", [(6, 5)]),
        ("sim = q @ k.transpose(-1, -2)\n    sim.mul_(scale)", [(6, 5)]),
        ("sim = scale * torch.matmul(q, k.transpose(-1, -2))", [(5, 11)]),
        ("sim = torch.matmul(q, k.transpose(-1, -2)).div(math.sqrt(q.shape[-1]))", [(5, 11)]),
        ("sim = q @ k.transpose(-1, -2)\n    sim *= bias", []),  # a tensor: it may not broadcast against q
        ("sim = bias * (q @ k.transpose(-1, -2))", []),
        ("sim = q @ k.transpose(-1, -2)\n    raw = sim.amax(-1)\n    sim /= scale", []),  # read unscaled first
        ("sim = (q @ k.transpose(-1, -2)).div(scale, rounding_mode='floor')", []),
    ],
)
def test_in_place_left_and_method_scales(body, expected):
    source = f"""\
import math
import torch

def f(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, scale: float):
    {body}
    return sim.softmax(-1)
"""
    assert positions(source) == expected


def test_fix_of_an_in_place_rescale_drops_it():
    source = """\
import torch

def f(q: torch.Tensor, k: torch.Tensor, scale: float):
    sim = torch.einsum("b i d, b j d -> b i j", q, k)
    sim *= scale
    return sim.softmax(-1)
"""
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL009"}), fix=FixMode.UNSAFE))
    assert 'sim = torch.einsum("b i d, b j d -> b i j", q * scale, k)\n    return' in result.source


def test_a_flattened_map_against_labels_is_no_similarity():
    source = """\
import torch

def dice_numerator(inputs: torch.Tensor, labels: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
    inputs = inputs.sigmoid().flatten(1)
    numerator = 2 * torch.matmul(inputs, labels.T)
    scores = 2 * torch.matmul(q.flatten(2), k.transpose(-1, -2))
    return numerator, scores
"""
    assert positions(source) == [(6, 14)]


def test_a_rescale_first_in_the_next_if_arm_is_reported_without_a_fix():
    source = """\
import torch

def f(q: torch.Tensor, k: torch.Tensor, scale: float | None, mask: torch.Tensor | None):
    sim = q @ k.transpose(-1, -2)
    if scale is not None:
        sim = sim * scale
    if mask is not None:
        sim = sim.masked_fill(mask, float("-inf"))
    return sim.softmax(-1)
"""
    result = lint_source(source, "m.py", OPTIONS)
    assert [(f.line, f.column, bool(f.edits)) for f in result.findings] == [(6, 15, False)]


def test_an_if_that_reads_the_scores_first_is_no_rescale():
    source = """\
import torch

def f(q: torch.Tensor, k: torch.Tensor, scale: float):
    sim = q @ k.transpose(-1, -2)
    if sim.amax() > 10:
        sim = sim * scale
    return sim.softmax(-1)
"""
    assert positions(source) == []


def _fixed(source: str) -> str:
    return lint_source(source, "m.py", LintOptions(codes=frozenset({"FL009"}), fix=FixMode.UNSAFE)).source


SCALES = """\
import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, heads: int, dim: int):
        super().__init__()
        self.temperature = nn.Parameter(torch.tensor(0.07))
        self.head_scale = nn.Parameter(torch.ones(heads, 1, 1))
        self.mask = nn.Parameter(torch.ones(heads, 64, 64))
        self.text_scale = nn.Parameter(torch.ones([]))

    def forward(self, q, k, text, image):
        a = (q @ k.transpose(-2, -1)) / self.temperature
        b = (q @ k.transpose(-2, -1)) * self.head_scale.exp()
        c = (q @ k.transpose(-2, -1)) * self.mask
        d = (text @ image.t()) * self.text_scale.exp()
        return a, b, c, d
"""


def test_a_tensor_that_broadcasts_like_a_number_scales_q_not_a_mask_nor_contrastive_logits():
    assert positions(SCALES) == [(16, 13), (17, 13)]
    source = _fixed(SCALES)
    assert "a = (q / self.temperature) @ k.transpose(-2, -1)" in source
    assert "b = (q * self.head_scale.exp()) @ k.transpose(-2, -1)" in source


COLUMNS = """\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.key_linear = nn.Linear(dim, dim)
        self.query_linear = nn.Linear(dim, dim)
        self.keys = None

    def forward(self, enc, dec, h: torch.Tensor, c: torch.Tensor):
        if self.keys is None:
            self.keys = self.key_linear(enc)
        query = self.query_linear(dec).unsqueeze(2)
        scores = torch.matmul(self.keys, query) / 4.0
        keys = self.key_linear(enc)
        more = keys @ self.query_linear(dec)[..., None] * 0.5
        point = (h @ c[..., None]) * 2.0
        return scores, more, point
"""


def test_keys_against_one_query_column_scale_the_query_not_a_matrix_made_by_arithmetic():
    assert positions(COLUMNS) == [(16, 18), (18, 16)]
    source = _fixed(COLUMNS)
    assert "scores = torch.matmul(self.keys, query / 4.0)" in source
    assert "more = keys @ (self.query_linear(dec)[..., None] * 0.5)" in source
