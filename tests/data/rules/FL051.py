# FL051 (split-reduction): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def energy(spec: torch.Tensor) -> torch.Tensor:
    return spec.square().sum(-1).sum(-1)

# --- example 2
import torch


def pooled(x: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x.amax(2, keepdim=True), 3, keepdim=True)
    return x - peak

# --- look-alike 1
import torch


def f(x: torch.Tensor, d: int):
    a = x.sum(d).sum(d)
    b = x.sum(1).sum(-1)
    c = x.sum(-1).mean()
    e = x.prod(1).prod(1)
    g = x.max(1)[0].max(1)[0]
    h = x.sum(1, keepdim=True).sum(1)
    k = x.sum(1, dtype=torch.int32).sum(1)
    return a, b, c, e, g, h, k
