# FL010 (manual-attention): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
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

# --- example 2
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

# --- example 3
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

# --- look-alike 1
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    weights = torch.softmax(q @ k.transpose(2, 3) * 0.125, dim=-1)
    return weights @ v, weights

# --- look-alike 2
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    weights = torch.sigmoid(q @ k.transpose(2, 3) * 0.125)
    return weights @ v

# --- look-alike 3
import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor):
    weights = (q @ k.transpose(2, 3)).softmax(-1) * keep
    other = (q @ k.transpose(2, 3)).softmax(dim=1)
    return weights @ v, other @ v

# --- nanoGPT's block: q and k are T long, the tril buffer is causal (the fix says is_causal=True)
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return y.transpose(1, 2).contiguous().view(B, T, C)


# --- the fallback branch of timm's `if self.fused_attn:` is flagged where its operands are 4-d (the
# corpus labels it actionable, bench/corpus timm-015); here their rank is unknown: not flagged
class Attention(nn.Module):
    def forward(self, q, k, v):
        if self.fused_attn:
            x = F.scaled_dot_product_attention(q, k, v)
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            x = attn @ v
        return x


# --- the key transposed by a permute that swaps its last two dims (Segment Anything's two-way
# transformer): the permute tells the rank, 4; a permute that moves other dims is not a transpose
def two_way_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    _, _, _, c_per_head = q.shape
    attn = q @ k.permute(0, 1, 3, 2)
    attn = attn / math.sqrt(c_per_head)
    attn = torch.softmax(attn, dim=-1)
    return attn @ v


def not_a_key_transpose(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    attn = q @ k.permute(0, 2, 3, 1)
    attn = torch.softmax(attn, dim=-1)
    return attn @ v


# --- the scores as an einsum over (batch, tokens, heads, dim) operands (Ultralytics' image pooling
# attention): flagged without a fix, SDPA wants the heads before the tokens
def pooled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    bs, nh, hc = 2, 4, 16
    q = q.reshape(bs, -1, nh, hc)
    k = k.reshape(bs, -1, nh, hc)
    v = v.reshape(bs, -1, nh, hc)
    aw = torch.einsum("bnmc,bkmc->bmnk", q, k)
    aw = aw / (hc**0.5)
    aw = F.softmax(aw, dim=-1)
    x = torch.einsum("bmnk,bkmc->bnmc", aw, v)
    return x.reshape(bs, -1, nh * hc)


# a 3-d einsum over (batch, tokens, heads) with no head dim summed is no attention; a 5-d one
# would take SDPA's math path: neither flagged
def not_attention_einsum(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    aw = torch.einsum("bnm,bkm->bnk", q, k).softmax(dim=-1)
    return torch.einsum("bnk,bkmc->bnmc", aw, v)


def five_d_einsum(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    aw = torch.einsum("bgnmc,bgkmc->bgmnk", q, k).softmax(dim=-1)
    return torch.einsum("bgmnk,bgkmc->bgnmc", aw, v)


# --- (heads, dim, tokens) operands (YOLO12's area attention): q^T @ k, then v @ weights^T, whose
# result is permuted next, as SDPA's transposed output can be: flagged without a fix
def area_attention(qkv: torch.Tensor) -> torch.Tensor:
    B, N, num_heads, head_dim = 4, 32, 2, 16
    q, k, v = qkv.view(B, N, num_heads, head_dim * 3).permute(0, 2, 3, 1).split([head_dim, head_dim, head_dim], dim=2)
    attn = (q * (head_dim**-0.5)).transpose(-2, -1) @ k
    attn = attn.softmax(dim=-1)
    x = v @ attn.transpose(-2, -1)
    x = x.permute(0, 3, 1, 2)
    return x.reshape(B, N, -1)


# the same attention whose (heads, dim, tokens) result is viewed at once (YOLO's PSA block): SDPA's
# transposed output would need a copy there (measured: more writes), not flagged
def psa_attention(qkv: torch.Tensor) -> torch.Tensor:
    B, C, H, W = 2, 64, 8, 8
    q, k, v = qkv.view(B, 2, 64, H * W).split([16, 16, 32], dim=2)
    attn = ((q * 0.25).transpose(-2, -1) @ k).softmax(dim=-1)
    return (v @ attn.transpose(-2, -1)).view(B, C, H, W)


# --- more look-alikes: weights returned after a transposed matmul, and a mask that multiplies the
# scores (not SDPA's additive mask)
def returned_weights(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    q = q.view(2, 4, 16, 8)
    k = k.view(2, 4, 16, 8)
    attn = (q.transpose(-2, -1) @ k).softmax(dim=-1)
    x = v @ attn.transpose(-2, -1)
    x = x.permute(0, 3, 1, 2)
    return x, attn


def multiplied_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    q = q.view(2, 4, 16, 8)
    k = k.view(2, 4, 16, 8)
    attn = (q @ k.transpose(-2, -1)) * keep
    attn = attn.softmax(dim=-1)
    return attn @ v


# --- a learned temperature per head (Restormer's channel attention): the query's rows take it
class ChannelAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.bias = nn.Parameter(torch.zeros(num_heads, 1, 16))

    def forward(self, qkv):
        q, k, v = qkv.chunk(3, dim=1)
        b, c, h, w = q.shape
        q = q.reshape(b, self.num_heads, c // self.num_heads, h * w)
        k = k.reshape(b, self.num_heads, c // self.num_heads, h * w)
        v = v.reshape(b, self.num_heads, c // self.num_heads, h * w)
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)
        return (attn @ v).reshape(b, c, h, w)

    # a learned tensor that varies across the keys is no per-head scale: not flagged
    def per_key(self, q, k, v):
        q = q.reshape(2, self.num_heads, 16, 64)
        attn = (q @ k.transpose(-2, -1)) * self.bias
        return attn.softmax(dim=-1) @ v


# XCiT's layout: the tokens moved last by the permute, a strided last dim that SDPA would copy
# (measured 6 -> 7 writes): not flagged
def cross_covariance(qkv: torch.Tensor) -> torch.Tensor:
    B, N, C3 = qkv.shape
    q, k, v = qkv.reshape(B, N, 3, 4, -1).permute(2, 0, 3, 4, 1).unbind(0)
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return (attn.softmax(dim=-1) @ v).permute(0, 3, 1, 2).reshape(B, N, -1)


# --- the softmax as an nn.Softmax(dim=-1) attribute (DaViT's window attention); one over another
# dim is not the attention's softmax: not flagged
class WindowAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.softmax = nn.Softmax(dim=-1)
        self.column_softmax = nn.Softmax(dim=1)

    def forward(self, qkv):
        B_, N, C3 = qkv.shape
        q, k, v = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = self.softmax((q * 0.25) @ k.transpose(-2, -1))
        return (attn @ v).transpose(1, 2).reshape(B_, N, -1)

    def over_columns(self, qkv):
        q, k, v = qkv.reshape(2, 16, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = self.column_softmax(q @ k.transpose(-2, -1))
        return attn @ v


# --- Swin's window attention: a relative-position bias, a shift mask added under an `if` on a 5-d
# view of the scores: reported without a fix (no one call says both paths)
class ShiftedWindowAttention(nn.Module):
    def __init__(self, num_heads: int = 4):
        super().__init__()
        self.num_heads = num_heads
        self.attn_drop = nn.Dropout(0.1)

    def forward(self, qkv, bias, mask=None):
        B_, N, _ = qkv.shape
        qkv = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * 0.25
        attn = q @ k.transpose(-2, -1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(B_ // nw, nw, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
            attn = F.softmax(attn, dim=-1)
        else:
            attn = F.softmax(attn, dim=-1)
        attn = self.attn_drop(attn).to(v.dtype)
        return (attn @ v).transpose(1, 2).reshape(B_, N, -1)


# --- a same-file helper that adds the mask, and a causal bias built from the scores' shape only
# (timm's Attention): reported without a fix
def maybe_add_mask(scores: torch.Tensor, attn_mask: torch.Tensor | None = None):
    return scores if attn_mask is None else scores + attn_mask


def causal_bias(seq_len: int, attn: torch.Tensor) -> torch.Tensor:
    return attn.new_full((seq_len, seq_len), float("-inf")).triu_(1)


def helper_masked_attention(qkv: torch.Tensor, fused: bool) -> torch.Tensor:
    B, N, _ = qkv.shape
    q, k, v = qkv.reshape(B, N, 3, 4, -1).permute(2, 0, 3, 1, 4).unbind(0)
    if fused:
        x = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        attn = (q * 0.25) @ k.transpose(-2, -1)
        attn = maybe_add_mask(attn, causal_bias(N, attn))
        attn = attn.softmax(dim=-1)
        x = attn @ v
    return x.transpose(1, 2).reshape(B, N, -1)


# a helper that caps the scores is no mask SDPA takes: not flagged
def soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    return torch.tanh(scores / cap) * cap


def capped_attention(qkv: torch.Tensor) -> torch.Tensor:
    q, k, v = qkv.reshape(2, 16, 3, 4, -1).permute(2, 0, 3, 1, 4).unbind(0)
    attn = soft_cap(q @ k.transpose(-2, -1), 30.0)
    return attn.softmax(dim=-1) @ v


# --- the hand-written arm of a module that uses SDPA wherever torch has it (open_clip): no torch
# since 2.0 runs it, not flagged
class FallbackAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_fsdpa = hasattr(nn.functional, "scaled_dot_product_attention")

    def forward(self, qkv, attn_mask=None):
        q, k, v = qkv.reshape(2, 16, 3, 4, -1).permute(2, 0, 3, 1, 4).unbind(0)
        if self.use_fsdpa:
            x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        else:
            attn = torch.matmul(q * 0.25, k.transpose(-1, -2))
            if attn_mask is not None:
                attn += attn_mask
            x = torch.matmul(attn.softmax(dim=-1), v)
        return x
