# FL048 (sum-started-from-zeros): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def summed(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(xs[0])
    for x in xs:
        acc = acc + torch.tanh(x @ w)
    return acc

# --- example 2
import torch


def residual_codes(x: torch.Tensor, codebooks: torch.Tensor) -> torch.Tensor:
    residual = x
    out = x.new_zeros(x.shape)
    partial = []
    for cb in codebooks:
        quantized = cb[(residual @ cb.t()).argmax(dim=-1)]
        residual = residual - quantized
        out += quantized
        partial.append(out.sum())
    return out, torch.stack(partial)

# --- look-alike 1
import torch


def f(xs: list, w: torch.Tensor, keep: list):
    h = torch.zeros_like(w)
    for x in xs:
        h = torch.tanh(h @ w + x)
        h = h + x
    acc = torch.zeros_like(w)
    for x, k in zip(xs, keep):
        if k:
            acc = acc + x
    tot = torch.zeros_like(w)
    for x in xs:
        if x is None:
            continue
        tot += x
    n = torch.zeros((), dtype=torch.int64)
    for x in xs:
        n += x.numel()
    return h, acc, tot, n

# --- look-alike 2
import numpy as np
import torch


def g(xs: list, a: np.ndarray):
    wide = torch.zeros(4, dtype=torch.float64)
    for x in xs:
        wide += x
    s = np.zeros(3)
    for x in xs:
        s += x
    p = 0.0
    for x in xs:
        p = p + x
    m = torch.zeros(4)
    while m.sum() < 10:
        m = m + xs[0]
    q = torch.zeros(4)
    q[0] = 1.0
    for x in xs:
        q = q * 2 + x
        q += x
    return wide, s, p, m, q
