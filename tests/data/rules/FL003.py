# FL003 (kept-alive-across-compute): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    g = a * b
    return s + g

# --- example 2
import torch


def project(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    a = torch.tanh(x)
    h = y @ w
    gate = torch.sigmoid(a) * 2  # returned: written anyway
    return h, gate

# --- example 3
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def forward(self, hidden, context, w_in, w_out):
        act = F.silu(hidden)
        scores = F.linear(context, w_in)
        gated = act * 0.5
        return scores + F.linear(gated, w_out)

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = x * 2
    h = a @ w
    out = h + a
    return out

# --- look-alike 2
import torch


def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = x * 2
    h = a @ w
    b = a * y
    return h + b

# --- look-alike 3
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = a.sum(-1, keepdim=True)
    g = a * b
    return s + g + a

# --- look-alike 4
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    s = a.sum(-1, keepdim=True)
    b = y + s
    g = a * b
    return g

# --- look-alike 5
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    s = x.sum(-1)
    g = x * y
    return s, g

# --- look-alike 6
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    g = a * b
    print(s.item())
    return s, g

# --- look-alike 7
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum()
    a.mul_(3)
    g = a * b
    return s, g

# --- look-alike 8
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum()
    s.backward()
    g = a * b
    return s, g

# --- look-alike 9
import torch


def f(x: torch.Tensor, y: torch.Tensor, flag: bool):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    if flag:
        s = s * 2
    g = a * b
    return s + g

# --- look-alike 10
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = a.clone().sum(-1, keepdim=True)
    g = a * b
    return s + g

# --- look-alike 11
import numpy as np
import torch


def f(x: np.ndarray, y: np.ndarray):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1)
    g = a * b
    return s, g
