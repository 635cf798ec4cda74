# FL014 (scale-smaller-factor): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def scale_norm(x: torch.Tensor, g: torch.Tensor, dim: int) -> torch.Tensor:
    return F.normalize(x, dim=-1) * dim**0.5 * g[None, None, :]

# --- example 2
import torch


def timestep_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    emb = scale * emb
    return torch.cat([emb.sin(), emb.cos()], dim=-1)

# --- look-alike 1
import torch


def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, g: torch.Tensor):
    a = x * 2.0 * y
    b = x * w * g[None, :]
    c = x[:, None] * 0.5
    return a, b, c

# --- look-alike 2
import torch


def f(t: torch.Tensor, freqs: torch.Tensor, scale: float):
    emb = t[:, None] * freqs[None, :]
    raw = emb.sum(-1)
    emb = emb * scale
    return emb, raw

# --- rescaled past a view that rebinds the product (fixed)
def flat_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    emb = emb.flatten(1)
    emb = scale * emb
    return torch.cat([emb.sin(), emb.cos()], dim=-1)

# --- scaled into another name, the factor computed in between (reported without a fix)
def renamed(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    half = dim // 2
    scaled = emb * half
    return scaled.sin()

# --- look-alike: the unscaled product is read again
def kept(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    scaled = emb * dim
    return scaled.sin() + emb

# --- a small tensor scale (a keepdim reduction's ratio, a per-channel gain)
import torch
from torch import nn


class ResponseNorm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.linspace(-1.0, 1.0, channels))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(-2, -1), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return self.gamma[None, :, None, None] * (x * nx)

# --- a matmul with a module's buffer, rescaled by the next statement
import math

import torch
from torch import nn


class RandomFourierEncoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("gaussian", torch.linspace(-0.5, 0.5, 128).reshape(2, 64))

    def forward(self, coords):
        coords = coords @ self.gaussian
        coords = 2 * math.pi * coords
        return torch.cat([coords.sin(), coords.cos()], dim=-1)

# --- a scale of a product of small tensors, a scale of unknown size: not flagged
import torch


def g(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, h: torch.Tensor):
    a = g.mean(-1, keepdim=True) * (g[None, :] * h[None, :])
    b = x * w * g.mean(-1, keepdim=True)
    c = x @ w
    c = c * 0.5
    return a, b, c

# --- a norm's output, scaled, then multiplied by a conditioned gain
import torch
import torch.nn.functional as F


def adaptive_rms_norm(x: torch.Tensor, condition: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    normed = F.normalize(x, dim=-1)
    gamma = condition @ w.t()
    return normed * scale * (gamma + 1.0)

# --- a low-rank adapter, a vocabulary head and a tied embedding scaled by a number: flagged
import torch
import torch.nn.functional as F
from torch import nn


class Heads(nn.Module):
    def __init__(self, dim: int, rank: int, config):
        super().__init__()
        self.lora_a = nn.Linear(dim, rank, bias=False)
        self.lora_b = nn.Linear(rank, dim, bias=False)
        self.dropout = nn.Dropout(0.1)
        self.lm_head = nn.Linear(dim, config.vocab_size, bias=False)
        self.emb = nn.Embedding(config.vocab_size, dim)
        self.config = config
        self.scaling = 16 / rank

    def adapter(self, x):
        lora_out = self.lora_a(self.dropout(x))
        return (self.config.alpha / self.config.rank) * self.lora_b(lora_out)

    def logits(self, h):
        logits = self.lm_head(h)
        logits *= self.config.logit_scale
        tied = F.linear(h, self.emb.weight) / self.scaling
        return logits, tied

    def softcapped(self, h):
        logits = self.lm_head(h)
        if self.config.final_logit_softcapping is not None:
            logits = logits / self.config.final_logit_softcapping
            logits = torch.tanh(logits) * self.config.final_logit_softcapping
        return logits

# --- look-alike: a Linear with a bias, an activation between, the logits cast first
class NotNarrow(nn.Module):
    def __init__(self, dim: int, config):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.down = nn.Linear(4 * dim, dim, bias=False)
        self.lm_head = nn.Linear(dim, config.vocab_size, bias=False)

    def forward(self, x):
        a = self.fc2(self.fc1(x)) * 0.5
        b = self.down(torch.relu(self.fc1(x))) * 0.5
        logits = self.lm_head(x)
        logits = logits.float() / 30.0
        return a, b, logits
