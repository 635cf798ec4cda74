# FL041 (computed-twice): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def gated(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, dim=(-2, -1), keepdim=True)
    h = torch.tanh(x) * peak
    scale = torch.amax(x, dim=(-2, -1), keepdim=True)
    return h + scale * y

# --- example 2
import torch


def entropy_and_choice(x: torch.Tensor, w: torch.Tensor):
    p = torch.softmax(x @ w, dim=-1)
    entropy = -(p * torch.log(p)).sum(-1)
    choice = torch.softmax(x @ w, dim=-1).argmax(-1)
    return entropy, choice

# --- example 3
import torch


def mix(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    w = a.exp().sum() / (a.exp().sum() + b.exp().sum())
    return x * w

# --- example 4
import torch


def mutual_match(feats1: torch.Tensor, feats2: torch.Tensor):
    cossim = feats1 @ feats2.t()
    cossim_t = feats2 @ feats1.t()
    return cossim.amax(dim=1), cossim_t.amax(dim=1)

# --- look-alike 1
import torch


def f(x: torch.Tensor, flag: bool):
    a = x.sum(-1)
    x = x * 2
    b = x.sum(-1)
    if flag:
        c = x.mean()
    else:
        c = x.mean()
    d = torch.dropout(x, 0.1, True).sum() + torch.dropout(x, 0.1, True).sum()
    return a, b, c, d

# --- look-alike 2
import torch


class Stats:
    def step(self, x: torch.Tensor, opt):
        s = x.sum()
        x.mul_(2)
        t = x.sum()
        n = self.weight.norm()
        opt.step()
        m = self.weight.norm()
        e = torch.exp(x) / (torch.exp(x) + 1)
        return s, t, n, m, e

# --- look-alike 3
import torch


def f(xs: list, x: torch.Tensor, norm, flag: bool):
    a = [v.sum() for v in xs]
    b = [v.sum() for v in xs]
    h = norm(x) + norm(x)
    c = x.sum() if flag else 0
    d = x.sum() if flag else 1
    return a, b, h, c, d
