# FL009 (scale-after-matmul): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-1, -2)) * 0.125

# --- example 2
import math

import torch


def scores(q: torch.Tensor, k: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.einsum("b i d, b j d -> b i j", q, k) / math.sqrt(dim)

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor):
    h = (x @ w) * 0.5
    s = (q @ k.transpose(-1, -2)) * bias
    return h, s

# --- look-alike 2
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    return torch.einsum("b n d, d e -> b n e", x, w) * 0.5
