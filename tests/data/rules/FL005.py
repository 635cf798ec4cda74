# FL005 (kept-alive-by-container): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def encode(x: torch.Tensor, y: torch.Tensor, trace: list) -> torch.Tensor:
    h = x
    for _ in range(3):
        h = torch.tanh(h * 2 + y)
        trace.append(h)
    return h * 0.5

# --- example 2
import torch


class Gate(torch.nn.Module):
    def forward(self, x, y):
        g = torch.sigmoid(x + y)
        self.last_gate = g
        return x * g + y

# --- example 3
import torch


def attend(x: torch.Tensor, y: torch.Tensor, stats: dict) -> torch.Tensor:
    s = x * 0.125 + y
    stats["logits"] = s.detach()
    return torch.softmax(s, -1) * y

# --- example 4
import torch
import torch.nn.functional as F


def mlp(x: torch.Tensor, w: torch.Tensor, logger) -> torch.Tensor:
    seen = ()
    h = F.gelu(x)
    seen += (h,)
    out = h * torch.sigmoid(x)
    logger.debug("%d activations", len(seen))
    return out @ w

# --- look-alike 1
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim))
        self.scale = dim ** -0.5
        self.names = []

    def forward(self, x):
        h = torch.relu(x * self.scale)
        self.names.append("relu")
        return h @ self.weight + h

# --- look-alike 2
import torch


def run(x: torch.Tensor, steps: int) -> torch.Tensor:
    outs = []
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 2)
        outs.append(h)
    return torch.stack(outs).sum(0) + h

# --- look-alike 3
import torch


def encoder(x: torch.Tensor, layers) -> tuple:
    all_states = ()
    h = x
    for layer in layers:
        h = torch.relu(h + 1)
        all_states = all_states + (h,)
        h = layer(h)
    return h, all_states

# --- look-alike 4
import torch


class Mlp(torch.nn.Module):
    def forward(self, x, w):
        h = torch.relu(x * 2)
        self.act = h
        y = x @ w
        self.pre = y
        return (h @ w) + y + 1

# --- look-alike 5
import numpy as np
import torch


def f(x: torch.Tensor, arr: np.ndarray, log: dict) -> torch.Tensor:
    a = torch.sigmoid(x) * 2
    out = a + 1
    log["a"] = a
    b = arr * 2
    log["b"] = b
    return out * b.sum() + b.mean()
