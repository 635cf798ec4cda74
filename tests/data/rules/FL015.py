# FL015 (fill-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def pad_column(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    column = torch.ones((tokens.shape[0], 1), dtype=torch.long) * pad_id
    return torch.cat([tokens, column], dim=1)

# --- example 2
import torch


def signs(x: torch.Tensor) -> torch.Tensor:
    labels = -torch.ones(x.shape[0], x.shape[0])
    return x * labels

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    a = torch.ones_like(x) * 2
    b = torch.ones(4, 4) * w
    c = torch.ones(4, 4) + 1
    return a, b, c

# --- look-alike 2
import torch
from torch import nn


class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))
