# FL012 (bmm-scale-add): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def biased_scores(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    scores = torch.bmm(q, k.transpose(1, 2)) * scale + bias
    return scores.softmax(-1)

# --- example 2
import torch


def mix(h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 0.9 * h + a.mm(b) / 10

# --- look-alike 1
import torch


def f(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, temperature: torch.Tensor):
    s = torch.bmm(q, k) * temperature + mask
    t = torch.matmul(q, k) * 0.5 + mask
    return s, t

# --- look-alike 2
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.mm(a, b) + c, c - torch.bmm(a, b) * 2, torch.bmm(a, b) * 2 + 1
