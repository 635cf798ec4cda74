"""FL014 beyond its own examples: which factor is the smaller one, and where the scale goes."""
from __future__ import annotations

import ast
import textwrap

import pytest

from fusionlint.engine import _LINE, _Texts, lint_source
from fusionlint.model import FixMode, LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.scale_smaller_factor import ScaleSmallerFactor

OPTIONS = LintOptions(codes=frozenset({"FL014"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


def fixed(source: str) -> str | None:
    return lint_source(source, "m.py", LintOptions(codes=frozenset({"FL014"}), fix=FixMode.UNSAFE)).source


NORM = """\
import torch
import torch.nn.functional as F
from torch import nn


class ScaleNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = dim**0.5
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        gamma = self.g + 1.0
        return F.normalize(x, dim=-1) * self.scale * gamma
"""


def test_a_gamma_made_of_a_parameter_takes_the_scale():
    assert positions(NORM) == [(14, 16)]
    assert "return F.normalize(x, dim=-1) * (gamma * self.scale)" in fixed(NORM)


ADAPTIVE = """\
import torch
from torch import nn


class AdaNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, shift: float):
        a = 0.5 * torch.tanh(x) * self.weight
        b = torch.tanh(x) / shift * self.weight[None, :]
        c = (torch.tanh(x) * self.weight) * 2.0
        return a + b + c
"""


def test_scale_before_or_after_the_product():
    assert positions(ADAPTIVE) == [(11, 13), (12, 13), (13, 13)]
    source = fixed(ADAPTIVE)
    assert "a = torch.tanh(x) * (self.weight * 0.5)" in source
    assert "b = torch.tanh(x) * (self.weight / shift)[None, :]" in source
    assert "c = torch.tanh(x) * (self.weight * 2.0)" in source


AFTER_IF = """\
import torch


def embed(t: torch.Tensor, freqs: torch.Tensor, scale: float, flip: bool):
    if flip:
        emb = t[:, None] * freqs.unsqueeze(0)
    else:
        emb = torch.zeros(t.shape[0], freqs.shape[0])
    emb = emb * scale
    return emb.sin()
"""


def test_rescaled_after_the_if_that_made_it_is_reported_without_a_fix():
    assert positions(AFTER_IF) == [(9, 11)]
    assert fixed(AFTER_IF) is None


SILENT = {
    "an outer product of two broadcasts is not smaller than its factors": """\
import torch


def f(t: torch.Tensor, freqs: torch.Tensor, x: torch.Tensor):
    emb = t[:, None] * freqs[None, :]
    return x * 0.5 * emb
""",
    "the large side is the module's own tensor": """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.ones(8, 8))

    def forward(self, x):
        return self.table * 2.0 * x[None, :]
""",
    "a zero-dimensional tensor of a number times a broadcast": """\
import math

import torch


def f(n: int):
    k = torch.tensor(-1.0) * math.pi * torch.arange(n)[None, :]
    return torch.exp(k)
""",
    "the factor is a tensor": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor):
    return x * w.sum() * g[None, :], (x * g[None, :]) * w
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []


def test_a_divisor_of_unknown_kind_is_not_taken_for_a_number():
    source = """\
import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, batch):
        std = gather_std(x, batch)
        return self.weight * x / std
"""
    assert positions(source) == []


SINUSOIDAL = """\
import math

import torch


def timestep_embedding(timesteps: torch.Tensor, dim: int, scale: float = 1, max_period: int = 10000):
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32)
    emb = torch.exp(exponent / half)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    return torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
"""


def test_a_sinusoidal_embedding_rescaled_after_its_outer_product():
    assert positions(SINUSOIDAL) == [(11, 11)]
    source = fixed(SINUSOIDAL)
    assert "emb = timesteps[:, None].float() * (emb * scale)[None, :]" in source
    assert "emb = scale * emb" not in source


def test_a_rescale_by_a_value_of_unknown_kind_is_silent():
    source = """\
import torch


def embed(t: torch.Tensor, freqs: torch.Tensor, scale):
    emb = t[:, None] * freqs[None, :]
    emb = scale * emb
    return emb.sin()
"""
    assert positions(source) == []


OFFSET_GAIN = """\
import torch
from torch import nn


class OffsetGain(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.g = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, s: float):
        return x * s * (self.g + 1.0)
"""


def test_a_sum_taking_the_scale_keeps_its_parentheses():
    assert "return x * ((self.g + 1.0) * s)" in fixed(OFFSET_GAIN)


REDUCED_BY_CHANNEL = """\
import torch
from torch import nn


class Gated(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        nx = x.mean((-2, -1), keepdim=True)
        a = self.gamma * (x * nx)
        b = x * mask[:, :, None] * mask[:, None, :]
        c = nx * (x * mask[:, None])
        return a, b, c
"""


def test_a_tensor_scale_pairs_a_module_tensor_with_a_keepdim_reduction():
    assert positions(REDUCED_BY_CHANNEL) == [(12, 13)]
    assert "a = x * (nx * self.gamma)" in fixed(REDUCED_BY_CHANNEL)


TEXT_TESTS = {
    "a product of a small factor": ("y = x * self.s * g[None, :]", [True]),
    "a path and a norm in a message": ('logger.warning(f"a/b/{n} norm", x * 2)', [False]),
    "a norm and a division in a comment": ("y = x * 2  # norm / dim", [False]),
    "code after a string holding a #": ('y = d["#"] * self.s * g', [True]),
    "floor divisions": ("self.window = (g[0] // self.p, g[1] // self.p)", [False]),
    "a module's output scaled": ("y = self.b(self.a(x)) * self.s", [True]),
    "a number times a module's output": ("y = 0.5 * self.b(x)", [True]),
    "a tied embedding's logits scaled": ("y = F.linear(x, self.emb.weight) / self.config.s", [True]),
    "a matmul with a module's tensor scaled": ("y = (x @ self.w) * self.s", [True]),
    "a module's output, no product": ("y = self.b(x)", [False]),
    "a gated activation": ("y = self.act(x) * d", [False]),
    "a module's outputs unpacked": ("y = torch.cat([x, *self.b(x)], dim=1)", [False]),
    "first in a block, rescaled by an attribute": ("x = x / self.config.s", [True]),
    "first in a block, rescaled by a reduction": ("x /= x.sum(-1, keepdim=True)", [False]),
}


@pytest.mark.parametrize("name", sorted(TEXT_TESTS))
def test_the_text_test_counts_the_products_of_code_only(name):
    body, expected = TEXT_TESTS[name]
    source = "def f(self, x, g, d, n):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    statements = ast.parse(source).body[0].body
    texts = _Texts(statements, _LINE.findall(source))
    assert [ScaleSmallerFactor.may_match(texts, i, op_tables()) for i in range(len(statements))] == expected


def _indented(text: str) -> str:
    return textwrap.indent(text + "\n", " " * 8)


def linear_module(members: str, body: str) -> str:
    return f"""\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, dim: int, rank: int, config):
        super().__init__()
{_indented(members)}        self.scaling = 2.0 / rank

    def forward(self, x):
{_indented(body)}"""


LOW_RANK = "self.a = nn.Linear(dim, rank)\nself.b = nn.Linear(rank, dim, bias=False)"
HEAD = "self.lm_head = nn.Linear(dim, config.vocab_size, bias=False)"


@pytest.mark.parametrize(
    "members,body,expected",
    [
        (LOW_RANK, "return self.scaling * self.b(self.a(x))", "return self.b(self.a(x) * self.scaling)"),
        (LOW_RANK, "h = self.a(x)\nreturn self.b(h) / self.scaling", "return self.b(h / self.scaling)"),
        (LOW_RANK + "\nself.drop = nn.Dropout(0.1)", "return self.b(self.drop(self.a(x))) * 2.0",
         "return self.b(self.drop(self.a(x)) * 2.0)"),
        (LOW_RANK, "y = self.b(self.a(x))\ny *= self.scaling\nreturn y", "y = self.b(self.a(x) * self.scaling)\n        return y"),
        (HEAD, "logits = self.lm_head(x)\nlogits = logits / self.scaling\nreturn logits",
         "logits = self.lm_head(x / self.scaling)\n        return logits"),
    ],
)
def test_a_number_scaling_a_linear_wider_than_its_input_moves_onto_the_input(members, body, expected):
    source = linear_module(members, body)
    assert len(positions(source)) == 1
    assert expected in fixed(source)


@pytest.mark.parametrize(
    "members,body",
    [
        ("self.a = nn.Linear(dim, rank)\nself.b = nn.Linear(rank, dim)", "return self.scaling * self.b(self.a(x))"),  # a bias
        (LOW_RANK, "h = torch.relu(self.a(x))\nreturn self.b(h) * self.scaling"),  # a nonlinearity between
        (LOW_RANK, "return self.b(x) * self.scaling"),  # x's width is unknown
        ("self.proj = nn.Linear(dim, config.hidden_size, bias=False)", "return self.proj(x) * self.scaling"),
        (HEAD, "logits = self.lm_head(x)\nlogits = logits.float() / self.scaling\nreturn logits"),  # cast first
        (HEAD, "logits = self.lm_head(x)\nif logits.isnan().any():\n    logits = logits * self.scaling\nreturn logits"),
        (HEAD, "return self.lm_head(x) * torch.ones_like(x)"),  # a tensor scale
    ],
)
def test_look_alikes_of_a_scaled_linear_are_silent(members, body):
    assert positions(linear_module(members, body)) == []


TIED = """\
import torch
import torch.nn.functional as F
from torch import nn


class TokenEmbedding(nn.Module):
    def __init__(self, dim: int, num_tokens: int):
        super().__init__()
        self.emb = nn.Embedding(num_tokens, dim)


class Logits(nn.Module):
    def __init__(self, dim: int, num_tokens: int, config):
        super().__init__()
        self.token_emb = TokenEmbedding(dim, num_tokens)
        self.pos_emb = nn.Embedding(num_tokens, dim)
        self.w = nn.Parameter(torch.randn(dim, dim))
        self.config = config

    def forward(self, t):
        a = F.linear(t, self.token_emb.emb.weight) * self.config.logit_scale
        b = (t @ self.w) / self.config.logit_scale
        c = F.linear(t, self.w) * self.config.logit_scale  # no embedding: its width is unknown
        d = F.linear(t, self.pos_emb.weight) * torch.ones_like(t)
        return a, b, c, d
"""


def test_a_tied_embeddings_logits_and_a_matmul_with_a_module_tensor_take_the_number():
    assert positions(TIED) == [(21, 13), (22, 13)]
    assert "a = F.linear(t * self.config.logit_scale, self.token_emb.emb.weight)" in fixed(TIED)
    assert "b = t @ (self.w / self.config.logit_scale)" in fixed(TIED)


def test_a_vocabulary_heads_logits_softcapped_in_an_if_arm_are_reported_without_a_fix():
    source = linear_module(
        HEAD, "logits = self.lm_head(x)\nif self.config.softcap is not None:\n    logits = logits / self.config.softcap\n"
              "    logits = torch.tanh(logits) * self.config.softcap\nreturn logits"
    )
    result = lint_source(source, "m.py", OPTIONS)
    assert [(f.line, f.column, bool(f.edits)) for f in result.findings] == [(14, 22, False)]


def test_a_number_scaling_one_factor_of_an_outer_product_of_ranges_is_silent():
    source = """\
import math

import torch


def dct_matrix(n_in: int, n_out: int) -> torch.Tensor:
    n = torch.arange(float(n_in))
    k = torch.arange(float(n_out)).unsqueeze(1)
    return torch.cos(math.pi / float(n_in) * (n + 0.5) * k)
"""
    assert positions(source) == []


def test_a_product_cleared_by_zero_is_no_rescale():
    source = """\
import torch


def f(t: torch.Tensor, freqs: torch.Tensor, keep: bool):
    emb = t[:, None] * freqs[None, :]
    if not keep:
        emb = emb * 0.0
    return emb
"""
    assert positions(source) == []


CHAINS = """\
import torch


def f(x: torch.Tensor, s: float, n: int):
    a = x * s * 2
    b = x / s / 2
    c = 2 * x / s
    d = x / s * 2
    e = x * s * 0.5 * n
    return a, b, c, d, e
"""


def test_a_tensor_scaled_by_numbers_in_a_row_has_them_folded():
    assert positions(CHAINS) == [(5, 9), (6, 9), (7, 9), (8, 9), (9, 9)]
    source = fixed(CHAINS)
    for line in ("a = x * (s * 2)", "b = x / (s * 2)", "c = (2 / s) * x", "d = x / (s / 2)", "e = x * (s * 0.5 * n)"):
        assert line in source


def test_numbers_in_a_row_on_a_number_a_range_or_a_reduction_are_silent():
    source = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.w = nn.Parameter(torch.ones(dim))
        self.scale = dim**-0.5

    def forward(self, x: torch.Tensor, f: torch.Tensor, dim: int):
        hidden = dim * self.scale * 2
        t = torch.arange(dim).view(1, -1) * self.scale * 2
        peaks = torch.argmax(f, dim=1) * 2 * 3.0
        w = self.w * self.scale * 2
        y = x * self.scale * f
        return hidden, t, peaks, w, y
"""
    assert positions(source) == []


def test_a_quotient_by_a_smaller_divisor_takes_the_scale_into_the_divisor():
    source = """\
import torch


def f(mask: torch.Tensor, x: torch.Tensor, scale: float):
    y = mask.cumsum(1)
    a = y / (y[:, -1:, :] + 1e-6) * scale
    b = (x - 0.5) / x.norm(dim=-1, keepdim=True) / scale
    c = scale * (x / x[..., :1])
    return a, b, c
"""
    assert positions(source) == [(6, 9), (7, 9), (8, 9)]
    result = fixed(source)
    assert "a = y / ((y[:, -1:, :] + 1e-6) / scale)" in result
    assert "b = (x - 0.5) / (x.norm(dim=-1, keepdim=True) * scale)" in result
    assert "c = x / (x[..., :1] / scale)" in result


def test_a_quotient_by_a_slice_of_many_positions_or_a_full_tensor_is_silent():
    source = """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, scale: float):
    a = x / (x[:, 1:, :] + 1e-6) * scale
    b = x / y * scale
    c = x / x[:, -1] * scale
    return a, b, c
"""
    assert positions(source) == []


def test_a_matmul_with_a_normalized_copy_of_a_weight_or_in_a_lambda_is_reported():
    source = """\
import torch
import torch.nn.functional as F
from torch import nn


class M(nn.Module):
    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dim))
        self.emb = nn.Embedding(vocab, dim)
        self.scale = dim**-0.5
        self.to_logits = lambda t: (t @ self.emb.weight.t()) * self.scale

    def forward(self, x: torch.Tensor, h: torch.Tensor):
        w = F.normalize(self.weight, dim=0)
        a = (x @ w) * self.scale
        b = (x @ h) * self.scale
        return a, b
"""
    assert positions(source) == [(12, 36), (16, 13)]
    result = fixed(source)
    assert "lambda t: (t * self.scale) @ self.emb.weight.t()" in result
    assert "a = x @ (w * self.scale)" in result


def test_a_quotient_by_a_smaller_divisor_rescaled_by_the_next_statement():
    source = """\
import torch


def f(mask: torch.Tensor, weights: torch.Tensor, scale: float):
    y = mask.cumsum(1)
    y = y / (y[:, -1:, :] + 1e-6)
    y = y * scale
    w = weights / weights.sum(-1, keepdim=True)
    w = w / scale
    return y, w
"""
    assert positions(source) == [(7, 9), (9, 9)]
    result = fixed(source)
    assert "y = y / ((y[:, -1:, :] + 1e-6) / scale)\n    w = weights / (weights.sum(-1, keepdim=True) * scale)\n" in result
