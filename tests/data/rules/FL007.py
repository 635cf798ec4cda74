# FL007 (redundant-copy): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def centered(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    c = h.clone()
    m = c.sum(-1, keepdim=True)
    return (c - m) * h

# --- example 2
import torch


def scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    target = h.detach().clone()
    z = torch.relu(target) @ w
    return z + target * h

# --- example 3
import torch


def col_energy(x: torch.Tensor) -> torch.Tensor:
    xt = x.t().contiguous()
    return (xt * xt).sum(-1)

# --- look-alike 1
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    old = a.clone()
    a.add_(1)
    return old * a


def g(a: torch.Tensor, i: int) -> torch.Tensor:
    b = a.clone()
    b[i] = 0
    return b * 2 + a

# --- look-alike 2
import torch


class Cache(torch.nn.Module):
    def forward(self, x: torch.Tensor, log) -> torch.Tensor:
        self.last = x.clone()
        kept = [x.detach().clone()]
        log(x.clone())
        h = torch.relu(x)
        return h.clone(), kept

# --- look-alike 3
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    xt = x.transpose(1, 2).contiguous()
    flat = xt.view(xt.shape[0], -1)
    h = torch.relu(x).contiguous()
    p = torch.softmax(x.transpose(1, 2).contiguous(), -1)
    return flat * 2, h.sum(-1), p * 2

# --- look-alike 4
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    row = y[0]
    row.zero_()
    z = x.clone(memory_format=torch.channels_last)
    return y * 2, z + 1

# --- a returned copy of a made value updated in place by +=
import torch


def predict(h: torch.Tensor, coefs: torch.Tensor) -> torch.Tensor:
    p = torch.matmul(h.permute(1, 2, 0), coefs)
    p = p.permute(2, 0, 1)
    p += h
    return p.contiguous().type_as(h)

# --- a returned copy of a torch.nn module's output
import torch


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).transpose(1, 2).contiguous()

# --- copies of values no name holds: a clone written in place, a contiguous copy of a conv output filled in place
import torch
import torch.nn.functional as F


def gated(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x @ w).clone()
    y[:, 0] = 0
    return y


def conv_layer(h: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = F.conv1d(h.permute(0, 2, 1).contiguous(), w, padding=1).permute(0, 2, 1).contiguous()
    out.masked_fill_((mask < 0).unsqueeze(-1).expand(out.size()), 0)
    return residual + F.gelu(out)

# --- look-alike: copies of values no name holds that are still needed (an expanded view written, a view)
import torch
import torch.nn.functional as F


def positions(n: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    ids = torch.arange(n).expand(3, -1).clone()
    ids[0] = 0
    out = F.conv1d(x, w).permute(0, 2, 1).contiguous()
    out.masked_fill_(out > 0, 0)
    return ids, out.view(-1)
