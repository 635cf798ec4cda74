# FL011 (matmul-bias): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w.t() + b)

# --- example 2
import torch


def update(a: torch.Tensor, c: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = torch.mm(a, c)
    h = h + bias
    return h.tanh()

# --- example 3
import torch
import torch.nn.functional as F


def head(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    logits = torch.matmul(x, w.T)
    logits += b
    return F.log_softmax(logits, -1)

# --- example 4
import torch


def codebook_distances(flat: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    squares = (flat**2).sum(dim=1, keepdim=True) + (codebook**2).sum(dim=1)
    return squares - 2 * torch.mm(flat, codebook.t())

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = x @ w.t()
    y = h + b
    return y, h


def g(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor):
    return x @ w.t() + 1.0, x @ v + v

# --- look-alike 2
import torch


def f(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    scores = q @ k.mT + mask
    h = torch.matmul(a, b)
    return scores, h + mask


def g(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = x @ w.t()
    x = x * 2
    return h + b + x
