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

# --- rescaled past a view that rebinds the product (fixed)
def flat_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    emb = emb.flatten(1)
    emb = scale * emb
    return torch.cat([emb.sin(), emb.cos()], dim=-1)

# --- scaled into another name, the factor computed in between (reported without a fix)
def renamed(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    half = dim // 2
    scaled = emb * half
    return scaled.sin()

# --- look-alike: the unscaled product is read again
def kept(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    scaled = emb * dim
    return scaled.sin() + emb

# --- a small tensor scale (a keepdim reduction's ratio, a per-channel gain)
import torch
from torch import nn


class ResponseNorm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.linspace(-1.0, 1.0, channels))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(-2, -1), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return self.gamma[None, :, None, None] * (x * nx)

# --- a matmul with a module's buffer, rescaled by the next statement
import math

import torch
from torch import nn


class RandomFourierEncoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("gaussian", torch.linspace(-0.5, 0.5, 128).reshape(2, 64))

    def forward(self, coords):
        coords = coords @ self.gaussian
        coords = 2 * math.pi * coords
        return torch.cat([coords.sin(), coords.cos()], dim=-1)

# --- a scale of a product of small tensors, a scale of unknown size: not flagged
import torch


def g(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, h: torch.Tensor):
    a = g.mean(-1, keepdim=True) * (g[None, :] * h[None, :])
    b = x * w * g.mean(-1, keepdim=True)
    c = x @ w
    c = c * 0.5
    return a, b, c

# --- a norm's output, scaled, then multiplied by a conditioned gain
import torch
import torch.nn.functional as F


def adaptive_rms_norm(x: torch.Tensor, condition: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    normed = F.normalize(x, dim=-1)
    gamma = condition @ w.t()
    return normed * scale * (gamma + 1.0)
