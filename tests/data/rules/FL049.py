# FL049 (replicated-for-broadcast): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2)

# --- example 2
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if k.size(1) != q.size(1):
            q_per_kv = q.size(1) // k.size(1)
            k = torch.repeat_interleave(k, q_per_kv, dim=1)
            v = torch.repeat_interleave(v, q_per_kv, dim=1)
        return self.attend(q, k, v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, scale=0.25)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return Attention()(q, k, v)

# --- example 3
import torch


def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    f = freqs.unsqueeze(2).expand(-1, -1, 4, -1).flatten(1, 2)
    return x * f

# --- example 4
import torch


def scaled(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return x * g.repeat(4)

# --- look-alike 1
import torch
import torch.nn.functional as F


def read_again(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    y = F.scaled_dot_product_attention(q, k, v)
    return y + k.sum()


def value_only(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    v = v.repeat_interleave(4, dim=1)
    return F.scaled_dot_product_attention(q, k, v)


def over_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=2)
    v = v.repeat_interleave(4, dim=2)
    return F.scaled_dot_product_attention(q, k, v)


def tiled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat(1, 4, 1, 1)
    v = v.repeat(1, 4, 1, 1)
    return F.scaled_dot_product_attention(q, k, v)


def counts_differ(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(2, dim=1)
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

# --- look-alike 2
import torch


def kept_apart(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1, -1).flatten(2, 3)
    return x * g


def matmul(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1).flatten(0, 1)
    return x @ g


def returned(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1).flatten(0, 1)
    return g, x * g


def gathered(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    index = idx.repeat(1, 4)
    return torch.gather(x, 1, index) * 2
