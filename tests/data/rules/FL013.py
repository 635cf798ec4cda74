# FL013 (scalar-fused-op): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def momentum_step(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float) -> torch.Tensor:
    buf = buf * 0.9 + grad
    return p - lr * buf

# --- example 2
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return x * scale * 0.5 + shift

# --- example 3
import torch


def adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    denom = v.abs().sqrt() + 1e-8
    return m / denom * -0.001 + p

# --- example 4
import torch


def mix(x: torch.Tensor, y: torch.Tensor, w_x: torch.Tensor, w_y: torch.Tensor) -> torch.Tensor:
    return x * w_x + y * w_y

# --- example 5
import torch


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

# --- look-alike 1
import torch


def mix(x: torch.Tensor, y: torch.Tensor, start, end):
    x += 0.5 * y
    return x * y + 1.0, start + (end - start) * x

# --- look-alike 2
import torch
import torch.nn.functional as F


def total_loss(logits: torch.Tensor, target: torch.Tensor, z: torch.Tensor, weight):
    loss = F.cross_entropy(logits, target)
    aux = z.pow(2).mean()
    return loss + weight * aux

# --- look-alike 3
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.bmm(a, b) * 0.5 + c, c - a * b
