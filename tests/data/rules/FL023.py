# FL023 (host-scalar-tensor): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def correlation(fmap1: torch.Tensor, fmap2: torch.Tensor) -> torch.Tensor:
    batch, channels, n = fmap1.shape
    corr = fmap1.transpose(1, 2) @ fmap2
    return corr / torch.sqrt(torch.tensor(channels))

# --- example 2
import math

import torch


def timestep_embedding(t: torch.Tensor, half: int) -> torch.Tensor:
    exponent = -torch.tensor(10000.0).log() * torch.arange(half, dtype=torch.float32)
    return t[:, None] * torch.exp(exponent / half)[None, :]

# --- look-alike 1
import torch


def f(x: torch.Tensor, d: int, sizes: list, t: torch.Tensor):
    a = x / torch.tensor(d)
    scale = torch.sqrt(torch.tensor(d))
    b = x * torch.sqrt(torch.tensor(sizes))
    c = x * torch.exp(torch.tensor(t))
    return a, scale, b, c

# --- look-alike 2
import torch
from torch import nn


class Contrastive(nn.Module):
    def __init__(self):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.ones([]) * torch.tensor(1 / 0.07).log())

# --- read back on the host: rounding of a host number, through a cast or .item()
import torch


def frames(x: torch.Tensor, length: int, rate: float, hop: int) -> torch.Tensor:
    n = int(torch.ceil(torch.tensor(length * rate)))
    m = torch.floor(torch.as_tensor(length / hop)).long()
    scale = torch.tensor(float(hop)).sqrt().item()
    return torch.tanh(x[:, :n]) * scale, m

# --- look-alike: rounding of a tensor, and rounding kept as a tensor operand
import torch


def quantize(x: torch.Tensor, lengths: torch.Tensor, steps: int) -> torch.Tensor:
    n = int(torch.ceil(lengths.float().mean()))
    q = torch.ceil(torch.tensor(steps * 0.5)) + x
    return q[:, :n]
