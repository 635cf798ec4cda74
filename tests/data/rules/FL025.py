# FL025 (min-max-one-output): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def normalise_peak(x: torch.Tensor) -> torch.Tensor:
    return x / x.abs().max(dim=-1, keepdim=True)[0]

# --- example 2
import torch


def nearest_code(x: torch.Tensor, codebook: torch.Tensor):
    dist = torch.cdist(x, codebook)
    indices = torch.max(-dist, dim=1)[1]
    best, _ = dist.min(dim=1)
    return indices, best

# --- look-alike 1
import torch


def f(x: torch.Tensor, other: torch.Tensor, items: list):
    a = torch.max(x, other)[0]
    b = x.max()
    values, indices = x.max(dim=1)
    top, _ = x.min(dim=0)
    c = items.max(1)[0]
    return a, b, values, indices, top, _, c, max(items[0], items[1])

# --- real-code spellings: a codebook's nearest code through a negated distance (in a call), the
# index picked by `.indices`, bounding boxes through unpacking, a peak over a dim held by a
# parameter, and a pooling helper's keepdim; look-alikes: a NumPy array's max, the name kept
# being the dropped one read later, both outputs of one call used
import numpy as np
import torch
from einops import rearrange


def quantize(latents: torch.Tensor, codebook: torch.Tensor, masks: torch.Tensor, dim: int, axis):
    dist = latents.pow(2).sum(1, keepdim=True) - 2 * latents @ codebook.t() + codebook.pow(2).sum(1, keepdim=True).t()
    indices = rearrange((-dist).max(1)[1], "(b t) -> b t", b=latents.size(0))
    embed_ind = dist.max(dim=-1).indices
    bottom_edges, _ = torch.max(masks, dim=-1)
    peak = latents.abs().max(dim)[0]
    pooled = torch.min(latents, axis, True).values
    return indices, embed_ind, bottom_edges, peak, pooled


def look_alikes(x: torch.Tensor, table: np.ndarray):
    rows = table.max(1)[0]
    scores, index = torch.max(x, dim=-1)
    best = x.min(dim=0)
    _dd, nn = torch.min(x, dim=0)
    return rows, scores, index, best.values, best.indices, _dd + nn
