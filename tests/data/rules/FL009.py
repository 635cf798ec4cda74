# FL009 (scale-after-matmul): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-1, -2)) * 0.125

# --- example 2
import math

import torch


def scores(q: torch.Tensor, k: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.einsum("b i d, b j d -> b i j", q, k) / math.sqrt(dim)

# --- look-alike 1
import torch


def f(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor):
    h = (x @ w) * 0.5
    s = (q @ k.transpose(-1, -2)) * bias
    return h, s

# --- look-alike 2
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    return torch.einsum("b n d, d e -> b n e", x, w) * 0.5

# --- the factor computed between the matmul and the rescale (reported without a fix)
import math

import torch


def perceiver_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    attention_scores = torch.matmul(queries, keys.transpose(-1, -2))
    batch_size, num_heads, seq_len, q_head_dim = queries.shape
    attention_scores = attention_scores / math.sqrt(q_head_dim)
    return attention_scores.softmax(-1)

# --- scaled into other names, the unscaled scores never read again (reported without a fix)
def layout_scores(q: torch.Tensor, k: torch.Tensor, lq: torch.Tensor, lk: torch.Tensor, d: int):
    scores = torch.matmul(q, k.transpose(-1, -2))
    layout_scores = torch.matmul(lq, lk.transpose(-1, -2))
    tmp_scores = scores / math.sqrt(d)
    tmp_layout_scores = layout_scores / math.sqrt(d // 2)
    scores = tmp_scores + tmp_layout_scores
    layout_scores = tmp_layout_scores + tmp_scores
    return scores, layout_scores

# --- rescaled past a view that rebinds the scores (fixed), or returned after it (reported only)
def windowed(q: torch.Tensor, k: torch.Tensor, b: int, n: int):
    s = q @ k.transpose(-1, -2)
    s = s.view(b, -1, n, n)
    s = s * 0.125
    return s


def correlation(fmap1: torch.Tensor, fmap2: torch.Tensor, b: int, h: int, w: int):
    corr = torch.matmul(fmap1, fmap2.transpose(1, 2))
    corr = corr.view(b, h, w, 1, h, w)
    return corr / torch.sqrt(torch.tensor(fmap1.shape[-1]))

# --- a 0-d tensor factor broadcasts against the operand too
def zero_dim_scale(q: torch.Tensor, k: torch.Tensor, d: int):
    return (q @ k.transpose(-1, -2)) / torch.sqrt(torch.tensor(d))

# --- look-alike: the unscaled scores are read again (both are kept)
def kept(q: torch.Tensor, k: torch.Tensor, d: int):
    s = q @ k.transpose(-1, -2)
    t = s / d
    return s + t

# --- look-alike: read after the view by something else before the rescale
def read_between(q: torch.Tensor, k: torch.Tensor, b: int, n: int):
    s = q @ k.transpose(-1, -2)
    s = s.view(b, -1, n, n)
    m = s.amax(-1, keepdim=True)
    s = s * 0.125
    return s - m

# --- a learned temperature given in log space, of unknown shape: reported without a fix;
# --- look-alike: a tensor made of a list
def tensor_factors(q: torch.Tensor, k: torch.Tensor, logit_scale: torch.Tensor):
    s = q @ k.transpose(-1, -2)
    s = s * torch.clamp(logit_scale, max=4.6).exp()
    return s, (q @ k.transpose(-1, -2)) * torch.tensor([0.5, 0.25])

# --- the keys transposed by a permute that moves their features next to last
def sam_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    _, _, _, c_per_head = q.shape
    attn = q @ k.permute(0, 1, 3, 2)
    attn = attn / math.sqrt(c_per_head)
    attn = torch.softmax(attn, dim=-1)
    return attn @ v


def relative_scores(q: torch.Tensor, k: torch.Tensor, d: int):
    return torch.matmul(q, torch.permute(k, (0, 2, 3, 1))) / math.sqrt(d)

# --- look-alike: a permute that leaves the features last, or moves another dim next to last
def other_permutes(q: torch.Tensor, k: torch.Tensor):
    a = torch.matmul(q, k.permute(0, 1, 2, 3)) * 0.125
    b = torch.matmul(q, k.permute(0, 3, 1, 2)) * 0.125
    return a, b

# --- rescaled in place, scaled on the left, by .div(): flagged
def in_place(q: torch.Tensor, k: torch.Tensor, scale: float):
    dots = torch.einsum("b h i d, b h j d -> b h i j", q, k)
    dots /= math.sqrt(k.shape[-1])
    sim = q @ k.transpose(-1, -2)
    sim.mul_(scale)
    return dots, sim, scale * (q @ k.mT), torch.matmul(q, k.mT).div(math.sqrt(q.shape[-1]))

# --- the rescale first in the arm of the next if: reported without a fix
def optional_scale(q: torch.Tensor, k: torch.Tensor, scale: float | None):
    sim = q @ k.transpose(-1, -2)
    if scale is not None:
        sim = sim * scale
    return sim.softmax(-1)

# --- look-alike: a flattened map against labels (a dice loss), an in-place tensor factor
def dice_numerator(inputs: torch.Tensor, labels: torch.Tensor, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor):
    inputs = inputs.sigmoid().flatten(1)
    numerator = 2 * torch.matmul(inputs, labels.T)
    sim = q @ k.transpose(-1, -2)
    sim *= bias
    return numerator, sim
