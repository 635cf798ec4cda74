# FL022 (norm-before-select): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def class_token(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = F.layer_norm(x, x.shape[-1:], weight, bias)
    return x[:, 0]

# --- example 2
import torch
import torch.nn.functional as F


def text_pool(x: torch.Tensor, proj: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x @ proj
    x = F.layer_norm(x, (x.shape[-1],), w, b)
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return pooled

# --- look-alike 1
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    pooled = h[:, 0]
    s = F.layer_norm(x, x.shape[-1:], w, b)
    tail = s[:, 1:]
    m = F.layer_norm(x, x.shape[-1:], w, b)
    return h, pooled, tail, m.mean(1)

# --- look-alike 2
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x * 2.0
    x = F.layer_norm(x, x.shape[-1:], w, b)
    return x[:, 0]

# --- look-alike 3
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    best = h[:, h.norm(dim=-1).argmax()]
    g = F.normalize(x, dim=0)
    return best, g[0]

# --- a norm module of the class, the class token returned; the end-of-text token gathered
from torch import nn


class Pooler(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.layernorm = nn.LayerNorm(d)
        self.post_layernorm = nn.LayerNorm(d)

    def forward(self, hidden_state):
        hidden_state = self.layernorm(hidden_state)
        return hidden_state[:, 0]

    def eot(self, last_hidden_state, input_ids):
        last_hidden_state = self.post_layernorm(last_hidden_state)
        pooled_output = last_hidden_state[
            torch.arange(last_hidden_state.shape[0], device=last_hidden_state.device),
            input_ids.to(dtype=torch.int, device=last_hidden_state.device).argmax(dim=-1),
        ]
        return pooled_output

    # --- look-alike: the normalized sequence is returned too (the last hidden state)
    def both(self, last_hidden_state):
        last_hidden_state = self.post_layernorm(last_hidden_state)
        pooled_output = last_hidden_state[:, 0, :]
        return last_hidden_state, pooled_output

    # --- look-alike: a norm that is not a module of the class
    def other(self, x, norm):
        x = norm(x)
        return x[:, 0]

# --- a pooling function of the file that only picks tokens, a norm module named as one
def text_global_pool(x, text=None, pool_type: str = "argmax"):
    if pool_type == "first":
        pooled = x[:, 0]
    elif pool_type == "argmax":
        pooled = x[torch.arange(x.shape[0], device=x.device), text.argmax(dim=-1)]
    else:
        pooled = x
    return pooled


def mean_pool(x):
    return x.mean(1)


class TextTower(nn.Module):
    def __init__(self, width: int, norm_layer=nn.LayerNorm):
        super().__init__()
        self.ln_final = norm_layer(width)

    def forward(self, x, text):
        x = self.ln_final(x)
        pooled = text_global_pool(x, text, pool_type="argmax")
        return pooled

    # --- look-alike: the normalized tokens are kept too
    def tokens_too(self, x, text):
        x = self.ln_final(x)
        pooled = text_global_pool(x, text)
        tokens = x
        return pooled, tokens

    # --- look-alike: a function that averages the tokens
    def mean(self, x):
        x = self.ln_final(x)
        return mean_pool(x)

    # --- look-alike: one pick per sample, over every sample
    def per_sample(self, x, valid, n: int):
        x = self.ln_final(x)
        return [x[b][valid[b]] for b in range(n)]
