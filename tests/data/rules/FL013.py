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

# --- look-alike 1
import torch


class Scale(torch.nn.Module):
    def mix(self, x: torch.Tensor, y: torch.Tensor, gamma):
        x += 0.5 * y
        return x + self.gamma * y + gamma * y, x * y + 1.0

# --- look-alike 2
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.bmm(a, b) * 0.5 + c, c - a * b
