# FL047 (loop-invariant-work): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def decode(x: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for i in range(4):
        x = x + F.linear(memory + pos, w[i]).mean(1, keepdim=True)
    return x

# --- example 2
import torch


def decode(x: torch.Tensor, ref: torch.Tensor, w: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        scale = torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-6)
        x = torch.tanh((x * scale) @ w)
    return x

# --- example 3
import torch


def center(x: torch.Tensor, ref: torch.Tensor, norm: bool) -> torch.Tensor:
    for _ in range(4):
        if norm:
            x = torch.tanh(x - ref.mean(0, keepdim=True))
    return x

# --- look-alike 1
import torch


def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, n: int):
    for i in range(n):
        x = x * 2
        y = a[i] + b
        a.add_(1)
        c = a * b
        if i == 0:
            d = b.sum()
    while n > 0:
        b[0] = b[0] + 1
        e = b.exp()
        n -= 1
    return x, y, c, d, e

# --- look-alike 2
import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor, n: int):
        outs = []
        for layer in self.layers:
            v = m.transpose(0, 1)
            c = m.float()
            buf = torch.zeros(n)
            acc = m * 2
            acc[0] = 0
            noise = torch.randn_like(m) * 0.1
            self.step()
            s = self.scale * 2
            outs.append(layer(x, self.proj(m) + 1))
        return outs, v, c, buf, acc, noise, s

# --- look-alike 3
import torch


def g(xs: list, m: torch.Tensor, k: int):
    out = [x + m.exp() for x in xs]
    for x in xs:
        f = lambda: m.exp()
        yield x + m.exp()
    for x in xs:
        z = k * 2 + 1
    return out, f, z
