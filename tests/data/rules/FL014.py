# FL014 (scale-smaller-factor): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def scale_norm(x: torch.Tensor, g: torch.Tensor, dim: int) -> torch.Tensor:
    return F.normalize(x, dim=-1) * dim**0.5 * g[None, None, :]

# --- example 2
import torch


def timestep_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    emb = scale * emb
    return torch.cat([emb.sin(), emb.cos()], dim=-1)

# --- look-alike 1
import torch


def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, g: torch.Tensor):
    a = x * 2.0 * y
    b = x * w * g[None, :]
    c = x[:, None] * 0.5
    return a, b, c

# --- look-alike 2
import torch


def f(t: torch.Tensor, freqs: torch.Tensor, scale: float):
    emb = t[:, None] * freqs[None, :]
    raw = emb.sum(-1)
    emb = emb * scale
    return emb, raw
