# FL004 (host-sync-in-tensor-work): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = 0.0
    for i in range(4):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total

# --- example 2
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    if (a > 3).any():
        a = a.clamp(max=3)
    return torch.relu(a) * y

# --- example 3
import torch


def decode_step(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1).tolist())
    return found

# --- example 4
import torch


def train_step(x: torch.Tensor, y: torch.Tensor):
    arrays = []
    for i in range(3):
        h = torch.tanh(x * i)
        arrays.append(h.detach().cpu().to(torch.double).numpy())
    return y * 3, arrays

# --- example 5
import torch


def run(x: torch.Tensor, layers: list) -> torch.Tensor:
    for w in layers:
        x = torch.tanh(x @ w)
        print("norm", x.norm())
        while float(x.abs().amax()) > 1e3:
            x = x * 0.5
    return x

# --- look-alike 1
import torch


def loss(x: torch.Tensor, y: torch.Tensor) -> float:
    d = torch.tanh(x) - y
    value = (d * d).mean()
    return value.item()

# --- look-alike 2
import torch


def stats(x: torch.Tensor) -> dict:
    h = torch.relu(x * 2)
    out = h.sum(-1)
    print("done", out.mean())
    return {"mean": float(out.mean()), "peaks": out.tolist()}

# --- look-alike 3
import numpy as np
import torch


def f(arr: np.ndarray, x: torch.Tensor, n: int, scale):
    y = x * 2
    total = arr.sum().item()
    bins = arr.tolist()
    k = int(n * 0.5)
    s = float(scale)
    if n > 3:
        y = y + 1
    return y * total + k + s + len(bins)

# --- look-alike 4
import torch


def forward(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    h = torch.relu(x)
    print(h.shape, h.dtype)
    if mask is not None and x.dim() == 3:
        h = h * mask
    n = int(h.size(0))
    return h[:n] + 1

# --- look-alike 5
import torch


def train(x: torch.Tensor, steps: int) -> torch.Tensor:
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 0.9 + 0.1)
    print("final", h.mean().item())
    return h

# --- look-alike 6
import torch


def check(x: torch.Tensor, limit: float) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if h.shape[0] > 8:
        raise ValueError(f"too many rows: {h.amax(-1).tolist()} above {limit}")
    assert h.dim() == 2, f"expected a matrix, got one summing to {h.sum().item()}"
    return h + 1

# --- look-alike 7
import warnings

import torch


def clean(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if torch.isnan(h).any():
        warnings.warn("nan in the input")
        h = torch.nan_to_num(h)
    out = torch.zeros(int(idx.max()) + 1, h.shape[-1])
    out = out.index_add(0, idx, h)
    for _ in range(10):
        out = out * 0.5
        if (out.abs() < 1).all():
            break
    return out + 1

# --- look-alike 8
import torch


def report(x: torch.Tensor) -> list:
    probs = torch.softmax(x, -1)
    rows = []
    for row in probs:
        rows.append(row.max().item())
    return rows
