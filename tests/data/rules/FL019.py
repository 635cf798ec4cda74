# FL019 (unit-offset-scale): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def adaptive_layer_norm(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    normed = F.layer_norm(x, x.shape[-1:])
    return normed * (gamma + 1.0)

# --- example 2
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, None])

# --- look-alike 1
import torch


def f(x: torch.Tensor, gamma: torch.Tensor, shift: torch.Tensor, eps: float):
    a = x * (1 + eps)
    b = x * 0.5 * (gamma + 1.0)
    c = x * (1 + gamma) + shift
    return a, b, c

# --- the residual added back to the product
import torch


def excite(x: torch.Tensor, gate: torch.Tensor, residual: bool) -> torch.Tensor:
    result = x * gate
    if residual:
        result += x
    return result

# --- added back after a read, or to another product: not flagged
import torch


def h(x: torch.Tensor, gate: torch.Tensor, y: torch.Tensor):
    result = x * gate
    total = result.sum()
    result += x
    other = y * gate
    other = other + x
    return result, total, other
