# FL042 (cat-grown-in-loop): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def column_sums(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x
    out = torch.tanh(h @ w)
    for _ in range(5):
        h = torch.tanh(h @ w)
        out = torch.cat((out, h.sum(-1, keepdim=True)), dim=-1)
    return out

# --- example 2
import torch


def stack_rows(x: torch.Tensor, w: torch.Tensor, keep: list) -> torch.Tensor:
    rows = x[:0]
    for flag in keep:
        x = torch.tanh(x @ w)
        if flag:
            rows = torch.cat([x, rows], dim=0)
    return rows

# --- look-alike 1
import torch


def decode(net, seq: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        logits = net(seq)
        seq = torch.cat((seq, logits[:, -1:].argmax(-1)), dim=-1)
    out = seq[:, :0]
    while out.shape[-1] < steps:
        out = torch.cat((out, seq[:, :1]), dim=-1)
    return seq, out

# --- look-alike 2
import numpy as np
import torch


def f(xs: list, a: np.ndarray) -> torch.Tensor:
    acc = xs[0]
    for x in xs:
        if acc.shape[0] > 4:
            break
        acc = torch.cat((acc, x))
    host = xs[0].cpu()
    for x in xs:
        host = torch.cat((host, x.cpu()))
    both = xs[0]
    for x in xs:
        both = torch.cat((both, both))
    for x in xs:
        a = np.concatenate((a, x.numpy()))
    return acc, host, both, [torch.cat((x, x)) for x in xs], a
