"""Attention in compiled inference graphs, chosen when it runs rather than when it is traced.

``F.scaled_dot_product_attention`` picks its kernel (cuDNN, flash, memory-efficient, or the math
form) from the tensors it is given. AOTAutograd makes that choice on fake tensors while tracing,
and for some calls — transformers passes an explicit mask while it is traced, where eager passes
none — it picks the math form, which writes the whole score matrix several times. So the
compile backend hands inference graphs an opaque op instead: traced as one node, it runs
``scaled_dot_product_attention`` on the real tensors, which picks the kernel eager would.

A mask whose rows are not contiguous (an expanded one) is made contiguous first, for the same
reason: the fused kernels refuse it. The op's result is laid out as the fused kernels lay theirs out (batch, sequence, heads, head
dim in memory), so the traced graph's views agree with what runs; a kernel that returns
another layout (the math form) is copied into it.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch._prims_common import make_contiguous_strides_for

__all__ = ["route_attention"]


def _layout(q: torch.Tensor, v: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides of the result: (..., heads, queries, value dim) stored as
    (..., queries, heads, value dim)."""
    shape = (*q.shape[:-1], v.shape[-1])
    if q.dim() != 4:
        return shape, tuple(make_contiguous_strides_for(shape))
    batch, heads, queries, dim = shape
    stored = make_contiguous_strides_for((batch, queries, heads, dim))
    return shape, (stored[0], stored[2], stored[1], stored[3])


@torch.library.custom_op("fusionrt::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor],
              dropout_p: float, is_causal: bool, scale: Optional[float], enable_gqa: bool) -> torch.Tensor:
    if attn_mask is not None and attn_mask.size(-1) > 1 and attn_mask.stride(-1) != 1:
        # The fused kernels read a mask's rows as contiguous memory; an expanded one (transformers
        # builds BERT's that way while traced) sends SDPA to its math form, ~20x slower on an H100.
        attn_mask = attn_mask.contiguous()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                         scale=scale, enable_gqa=enable_gqa)
    shape, strides = _layout(q, v)
    if out.stride() == strides:
        return out
    return torch.empty_strided(shape, strides, dtype=out.dtype, device=out.device).copy_(out)


@attention.register_fake
def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor],
                    dropout_p: float, is_causal: bool, scale: Optional[float], enable_gqa: bool) -> torch.Tensor:
    shape, strides = _layout(q, v)
    return q.new_empty_strided(shape, strides)


_SDPA = (torch._C._nn.scaled_dot_product_attention, F.scaled_dot_product_attention)
_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def route_attention(gm: torch.fx.GraphModule) -> int:
    """Make each ``scaled_dot_product_attention`` call of a Dynamo graph the run-time-chosen op;
    return how many were changed. For inference graphs only: the op has no backward."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        values = dict(zip(_PARAMETERS, node.args))
        values.update(node.kwargs)
        if set(values) - set(_PARAMETERS) or not {"query", "key", "value"} <= set(values):
            continue  # a signature this torch does not have: leave the call as it is
        node.target = torch.ops.fusionrt.attention.default
        node.args = tuple(values.get(name, _DEFAULTS.get(name)) for name in _PARAMETERS)
        node.kwargs = {}
        changed += 1
    if changed:
        gm.recompile()
    return changed
