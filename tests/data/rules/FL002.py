# FL002 (clone-before-compute): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    out = t3 + a * b
    return out

# --- example 2
import torch
import torch.nn.functional as F


class GatedNorm(torch.nn.Module):
    def forward(self, hidden, gate_in):
        h = F.gelu(hidden)
        g = torch.sigmoid(gate_in)
        normed = F.layer_norm(h.clone(), (128,))
        return normed + h * g  # noqa: E501

# --- example 3
import torch


def norm_gap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    total = a.detach().clone().sum(-1, keepdim=True)
    return total - a * b

# --- example 4
import torch


def scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    b = y * 0.5
    peak = a.contiguous().amax(-1, keepdim=True)
    return a * b / peak

# --- look-alike 1
import torch


def scores(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = a.clone() @ w
    return h + a * 2

# --- look-alike 2
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = x.t().contiguous().sum(-1)
    z = y.contiguous().sum(-1)
    return s + x.t() * 2 + z + y

# --- look-alike 3
import torch


def f(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    old = p.detach().clone().sum()
    p.sub_(g)
    return old + p * 2


def g(a: torch.Tensor) -> torch.Tensor:
    loss = a.detach().clone().sum()
    (a * 2).sum().backward()
    return loss + a * 2

# --- look-alike 4
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    t = a.clone().sum(-1)
    a.add_(1)
    return t + a

# --- look-alike 5
import torch


def f(a: torch.Tensor, i: int) -> torch.Tensor:
    t = a.clone().sum()
    a[i] = 0
    return t + a

# --- look-alike 6
import torch


def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    t = torch.matmul(a.clone(), b)
    torch.mul(b, 2, out=a)
    return t + a

# --- look-alike 7
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    loss = a.clone().sum()
    loss.backward()
    return loss + a

# --- look-alike 8
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    return a.clone().sum(-1)

# --- look-alike 9
import numpy as np
import torch


def f(config: "Config", arr: np.ndarray):
    total = config.clone().sum()
    s = arr.copy().sum()
    return total + config.scale + s + arr
