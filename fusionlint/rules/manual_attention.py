"""FL010: attention written by hand (``softmax(q @ k.transpose(-2, -1) * scale + mask) @ v``),
which writes the whole score matrix, where ``F.scaled_dot_product_attention`` writes none."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Block,
    Scope,
    StatementRef,
    children,
    count_name,
    dotted_name,
    inner_blocks,
    names_of,
    own_parts,
    per_scope,
    reaching_value,
    statements_after,
    statements_before,
)
from fusionlint.analysis.purity import METADATA
from fusionlint.analysis.views import ast_view, cst_view, dotted_path
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

_SOFTMAX = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
_DROPOUT = frozenset({"torch.nn.functional.dropout", "torch.dropout"})
_SQRT = frozenset({"math.sqrt", "np.sqrt", "numpy.sqrt"})
# transpose(a, b) of the key that makes ``q @ k.transpose(a, b)`` compare rows with rows; (2, 3)
# is how 4-d (batch, heads, tokens, head_dim) code spells the last two dims
_KEY_TRANSPOSES = (frozenset({-2, -1}), frozenset({2, 3}))
_BMM_KEY_TRANSPOSES = (*_KEY_TRANSPOSES, frozenset({1, 2}))


class ManualAttention(Rule):
    code = "FL010"
    name = "manual-attention"
    message = "attention written by hand writes the whole score matrix: use F.scaled_dot_product_attention"
    rationale = """
        `softmax(q @ k.transpose(-2, -1) * scale + mask) @ v` computes a score for every query
        against every key: a batch x heads x queries x keys matrix that eager PyTorch writes to
        memory at every step (the matmul, the scale, the mask, the softmax, the dropout), and
        that fusionrt must write at least once, since the softmax over it and the matmul that
        reads it are two kernels. `torch.nn.functional.scaled_dot_product_attention` computes
        the same result tile by tile (flash or memory-efficient attention on a GPU, a fused
        kernel on the CPU) and never writes the scores: for four heads of 64 tokens by 32 the
        examples go from 576-836 KiB to 66 KiB written under fusionrt and in eager.

        Flagged: the chain, inline or through the names it assigns in one block, of a score matmul
        (`@`, `matmul`, `bmm`, or `einsum('b h i d, b h j d -> b h i j')`) against a transposed key
        (or, on (heads, dim, tokens) operands, `q.transpose(-2, -1) @ k` with `v @
        weights.transpose(-2, -1)` whose result is permuted next; or an einsum in any letter order,
        such as `'b n h d, b k h d -> b h n k'`: both without a fix, SDPA wants its operands
        transposed), an optional scale (`*`/`/` by a number, or `q * scale` before the matmul, or a
        learned temperature per head, `nn.Parameter(torch.ones(heads, 1, 1))`, which the fix folds
        into the query), an optional mask (`+ mask`, or `.masked_fill(mask, float('-inf'))`), a
        softmax over the last dim (a call, or an `nn.Softmax(dim=-1)` attribute), optional dropout
        (an `nn.Dropout` attribute or `F.dropout`), and the matmul with the values; where the code
        shows the operands are 4-d (`x.view(b, t, h, d)`, `.permute(0, 2, 1, 3)`, `B, H, N, D =
        q.shape`, `rearrange(x, 'b n (h d) -> b h n d')`, `.unbind(0)` or `[0]` of a
        5-d tensor, `k.transpose(2, 3)`, a key transposed as `k.permute(0, 1, 3, 2)`, a 4-letter
        einsum) or 3-d (`bmm`, unsqueezed to 4-d for SDPA): SDPA's fused kernels take only 4-d
        tensors, and on others it runs its math form, which writes the scores all the same.
        Flagged without a fix: the same data flow where no single call says every path, or the
        code a stage calls is out of the fix's reach: a stage under an `if` (`if mask is not
        None: attn = attn + mask`), the softmax in both arms, `attn += mask`,
        `attn.masked_fill_(m, v)`, `.add`/`.mul`/`.div` and `torch.add`/`torch.mul`, scores from
        `torch.baddbmm(bias, q, k.transpose(1, 2), alpha=s)`, a key scaled after its transpose
        (`k.transpose(-1, -2) * s`), the rows' max subtracted for stability (`sim -
        sim.amax(dim=-1, keepdim=True).detach()`), views of the scores between the stages (Swin's
        shift mask added on a 5-d view), casts, a softmax with a `dtype` or over the last dim by
        number (`dim=3` of 4-d scores), a fill with a finite value (`torch.finfo(x.dtype).min`),
        a learned scale computed apart (`logit_scale = self.logit_scale.clamp(max=m).exp()`), a
        same-file helper that returns the scores plus a bias (`attn = maybe_add_mask(attn,
        bias)`), and reads of the scores' shape or dtype only (`probs.type_as(scores)`);
        operands of unknown rank only where a `(heads, 1, 1)` temperature scales the scores (it
        broadcasts against 3-d or 4-d ones). The rewrite by hand folds the paths' masks and
        biases into one `attn_mask` (the Swin example: 8 -> 2 kernels, 8 -> 3 writes under
        fusionrt); on 3-d operands the message says to unsqueeze them to 4-d, since SDPA on 3-d
        ones writes the scores too.
        Not flagged (the rewrite would change what the code computes or keeps, or save
        nothing): weights read anywhere after the matmul with the values (returned, stored,
        averaged); another normaliser than softmax (sigmoid, relu, softmax over another dim);
        anything but dropout and casts between the softmax and the values (a mask after the
        softmax, a renormalisation); a mask that multiplies; a helper whose code is not in the
        file or that does more than add (a soft cap); a stage in a loop; operands of unknown or
        other rank, or whose last dim a permute moved (XCiT's `.permute(2, 0, 3, 4, 1)`: SDPA
        copies them, 6 -> 7 writes); the hand-written arm of `if hasattr(F,
        "scaled_dot_product_attention")` (or after such an `if` that returns), which no torch
        since 2.0 runs.
    """
    use_instead = "`F.scaled_dot_product_attention(q, k, v, attn_mask=..., dropout_p=..., is_causal=..., scale=...)`."
    fix_safety = FixSafety.UNSAFE
    pays_in = (FUSIONRT, EAGER)
    fix_notes = """
        The fix replaces the matmul with the values by one call and deletes the statements of
        the chain. It maps exactly: `scale=` is the scale as written (`1 / s` for a division,
        `1.0` when there is none), left out only when it is provably SDPA's default
        `1 / sqrt(q.size(-1))` (`math.sqrt(k.size(-1))`, `q.shape[-1] ** -0.5`, a name bound to
        one of these); a temperature per head (one number per head for every key) scales the
        query instead, `q * t` with `scale=1.0`; an additive mask becomes `attn_mask=mask`; `masked_fill(m, -inf)` becomes
        the boolean `attn_mask=` of the positions kept (`x != 0` for `x == 0`, else `~m`);
        an additive mask not known to be 4-d is expanded to the scores' shape (a view: a
        `(heads, L, S)` bias sends SDPA to its math form, which writes the scores again);
        `is_causal=True` only for nanoGPT's `self.bias[:, :, :T, :T] == 0` over a registered
        `torch.tril(torch.ones(n, n))` buffer where `q` and `k` are `.view(B, T, ...).transpose(1, 2)`
        with the same `T`; dropout becomes `dropout_p=` (`self.drop.p if self.training else
        0.0` for an `nn.Dropout` attribute). It is **unsafe**: the fused kernels round
        differently (equal within fp32 and bf16 tolerances, not bit for bit), a row whose keys
        are all masked gives zeros instead of NaN on some backends, and SDPA wants a floating
        mask in the query's dtype where `+` would promote.
    """
    training_note = """
        With an additive mask that requires grad (a learned bias), SDPA on the CPU has no fused
        kernel and runs its math form: it scales `q` and `k`, writes the scores, and checks for
        fully masked rows with an `all` that fusionrt runs as a fallback (a flush). The second
        example as a training step, every input requiring grad: 21 -> 24 writes, 1.57 -> 1.84
        MiB, 17 -> 21 kernels (eager 21 -> 23 kernels). With a mask that needs no grad it still
        saves (19 -> 6 writes), as do the causal and unmasked examples. A learned temperature
        per head that requires grad takes the same math form: 8 -> 15 writes.
    """
    examples = (
        Example(
            bad="""\
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_head: int = 4, block_size: int = 64, dropout: float = 0.1):
        super().__init__()
        self.n_head = n_head
        self.attn_dropout = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, qkv):
        B, T, C3 = qkv.size()
        q, k, v = qkv.split(C3 // 3, dim=2)
        q = q.view(B, T, self.n_head, -1).transpose(1, 2)
        k = k.view(B, T, self.n_head, -1).transpose(1, 2)
        v = v.view(B, T, self.n_head, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return y.transpose(1, 2).reshape(B, T, C3 // 3)
""",
            at=((22, 16),),
            fixed="""\
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_head: int = 4, block_size: int = 64, dropout: float = 0.1):
        super().__init__()
        self.n_head = n_head
        self.attn_dropout = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, qkv):
        B, T, C3 = qkv.size()
        q, k, v = qkv.split(C3 // 3, dim=2)
        q = q.view(B, T, self.n_head, -1).transpose(1, 2)
        k = k.view(B, T, self.n_head, -1).transpose(1, 2)
        v = v.view(B, T, self.n_head, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout.p if self.training else 0.0, is_causal=True)
        return y.transpose(1, 2).reshape(B, T, C3 // 3)
""",
            call="CausalSelfAttention().eval()(randn(2, 64, 384))",
        ),
        Example(
            bad="""\
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, num_heads: int = 4, head_size: int = 32, dropout: float = 0.1):
        super().__init__()
        self.num_heads, self.head_size = num_heads, head_size
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, attention_mask):
        B, T, _ = query.shape
        query = query.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        key = key.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        value = value.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        scores = torch.matmul(query, key.transpose(-1, -2))
        scores = scores / math.sqrt(self.head_size)
        scores = scores + attention_mask
        probs = nn.functional.softmax(scores, dim=-1)
        probs = self.dropout(probs)
        context = torch.matmul(probs, value)
        return context.permute(0, 2, 1, 3).reshape(B, T, -1)
""",
            at=((18, 18),),
            fixed="""\
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, num_heads: int = 4, head_size: int = 32, dropout: float = 0.1):
        super().__init__()
        self.num_heads, self.head_size = num_heads, head_size
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, attention_mask):
        B, T, _ = query.shape
        query = query.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        key = key.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        value = value.view(B, T, self.num_heads, self.head_size).permute(0, 2, 1, 3)
        context = nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask.expand(*query.shape[:-1], key.size(-2)), dropout_p=self.dropout.p if self.training else 0.0, scale=1 / math.sqrt(self.head_size))
        return context.permute(0, 2, 1, 3).reshape(B, T, -1)
""",
            call="SelfAttention().eval()(randn(2, 64, 128), randn(2, 64, 128), randn(2, 64, 128), randn(2, 1, 1, 64))",
        ),
        Example(
            bad="""\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, num_heads: int = 4, head_dim: int = 32):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.scale = head_dim ** -0.5

    def forward(self, qkv):
        B, N, _ = qkv.shape
        q, k, v = qkv.reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        x = attn @ v
        return x.transpose(1, 2).reshape(B, N, -1)
""",
            at=((15, 16),),
            fixed="""\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, num_heads: int = 4, head_dim: int = 32):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.scale = head_dim ** -0.5

    def forward(self, qkv):
        B, N, _ = qkv.shape
        q, k, v = qkv.reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = nn.functional.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return x.transpose(1, 2).reshape(B, N, -1)
""",
            call="Attention()(randn(2, 64, 384))",
        ),
        # the scores as an einsum over (batch, tokens, heads, dim) operands: SDPA wants the heads
        # before the tokens, so the rewrite transposes them (views) and no fix is offered
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def pooled_attention(q, k, v):
    bs, nh, hc = 2, 4, 16
    q = q.reshape(bs, -1, nh, hc)
    k = k.reshape(bs, -1, nh, hc)
    v = v.reshape(bs, -1, nh, hc)
    aw = torch.einsum("bnmc,bkmc->bmnk", q, k)
    aw = aw / (hc**0.5)
    aw = F.softmax(aw, dim=-1)
    x = torch.einsum("bmnk,bkmc->bnmc", aw, v)
    return x.reshape(bs, -1, nh * hc)
""",
            at=((10, 10),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def pooled_attention(q, k, v):
    bs, nh, hc = 2, 4, 16
    q = q.reshape(bs, -1, nh, hc).transpose(1, 2)
    k = k.reshape(bs, -1, nh, hc).transpose(1, 2)
    v = v.reshape(bs, -1, nh, hc).transpose(1, 2)
    x = F.scaled_dot_product_attention(q, k, v)
    return x.transpose(1, 2).reshape(bs, -1, nh * hc)
""",
            call="pooled_attention(randn(2, 20, 64), randn(2, 27, 64), randn(2, 27, 64))",
        ),
        # (heads, dim, tokens) operands: the scores are q^T @ k and the output v @ weights^T, which
        # is SDPA's output transposed; no fix offered
        Example(
            bad="""\
import torch


def area_attention(qkv):
    B, N, num_heads, head_dim = 4, 32, 2, 16
    q, k, v = qkv.view(B, N, num_heads, head_dim * 3).permute(0, 2, 3, 1).split([head_dim, head_dim, head_dim], dim=2)
    attn = (q * (head_dim**-0.5)).transpose(-2, -1) @ k
    attn = attn.softmax(dim=-1)
    x = v @ attn.transpose(-2, -1)
    x = x.permute(0, 3, 1, 2)
    return x.reshape(B, N, -1)
""",
            at=((7, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def area_attention(qkv):
    B, N, num_heads, head_dim = 4, 32, 2, 16
    q, k, v = qkv.view(B, N, num_heads, head_dim * 3).permute(0, 2, 3, 1).split([head_dim, head_dim, head_dim], dim=2)
    x = F.scaled_dot_product_attention(q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1))
    x = x.transpose(1, 2)
    return x.reshape(B, N, -1)
""",
            call="area_attention(randn(4, 32, 96))",
        ),
        # a learned temperature per head (Restormer's channel attention, at inference: with grad on the
        # CPU SDPA runs its math form): the query's rows take it
        Example(
            bad="""\
import torch
import torch.nn.functional as F
from torch import nn


class ChannelAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, qkv):
        q, k, v = qkv.chunk(3, dim=1)
        b, c, h, w = q.shape
        q = q.reshape(b, self.num_heads, c // self.num_heads, h * w)
        k = k.reshape(b, self.num_heads, c // self.num_heads, h * w)
        v = v.reshape(b, self.num_heads, c // self.num_heads, h * w)
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)
        x = attn @ v
        return x.reshape(b, c, h, w)
""",
            at=((18, 17),),
            fixed="""\
import torch
import torch.nn.functional as F
from torch import nn


class ChannelAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, qkv):
        q, k, v = qkv.chunk(3, dim=1)
        b, c, h, w = q.shape
        q = q.reshape(b, self.num_heads, c // self.num_heads, h * w)
        k = k.reshape(b, self.num_heads, c // self.num_heads, h * w)
        v = v.reshape(b, self.num_heads, c // self.num_heads, h * w)
        x = F.scaled_dot_product_attention(F.normalize(q, dim=-1) * self.temperature, F.normalize(k, dim=-1), v, scale=1.0)
        return x.reshape(b, c, h, w)
""",
            call="ChannelAttention().requires_grad_(False)(randn(2, 96, 8, 8))",
        ),
        # the softmax as an `nn.Softmax(dim=-1)` attribute (Swin's and DaViT's window attention)
        Example(
            bad="""\
import torch
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, dim: int = 64, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, qkv):
        B_, N, C3 = qkv.shape
        q, k, v = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = self.softmax(attn)
        x = attn @ v
        return x.transpose(1, 2).reshape(B_, N, -1)
""",
            at=((16, 16),),
            fixed="""\
import torch
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, dim: int = 64, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, qkv):
        B_, N, C3 = qkv.shape
        q, k, v = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        x = nn.functional.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return x.transpose(1, 2).reshape(B_, N, -1)
""",
            call="WindowAttention()(randn(8, 64, 192))",
        ),
        # Swin's window attention: a relative-position bias, then a shift mask only for shifted
        # windows (an `if`), through 5-d views of the scores: reported without a fix, the two
        # paths take one combined attn_mask
        Example(
            bad="""\
import torch
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads

    def forward(self, qkv, bias, mask=None):
        B_, N, _ = qkv.shape
        q, k, v = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        q = q * 0.25
        attn = q @ k.transpose(-2, -1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(B_ // nw, nw, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = attn.softmax(dim=-1)
        x = attn @ v
        return x.transpose(1, 2).reshape(B_, N, -1)
""",
            at=((14, 16),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads

    def forward(self, qkv, bias, mask=None):
        B_, N, _ = qkv.shape
        q, k, v = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn_mask = bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn_mask = (attn_mask.unsqueeze(1) + mask.unsqueeze(1).unsqueeze(0)).expand(B_ // nw, -1, -1, -1, -1)
            attn_mask = attn_mask.reshape(-1, self.num_heads, N, N)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.expand(B_, -1, -1, -1), scale=0.25)
        return x.transpose(1, 2).reshape(B_, N, -1)
""",
            call="WindowAttention()(randn(8, 16, 96), randn(4, 16, 16), randn(4, 16, 16))",
        ),
    )
    valid = (
        # the weights are returned: SDPA does not give them, and the score matrix is written anyway
        """\
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    weights = torch.softmax(q @ k.transpose(2, 3) * 0.125, dim=-1)
    return weights @ v, weights
""",
        # sigmoid attention: not a softmax, SDPA cannot compute it
        """\
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    weights = torch.sigmoid(q @ k.transpose(2, 3) * 0.125)
    return weights @ v
""",
        # the hand-written branch of ``if hasattr(F, "scaled_dot_product_attention")``: the fallback
        # for a torch without it, which no torch since 2.0 runs
        """\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None):
    q = q.view(2, 4, 16, 8)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn + mask
    return attn.softmax(dim=-1) @ v
""",
        # a mask applied after the softmax (and a softmax over another dim): not SDPA's order
        """\
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor):
    weights = (q @ k.transpose(2, 3)).softmax(-1) * keep
    other = (q @ k.transpose(2, 3)).softmax(dim=1)
    return weights @ v, other @ v
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return re.compile("softmax")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        # every chain holds a softmax, and its function is analysed whole
        return "softmax" in block[index]

    def check(self, scope: Scope) -> Iterator[Violation]:
        flagged: set[int] = set()  # the score matmuls reported (two arms' value matmuls may share one)
        for key in ("@", "matmul", "bmm", "einsum"):
            for site in scope.sites.get(key, ()):
                if site.conditional or not isinstance(site.statement.node, cst.SimpleStatementLine):
                    continue
                violation = _violation(scope, site.node, site.statement)
                if violation is None or id(violation.node) in flagged or _fallback_for_old_torch(scope, site.statement):
                    continue
                flagged.add(id(violation.node))
                yield violation


def _violation(scope: Scope, final: cst.CSTNode, final_ref: StatementRef) -> Violation | None:
    """The attention whose matmul with the values ``final`` is: one chain the fix maps, else the
    branching data flow, reported without a fix."""
    chain = _chain(scope, final, final_ref)
    if chain is not None:
        fix = _fix(scope, chain) if chain.fixable else None
        return Violation(chain.scores, fix=fix, spans=tuple(r.node for r in chain.statements))
    branching = _branching_chain(scope, final, final_ref)
    if branching is None:
        return None
    scores, unbatched = branching
    return Violation(scores, message=_UNBATCHED_MESSAGE if unbatched else None)


@dataclass
class _Chain:
    """One hand-written attention, read backwards from its matmul with the values."""

    final: cst.CSTNode  # weights @ v
    final_ref: StatementRef
    scores: cst.CSTNode = None  # type: ignore[assignment]  # q @ k.transpose(-2, -1): where the finding points
    q: cst.BaseExpression | None = None
    k: cst.BaseExpression | None = None
    v: cst.BaseExpression | None = None
    scale: cst.BaseExpression | None = None  # SDPA's scale=; None: its default
    attn_mask: cst.BaseExpression | None = None
    is_causal: bool = False
    unbatched: bool = False  # 3-d (batch x heads, tokens, head_dim): SDPA gets them unsqueezed to 4-d
    dropout_p: cst.BaseExpression | None = None
    fixable: bool = True  # False: the operands need permutes to be SDPA's (batch, heads, tokens, dim)
    # statements the chain runs through (the final one last), and those the fix deletes
    statements: list[StatementRef] = field(default_factory=list)
    deleted: list[StatementRef] = field(default_factory=list)
    # (expression moved into the final statement, the statement it was read in)
    moved: list[tuple[cst.BaseExpression, StatementRef]] = field(default_factory=list)


def _chain(scope: Scope, final: cst.CSTNode, final_ref: StatementRef) -> _Chain | None:
    for values in _value_matmuls(scope, final):
        chain = _chain_from(scope, values, final, final_ref)
        if chain is not None:
            return chain
    return None


def _chain_from(scope: Scope, values: _Values, final: cst.CSTNode, final_ref: StatementRef) -> _Chain | None:
    if values.transposed and not _permuted_next(final, final_ref):
        return None  # a view of the (heads, dim, tokens) result would copy SDPA's transposed one
    chain = _Chain(final, final_ref, v=values.v, statements=[final_ref])
    expr, at = _follow(scope, chain, values.weights, final_ref)
    dropped = _dropout(scope, expr)
    if dropped is not None:
        inner, chain.dropout_p = dropped
        chain.moved.append((chain.dropout_p, at))
        expr, at = _follow(scope, chain, inner, at)
    inner = _softmax(scope, expr)
    if inner is None:
        return None
    expr, at = _follow(scope, chain, inner, at)
    masked = _mask(scope, expr)
    if masked is not None:
        expr, mask, fill = masked
        mask_ref = at
        expr, at = _follow(scope, chain, expr, at)
    scale = _scale(scope, expr)
    scale_ref = at
    if scale is not None:
        expr, factor, divided = scale
        expr, at = _follow(scope, chain, expr, at)
    scores = _score_matmul(scope, expr, values)
    if scores is None:
        return None
    chain.scores, (q, chain.k, rank, chain.fixable) = expr, scores
    last = -2 if values.transposed else -1  # the operands' dim that SDPA reads as its last
    ranks = {r for r in (rank, _rank(scope, q, at, last), _rank(scope, chain.k, at, last), _rank(scope, chain.v, final_ref, last)) if r}
    if ranks not in ({3}, {4}):
        return None  # SDPA's fused kernels take 4-d tensors (3-d ones are unsqueezed); others run its math form
    chain.unbatched = ranks == {3}
    if scale is None:
        q, scale = _scaled_query(scope, chain, q, at)
        scale_ref = at
    if scale is not None:
        _, factor, divided = scale
    chain.q = q
    chain.moved += [(q, at), (chain.k, at)]
    if scale is None:
        chain.scale = cst.Float("1.0")
    else:
        chain.moved.append((factor, scale_ref))
        if _per_head(scope, factor):  # SDPA's scale= is a number: the query's rows take it
            chain.q = cst.BinaryOperation(_atom(q), cst.Divide() if divided else cst.Multiply(), factor)
            chain.scale = cst.Float("1.0")
        elif not _default_scale(scope, chain, factor, divided, scale_ref):
            chain.scale = _reciprocal(factor) if divided else factor
    if masked is not None:
        chain.moved.append((mask, mask_ref))
        if fill:
            if _causal(scope, chain, mask):
                chain.is_causal = True
            else:
                chain.attn_mask = _kept(mask)
        else:
            chain.attn_mask = _four_dims(scope, mask, mask_ref, chain)
    return chain if _movable(scope, chain) else None


def _permuted_next(final: cst.CSTNode, final_ref: StatementRef) -> bool:
    """Is ``x = final`` next read as ``x.permute(...)`` or ``x.transpose(...)``, an order of its
    dims that SDPA's transposed result gives as cheaply?"""
    small = final_ref.simple
    if not (isinstance(small, cst.Assign) and small.value is final and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    for ref in final_ref.later():
        if target.value in names_of(ref.node)[0]:
            value = getattr(ref.simple, "value", None)
            return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value in ("permute", "transpose")
                    and isinstance(value.func.value, cst.Name) and value.func.value.value == target.value)
    return False


# --------------------------------------------------------------------------- following names


def _follow(scope: Scope, chain: _Chain, expr: cst.BaseExpression | None, at: StatementRef
            ) -> tuple[cst.BaseExpression | None, StatementRef]:
    """The value ``expr`` stands for at ``at``: itself, or for a name read only there, the value
    of its assignment earlier in the block (whose statement then belongs to the chain)."""
    if not isinstance(expr, cst.Name):
        return expr, at
    name = expr.value
    bound = _binding(at, name)
    if bound is None:
        return None, at
    value, definition = bound
    if _reads(at, name) != 1 or _read_between(definition, at, name):
        return None, at
    if name not in names_of(at.node)[1] and scope.read_after(at, name):
        return None, at  # the weights (or scores) are used elsewhere: the fix would lose them
    chain.statements.insert(0, definition)
    chain.deleted.append(definition)
    return value, definition


def _binding(at: StatementRef, name: str) -> tuple[cst.BaseExpression, StatementRef] | None:
    """The value of ``name = value`` that surely reaches ``at`` (``reaching_value``), and its statement."""
    value = reaching_value(at, name)
    if value is None:
        return None
    return value, next(r for r in at.earlier() if r.simple is not None and getattr(r.simple, "value", None) is value)


def _reads(ref: StatementRef, name: str) -> int:
    """How often the statement reads ``name`` (an assignment's own target is no read)."""
    small = ref.simple
    if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
        return count_name(small.value, name)
    return count_name(ref.node, name)


def _read_between(first: StatementRef, last: StatementRef, name: str) -> bool:
    return any(name in names_of(r.node)[0] for r in first.later() if r.index < last.index)


# --------------------------------------------------------------------------- the stages


@dataclass(frozen=True)
class _Values:
    """A matmul with the values: its operands and how it lays them out."""

    weights: cst.BaseExpression
    v: cst.BaseExpression
    einsum: tuple[str, str, str] | None = None  # (weights, values, output) subscripts
    transposed: bool = False  # ``v @ weights.transpose(-2, -1)``: every operand has its last two dims swapped


def _value_matmuls(scope: Scope, node: cst.CSTNode) -> Iterator[_Values]:
    """The readings of ``node`` as the matmul with the values: ``weights @ v`` (``matmul``, ``bmm``),
    ``v @ weights.transpose(-2, -1)``, or an einsum that sums the weights' last dim against the values."""
    operands = _matmul_operands(scope, node)
    if operands is not None:
        yield _Values(*operands)
        weights = _untransposed(operands[1], _KEY_TRANSPOSES)
        if weights is not None and _op_name(scope, node) != "bmm":
            yield _Values(weights, operands[0], transposed=True)
    elif _op_name(scope, node) == "einsum" and len(node.args) == 3 and _plain_args(node):  # type: ignore[attr-defined]
        parts = _einsum_parts(node.args[0].value)  # type: ignore[attr-defined]
        if parts is not None:
            (w, v), out = parts
            yield _Values(node.args[1].value, node.args[2].value, einsum=(w, v, out))  # type: ignore[attr-defined]


def _matmul_operands(scope: Scope, node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(node, cst.BinaryOperation):
        return (node.left, node.right) if scope.op(node) is not None else None
    name = _op_name(scope, node)
    if name not in ("matmul", "bmm") or not _plain_args(node):  # type: ignore[arg-type]
        return None
    args = [a.value for a in node.args]  # type: ignore[attr-defined]
    if isinstance(node.func, cst.Attribute) and scope.is_tensor(node.func.value) and len(args) == 1:  # type: ignore[attr-defined]
        return node.func.value, args[0]  # type: ignore[attr-defined]
    return (args[0], args[1]) if len(args) == 2 else None


def _score_matmul(scope: Scope, node: cst.BaseExpression | None, values: _Values
                  ) -> tuple[cst.BaseExpression, cst.BaseExpression, int | None, bool] | None:
    """(q, k, their rank if the matmul tells it, whether they are laid out as SDPA's) of
    ``q @ k.transpose(-2, -1)`` (``matmul``, ``bmm``: 3), of ``q.transpose(-2, -1) @ k`` for
    transposed values, or of an einsum of ``q`` and ``k`` that ``_attention_einsums`` accepts."""
    if node is None:
        return None
    if values.einsum is not None:
        if _op_name(scope, node) != "einsum" or len(node.args) != 3 or not _plain_args(node):  # type: ignore[attr-defined]
            return None
        parts = _einsum_parts(node.args[0].value)  # type: ignore[attr-defined]
        layout = _attention_einsums(parts, values.einsum) if parts is not None else None
        if layout is None:
            return None
        return node.args[1].value, node.args[2].value, *layout  # type: ignore[attr-defined]
    operands = _matmul_operands(scope, node)
    if operands is None:
        return None
    q_t, key = operands
    if values.transposed:
        q = _untransposed(q_t, _KEY_TRANSPOSES)
        return (q, key, _transpose_rank(q_t), False) if q is not None else None
    q, key_t = operands
    bmm = _op_name(scope, node) == "bmm"
    swapped = _last_two_swapped(key_t)
    if swapped is not None:
        key, rank = swapped
        return (q, key, rank, True) if rank == 3 or not bmm else None
    key = _untransposed(key_t, _BMM_KEY_TRANSPOSES if bmm else _KEY_TRANSPOSES)
    if key is None:
        return None
    return q, key, 3 if bmm else _transpose_rank(key_t), True


def _transpose_rank(expr: cst.BaseExpression) -> int | None:
    """4 for ``x.transpose(2, 3)``, which says the last two dims of a 4-d tensor; else unknown."""
    return 4 if isinstance(expr, cst.Call) and _integer(expr.args[0].value) in (2, 3) else None


def _attention_einsums(scores: tuple[tuple[str, str], str], values: tuple[str, str, str]) -> tuple[int | None, bool] | None:
    """(rank, laid out as SDPA's) where ``einsum(scores, q, k)`` then ``einsum(values, weights, v)``
    is attention: the scores sum the last letter of ``q`` and ``k`` and end in ``k``'s token letter
    (the softmax's dim), the values sum that letter, and both keep every other letter; the rank is
    unknown for ``...``."""
    (qs, ks), w = scores
    ws, vs, out = values
    if ws != w or any(len(set(x)) != len(x) for x in (qs, ks, w, vs, out)):
        return None
    i, j, d, e = set(qs) - set(ks), set(ks) - set(qs), set(qs) & set(ks) - set(w), set(vs) - set(w)
    if not len(i) == len(j) == len(d) == len(e) == 1 or w[-1] not in j:
        return None
    batch = set(qs) & set(ks) & set(w)
    if set(qs) | set(ks) != batch | i | j | d or set(w) != batch | i | j or set(vs) != batch | j | e or set(out) != batch | i | e:
        return None
    b, (q_token, k_token, dim, v_dim) = w[:-2], (min(x) for x in (i, j, d, e))
    if not qs[-1] == ks[-1] == dim or vs[-1] != v_dim:
        return None  # SDPA would read a strided last dim, and copy it
    sdpa = (b + q_token + dim, b + k_token + dim, b + q_token + k_token, b + k_token + v_dim, b + q_token + v_dim)
    canonical = (qs, ks, w, vs, out) == sdpa
    return (None if "." in qs else len(qs)), canonical


def _last_two_swapped(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, int] | None:
    """(k, its rank) for ``k.permute(0, 1, 3, 2)``: a permute that swaps the last two dims only."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "permute"):
        return None
    if not _plain_args(expr):
        return None
    dims = [_integer(a.value) for a in expr.args]
    rank = len(dims)
    return (expr.func.value, rank) if rank >= 3 and dims == [*range(rank - 2), rank - 1, rank - 2] else None


def _untransposed(expr: cst.BaseExpression, transposes: tuple[frozenset[int], ...]) -> cst.BaseExpression | None:
    """``k`` for ``k.transpose(-2, -1)`` (the dims in ``transposes``) or ``k.mT``."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "mT":
        return expr.value
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    if expr.func.attr.value not in ("transpose", "swapaxes", "swapdims") or len(expr.args) != 2 or not _plain_args(expr):
        return None
    dims = {_integer(a.value) for a in expr.args}
    return expr.func.value if frozenset(dims) in transposes else None


def _softmax(scope: Scope, node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The input of a softmax over the last dim (and nothing else: no dtype), or of an
    ``nn.Softmax(dim=-1)`` attribute."""
    if not isinstance(node, cst.Call):
        return None
    attr = _self_attr(node.func)
    if attr is not None and scope.class_name is not None:
        plain = len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
        return node.args[0].value if plain and _is_last_dim_softmax_attr(scope, attr) else None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax" and scope.is_tensor(node.func.value):
        source, args = node.func.value, list(node.args)
    elif scope.torch_name(node.func) in _SOFTMAX and node.args and node.args[0].keyword is None:
        source, args = node.args[0].value, list(node.args[1:])
    else:
        return None
    if len(args) != 1 or args[0].star or (args[0].keyword is not None and args[0].keyword.value != "dim"):
        return None
    return source if _integer(args[0].value) == -1 else None


def _dropout(scope: Scope, node: cst.BaseExpression | None) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(input, SDPA's dropout_p) of ``self.drop(x)`` (an ``nn.Dropout``) or ``F.dropout(x, p, training)``."""
    if not isinstance(node, cst.Call) or not _plain_args(node, keywords=True):
        return None
    attr = _self_attr(node.func)
    if attr is not None and scope.class_name is not None:
        if len(node.args) != 1 or node.args[0].keyword is not None or not _is_dropout_attr(scope, attr):
            return None
        p = cst.parse_expression(f"self.{attr}.p if self.training else 0.0")
        return node.args[0].value, p
    canonical = scope.torch_name(node.func)
    if canonical not in _DROPOUT:
        return None
    names = ("input", "p", "training" if canonical.endswith("functional.dropout") else "train", "inplace")
    bound = _bind(node, names)
    if bound is None or "input" not in bound:
        return None
    p = bound.get("p", cst.Float("0.5") if canonical.endswith("functional.dropout") else None)
    training = bound.get(names[2])
    if p is None or (training is None and not canonical.endswith("functional.dropout")):
        return None
    if training is None or (isinstance(training, cst.Name) and training.value == "True"):
        return bound["input"], p
    text = f"{_code(p)} if {_code(training)} else 0.0"
    return bound["input"], cst.parse_expression(text)


def _mask(scope: Scope, node: cst.BaseExpression | None
          ) -> tuple[cst.BaseExpression, cst.BaseExpression, bool] | None:
    """(scores, mask, filled) of ``scores.masked_fill(mask, -inf)`` (filled) or ``scores + mask``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) and scope.is_tensor(node.right):
        return node.left, node.right, False
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "masked_fill"):
        return None
    bound = _bind(node, ("mask", "value"))
    if bound is None or len(bound) != 2 or not _minus_infinity(bound["value"]):
        return None
    return node.func.value, bound["mask"], True


def _scale(scope: Scope, node: cst.BaseExpression | None
           ) -> tuple[cst.BaseExpression, cst.BaseExpression, bool] | None:
    """(scores, factor, divided) of ``scores * factor``, ``factor * scores`` or ``scores / factor``,
    the factor not known to be a tensor (a tensor need not be a scalar) or one per head."""
    if not isinstance(node, cst.BinaryOperation):
        return None
    if isinstance(node.operator, cst.Divide) and _scalar_like(scope, node.right):
        return node.left, node.right, True
    if isinstance(node.operator, cst.Multiply):
        if _scalar_like(scope, node.right):
            return node.left, node.right, False
        if _scalar_like(scope, node.left):
            return node.right, node.left, False
    return None


def _scalar_like(scope: Scope, factor: cst.BaseExpression) -> bool:
    return not scope.is_tensor(factor) or _per_head(scope, factor)


def _per_head(scope: Scope, factor: cst.BaseExpression) -> bool:
    """Is ``factor`` ``self.<attr>``, made only as ``nn.Parameter(torch.ones(heads, 1, 1))`` (any
    rank up to 4 whose last size is 1)? It is the same for every key, so scaling the scores by it
    is scaling the query's rows (Restormer's and XCiT's temperature)."""
    return _per_head_rank(scope, factor) is not None


def _per_head_rank(scope: Scope, factor: cst.BaseExpression | None) -> int | None:
    """The rank of the per-head parameter ``factor`` is (see ``_per_head``), else None."""
    attr = _self_attr(factor) if factor is not None else None
    if attr is None or scope.class_name is None:
        return None
    values = [node.value for node in _class_members(scope) if isinstance(node, ast.Assign) and _assigns_self(node, attr)]
    ranks = {_column_rank(scope, v) for v in values}
    return ranks.pop() if len(ranks) == 1 else None


def _column_rank(scope: Scope, value: ast.expr) -> int | None:
    if not (isinstance(value, ast.Call) and _canonical(scope, value.func) == "torch.nn.Parameter" and len(value.args) == 1):
        return None
    made = value.args[0]
    while isinstance(made, ast.BinOp) and isinstance(made.left, ast.Constant) or isinstance(made, ast.Call) \
            and _canonical(scope, made.func) in ("torch.log", "torch.exp") and len(made.args) == 1:
        made = made.right if isinstance(made, ast.BinOp) else made.args[0]  # nn.Parameter(torch.log(10 * torch.ones(h, 1, 1)))
    if not (isinstance(made, ast.Call) and _canonical(scope, made.func) in ("torch.ones", "torch.zeros", "torch.randn", "torch.rand")):
        return None
    sizes = made.args[0].elts if len(made.args) == 1 and isinstance(made.args[0], (ast.Tuple, ast.List)) else made.args
    last = sizes[-1] if sizes else None
    column = not any(isinstance(x, ast.Starred) for x in sizes) and isinstance(last, ast.Constant) and last.value == 1
    return len(sizes) if column and 1 <= len(sizes) <= 4 else None


def _scaled_query(scope: Scope, chain: _Chain, q: cst.BaseExpression, at: StatementRef
                  ) -> tuple[cst.BaseExpression, tuple[cst.BaseExpression, cst.BaseExpression, bool] | None]:
    """The query before a scale applied to it (``(q * s) @ k.T``, or ``q = q * s`` just for this
    matmul, whose statement the fix deletes), and that scale; else ``q`` itself and None."""
    scaled = _scale(scope, _bare(q))
    if scaled is not None:
        return scaled[0], scaled
    if not isinstance(q, cst.Name):
        return q, None
    bound = _binding(at, q.value)
    scaled = _scale(scope, bound[0]) if bound is not None else None
    if scaled is None or not (isinstance(scaled[0], cst.Name) and scaled[0].value == q.value):
        return q, None
    definition = bound[1]  # type: ignore[index]
    # the scaled query must be read by the score matmul only: the fix gives ``q`` its old value
    reads_after = scope.read_after(chain.final_ref, q.value) and q.value not in names_of(chain.final_ref.node)[1]
    if _reads(at, q.value) != 1 or _read_between(definition, at, q.value) or reads_after:
        return q, None
    if any(q.value in names_of(r.node)[0] for r in at.later() if r.index < chain.final_ref.index):
        return q, None
    chain.statements.insert(0, definition)
    chain.deleted.append(definition)
    return scaled[0], scaled


# --------------------------------------------------------------------------- ranks

_KEEPS_RANK = frozenset({"transpose", "swapaxes", "swapdims", "contiguous", "float", "half", "bfloat16", "to", "type_as"})
# the rank given to an operand whose dim SDPA reads last a permute moved there from another place:
# SDPA's fused kernels copy such a strided operand, and cost more than the hand-written chain
# (XCiT's (heads, dim, tokens) layout: 6 -> 7 writes), so no chain takes it
_STRIDED = -1


def _rank(scope: Scope, expr: cst.BaseExpression | None, at: StatementRef, last: int = -1, depth: int = 0) -> int | None:
    """The number of dims of ``expr`` where its code spells it: ``x.view(b, t, h, d)``,
    ``x.permute(0, 2, 1, 3)``, the elements of ``x.unbind(0)`` or ``x.split(...)``, through the
    names that hold them and the ops that keep a rank; None where it does not; ``_STRIDED``
    where a permute moved a dim other than the source's last to the operand's ``last``."""
    expr = _bare(expr)
    if expr is None or depth > 8:
        return None
    if isinstance(expr, cst.Name):
        return _rank_of_name(scope, expr.value, at, last, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
        return _rank(scope, expr.left if scope.is_tensor(expr.left) else expr.right, at, last, depth + 1)
    if isinstance(expr, cst.Subscript):
        return _rank_of_item(scope, expr, at, last, depth)
    if isinstance(expr, cst.Call) and scope.torch_name(expr.func) in ("einops.rearrange", "einops.repeat") and len(expr.args) >= 2:
        pattern = expr.args[1].value
        return _einops_rank(pattern.evaluated_value, last) if isinstance(pattern, cst.SimpleString) else None
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)) or not _plain_args(expr, keywords=True):
        return None
    name = expr.func.attr.value
    if name in ("view", "reshape", "permute"):
        sizes = [a.value for a in expr.args if a.keyword is None]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [el.value for el in sizes[0].elements]
        single = len(sizes) == 1 and not isinstance(sizes[0], cst.Integer)
        if single or any(isinstance(e, cst.StarredElement) for e in sizes):
            return None
        moved = name == "permute" and len(sizes) >= 2 and _integer(sizes[last]) not in (None, -1, len(sizes) - 1)
        return _STRIDED if moved else len(sizes)
    if name in _KEEPS_RANK:
        return _rank(scope, expr.func.value, at, last, depth + 1)
    if scope.torch_name(expr.func) == "torch.nn.functional.normalize" and expr.args and expr.args[0].keyword is None:
        return _rank(scope, expr.args[0].value, at, last, depth + 1)
    return None


_EINOPS_AXES = re.compile(r"\([^)]*\)|[^\s()]+")


def _einops_rank(pattern: str | bytes, last: int) -> int | None:
    """The rank ``rearrange(x, pattern)`` gives (``'b n (h d) -> b h n d'``: 4), ``_STRIDED`` where
    the dim at ``last`` is not the input's innermost, None with ``...``."""
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        return None
    inputs, output = pattern.split("->")
    outer = _EINOPS_AXES.findall(output)
    inner = inputs.replace("(", " ").replace(")", " ").split()
    if not outer or "..." in output or "..." in inputs or len(outer) < -last:
        return None
    return len(outer) if inner and outer[last].strip("()").split()[-1:] == inner[-1:] else _STRIDED


def _rank_of_item(scope: Scope, expr: cst.BaseExpression, at: StatementRef, last: int, depth: int) -> int | None:
    """``qkv[0]``: one rank fewer than ``qkv``."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index) or _integer(expr.slice[0].slice.value) is None:
        return None
    whole = _rank(scope, expr.value, at, last, depth + 1)
    return whole - 1 if whole and whole != _STRIDED else whole


def _rank_of_name(scope: Scope, name: str, at: StatementRef, last: int, depth: int) -> int | None:
    """The rank of what the nearest assignment of ``name`` before ``at`` binds to it, or that an
    unpacking of its shape says (``B, H, N, D = q.shape``)."""
    for ref in statements_before(at):
        unpacked = _shape_unpacked(ref, name)
        if unpacked is not None:
            return unpacked
        if name not in names_of(ref.node)[1]:
            continue
        small = ref.simple
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return None
        target, value = small.targets[0].target, small.value
        if isinstance(target, cst.Name):
            return _rank(scope, value, ref, last, depth)
        if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
            for element, item in zip(target.elements, value.elements):
                if isinstance(element.value, cst.Name) and element.value.value == name:
                    return _rank(scope, item.value, ref, last, depth)
            return None
        if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "unbind" and len(value.args) == 1 and _integer(value.args[0].value) == 0:
            whole = _rank(scope, func.value, ref, last, depth)
            return whole - 1 if whole and whole != _STRIDED else whole
        if isinstance(func, cst.Name) and func.value == "map" and value.args and isinstance(value.args[0].value, cst.Lambda):
            return _rank(scope, value.args[0].value.body, ref, last, depth)  # map(lambda t: rearrange(t, ...), qkv)
        if scope.torch_name(func) in ("torch.split", "torch.chunk"):
            first = value.args[0] if value.args else None
            return _rank(scope, first.value, ref, last, depth) if first is not None and first.keyword is None else None
        if isinstance(func, cst.Attribute) and func.attr.value in ("split", "chunk"):
            return _rank(scope, func.value, ref, last, depth)
        return None
    return None


def _shape_unpacked(ref: StatementRef, name: str) -> int | None:
    """The number of names ``a, b, c = name.shape`` (or ``name.size()``) unpacks: the rank."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Tuple)):
        return None
    value = small.value
    if isinstance(value, cst.Call) and not value.args and _method(value) == "size":
        value = value.func
    if not (isinstance(value, cst.Attribute) and value.attr.value in ("shape", "size")):
        return None
    elements = small.targets[0].target.elements
    if not (isinstance(value.value, cst.Name) and value.value.value == name) or any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    return len(elements)


# --------------------------------------------------------------------------- exact mapping


def _default_scale(scope: Scope, chain: _Chain, factor: cst.BaseExpression, divided: bool, at: StatementRef) -> bool:
    """Is the scale provably ``1 / sqrt(q.size(-1))``, SDPA's default? ``* (1.0 / math.sqrt(E))``,
    ``* E ** -0.5``, ``/ math.sqrt(E)``, ``/ E ** 0.5`` (or a name bound to one of these) where
    ``E`` is ``q.size(-1)``/``q.shape[-1]`` (or ``k``'s: the matmul sums over both), the query
    not rebound since ``E`` was read."""
    factor, since = _bound_value(factor, at)
    if divided:
        root = _square_root(factor)
    elif isinstance(factor, cst.BinaryOperation) and isinstance(factor.operator, cst.Divide):
        root = _square_root(_bare(factor.right)) if _number(factor.left) == 1 else None
    else:
        root = _power(factor, -0.5)
    if root is None:
        return False
    root, since = _bound_value(root, since)
    receiver = _last_dim_of(root)
    operands = {x.value for x in (chain.q, chain.k) if isinstance(x, cst.Name)}
    if receiver not in operands:
        return False
    return not any(receiver in names_of(r.node)[1] for r in since.later() if r.index < at.index)


def _bound_value(expr: cst.BaseExpression, at: StatementRef) -> tuple[cst.BaseExpression, StatementRef]:
    """``expr`` without parentheses, or for a name, the value it was bound to before ``at`` (and
    where); unchanged when the binding is not known."""
    expr = _bare(expr)  # type: ignore[assignment]
    bound = _binding(at, expr.value) if isinstance(expr, cst.Name) else None
    return (_bare(bound[0]), bound[1]) if bound is not None else (expr, at)  # type: ignore[return-value]


def _square_root(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and _plain_args(expr) and dotted_name(expr.func) in _SQRT:
        return expr.args[0].value
    return _power(expr, 0.5)


def _power(expr: cst.BaseExpression, exponent: float) -> cst.BaseExpression | None:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power) and _number(_bare(expr.right)) == exponent:
        return expr.left
    return None


def _last_dim_of(expr: cst.BaseExpression) -> str | None:
    """``q`` for ``q.size(-1)`` or ``q.shape[-1]``."""
    receiver = None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size":
        if len(expr.args) == 1 and _integer(expr.args[0].value) == -1:
            receiver = expr.func.value
    elif isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and _integer(expr.slice[0].slice.value) == -1:
            receiver = expr.value.value
    return receiver.value if isinstance(receiver, cst.Name) else None


def _causal(scope: Scope, chain: _Chain, mask: cst.BaseExpression) -> bool:
    """nanoGPT's causal mask, provably SDPA's ``is_causal``: ``self.bias[:, :, :T, :T] == 0``
    over a buffer registered as ``torch.tril(torch.ones(n, n))`` (viewed as ``(1, 1, n, n)``),
    where ``q`` and ``k`` are ``x.view(B, T, heads, head_dim).transpose(1, 2)`` with this ``T``,
    so that queries and keys are both ``T`` long."""
    if not (isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1):
        return False
    comparison = mask.comparisons[0]
    if not isinstance(comparison.operator, cst.Equal) or _number(comparison.comparator) != 0:
        return False
    sliced = mask.left
    if not (isinstance(sliced, cst.Subscript) and len(sliced.slice) == 4):
        return False
    buffer = _self_attr(sliced.value)
    bounds = [_upper_bound(el.slice) for el in sliced.slice]
    if buffer is None or bounds[:2] != ["", ""] or not bounds[2] or bounds[2] != bounds[3]:
        return False
    length = bounds[2]
    return _tril_buffer(scope, buffer) and all(_heads_of_length(operand, length, chain) for operand in (chain.q, chain.k))


def _upper_bound(part: cst.BaseSlice) -> str | None:
    """"" for ``:``, ``T`` for ``:T`` (a name), None for anything else."""
    if not isinstance(part, cst.Slice) or part.lower is not None or part.step is not None:
        return None
    if part.upper is None:
        return ""
    return part.upper.value if isinstance(part.upper, cst.Name) else None


def _heads_of_length(operand: cst.BaseExpression | None, length: str, chain: _Chain) -> bool:
    """``operand`` is a name bound, before the chain, to ``x.view(B, length, h, d).transpose(1, 2)``
    and ``length`` is not rebound from there to the end of the chain."""
    if not isinstance(operand, cst.Name):
        return False
    bound = _binding(chain.statements[0], operand.value)
    value, definition = bound if bound is not None else (None, None)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "transpose"):
        return False
    if {_integer(a.value) for a in value.args} != {1, 2} or len(value.args) != 2:
        return False
    viewed = value.func.value
    if not (isinstance(viewed, cst.Call) and isinstance(viewed.func, cst.Attribute) and viewed.func.attr.value in ("view", "reshape")):
        return False
    if len(viewed.args) != 4 or not (isinstance(viewed.args[1].value, cst.Name) and viewed.args[1].value.value == length):
        return False
    return not any(length in names_of(r.node)[1] for r in definition.later() if r.index <= chain.final_ref.index)


def _tril_buffer(scope: Scope, buffer: str) -> bool:
    """Does the class register ``buffer`` (once) as ``torch.tril(torch.ones(n, n))``, maybe viewed
    as ``(1, 1, n, n)``, directly or through a local assigned just that?"""
    registered = [node for node in _class_members(scope) if isinstance(node, ast.Call) and node.args[0].value == buffer]  # type: ignore[attr-defined]
    assigned = [node for node in _class_members(scope) if isinstance(node, ast.Assign) and _assigns_self(node, buffer)]
    if len(registered) != 1 or assigned or len(registered[0].args) < 2:
        return False
    value = registered[0].args[1]  # type: ignore[attr-defined]
    if isinstance(value, ast.Name):
        value = _local_value(scope, value.id, registered[0])
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "view":
        sizes = value.args
        if len(sizes) != 4 or not all(isinstance(s, ast.Constant) and s.value == 1 for s in sizes[:2]):
            return False
        value = value.func.value
        if isinstance(value, ast.Name):
            value = _local_value(scope, value.id, registered[0])
    if not (isinstance(value, ast.Call) and _canonical(scope, value.func) == "torch.tril" and len(value.args) == 1 and not value.keywords):
        return False
    ones = value.args[0]
    return (
        isinstance(ones, ast.Call) and _canonical(scope, ones.func) == "torch.ones" and len(ones.args) == 2
        and ast.dump(ones.args[0]) == ast.dump(ones.args[1]) and not ones.keywords
    )


def _local_value(scope: Scope, name: str, before: ast.AST) -> ast.expr | None:
    """The value of the one assignment ``name = ...`` in the function holding ``before``."""
    for cls in scope.facts.classes.get(scope.class_name or "", ()):
        for function in cls.body:
            if isinstance(function, ast.FunctionDef) and function.lineno <= before.lineno <= (function.end_lineno or 0):
                found = [n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                         and any(isinstance(t, ast.Name) and t.id == name for t in getattr(n, "targets", [getattr(n, "target", None)]))]
                if len(found) == 1 and isinstance(found[0], ast.Assign):
                    return found[0].value
    return None


def _is_dropout_attr(scope: Scope, attr: str) -> bool:
    """Does the class assign ``self.<attr>`` only ``nn.Dropout(...)``?"""
    values = [node.value for node in _class_members(scope) if isinstance(node, ast.Assign) and _assigns_self(node, attr)]
    return bool(values) and all(
        isinstance(v, ast.Call) and _canonical(scope, v.func) == "torch.nn.Dropout" for v in values
    )


def _is_last_dim_softmax_attr(scope: Scope, attr: str) -> bool:
    """Does the class assign ``self.<attr>`` only ``nn.Softmax(dim=-1)``?"""
    values = [node.value for node in _class_members(scope) if isinstance(node, ast.Assign) and _assigns_self(node, attr)]
    return bool(values) and all(
        isinstance(v, ast.Call) and _canonical(scope, v.func) == "torch.nn.Softmax" and _minus_one(_only_argument(v, "dim"))
        for v in values
    )


def _only_argument(call: ast.Call, name: str) -> ast.expr | None:
    if len(call.args) + len(call.keywords) != 1:
        return None
    return call.args[0] if call.args else call.keywords[0].value if call.keywords[0].arg == name else None


def _minus_one(expr: ast.expr | None) -> bool:
    return (isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub)
            and isinstance(expr.operand, ast.Constant) and expr.operand.value == 1)


def _class_members(scope: Scope) -> list[ast.Assign | ast.Call]:
    """``self.<attr> = ...`` and ``register_buffer(...)`` written in the scope's class."""
    found: list[ast.Assign | ast.Call] = []
    for cls in scope.facts.classes.get(scope.class_name or "", ()):
        last = cls.end_lineno or cls.lineno
        found += [node for node in scope.facts.members if cls.lineno <= node.lineno <= last]
    return found


def _assigns_self(node: ast.Assign, attr: str) -> bool:
    return any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and t.attr == attr
               for t in node.targets)


def _canonical(scope: Scope, func: ast.expr) -> str | None:
    dotted = dotted_path(ast_view, func)
    return scope.facts.canonical(dotted) if dotted else None


def _kept(mask: cst.BaseExpression) -> cst.BaseExpression:
    """The boolean mask of the positions ``masked_fill(mask, -inf)`` keeps: ``x != 0`` for
    ``x == 0``, ``x`` for ``~x``, else ``~(mask)``."""
    mask = _bare(mask)
    if isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1 and isinstance(mask.comparisons[0].operator, cst.Equal):
        return mask.with_changes(comparisons=[mask.comparisons[0].with_changes(operator=cst.NotEqual())])
    if isinstance(mask, cst.UnaryOperation) and isinstance(mask.operator, cst.BitInvert):
        return mask.expression
    if isinstance(mask, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return cst.UnaryOperation(cst.BitInvert(), mask)
    return cst.UnaryOperation(cst.BitInvert(), mask.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))


def _four_dims(scope: Scope, mask: cst.BaseExpression, at: StatementRef, chain: _Chain) -> cst.BaseExpression:
    """An additive mask as SDPA's fused kernels take it: 4-d. A relative-position bias is often
    (heads, L, S), which sends SDPA to its math form; expanded to the scores' shape (a view) it
    adds the same numbers."""
    if _rank(scope, mask, at) == 4 or not isinstance(chain.q, cst.Name) or not isinstance(chain.k, cst.Name):
        return mask
    batch = "1, " if chain.unbatched else ""
    text = f"{_code(_atom(mask))}.expand({batch}*{chain.q.value}.shape[:-1], {chain.k.value}.size(-2))"
    return cst.parse_expression(text)


def _reciprocal(factor: cst.BaseExpression) -> cst.BaseExpression:
    return cst.BinaryOperation(cst.Integer("1"), cst.Divide(), _atom(factor))


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr``, parenthesised unless it binds tighter than any operator."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _movable(scope: Scope, chain: _Chain) -> bool:
    """Do the expressions the fix moves into the final statement read there what they read where
    they were? No name they read is assigned, nor written in place, on the way."""
    for expr, origin in chain.moved:
        reads = names_of(expr)[0]
        for ref in origin.later():
            if ref.index >= chain.final_ref.index:
                break
            if reads & names_of(ref.node)[1]:
                return False
    return not _inplace_reads(scope, chain)


def _inplace_reads(scope: Scope, chain: _Chain) -> bool:
    return any(names_of(expr)[0] & scope.inplace & scope.tensors for expr, _ in chain.moved)


# --------------------------------------------------------------------------- the data flow, reported only

# Ops that change neither which numbers the softmax sees nor which rows it normalises.
_CASTS = frozenset({"to", "type_as", "float", "half", "bfloat16", "double", "type", "contiguous"})
_RESHAPES = frozenset({"view", "reshape"})
_AUGMENTED = {cst.AddAssign: cst.Add, cst.MultiplyAssign: cst.Multiply, cst.DivideAssign: cst.Divide}
_FOLLOWED_AT_MOST = 32  # bindings one reading follows: attention takes a handful
_UNBATCHED_MESSAGE = (
    "attention written by hand writes the whole score matrix: use F.scaled_dot_product_attention "
    "on its 3-d operands unsqueezed to 4-d (on 3-d ones it writes the scores too)"
)


def _branching_chain(scope: Scope, final: cst.CSTNode, final_ref: StatementRef) -> tuple[cst.CSTNode, bool] | None:
    """(score matmul, whether its operands are 3-d) of an attention that is no single chain of
    statements the fix could say in one call (the rationale lists the forms): each value on the
    way is read by its next stage only (or for its shape), and the operands are 3-d or 4-d
    where the code says so."""
    if not _has_softmax(scope):
        return None
    for values in _value_matmuls(scope, final):
        if values.transposed:
            continue
        flow = _Flow(scope, values)
        if not flow.weights(values.weights, final_ref) or not flow.scores or not flow.private():
            continue
        v_rank = _rank(scope, values.v, final_ref)
        all_ranks: set[int] = set()
        for _, q, k, rank, at in flow.scores:
            ranks = {r for r in (rank, _rank(scope, q, at), _rank(scope, k, at), v_rank) if r}
            if ranks not in ({3}, {4}) and not (flow.heads_first and not ranks):
                break
            if any(dim != -1 and {dim + 1} != ranks for dim in flow.softmax_dims):
                break  # ``softmax(dim=3)`` is over the last dim of 4-d scores only
            all_ranks |= ranks
        else:
            return flow.scores[0][0], all_ranks == {3}
    return None


@per_scope
def _has_softmax(scope: Scope) -> bool:
    """Does the scope call a softmax, or a module attribute that is one (``self.attend(x)``)?"""
    return "softmax" in scope.sites or scope.class_name is not None and any(
        scope.facts.nn_class(scope.class_name, key) == "Softmax" for key in scope.sites)


@per_scope
def _statement_names(scope: Scope) -> dict[int, tuple[frozenset[str], frozenset[str]]]:
    """``names_of`` of each statement, by id, filled as they are asked for."""
    return {}


def _names_in(scope: Scope, statement: cst.CSTNode) -> tuple[frozenset[str], frozenset[str]]:
    known = _statement_names(scope)
    names = known.get(id(statement))
    if names is None:
        names = known[id(statement)] = names_of(statement)
    return names


class _Flow:
    """A backward reading of the weights of ``weights @ v``: every path from them to a score
    matmul passes one softmax over the last dim, and only the stages SDPA has (or needs none)."""

    def __init__(self, scope: Scope, values: _Values) -> None:
        self.scope, self.values = scope, values
        self.bound: dict[tuple[str, int], StatementRef] = {}  # (name, id of its binding statement)
        self.consumed: set[tuple[str, int]] = set()  # (name, id of the statement whose stage reads it)
        self.scores: list[tuple[cst.CSTNode, cst.BaseExpression, cst.BaseExpression, int | None, StatementRef]] = []
        # scaled by a (heads, 1, 1) temperature, which broadcasts against (heads, L, S) or
        # (batch, heads, L, S) scores: a rank SDPA's fused kernels take, where nothing else says it
        self.heads_first = False
        self.softmax_dims: set[int] = set()  # -1, or a dim that must be the last one

    def weights(self, expr: cst.BaseExpression | None, at: StatementRef) -> bool:
        """After the softmax: dropout and casts."""
        expr = _bare(expr)
        if isinstance(expr, cst.Name):
            return self._through(expr.value, at, self.weights)
        softmax = _any_softmax(self.scope, expr)
        if softmax is not None:
            self.softmax_dims.add(softmax[1])
            return self.logits(softmax[0], at)
        if _method(expr) in _CASTS:
            return self.weights(expr.func.value, at)  # type: ignore[union-attr]
        dropped = _dropout(self.scope, expr)
        return dropped is not None and self.weights(dropped[0], at)

    def logits(self, expr: cst.BaseExpression | None, at: StatementRef) -> bool:
        """Before the softmax: additive masks and biases, fills, scales, views, casts."""
        written, expr = expr, _bare(expr)  # the finding points at the node as written
        scope = self.scope
        if isinstance(expr, cst.Name):
            return self._through(expr.value, at, self.logits)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self._either(expr.left, expr.right, at=at)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) \
                and isinstance(expr.left, cst.Name) and _row_max_of(expr.right, expr.left.value):
            return self.logits(expr.left, at)  # the softmax's own shift, for stability
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
            for factor, scores in ((expr.right, expr.left), (expr.left, expr.right)):
                if isinstance(expr.operator, cst.Multiply) or factor is expr.right:
                    rank = _fixed_factor(scope, factor, at)
                    if rank is not None and self._either(scores, at=at):
                        self.heads_first |= rank == 3
                        return True
            return False
        method = _method(expr)
        if method in _CASTS or method in _RESHAPES:
            return self.logits(expr.func.value, at)  # type: ignore[union-attr]
        if method == "masked_fill":
            bound = _bind(expr, ("mask", "value"))  # type: ignore[arg-type]
            return bound is not None and "value" in bound and not scope.is_tensor(bound["value"]) \
                and self.logits(expr.func.value, at)  # type: ignore[union-attr]
        spelled = _as_operator(scope, expr)
        if spelled is not None:
            return self.logits(spelled, at)
        biased = _biased(scope, expr)
        if biased is not None:
            return self.logits(biased, at)
        scores = _score_matmul(scope, _unscaled_operands(scope, expr, at), self.values) or _baddbmm_scores(scope, expr)
        if scores is None:
            return False
        q, k, rank, _ = scores
        self.scores.append((written, q, k, rank, at))  # type: ignore[arg-type]
        return True

    def _either(self, *sides: cst.BaseExpression, at: StatementRef) -> bool:
        """The first of ``sides`` that leads to the scores (``scores + bias`` or ``bias + scores``)."""
        for side in sides:
            kept = (dict(self.bound), set(self.consumed), list(self.scores))
            if self.logits(side, at):
                return True
            self.bound, self.consumed, self.scores = kept
        return False

    def _through(self, name: str, at: StatementRef, stage: Callable[[cst.BaseExpression, StatementRef], bool]) -> bool:
        """Each value ``name`` may hold at ``at``, read there once (and maybe for its dtype), through ``stage``."""
        reads = _reads(at, name)
        if reads > 1:
            reads -= _metadata_reads(self.scope, at.node, name) + _row_max_reads(at.node, name)
        if reads != 1 or len(self.bound) >= _FOLLOWED_AT_MOST:
            return False
        if stage == self.weights and name not in _names_in(self.scope, at.node)[1] and self.scope.read_after(at, name):
            return False  # weights read again (returned): ``private`` would say so, later
        definitions = _definitions(at, name)
        if not definitions:
            return False
        self.consumed.add((name, id(at.node)))
        for value, definition in definitions:
            self.bound[(name, id(definition.node))] = definition
            if not stage(value, definition):
                return False
        return True

    def private(self) -> bool:
        """Is each value bound on the way read by its next stage only (or for its shape)?"""
        scope = self.scope
        if scope.dynamic:
            return False
        for (name, _), definition in self.bound.items():
            if name in scope.escaped:
                return False
            for ref in statements_after(definition):
                if not _read_by(scope, ref.node, name, self.consumed):
                    return False
                if name in _names_in(scope, ref.node)[1]:
                    break
        return True


def _read_by(scope: Scope, statement: cst.CSTNode, name: str, consumed: set[tuple[str, int]]) -> bool:
    """Does ``statement`` read ``name`` only as the stage that consumes it, or only for its metadata?"""
    if (name, id(statement)) in consumed or name not in _names_in(scope, statement)[0]:
        return True
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return count_name(statement, name) == _metadata_reads(scope, statement, name)
    if not all(count_name(part, name) == _metadata_reads(scope, part, name) for part in own_parts(statement)):
        return False
    return all(_read_by(scope, inner, name, consumed) for block in inner_blocks(statement)
               if isinstance(block, cst.IndentedBlock) for inner in block.body)


def _metadata_reads(scope: Scope, node: cst.CSTNode, name: str) -> int:
    """The reads of ``name`` in ``node`` that take its shape, dtype or device only: ``x.shape``,
    ``x.new_full(...)``, or ``x`` handed to a same-file function that does no more with it."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == name:
        return int(node.attr.value in METADATA)
    count = 0
    if _method(node) == "type_as" and len(node.args) == 1:  # type: ignore[arg-type]
        argument = node.args[0].value  # type: ignore[attr-defined]
        count += isinstance(argument, cst.Name) and argument.value == name
    if isinstance(node, cst.Call) and any(isinstance(a.value, cst.Name) and a.value.value == name for a in node.args):
        callee = scope.facts.callee(scope.class_name, cst_view, node.func)
        functions = _functions(scope, callee) if callee is not None else []
        for position, arg in enumerate(node.args):
            if isinstance(arg.value, cst.Name) and arg.value.value == name and arg.keyword is None and not arg.star \
                    and functions and all(_metadata_parameter(f, position, callee[0] is not None) for f in functions):  # type: ignore[index]
                count += 1
    return count + sum(_metadata_reads(scope, child, name) for child in children(node))


def _row_max_of(expr: cst.BaseExpression, name: str) -> bool:
    """Is ``expr`` the max of each row of ``name``: ``name.amax(dim=-1, keepdim=True)``,
    ``name.max(-1, keepdim=True).values`` (or ``[0]``), maybe ``.detach()``-ed?"""
    expr = _bare(expr)  # type: ignore[assignment]
    if _method(expr) == "detach" and not expr.args:  # type: ignore[attr-defined]
        return _row_max_of(expr.func.value, name)  # type: ignore[attr-defined]
    if isinstance(expr, cst.Attribute) and expr.attr.value == "values":
        expr, method = expr.value, "max"
    elif isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) \
            and _integer(expr.slice[0].slice.value) == 0:
        expr, method = expr.value, "max"
    else:
        method = "amax"
    if _method(expr) != method or not (isinstance(expr.func.value, cst.Name) and expr.func.value.value == name):  # type: ignore[attr-defined]
        return False
    bound = _bind(expr, ("dim", "keepdim"))  # type: ignore[arg-type]
    return bound is not None and _integer(bound.get("dim", cst.Name("None"))) == -1 \
        and dotted_name(bound.get("keepdim", cst.Name("False"))) == "True"


def _row_max_reads(node: cst.CSTNode, name: str) -> int:
    """The reads of ``name`` in ``node`` that take its row maxima (``_row_max_of``)."""
    if isinstance(node, cst.BaseExpression) and _row_max_of(node, name):
        return 1
    return sum(_row_max_reads(child, name) for child in children(node))


def _functions(scope: Scope, callee: tuple[str | None, str]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    owner, name = callee
    return scope.facts.functions.get(name, []) if owner is None else scope.facts.methods(owner, name)


def _parameter(function: ast.FunctionDef | ast.AsyncFunctionDef, position: int, method: bool) -> str | None:
    params = [*function.args.posonlyargs, *function.args.args][int(method):]
    return params[position].arg if position < len(params) else None


def _metadata_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef, position: int, method: bool) -> bool:
    """Does the function read its ``position``-th parameter for its metadata only?"""
    param = _parameter(function, position, method)
    if param is None:
        return False
    uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == param]
    metadata = [n for n in ast.walk(function) if isinstance(n, ast.Attribute) and n.attr in METADATA
                and isinstance(n.value, ast.Name) and n.value.id == param]
    return len(uses) == len(metadata)


def _biased(scope: Scope, call: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The scores handed first to a same-file function that returns them plus something (or as
    they are): ``return scores if mask is None else scores + mask``."""
    if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    callee = scope.facts.callee(scope.class_name, cst_view, call.func)
    functions = _functions(scope, callee) if callee is not None else []
    if not functions or not all(_adds_to_first(f, callee[0] is not None) for f in functions):  # type: ignore[index]
        return None
    return call.args[0].value


def _adds_to_first(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    first = _parameter(function, 0, method)
    if first is None:
        return False
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)) or isinstance(node, ast.Assign) and len(node.targets) != 1:
            return False
        if isinstance(node, ast.Assign):
            for target in ast.walk(node.targets[0]):
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)

    def adds(expr: ast.expr, depth: int, parameter: bool) -> bool:
        """``parameter``: ``first`` still names the parameter (inside the one value it is rebound to)."""
        if depth > 8:
            return False
        if isinstance(expr, ast.Name):
            if expr.id == first and (parameter or first not in assigned):
                return True
            values = assigned.get(expr.id, [])
            return len(values) == 1 and adds(values[0], depth + 1, parameter or expr.id == first)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return adds(expr.left, depth + 1, parameter) or adds(expr.right, depth + 1, parameter)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _RESHAPES:
            return adds(expr.func.value, depth + 1, parameter)
        if isinstance(expr, ast.IfExp):
            return adds(expr.body, depth + 1, parameter) and adds(expr.orelse, depth + 1, parameter)
        return False

    returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return)]
    return bool(returns) and all(r is not None and adds(r, 0, False) for r in returns)


def _fixed_factor(scope: Scope, factor: cst.BaseExpression, at: StatementRef, depth: int = 0) -> int | None:
    """A factor the same for every key: a number (0), a per-head temperature, or a local made
    from one by element-wise ops (``logit_scale = torch.clamp(self.logit_scale, max=m).exp()``):
    the temperature's rank; None for any other factor."""
    factor = _bare(factor)
    if depth > 6:
        return None
    if not scope.is_tensor(factor):
        return 0
    per_head = _per_head_rank(scope, factor)
    if per_head is not None:
        return per_head
    if isinstance(factor, cst.Name):
        bound = _binding(at, factor.value)
        return _fixed_factor(scope, bound[0], bound[1], depth + 1) if bound is not None else None
    parts: list[cst.BaseExpression] = []
    if isinstance(factor, cst.BinaryOperation) and isinstance(factor.operator, _ARITHMETIC):
        parts = [factor.left, factor.right]
    elif isinstance(factor, cst.Call) and _op_name(scope, factor) in _ELEMENTWISE_OF_ONE:
        parts = [a.value for a in factor.args] + ([factor.func.value] if isinstance(factor.func, cst.Attribute) else [])
    ranks = [_fixed_factor(scope, part, at, depth + 1) for part in parts]
    return max(ranks) if ranks and None not in ranks else None  # type: ignore[type-var]


_ELEMENTWISE_OF_ONE = frozenset({"exp", "clamp", "clip", "log", "sigmoid", "softplus", "abs", "sqrt", "rsqrt", "reciprocal"})
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)


def _any_softmax(scope: Scope, node: cst.BaseExpression | None) -> tuple[cst.BaseExpression, int] | None:
    """(input, dim) of a softmax over one dim, maybe with a ``dtype``: ``F.softmax(x, dim=-1,
    dtype=...)``, ``x.softmax(3)``, or an ``nn.Softmax(dim=-1)`` attribute."""
    if not isinstance(node, cst.Call) or not _plain_args(node, keywords=True):
        return None
    attribute = _softmax(scope, node) if _self_attr(node.func) is not None else None
    if attribute is not None:
        return attribute, -1
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax" and scope.is_tensor(node.func.value):
        source, args = node.func.value, list(node.args)
    elif scope.torch_name(node.func) in _SOFTMAX and node.args and node.args[0].keyword is None:
        source, args = node.args[0].value, list(node.args[1:])
    else:
        return None
    bound = _bind(node.with_changes(args=args), ("dim", "dtype"))
    dim = _integer(bound["dim"]) if bound is not None and "dim" in bound else None
    return (source, dim) if dim is not None and dim >= -1 else None


def _unscaled_operands(scope: Scope, node: cst.BaseExpression | None, at: StatementRef) -> cst.BaseExpression | None:
    """The matmul ``node`` with a fixed factor taken off each operand: ``(q * s) @ (k.transpose(-1,
    -2) * s)`` as ``q @ k.transpose(-1, -2)`` (both scaled by the root of the scale)."""
    def bare(operand: cst.BaseExpression) -> cst.BaseExpression:
        inner = _bare(operand)
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, (cst.Multiply, cst.Divide)):
            if _fixed_factor(scope, inner.right, at) is not None:
                return inner.left
            if isinstance(inner.operator, cst.Multiply) and _fixed_factor(scope, inner.left, at) is not None:
                return inner.right
        return operand

    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return node.with_changes(left=bare(node.left), right=bare(node.right))
    if isinstance(node, cst.Call) and len(node.args) == 2 and _plain_args(node):
        return node.with_changes(args=[a.with_changes(value=bare(a.value)) for a in node.args])
    return node


def _baddbmm_scores(scope: Scope, node: cst.BaseExpression | None
                    ) -> tuple[cst.BaseExpression, cst.BaseExpression, int, bool] | None:
    """(q, k, 3, laid out as SDPA's) of ``torch.baddbmm(bias, q, k.transpose(1, 2), beta=b, alpha=s)``:
    scores scaled by ``s`` plus ``b`` times a bias, SDPA's scale and mask."""
    if not (isinstance(node, cst.Call) and scope.torch_name(node.func) == "torch.baddbmm"):
        return None
    bound = _bind(node, ("input", "batch1", "batch2", "beta", "alpha"))
    if bound is None or "batch1" not in bound or "batch2" not in bound:
        return None
    key = _untransposed(bound["batch2"], _BMM_KEY_TRANSPOSES)
    return (bound["batch1"], key, 3, True) if key is not None else None


_OPERATORS = {"add": cst.Add, "mul": cst.Multiply, "div": cst.Divide}


def _as_operator(scope: Scope, call: cst.BaseExpression | None) -> cst.BinaryOperation | None:
    """``a.add(b)``, ``torch.mul(a, b)``, ... as ``a + b``, ``a * b``."""
    if not isinstance(call, cst.Call) or not _plain_args(call) or not isinstance(call.func, cst.Attribute):
        return None
    name = call.func.attr.value
    if name not in _OPERATORS:
        return None
    if len(call.args) == 1 and scope.is_tensor(call.func.value):
        left, right = call.func.value, call.args[0].value
    elif len(call.args) == 2 and scope.torch_name(call.func) == f"torch.{name}":
        left, right = call.args[0].value, call.args[1].value
    else:
        return None
    return cst.BinaryOperation(left, _OPERATORS[name](), right)


def _method(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value
    return None


def _definitions(at: StatementRef, name: str) -> list[tuple[cst.BaseExpression, StatementRef]] | None:
    """Every ``name = value`` (or ``name += value``, as ``name + value``) that may reach ``at``
    through ``if`` statements and out of their arms; None where another statement (a loop, a
    tuple target) may bind it, or none is found."""
    found: list[tuple[cst.BaseExpression, StatementRef]] = []
    ref = at
    while True:
        for earlier in ref.earlier():
            node = earlier.node
            if isinstance(node, cst.SimpleStatementLine):
                in_place = _in_place_stage(earlier, name)
                if in_place is not None:
                    return found + [(in_place, earlier)]
                if name not in names_of(node)[1]:
                    continue
                value = _assigned(earlier, name)
                return found + [(value, earlier)] if value is not None else None
            if not _may_assign(node, name):
                continue
            arms = [block for block in inner_blocks(node)]
            if not isinstance(node, cst.If) or not all(isinstance(arm, cst.IndentedBlock) for arm in arms):
                return None
            for arm in arms:
                block = Block(tuple(arm.body), earlier, arm)  # type: ignore[attr-defined]
                inside = _definitions(StatementRef(node, block, len(block.statements)), name)
                if inside is None:
                    return None
                found += inside
            if _has_else(node):
                return found
        parent = ref.block.parent
        if parent is None or not isinstance(parent.node, (cst.If, cst.With)):
            return None
        ref = parent


def _has_else(node: cst.If) -> bool:
    while isinstance(node.orelse, cst.If):
        node = node.orelse
    return node.orelse is not None


def _may_assign(statement: cst.CSTNode, name: str) -> bool:
    return any(
        name in names_of(inner)[1] or (not isinstance(inner, cst.SimpleStatementLine) and _may_assign(inner, name))
        for block in inner_blocks(statement) for inner in getattr(block, "body", ())
    ) or name in names_of(statement)[1]


_IN_PLACE = {"masked_fill_": "masked_fill", "add_": "add", "mul_": "mul", "div_": "div"}


def _in_place_stage(ref: StatementRef, name: str) -> cst.Call | None:
    """``name.masked_fill_(mask, v)`` (``add_``, ``mul_``, ``div_``) as a statement: a new value of
    ``name``, the call without its underscore."""
    small = ref.simple
    call = small.value if isinstance(small, cst.Expr) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in _IN_PLACE):
        return None
    if not (isinstance(call.func.value, cst.Name) and call.func.value.value == name):
        return None
    return call.with_changes(func=call.func.with_changes(attr=cst.Name(_IN_PLACE[call.func.attr.value])))


def _assigned(ref: StatementRef, name: str) -> cst.BaseExpression | None:
    small = ref.simple
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        return small.value if isinstance(target, cst.Name) and target.value == name else None
    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value == name:
        operator = _AUGMENTED.get(type(small.operator))
        return cst.BinaryOperation(cst.Name(name), operator(), small.value) if operator is not None else None
    return None


def _fallback_for_old_torch(scope: Scope, ref: StatementRef) -> bool:
    """Does ``ref`` run only where ``F.scaled_dot_product_attention`` does not exist: in the other
    arm of ``if hasattr(F, "scaled_dot_product_attention"):``, or after such an ``if`` that
    returns? Every torch since 2.0 has it: the hand-written attention never runs."""
    while True:
        if any(_returns_with_sdpa(scope, earlier.node) for earlier in ref.earlier()):
            return True
        owner = ref.block.parent
        if owner is None:
            return False
        if isinstance(owner.node, cst.If):
            test, negated = _sdpa_test(owner.node)
            if _has_sdpa(scope, test) and (ref.block.node is owner.node.body) == negated:
                return True
        ref = owner


def _sdpa_test(node: cst.If) -> tuple[cst.BaseExpression | None, bool]:
    """(the test without ``not``, whether it was negated)."""
    test = _bare(node.test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _bare(test.expression), True
    return test, False


def _returns_with_sdpa(scope: Scope, node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.If) or not isinstance(node.body, cst.IndentedBlock):
        return False
    last = node.body.body[-1]
    returns = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)
    test, negated = _sdpa_test(node)
    return returns and not negated and _has_sdpa(scope, test)


def _has_sdpa(scope: Scope, test: cst.BaseExpression | None) -> bool:
    """``hasattr(F, "scaled_dot_product_attention")``, or a ``self.<attr>`` assigned only that."""
    attr = _self_attr(test) if test is not None else None
    if attr is not None and scope.class_name is not None:
        values = [node.value for node in _class_members(scope) if isinstance(node, ast.Assign) and _assigns_self(node, attr)]
        return bool(values) and all(_sdpa_hasattr(v) for v in values)
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "hasattr"):
        return False
    return len(test.args) == 2 and isinstance(test.args[1].value, cst.SimpleString) \
        and test.args[1].value.evaluated_value == "scaled_dot_product_attention"


def _sdpa_hasattr(value: ast.expr) -> bool:
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "hasattr"
            and len(value.args) == 2 and isinstance(value.args[1], ast.Constant)
            and value.args[1].value == "scaled_dot_product_attention")


# --------------------------------------------------------------------------- the fix


def _fix(scope: Scope, chain: _Chain) -> tuple[StatementEdit, ...] | None:
    function = scope.facts.spelling("torch.nn.functional.scaled_dot_product_attention")
    if function is None:
        return None
    operands = (chain.q, chain.k, chain.v)
    if chain.unbatched:
        args = [f"{_code(_atom(x))}.unsqueeze(0)" for x in operands]
    else:
        args = [_code(x) for x in operands]
    if chain.attn_mask is not None:
        args.append(f"attn_mask={_code(chain.attn_mask)}")
    if chain.dropout_p is not None:
        args.append(f"dropout_p={_code(chain.dropout_p)}")
    if chain.is_causal:
        args.append("is_causal=True")
    if chain.scale is not None:
        args.append(f"scale={_code(chain.scale)}")
    squeeze = ".squeeze(0)" if chain.unbatched else ""
    call = cst.parse_expression(f"{function}({', '.join(args)}){squeeze}")
    replacement = replace_nodes(chain.final_ref.node, {chain.final: call})
    edits = [StatementEdit(ref.node, ()) for ref in chain.deleted]  # type: ignore[arg-type]
    edits.append(StatementEdit(chain.final_ref.node, (replacement,)))  # type: ignore[arg-type]
    return tuple(edits)


# --------------------------------------------------------------------------- small readers


def _op_name(scope: Scope, node: cst.CSTNode) -> str | None:
    op = scope.op(node)
    return op[0] if op is not None else None


def _plain_args(node: cst.Call, keywords: bool = False) -> bool:
    return all(not a.star and (keywords or a.keyword is None) for a in node.args)


def _bind(node: cst.Call, names: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by parameter name (positional first); None for unknown keywords."""
    bound: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(node.args):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword is not None else (names[i] if i < len(names) else None)
        if name not in names or name in bound:
            return None
        bound[name] = arg.value
    bound.pop("inplace", None)
    return bound


def _einsum_parts(equation: cst.BaseExpression) -> tuple[tuple[str, str], str] | None:
    """(operands, output) of a two-operand equation, spaces dropped, ``...`` as one letter ``.``."""
    if not isinstance(equation, cst.SimpleString):
        return None
    text = equation.evaluated_value
    if not isinstance(text, str) or "->" not in text:
        return None
    inputs, out = text.replace(" ", "").replace("...", ".").split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or not all(parts):
        return None
    return (parts[0], parts[1]), out


def _integer(expr: cst.BaseExpression) -> int | None:
    number = _number(expr)
    return number if isinstance(number, int) else None


def _number(expr: cst.BaseExpression) -> int | float | None:
    expr = _bare(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _number(expr.expression)
        return -inner if inner is not None else None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    return None


def _minus_infinity(expr: cst.BaseExpression) -> bool:
    """``float('-inf')``, ``-float('inf')``, ``-math.inf``, ``-torch.inf``."""
    expr = _bare(expr)
    negated = isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus)
    inner = _bare(expr.expression) if negated else expr  # type: ignore[attr-defined]
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "float" and len(inner.args) == 1:
        text = inner.args[0].value
        if isinstance(text, cst.SimpleString) and isinstance(text.evaluated_value, str):
            value = text.evaluated_value.strip().lower()
            return value in ("inf", "infinity") if negated else value in ("-inf", "-infinity")
    return negated and dotted_name(inner) in ("math.inf", "torch.inf", "numpy.inf", "np.inf")


def _self_attr(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _bare(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    return expr.with_changes(lpar=[], rpar=[]) if expr is not None and expr.lpar else expr


def _code(expr: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(expr)
