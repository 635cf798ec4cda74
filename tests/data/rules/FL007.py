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

# --- channels-last tokens permuted channels-first, read by a conv layer; a buffer's clone read as an index
import torch
from torch import nn
from ultralytics.nn.modules.conv import Conv


class AreaAttention(nn.Module):
    def __init__(self, dim: int, n: int):
        super().__init__()
        self.pe = Conv(dim, dim, 7, 1, 3, g=dim, act=False)
        self.register_buffer("relative_position_index", torch.arange(n * n).view(n, n))

    def forward(self, v: torch.Tensor, table: torch.Tensor, b: int, h: int, c: int) -> torch.Tensor:
        n = h * h
        bias = table[self.relative_position_index.clone()[:n, :n].reshape(-1)].reshape(n, n, -1)
        v = v.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        return self.pe(v), bias

# --- stacks only summed or averaged over the dimension they make
import torch
import torch.nn.functional as F


def fuse(xs: list[torch.Tensor], a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    resized = [F.interpolate(x, size=xs[-1].shape[2:]) for x in xs[:-1]]
    total = torch.sum(torch.stack(resized + xs[-1:]), dim=0)
    return total + torch.stack([a, b * 2], dim=-1).mean(-1)

# --- look-alike: a conv block's input permuted another way; a stack kept; a buffer's clone kept
import torch
from torch import nn
from ultralytics.nn.modules.conv import Conv


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.pe = Conv(dim, dim, 3)
        self.register_buffer("index", torch.arange(dim))

    def forward(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = x.transpose(2, 3).contiguous()
        s = torch.stack([a, b])
        kept = self.index.clone()
        return self.pe(y), s.sum(0) + s, x[..., kept]

# --- repeats of dimensions of size 1 only read (an expand would do); look-alike: a repeat written in place
import torch


def padded(hidden: torch.Tensor, mask: torch.Tensor, n: int, lengths: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).repeat(1, 1, hidden.shape[2])
    valid = torch.arange(n)[None].repeat(lengths.shape[0], 1) < lengths[:, None]
    kept = mask.unsqueeze(-1).repeat(1, 1, hidden.shape[2])
    kept[:, 0] = 0
    return hidden * m * kept, valid

# --- a strided view made contiguous for a same-file block whose forward reads it with ops that take
# any layout (a layer norm, a linear layer, the residual add); look-alikes: blocks that view their
# input, hand it back through dropout, or only normalize it (which copies a strided input itself)
import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.fc(self.norm(x))
        return shortcut + x


class Heads(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], -1)


class Passed(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x)


class Normed(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class Encoder(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.block = Residual(dim)
        self.heads = Heads()
        self.passed = Passed()
        self.normed = Normed(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.transpose(1, 2).contiguous()
        h = self.block(h)
        flat = self.heads(x.transpose(1, 2).contiguous())
        kept = self.passed(x.transpose(1, 2).contiguous())
        normed = self.normed(x.transpose(1, 2).contiguous())
        return h, flat, kept, normed

# --- channels-last tokens permuted channels-first for the modules of a ModuleList, each a 1x1
# convolution that reads that layout as it is (the loop's own variable rebound by the copy);
# and a copy that a loop over the blocks rebinds (a model's stack of layers is never empty)
import torch
from torch import nn


class Reassemble(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.projection = nn.Conv2d(dim, dim, 1)

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        return self.projection(hidden_state)


class Stage(nn.Module):
    def __init__(self, dim: int, n: int):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n):
            self.layers.append(Reassemble(dim))
        self.blocks = nn.ModuleList([Residual(dim) for _ in range(n)])

    def forward(self, hidden_states: list, height: int, width: int) -> list:
        out = []
        for i, hidden_state in enumerate(hidden_states):
            batch, _, channels = hidden_state.shape
            hidden_state = hidden_state.reshape(batch, height, width, channels)
            hidden_state = hidden_state.permute(0, 3, 1, 2).contiguous()
            hidden_state = self.layers[i](hidden_state)
            out.append(hidden_state)
        return out

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2).contiguous()
        for block in self.blocks:
            x = block(x)
        return x

# --- a parameter rebound to a value the function made (a linear layer's output), its unpadded
# slice returned: the caller gets a tensor nobody else holds either way
import torch
import torch.nn.functional as F
from torch import nn


class Windows(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def part(self, x: torch.Tensor, pad: int) -> torch.Tensor:
        b, h, w, c = x.shape
        x = F.pad(x, (0, 0, 0, pad, 0, pad))
        x = self.fc(x)
        if pad > 0:
            x = x[:, :h, :w, :].contiguous()
        return x

# --- copies written in place at once (the out-of-place op makes the tensor); look-alikes: the op
# reads the copy, fills it with a tensor, or has no out-of-place form that keeps the dtype
import torch


def decoded(mel: torch.Tensor, mask: torch.Tensor, parents: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    masked = mel.clone().masked_fill_(mask, 0.0)
    merged = parents.clone()
    merged.scatter_reduce_(0, index, mel, reduce="amin")
    cleared = mel.detach().clone()
    cleared.zero_()
    kept = mel.clone()
    kept.masked_fill_(kept > 0, 0)
    filled = mel.clone()
    filled.fill_(mask)
    return masked, merged, cleared, kept, filled, mel.clone().add_(mask)
