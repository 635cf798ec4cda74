"""FL010 beyond its own examples: the variants it maps to SDPA and how, the look-alikes it leaves
alone, and the fixed code run against the original (fp32 and bf16, under fusionrt)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions
from fusionlint.rules.manual_attention import ManualAttention

FIX = LintOptions(codes=frozenset({"FL010"}), fix=FixMode.UNSAFE)
HEADER = "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"


def fixed(source: str) -> str | None:
    """The file after FL010's fix (None: nothing flagged)."""
    result = lint_source(HEADER + source, "m.py", FIX)
    assert not result.errors
    return None if not result.fixed else result.source[len(HEADER):]


# --- variants, each with the call the fix writes -----------------------------------------------

MAPPED = {
    "the rank an einops pattern gives (the last dim kept innermost)": (
        """\
from einops import rearrange


def attend(q, k, v):
    q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=4), (q, k, v))
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, scale=0.125)",
    ),
    "the rank read off an unpacking of the query's shape": (
        """\
def attend(q, k, v):
    B, H, N, D = q.shape
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, scale=0.125)",
    ),
    "matmul, / math.sqrt(d_k) of the query: SDPA's default scale, left out": (
        """\
def attend(query, key, value):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(2, 3)) / math.sqrt(d_k)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value)
""",
        "F.scaled_dot_product_attention(query, key, value)",
    ),
    "the last dim read before the head split is not the head dim: the scale is passed": (
        """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    d = q.size(-1)
    q = q.view(2, 16, 4, 8).transpose(1, 2)
    k = k.view(2, 16, 4, 8).transpose(1, 2)
    v = v.view(2, 16, 4, 8).transpose(1, 2)
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
    return s.softmax(-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(d))",
    ),
    "k.shape[-1] ** -0.5 is the default too (the matmul sums over q's and k's last dims)": (
        """\
def attend(x: torch.Tensor):
    q, k, v = x.view(3, -1, 4, 16, 8).unbind(0)
    return torch.softmax(q @ k.mT * k.shape[-1] ** -0.5, -1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v)",
    ),
    "bmm, no scale: 3-d operands unsqueezed to SDPA's 4-d, scale=1.0 (not the default)": (
        """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    w = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
    return torch.bmm(w, v)
""",
        "F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), scale=1.0).squeeze(0)",
    ),
    "a scale that is not provably 1/sqrt(head_dim) is passed as written": (
        """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_dim: int):
    s = q @ k.transpose(2, 3) / math.sqrt(head_dim)
    return s.softmax(-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(head_dim))",
    ),
    "einsum with the same batch letters on both sides, the key scaled (scale=1.0), a bias expanded to 4-d": (
        """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor):
    k = k * 0.125
    sim = torch.einsum("b h i d, b h j d -> b h i j", q, k)
    attn = F.softmax(sim + bias, dim=-1)
    return torch.einsum("b h i j, b h j d -> b h i d", attn, v)
""",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=bias.expand(*q.shape[:-1], k.size(-2)), scale=1.0)",
    ),
    "masked_fill(~keep, -inf): the kept positions are the boolean mask": (
        """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor):
    s = (q * 0.125) @ k.transpose(2, 3)
    s = s.masked_fill(~keep, -math.inf)
    return s.softmax(dim=-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.125)",
    ),
    "F.dropout with p and training: dropout_p only while training": (
        """\
class Attention(nn.Module):
    def forward(self, q, k, v):
        a = (q @ k.transpose(2, 3)) * 0.125
        a = F.dropout(F.softmax(a, dim=-1), p=0.1, training=self.training)
        return a @ v
""",
        "F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0, scale=0.125)",
    ),
    "nanoGPT's tril buffer over queries and keys of the same T: is_causal": (
        """\
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int = 64, n_head: int = 4, block_size: int = 32):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return y.transpose(1, 2).contiguous().view(B, T, C)
""",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
    ),
    "the same mask over a query of another length: a boolean attn_mask, not is_causal": (
        """\
class CrossAttention(nn.Module):
    def __init__(self, block_size: int = 32):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, q, k, v):
        T = k.size(-2)
        att = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v
""",
        "F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias[:, :, :T, :T] != 0)",
    ),
    "a temperature per head divides the scores: the query's rows are divided, scale=1.0": (
        """\
class Attention(nn.Module):
    def __init__(self, heads: int = 4):
        super().__init__()
        self.temperature = nn.Parameter(torch.ones((heads, 1, 1)))

    def forward(self, q, k, v):
        q = q.view(2, 4, 16, 8)
        attn = (q @ k.transpose(-2, -1)) / self.temperature
        return attn.softmax(dim=-1) @ v
""",
        "F.scaled_dot_product_attention(q / self.temperature, k, v, scale=1.0)",
    ),
}


@pytest.mark.parametrize("case", MAPPED)
def test_the_fix_maps_scale_mask_causal_and_dropout(case):
    source, call = MAPPED[case]
    after = fixed(source)
    assert after is not None, "not flagged"
    assert call in after, after
    assert "softmax" not in after


def test_an_nn_softmax_attribute_over_the_last_dim_is_the_softmax():
    after = fixed("""\
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(-1)

    def forward(self, q, k, v):
        q = q.view(2, 4, 16, 8)
        return self.softmax(q @ k.transpose(-2, -1) * 0.5) @ v
""")
    assert after is not None and "return F.scaled_dot_product_attention(q, k, v, scale=0.5)" in after


# --- look-alikes left alone, each with why ------------------------------------------------------

LEFT_ALONE = {
    # SDPA does not give the weights: a caller reading them would lose them
    "weights stored on the module": """\
class Attention(nn.Module):
    def forward(self, q, k, v):
        attn = (q @ k.transpose(2, 3)) * 0.125
        attn = attn.softmax(dim=-1)
        self.last_attn = attn
        return attn @ v
""",
    "weights returned from the matmul's statement": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    attn = torch.softmax(q @ k.transpose(2, 3), dim=-1)
    return attn @ v, attn.mean(1)
""",
    # another normaliser than a softmax over the last dim: SDPA computes only that one
    "relu attention": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    return torch.relu(q @ k.transpose(2, 3)) @ v
""",
    "softmax over the queries": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    return F.softmax(q @ k.transpose(2, 3), dim=-2) @ v
""",
    # anything but dropout between the softmax and the values
    "a head mask after the softmax": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_mask: torch.Tensor):
    p = F.softmax(q @ k.transpose(2, 3), dim=-1)
    p = p * head_mask
    return p @ v
""",
    # the scores matmul is no rows-against-rows similarity
    "a key that is not transposed": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    return F.softmax(q @ k, dim=-1) @ v
""",
    # SDPA's fused kernels take 4-d tensors: on others it runs its math form, which writes the
    # scores too (and falls back under fusionrt)
    "5-d einsum (maxvit's grid attention)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b g h i d, b g h j d -> b g h i j", q, k)
    return torch.einsum("b g h i j, b g h j d -> b g h i d", F.softmax(s, dim=-1), v)
""",
    "rank unknown (function arguments, no 4-d key transpose)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    return F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
""",
    # vector operands (torchmetrics' `einsum("r, c -> rc", ...)` crashed the rule): no matrices
    "einsum with vector weights": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("d, j d -> j", q, k)
    return torch.einsum("j, j d -> d", F.softmax(s, dim=-1), v)
""",
    "einsum with a vector key": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("i d, d -> i", q, k)
    return torch.einsum("i j, j d -> i d", F.softmax(s, dim=-1), v)
""",
    "a 5-d einsum (SDPA's math path)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b g n h d, b g k h d -> b g h n k", q, k)
    return torch.einsum("b g h n k, b g k h d -> b g n h d", s.softmax(dim=-1), v)
""",
    "an einsum whose weights the values read under other letters": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b n h d, b k h d -> b h n k", q, k)
    return torch.einsum("b h k n, b k h d -> b n h d", s.softmax(dim=-1), v)
""",
    "an einsum that sums a dim other than the last (SDPA copies the strided operands: 3 -> 5 writes)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b h d n, b h d k -> b h n k", q, k)
    return torch.einsum("b h n k, b h k e -> b h n e", s.softmax(dim=-1), v)
""",
    # the branching data flow keeps to SDPA's stages too
    "a helper that caps the scores (no addition)": """\
def softcap(scores, cap):
    return torch.tanh(scores / cap) * cap


def attend(q, k, v, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = softcap(attn, 30.0)
    return attn.softmax(dim=-1) @ v
""",
    "weights kept under an if": """\
def attend(q, k, v, store, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn + mask
    attn = attn.softmax(dim=-1)
    if store is not None:
        store.append(attn)
    return attn @ v
""",
    "scores handed to an unknown function": """\
def attend(q, k, v, log, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    log(attn)
    if mask is not None:
        attn = attn + mask
    return attn.softmax(dim=-1) @ v
""",
    "an optional mask on operands of unknown rank": """\
def attend(q, k, v, mask=None):
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn + mask
    return attn.softmax(dim=-1) @ v
""",
    "an optional mask on 5-d operands (SDPA's math path)": """\
def attend(q, k, v, mask=None):
    q = q.view(2, 4, 3, 16, 8)
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn + mask
    return attn.softmax(dim=-1) @ v
""",
    "a mask that multiplies, under an if": """\
def attend(q, k, v, keep: torch.Tensor | None = None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    if keep is not None:
        attn = attn * keep
    return attn.softmax(dim=-1) @ v
""",
    "a softmax over dim 2 of 4-d scores (the queries' dim)": """\
def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    return F.softmax(attn, dim=2) @ v
""",
    "scores clamped in place (no stage SDPA has)": """\
def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    attn = torch.matmul(q, k.transpose(2, 3))
    attn.clamp_(min=-5.0)
    return torch.matmul(attn.softmax(-1), v)
""",
    "the scores returned beside the output": """\
def attend(q, k, v, mask):
    q = q.view(8, 16, 8)
    weights = torch.bmm(q * 0.125, k.transpose(1, 2))
    probs = F.softmax(weights.float().masked_fill(mask, -1e8), dim=-1).type_as(weights)
    return torch.bmm(probs, v), weights
""",
    "a key scaled by a tensor (no scale SDPA takes)": """\
def attend(q, k, v, g: torch.Tensor):
    q = q.view(2, 4, 16, 8)
    attn = torch.matmul(q, k.transpose(-1, -2) * g)
    return torch.matmul(attn.softmax(dim=-1), v)
""",
    "the max over the queries subtracted (no shift the softmax ignores)": """\
def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    attn = attn - attn.amax(dim=-2, keepdim=True)
    return F.softmax(attn, dim=-1) @ v
""",
    "keys torch.split from a permute that moved their last dim (halo attention: SDPA copies them)": """\
def attend(q, kv, pos):
    q = q.view(2, 4, 16, 8)
    kv = kv.reshape(2, 16, 4, 36).permute(0, 2, 3, 1)
    k, v = torch.split(kv, [8, 8], dim=-1)
    attn = (q @ k.transpose(-1, -2)) * 0.125 + pos
    return attn.softmax(dim=-1) @ v
""",
    "five names unpacked from the query's shape (SDPA's math path)": """\
def attend(q, k, v):
    B, H, W, N, D = q.shape
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
    "the query rebound after its shape was unpacked": """\
def attend(q, k, v):
    B, H, N, D = q.shape
    q = q.unsqueeze(0)
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
    "an einops pattern that moves the tokens last (SDPA would copy the strided operands)": """\
from einops import rearrange


def attend(q, k, v):
    q, k, v = map(lambda t: rearrange(t, "b (h d) n -> b h n d", h=4), (q, k, v))
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
    "an einops pattern with five axes": """\
from einops import rearrange


def attend(q, k, v):
    q, k, v = map(lambda t: rearrange(t, "b w n (h d) -> b w h n d", h=4), (q, k, v))
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
    "masks added in a loop": """\
def attend(q, k, v, masks):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    for mask in masks:
        attn = attn + mask
    return attn.softmax(dim=-1) @ v
""",
    "a mask after the softmax, under an if": """\
def attend(q, k, v, keep: torch.Tensor | None = None):
    q = q.view(2, 4, 16, 8)
    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    if keep is not None:
        attn = attn * keep
    return attn @ v
""",
    # the fallback of a torch without SDPA: every torch since 2.0 takes the fused arm
    "the other arm of if hasattr(F, 'scaled_dot_product_attention')": """\
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_sdpa = hasattr(F, "scaled_dot_product_attention")

    def forward(self, q, k, v, mask=None):
        q = q.view(2, 4, 16, 8)
        if self.use_sdpa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            attn = q @ k.transpose(-2, -1)
            if mask is not None:
                attn += mask
            return attn.softmax(dim=-1) @ v
""",
    "an einsum whose softmax dim is the query's": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b n h d, b k h d -> b h k n", q, k)
    return torch.einsum("b h k n, b n h d -> b k h d", s.softmax(dim=-1), v)
""",
    "transposed operands whose result is viewed at once (SDPA's transposed output would be copied)": """\
def attend(qkv: torch.Tensor):
    q, k, v = qkv.view(2, 2, 64, 64).split([16, 16, 32], dim=2)
    attn = ((q * 0.25).transpose(-2, -1) @ k).softmax(dim=-1)
    x = v @ attn.transpose(-2, -1)
    return x.view(2, 64, 8, 8)
""",
    "a learned factor that is not one per head (its last size is not 1)": """\
class Attention(nn.Module):
    def __init__(self, heads: int = 4):
        super().__init__()
        self.temperature = nn.Parameter(torch.ones(heads, 1, 16))

    def forward(self, q, k, v):
        q = q.view(2, 4, 16, 8)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        return attn.softmax(dim=-1) @ v
""",
    "the tokens permuted last (XCiT's layout): SDPA would copy the strided operands": """\
def attend(qkv: torch.Tensor):
    q, k, v = qkv.reshape(2, 64, 3, 4, -1).permute(2, 0, 3, 4, 1).unbind(0)
    attn = (q @ k.transpose(-2, -1)) * 0.125
    return attn.softmax(dim=-1) @ v
""",
    "an attribute that is also assigned another module": """\
class Attention(nn.Module):
    def __init__(self, log: bool):
        super().__init__()
        self.softmax = nn.LogSoftmax(dim=-1) if log else nn.Softmax(dim=-1)

    def forward(self, q, k, v):
        q = q.view(2, 4, 16, 8)
        return self.softmax(q @ k.transpose(-2, -1) * 0.5) @ v
""",
    "a mask that multiplies the scores": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor):
    s = (q @ k.transpose(2, 3)) * keep
    return s.softmax(dim=-1) @ v
""",
}


REPORTED_WITHOUT_FIX = {
    # SDPA computes these, but no one call the fix writes says them exactly
    "softmax with a dtype (an upcast SDPA's kernels make themselves)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    return F.softmax(q @ k.transpose(2, 3), dim=-1, dtype=torch.float32) @ v
""",
    "two masks (SDPA takes them combined into one)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, keep: torch.Tensor):
    s = (q @ k.transpose(2, 3) + bias).masked_fill(~keep, float("-inf"))
    return s.softmax(-1) @ v
""",
    "a finite fill value (a boolean mask differs on rows with every key masked)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor):
    s = (q @ k.transpose(2, 3)).masked_fill(~keep, torch.finfo(q.dtype).min)
    s = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    return s @ v
""",
    "the key rebound between the scores and the values (the fix would read the new key)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = F.softmax(q @ k.transpose(2, 3), dim=-1)
    k = k + 1
    return s @ v + k
""",
    "a mask added under an if": """\
def attend(q, k, v, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1) * 0.125
    if mask is not None:
        attn = attn + mask
    attn = attn.softmax(dim=-1)
    return attn @ v
""",
    "a mask added in place": """\
def attend(q, k, v, mask):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    attn += mask
    return attn.softmax(dim=-1) @ v
""",
    "the softmax in both arms, a 5-d view of the scores, a cast after": """\
def attend(q, k, v, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn.view(1, 2, 4, 16, 16) + mask
        attn = attn.view(-1, 4, 16, 16)
        attn = attn.softmax(dim=-1)
    else:
        attn = attn.softmax(dim=-1)
    return attn.to(v.dtype) @ v
""",
    "a same-file helper that adds the mask": """\
def maybe_add_mask(scores, mask=None):
    return scores if mask is None else scores + mask


def attend(q, k, v, mask=None):
    q = q.view(2, 4, 16, 8)
    attn = maybe_add_mask(q @ k.transpose(-2, -1), mask)
    return attn.softmax(dim=-1) @ v
""",
    "the scores read for their shape only, here and by a same-file helper": """\
def causal_bias(n, scores):
    return scores.new_full((n, n), float("-inf")).triu_(1)


def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    bias = causal_bias(attn.shape[-1], attn)
    attn = attn + bias
    return attn.softmax(dim=-1) @ v
""",
    "a learned logit scale computed apart (open_clip's scaled cosine attention)": """\
class Attention(nn.Module):
    def __init__(self, heads: int = 4):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))

    def forward(self, q, k, v):
        q = q.view(2, 4, 16, 8)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-1, -2)
        logit_scale = torch.clamp(self.logit_scale, max=4.6).exp()
        attn = attn * logit_scale
        return attn.softmax(dim=-1) @ v
""",
    "scores from torch.baddbmm (a scale and a bias in the matmul)": """\
def attend(q, k, v, bias):
    q = q.view(8, 16, 8)
    attn = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=0.125)
    return torch.bmm(attn.softmax(dim=-1), v)
""",
    "a softmax over dim 3 of 4-d scores": """\
def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    attn = q @ k.transpose(-2, -1)
    return F.softmax(attn, dim=3) @ v
""",
    "a mask filled in place": """\
def attend(q, k, v, mask):
    q = q.view(2, 4, 16, 8)
    attn = torch.matmul(q, k.transpose(2, 3))
    attn.masked_fill_(mask, float("-inf"))
    attn = attn.softmax(-1)
    return torch.matmul(attn, v)
""",
    "a scale and a mask as .mul and torch.add": """\
def attend(q, k, v, mask):
    q = q.view(2, 4, 16, 8)
    attn = torch.matmul(q, k.transpose(2, 3)).mul(0.125)
    attn = torch.add(attn, mask)
    return torch.matmul(attn.softmax(-1), v)
""",
    "the key scaled after its transpose (the scale's root on both operands)": """\
def attend(q, k, v):
    q = q.view(2, 4, 16, 8)
    scale = 1 / math.sqrt(math.sqrt(8))
    attn = torch.matmul(q * scale, k.transpose(-1, -2) * scale)
    return torch.matmul(attn.softmax(dim=-1), v)
""",
    "an fp32 softmax cast back with type_as of the scores (read for their dtype)": """\
def attend(q, k, v, mask):
    q = q.view(8, 16, 8)
    weights = torch.bmm(q * 0.125, k.transpose(1, 2))
    weights_float = weights.float().masked_fill(mask, -1e8)
    probs = F.softmax(weights_float, dim=-1).type_as(weights)
    probs = F.dropout(probs, p=0.1, training=False)
    return torch.bmm(probs, v)
""",
    "the rows' max subtracted first (the softmax does it itself)": """\
def attend(q, k, v, mask):
    q = q.view(2, 4, 16, 8).permute(0, 2, 1, 3)
    sim = torch.matmul(q, k.transpose(-1, -2))
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    sim = sim.masked_fill(mask, -1e4)
    return torch.matmul(sim.softmax(dim=-1), v)
""",
    "operands of unknown rank scaled by a (heads, 1, 1) temperature (Restormer)": """\
class ChannelAttention(nn.Module):
    def __init__(self, heads: int = 4):
        super().__init__()
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))

    def attend(self, q, k, v):
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        return attn.softmax(dim=-1) @ v
""",
    "einsum over (batch, tokens, heads, dim)": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = torch.einsum("b n h d, b k h d -> b h n k", q, k) * 0.125
    return torch.einsum("b h n k, b k h d -> b n h d", s.softmax(dim=-1), v)
""",
    "(heads, dim, tokens) operands, the result permuted next": """\
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    attn = F.softmax(q.transpose(2, 3) @ k, dim=-1)
    x = torch.matmul(v, attn.transpose(-2, -1))
    x = x.transpose(1, 2)
    return x
""",
}


@pytest.mark.parametrize("case", REPORTED_WITHOUT_FIX)
def test_reported_without_a_fix(case):
    result = lint_source(HEADER + REPORTED_WITHOUT_FIX[case], "m.py", FIX)
    assert not result.errors and len(result.findings) == 1
    assert fixed(REPORTED_WITHOUT_FIX[case]) is None


def test_a_finding_without_a_fix_on_3d_operands_says_to_unsqueeze_them():
    options = LintOptions(codes=frozenset({"FL010"}))
    three_d = lint_source(HEADER + REPORTED_WITHOUT_FIX["scores from torch.baddbmm (a scale and a bias in the matmul)"], "m.py", options)
    four_d = lint_source(HEADER + REPORTED_WITHOUT_FIX["a mask added under an if"], "m.py", options)
    assert [f.message for f in three_d.findings] == [
        "attention written by hand writes the whole score matrix: use F.scaled_dot_product_attention on its 3-d "
        "operands unsqueezed to 4-d (on 3-d ones it writes the scores too)"]
    assert [f.message for f in four_d.findings] == [ManualAttention.message]


def test_a_flag_that_is_not_hasattr_leaves_the_hand_written_arm_flagged():
    source = LEFT_ALONE["the other arm of if hasattr(F, 'scaled_dot_product_attention')"]
    source = source.replace('hasattr(F, "scaled_dot_product_attention")', "use_sdpa")
    source = source.replace("def __init__(self):", "def __init__(self, use_sdpa: bool):")
    result = lint_source(HEADER + source, "m.py", LintOptions(codes=frozenset({"FL010"})))
    assert not result.errors and len(result.findings) == 1


@pytest.mark.parametrize("case", LEFT_ALONE)
def test_look_alikes_are_left_alone(case):
    result = lint_source(HEADER + LEFT_ALONE[case], "m.py", LintOptions(codes=frozenset({"FL010"})))
    assert not result.errors and result.findings == ()


def test_the_finding_points_at_the_scores_and_spans_the_chain():
    source, _ = MAPPED["nanoGPT's tril buffer over queries and keys of the same T: is_causal"]
    result = lint_source(HEADER + source, "m.py", LintOptions(codes=frozenset({"FL010"})))
    line = HEADER.count("\n") + source.splitlines().index(
        "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))") + 1
    assert [(f.line, f.column) for f in result.findings] == [(line, 16)]


# --- the fixed code, run --------------------------------------------------------------------------

torch = pytest.importorskip("torch")
import fusionrt  # noqa: E402

RUN_CASES = [
    *(pytest.param(example.bad, example.fixed or example.good, example.call, id=f"example{i}")
      for i, example in enumerate(ManualAttention.examples, start=1)),
    pytest.param(HEADER + MAPPED["nanoGPT's tril buffer over queries and keys of the same T: is_causal"][0], None,
                 "CausalSelfAttention().eval()(randn(2, 32, 64))", id="nanogpt-causal"),
    pytest.param(HEADER + MAPPED["masked_fill(~keep, -inf): the kept positions are the boolean mask"][0], None,
                 "attend(randn(2, 4, 16, 32), randn(2, 4, 16, 32), randn(2, 4, 16, 32), randn(16, 16) > -1)",
                 id="masked-fill"),
    pytest.param(HEADER + MAPPED["bmm, no scale: 3-d operands unsqueezed to SDPA's 4-d, scale=1.0 (not the default)"][0],
                 None, "attend(randn(8, 64, 32), randn(8, 64, 32), randn(8, 64, 32))", id="bmm"),
    pytest.param(HEADER + MAPPED["einsum with the same batch letters on both sides, the key scaled (scale=1.0), a bias expanded to 4-d"][0], None,
                 "attend(randn(2, 4, 64, 32), randn(2, 4, 64, 32), randn(2, 4, 64, 32), randn(4, 64, 64))",
                 id="einsum"),
]
BF16_STEP = 2.0 ** -8  # bf16's relative rounding step


def _measure(source: str, call: str, dtype, measure: bool = True):
    """Build the callee with weights from one seed, then call it on inputs from another, without
    autograd (inference, as in the contract test's examples): measured under fusionrt, or eagerly."""
    namespace: dict = {"__name__": "m"}
    exec(compile(source, "m.py", "exec"), namespace)
    generator = torch.Generator().manual_seed(7)
    namespace["randn"] = lambda *shape: torch.randn(*shape, generator=generator).to(dtype)
    torch.manual_seed(3)
    callee, _, rest = call.partition("(randn")
    target = eval(callee, namespace)
    if isinstance(target, torch.nn.Module):
        target = target.to(dtype)
    args = eval("(randn" + rest[:-1] + ",)", namespace)
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    with torch.no_grad():
        return fusionrt.measure(target, *args, executor="reference") if measure else target(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("bad,after,call", RUN_CASES)
def test_fixed_attention_equals_the_original_and_writes_less_under_fusionrt(bad, after, call, dtype):
    after = after if after is not None else lint_source(bad, "m.py", FIX).source
    assert after is not None and "scaled_dot_product_attention" in after
    (before_out, before), (after_out, report) = _measure(bad, call, dtype), _measure(after, call, dtype)
    assert before_out.dtype == after_out.dtype == dtype
    if dtype is torch.float32:
        torch.testing.assert_close(after_out, before_out, rtol=1e-5, atol=1e-5)
    else:
        # The hand-written chain rounds the scores and the weights to bf16 between its kernels
        # and SDPA does not: measured against the float64 result, SDPA is at least as close
        # (up to one bf16 step), and both are within bf16's tolerance of it.
        exact = _measure(bad, call, torch.float64, measure=False)
        error_before, error_after = ((out.double() - exact).abs().max().item() for out in (before_out, after_out))
        assert error_after <= error_before + BF16_STEP
        torch.testing.assert_close(after_out.double(), exact, rtol=1.6e-2, atol=error_before + BF16_STEP)
    assert report.bytes_written < before.bytes_written
    assert report.writes <= before.writes and report.kernels <= before.kernels
    assert report.eager_bytes_written < before.eager_bytes_written


# --- --fix --verify -------------------------------------------------------------------------------

VERIFIED = HEADER + """\

def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v)
"""


def test_verify_proves_the_fix_before_applying_it(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text(VERIFIED)
    done = subprocess.run(
        [sys.executable, "-m", "fusionlint", "check", "--no-cache", "--select", "FL010", "--fix", "--unsafe-fixes",
         "--verify", str(path)],
        capture_output=True, text=True,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Verified: 1 fix proven and applied, 0 refused, 0 not run (no harness)." in out
    text = path.read_text()
    assert "    return F.scaled_dot_product_attention(q, k, v)\n" in text and "softmax" not in text
