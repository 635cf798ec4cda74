# FL024 (copy-updated-by-slices): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def normalize_coords(coords_input: torch.Tensor, width: int, height: int) -> torch.Tensor:
    coords = coords_input.clone()
    coords[:, :, 0] = coords[:, :, 0] / width
    coords[:, :, 1] = coords[:, :, 1] / height
    return coords

# --- example 2
import torch


def decode(kpts: torch.Tensor, anchors: torch.Tensor, strides: torch.Tensor, ndim: int) -> torch.Tensor:
    y = kpts.clone()
    if ndim == 3:
        y[:, 2::ndim] = y[:, 2::ndim].sigmoid()
    y[:, 0::ndim] = (y[:, 0::ndim] * 2.0 + anchors[0]) * strides
    y[:, 1::ndim] = (y[:, 1::ndim] * 2.0 + anchors[1]) * strides
    return y

# --- example 3
import torch


def hinge_margin(preds: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    target = labels > 0
    margin = torch.zeros_like(preds)
    margin[target] = preds[target]
    margin[~target] = -preds[~target]
    return margin

# --- example 4
import torch


def zero_nans(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[torch.isnan(y)] = 0.0
    return y

# --- example 5
import torch


def polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    y = torch.zeros(magnitude.shape + (2,), dtype=magnitude.dtype)
    y[..., 0] = magnitude * torch.cos(angle)
    y[..., 1] = magnitude * torch.sin(angle)
    return y

# --- look-alike 1
import torch


def f(x: torch.Tensor, mask: torch.Tensor, w: float):
    a = x.clone()
    a[:, 0] = a[:, 0] / w
    b = x.clone()
    b[:, 0] = 0
    b[:, 1] = x[:, 0]
    c = x.clone()
    c[mask] = c[mask] * 2
    c[:, 1] = c[:, 1] * 2
    d = x.clone()
    d[:, 0] = d[:, 0] * w
    total = d.sum()
    d[:, 1] = d[:, 1] * w
    return a, b, c, d, total

# --- look-alike 2
import torch


def f(r: torch.Tensor, c: torch.Tensor, s: torch.Tensor, v: torch.Tensor, idx: torch.Tensor):
    pe = torch.zeros(r.shape[0], c.shape[0], 3)
    pe[:, :, 1] = r.unsqueeze(1)
    pe[:, :, 2] = c.unsqueeze(0)
    u = torch.zeros((s.shape[0], 2))
    u[:, 0] = s // 4
    u[:, 1] = s - u[:, 0] * 4
    keep = r > 0
    w = torch.zeros(v.size(0))
    w[keep] = torch.norm(v[keep], dim=-1)
    g = torch.zeros_like(r)
    g[idx] = r[idx]
    h = torch.zeros(r.shape + (2,), requires_grad=True)
    h[..., 0] = r
    h[..., 1] = c
    return pe, u, w, g, h

# --- look-alike 3
import torch


class Table(torch.nn.Module):
    def __init__(self, pos: torch.Tensor, freq: torch.Tensor) -> None:
        super().__init__()
        pe = torch.zeros(pos.shape + (2,))
        pe[..., 0] = torch.sin(pos * freq)
        pe[..., 1] = torch.cos(pos * freq)
        self.register_buffer("pe", pe)
