# FL018 (elementwise-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

# --- example 2
import math

import torch


def swish_mlp(h: torch.Tensor, distance: torch.Tensor):
    h = h * torch.sigmoid(h)
    exact = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
    return exact, torch.log(1 + torch.exp(h)), torch.log(distance.abs() + 1), torch.exp(h) - 1

# --- look-alike 1
import torch


def f(x: torch.Tensor, gate: torch.Tensor, eps: float):
    a = x * torch.sigmoid(1.702 * x)
    b = x * torch.sigmoid(gate)
    c = 2 * x * torch.sigmoid(x) * x
    d = x.sigmoid().log()
    return a, b, c, d, torch.log(x + eps), torch.exp(x) - 2

# --- look-alike 2
import torch


def g(x: torch.Tensor):
    return 0.5 * x * (1 + torch.tanh(x)), 0.5 * x * (1 + torch.erf(x / 2))
