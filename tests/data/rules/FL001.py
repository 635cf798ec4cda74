# FL001 (view-breaks-fused-block): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def mlp_out(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x).flatten(0, 1)
    return h + bias

# --- example 2
import torch


class Head(torch.nn.Module):
    def forward(self, x, temperature: float = 0.5):
        probs = (x * 0.5).view(-1, x.size(-1)).softmax(-1)
        return probs

# --- example 3
import torch


def gate(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    h = x * 2
    g = torch.sigmoid(h)
    g2 = g.flatten(0, 1)
    return g2 + c

# --- example 4
import torch


def mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.flatten(x * y, 1).sum(-1)

# --- look-alike 1
import torch


def burn(t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor) -> torch.Tensor:
    t4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)
    return t4 + t1.flatten() * 2

# --- look-alike 2
import torch


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, q: torch.Tensor, n: int, d: int):
    y = (x * 2).transpose(0, 1) @ w + (x * 2).T + b.mT
    z = (x * 2)[..., None] * b[None, :] + (x - 1).unsqueeze(0)
    heads = (q * 0.125).view(n, -1, 4, d).permute(0, 2, 1, 3) + 1
    return y, z, heads, (q + 1).reshape(-1, 1) + 1

# --- look-alike 3
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    out = (x * 2).flatten(0, 1) @ w
    return out, torch.relu(x).reshape(-1)

# --- look-alike 4
import torch


class Block(torch.nn.Module):
    def forward(self, x, w):
        h = x @ w
        a = self.act(x)
        return h.flatten(0, 1) + 1, a.view(-1) * 2, x.flatten(1) * 2

# --- look-alike 5
import torch


def f(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    kt = k.transpose(1, 2)
    scores = (kt * 0.125).flatten(2) + 1
    return (x.t() * 2).reshape(-1) + 1, scores

# --- look-alike 6
import torch


def f(probs: torch.Tensor, codebook: torch.Tensor, labels: torch.Tensor, logits: torch.Tensor, b: int, s: int):
    per_group = probs.unsqueeze(-1) * codebook
    codevectors = per_group.view(b * s, 2, 320, -1).sum(-2)
    labels = labels.masked_fill(labels == 7, -100).reshape(-1)
    labels = labels.to(logits.device)
    feats = logits.to(labels.device).flatten(1) + 1
    return codevectors, labels, feats

# --- look-alike 7
import torch


def dice(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    probs = inputs.sigmoid().flatten(1)
    numerator = 2 * (probs * labels).sum(-1)
    denominator = probs.sum(-1) + labels.sum(-1)
    h = inputs * 2
    g = h.flatten(1) + 1
    return 1 - (numerator + 1) / (denominator + 1) + g.sum() + h.sum()

# --- look-alike 8
import torch


def gate(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, n: int) -> torch.Tensor:
    g = a * (b * 2.0 - 1.0) + 2.0
    return g.view(n * 4, -1, 1) * bias

# --- look-alike 9
import torch


def bits(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).view(torch.int32) & 1

# --- look-alike 10
import numpy as np
import torch


def f(self, a: np.ndarray, request, buf: bytes, x: torch.Tensor, flag: bool):
    r = (a * 2).reshape(-1) + 1
    mv = memoryview(buf).cast("B").tolist()
    page = self.view(request).render()
    if flag:
        x = x * 2
    return r, mv, page, x.flatten(1) + 1

# --- concatenation: element-wise work on a cat of computed values
import torch


def sinusoidal(pos: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    emb = torch.einsum("i, j -> i j", pos, inv_freq)
    emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
    return emb * scale

# --- concatenation look-alikes
import torch


def f(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor):
    x = torch.cat((a, b), -1) * 2
    y = (torch.cat((a * 2, b), -1) * 2) @ w
    z = torch.cat((torch.tanh(a), b), -1)
    s = (torch.cat((torch.tanh(a), b), -1) + 1).sum(-1)
    return x, y, z.sum(-1), z * 2, s

# --- concatenation look-alikes, measured
import torch


def f(h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor, q, k, m):
    r = torch.cat((-h[..., 16:], h[..., :16]), dim=-1)
    rotated = h * cos + r * sin
    filled = torch.cat((h[:, :1], h[:, 1:] - 0.97 * h[:, :-1]), dim=1).masked_fill(mask, 0.0)
    w = torch.cat((q @ k, q @ m), dim=-1)
    w = w + mask
    p = w.softmax(-1)
    return rotated, filled, p, torch.cat((h * 2, h), 0).float()

# --- the 5-d view two element-wise statements back (Swin V2 adds its window mask twice)
import torch
from torch import nn


class Swinv2SelfAttention(nn.Module):
    def forward(self, attention_scores, attention_mask, batch_size: int, dim: int):
        if attention_mask is not None:
            mask_shape = attention_mask.shape[0]
            attention_scores = attention_scores.view(
                batch_size // mask_shape, mask_shape, self.num_attention_heads, dim, dim
            ) + attention_mask.unsqueeze(1).unsqueeze(0)
            attention_scores = attention_scores + attention_mask.unsqueeze(1).unsqueeze(0)
            attention_scores = attention_scores.view(-1, self.num_attention_heads, dim, dim)
        return nn.functional.softmax(attention_scores, dim=-1)

# --- look-alike: a view to as many dims as the value was viewed with
def same_rank(scores: torch.Tensor, mask: torch.Tensor, heads: int, n: int):
    scores = scores.view(-1, heads, n, n) + mask
    scores = scores + mask
    scores = scores.view(-1, heads, n, n)
    return scores.softmax(-1)
