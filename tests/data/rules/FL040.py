# FL040 (loop-over-slices): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def gate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in range(x.shape[1]):
        out[:, i] = torch.sigmoid(x[:, i] * w + b)
    return out

# --- example 2
import torch


def project(tokens: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.stack([tokens[:, i] @ w for i in range(tokens.shape[1])], dim=1)

# --- example 3
import torch
import torch.nn.functional as F


def blur(inputs: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    return torch.cat(
        [F.conv2d(inputs[:, c].unsqueeze(1), kernel) for c in range(inputs.shape[1])], dim=1
    )

# --- example 4
import torch
import torch.nn.functional as F


def pooled(frames: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    outs = []
    for frame in frames.unbind(1):
        h = F.gelu(F.linear(frame, w, b))
        outs.append(h.mean(-1))
    return torch.stack(outs, dim=1)

# --- example 5
import torch
from torch import nn


class TokenHeads(nn.Module):
    def __init__(self, w: torch.Tensor, b: torch.Tensor):
        super().__init__()
        self.n = w.shape[0]
        self.heads = nn.ModuleList([nn.Linear(w.shape[1], w.shape[2]) for _ in range(self.n)])
        with torch.no_grad():
            for head, wi, bi in zip(self.heads, w, b):
                head.weight.copy_(wi.t())
                head.bias.copy_(bi)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        outs = []
        for i in range(self.n):
            outs.append(torch.relu(self.heads[i](tokens[:, i])))
        return torch.stack(outs, dim=1)

# --- look-alike 1
import torch


def f(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, ws: list, layers, step):
    for i in range(x.shape[1]):
        h = torch.tanh(x[:, i] @ w + h)
    acc = 0
    for i in range(x.shape[1]):
        acc += x[:, i] * w
    y = torch.empty_like(x)
    for i in range(1, x.shape[1]):
        y[:, i] = y[:, i - 1] * 0.9 + x[:, i]
    a = torch.stack([step(x[:, i]) for i in range(x.shape[1])], 1)
    b = torch.stack([x[:, i] @ ws[i] for i in range(len(ws))], 1)
    c = torch.stack([layers[i](x[:, i]) for i in range(len(layers))], 1)
    outs = []
    for i in range(x.shape[1]):
        if x[:, i].sum().item() > 0:
            outs.append(x[:, i] * 2)
    d = torch.stack([x[:, i] for i in range(x.shape[1])], -1)
    e = torch.stack([x[:, i] * i for i in range(x.shape[1])], 1)
    return h, acc, y, a, b, c, torch.cat(outs), d, e

# --- look-alike 2
import torch
import torch.nn.functional as F


def g(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor):
    outs = []
    for t in x.unbind(1):
        outs.append(F.batch_norm(t, rm, rv, training=True))
    ys = []
    for t in x.unbind(1):
        ys.append(t * 2 + (ys[-1] if ys else 0))
    return torch.stack(outs, 1), torch.stack(ys, 1)
