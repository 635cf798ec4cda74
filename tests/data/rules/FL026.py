# FL026 (norm-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def edge_lengths(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (source - target).pow(2).sum(dim=-1).sqrt()

# --- example 2
import torch


def magnitude_and_unit(re: torch.Tensor, im: torch.Tensor, x: torch.Tensor):
    magnitude = torch.sqrt(re ** 2 + im ** 2)
    unit = x / torch.sqrt(torch.sum(x * x, dim=1, keepdim=True))
    return magnitude, unit

# --- look-alike 1
import math

import torch


def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, sigma: float):
    a = torch.sqrt((x ** 2).sum(-1) + 1e-6)
    b = x.pow(2).mean(-1).sqrt()
    c = torch.sqrt(x ** 2 + y ** 2 + z ** 2)
    d = torch.sqrt(x ** 2 + sigma ** 2)
    e = x.pow(2).sum(-1, dtype=torch.float64).sqrt()
    return a, b, c, d, e, math.sqrt(sigma ** 2 + 1)

# --- real-code spellings: a point-cloud distance through `** 0.5`, a spectrum's magnitude with an
# offset after the root, vectors scaled to unit length (`pow(2.0)`, a clamp after the root), a
# flow's endpoint error of two channels; look-alikes: a number's square under the root, a root
# of a mean
import torch


def spellings(pts: torch.Tensor, re: torch.Tensor, im: torch.Tensor, latents: torch.Tensor, flow: torch.Tensor,
              target: torch.Tensor, sigma: float, eps: float):
    lengths = torch.sum(pts ** 2, dim=1) ** 0.5
    magnitude = torch.sqrt(re ** 2 + im ** 2) + eps
    unit = latents / latents.pow(2.0).sum(dim=-1, keepdim=True).sqrt().clamp_min(eps)
    epe = ((flow[..., 0] - target[..., 0]) ** 2 + (flow[..., 1] - target[..., 1]) ** 2).sqrt()
    scale = torch.sqrt(sigma ** 2 + re ** 2)
    rms = torch.sqrt(torch.mean(re ** 2, dim=-1))
    return lengths, magnitude, unit, epe, scale, rms
