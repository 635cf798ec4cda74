# FL008 (reduce-before-compute): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def centered_scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    return h + a.sum(-1, keepdim=True)

# --- example 2
import torch
import torch.nn.functional as F


def gated(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = F.gelu(x * 2)
    h = F.linear(a, w)
    gate = torch.softmax(a, -1)
    return h * gate

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    b = torch.tanh(x) * 2
    return h + h.sum(-1, keepdim=True) + b.amax(-1, keepdim=True)

# --- look-alike 2
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    s = x.sum(-1)
    return h, s

# --- look-alike 3
import torch


def f(x: torch.Tensor, w: torch.Tensor, flag: bool) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    if flag:
        h = h * 2
    return h + a.sum(-1, keepdim=True)


def g(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    a.mul_(2)
    return h + a.sum(-1, keepdim=True)
