# FL028 (mask-multiply): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def cutoff_envelope(distances: torch.Tensor, cutoffs: torch.Tensor, cutoff: float) -> torch.Tensor:
    return cutoffs * (distances < cutoff).float()

# --- example 2
import torch


def mask_padding(out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    keep = torch.logical_not(padding).unsqueeze(-1).float()
    return out * keep

# --- look-alike 1
import numpy as np
import torch


def f(x: torch.Tensor, mask: torch.Tensor, weights, n: int):
    m = x > 0
    a = x * m
    b = x * (1 - mask)
    c = x * mask.float()
    keep = (~m).float()
    d = x * keep
    e = np.sum(weights * ~np.isnan(weights))
    g = (n > 1) * 2
    return a, b, c, d, keep, e, g
