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
