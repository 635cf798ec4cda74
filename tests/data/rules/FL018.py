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

# --- example 3
import torch
import torch.nn.functional as F


def mish_then_hardswish(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x * F.softplus(x).tanh()
    h = h @ w
    return h * F.hardtanh(h + 3, 0.0, 6.0) / 6.0

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

# --- look-alike 3: Hard Mish (no op computes it), an in-place chain, another tensor's clamp
import torch
import torch.nn.functional as F


def h(x: torch.Tensor, y: torch.Tensor):
    hard_mish = 0.5 * x * (x + 2).clamp(min=0, max=2)
    in_place = x.add_(3.).clamp_(0., 6.).div_(6.)
    return hard_mish, in_place, y * F.relu6(x + 3) / 6
