# FL050 (elementwise-on-expanded): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def fill(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = lengths.unsqueeze(-1).expand(-1, -1, x.size(-1)).gt(0)
    return x.masked_fill(mask, -1e4)

# --- example 2
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, padding: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    b, h, k, _ = q.shape
    key_padding_mask = (padding > 0).view(b, 1, 1, k).expand(b, h, k, k)
    attn_mask = (causal > 0).view(1, 1, k, k).expand(b, h, k, k)
    final_mask = torch.logical_or(attn_mask, key_padding_mask)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=final_mask)

# --- example 3
import torch


def positions(x: torch.Tensor, offset: int = 2) -> torch.Tensor:
    return torch.arange(x.size(1)).expand_as(x) + offset

# --- look-alike 1
import torch


def scaled(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale.expand_as(x)


def where(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask[:, None].expand(-1, x.size(1)), x, 0.0)


def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    n, m = a.size(0), b.size(0)
    return a[:, None].expand(n, m) < b[None, :].expand(n, m)


def copied(a: torch.Tensor, n: int) -> torch.Tensor:
    return a.unsqueeze(0).expand(n, -1).contiguous() * 2


def gathered(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def unknown(a: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
    return a.expand(n, -1, -1) > b
