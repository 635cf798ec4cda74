# FL015 (fill-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def pad_column(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    column = torch.ones((tokens.shape[0], 1), dtype=torch.long) * pad_id
    return torch.cat([tokens, column], dim=1)

# --- example 2
import torch


def signs(x: torch.Tensor) -> torch.Tensor:
    labels = -torch.ones(x.shape[0], x.shape[0])
    return x * labels

# --- example 3
import torch


def position_encoding(gaussian: torch.Tensor, h: int, w: int) -> torch.Tensor:
    grid = torch.ones((h, w), dtype=torch.float32)
    y_embed = grid.cumsum(dim=0) - 0.5
    x_embed = grid.cumsum(dim=1) - 0.5
    coords = torch.stack([x_embed / w, y_embed / h], dim=-1)
    return coords @ gaussian

# --- example 4
import torch


def object_scores(iou_pred: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    scores = 10.0 * iou_pred.new_ones(iou_pred.shape[0], 1)
    return torch.cat([scores, logits], dim=1)

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    a = torch.ones_like(x) * w
    b = torch.ones(4, 4) * w
    c = torch.ones(4, 4) + 1
    return a, b, c

# --- look-alike 2
import torch
from torch import nn


class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

# --- look-alike 3: ones summed and also read as they are; not read (the rule reads a function's own body
# only, not its nested blocks): ones summed inside an `if`
import torch


def kept(h: int, w: int):
    grid = torch.ones(h, w)
    return grid.cumsum(0), grid


def nested(h: int, flag: bool):
    if flag:
        ones = torch.ones(h)
        return ones.cumsum(0)
    return None
