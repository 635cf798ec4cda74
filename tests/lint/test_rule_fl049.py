"""FL049 beyond its own examples: which repeats of grouped keys and values are seen."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.replicated_for_broadcast import ReplicatedForBroadcast

OPTIONS = LintOptions(codes=frozenset({"FL049"}))


def lines(source: str) -> list[int]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [f.line for f in result.findings]


# litgpt's CausalSelfAttention: the repeat in an `if`, the attention in a method of the class
# that computes it by hand on another path (softcapping).
LITGPT = """\
import math
import torch
import torch.nn.functional as F


class CausalSelfAttention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(64, 96)

    def forward(self, x: torch.Tensor, mask=None, input_pos=None) -> torch.Tensor:
        q, k, v = self.qkv(x).split(self.sizes, dim=-1)
        n_head, n_query_groups = self.n_head, self.n_query_groups
        if n_query_groups != n_head and (input_pos is None or n_query_groups != 1):
            q_per_kv = n_head // n_query_groups
            k = k.repeat_interleave(q_per_kv, dim=1)  # (B, nh_q, T, hs)
            v = v.repeat_interleave(q_per_kv, dim=1)  # (B, nh_q, T, hs)
        y = self.scaled_dot_product_attention(q, k, v, mask)
        return self.proj(y)

    def scaled_dot_product_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        scale = 1.0 / math.sqrt(self.head_size)
        if self.softcapping is not None:
            scores = q @ k.mT * scale
            y = F.softmax(scores, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, is_causal=mask is None)
        return y.transpose(1, 2)
"""


def test_a_repeat_in_an_if_read_by_a_method_that_attends():
    assert lines(LITGPT) == [16]


# keys laid out (B, T, H, D), repeated over dim 2, transposed into the attention; keywords.
TRANSPOSED = """\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = torch.repeat_interleave(k, repeats=4, dim=2)
    v = torch.repeat_interleave(v, repeats=4, dim=2)
    return F.scaled_dot_product_attention(q.transpose(1, 2), key=k.transpose(1, 2), value=v.transpose(2, 1))
"""


def test_a_transposed_read_of_a_repeat_over_dim_2():
    assert lines(TRANSPOSED) == [6]


LOOK_ALIKES = """\
import torch
import torch.nn.functional as F


def counts_as_tensor(q, k: torch.Tensor, v: torch.Tensor, n: torch.Tensor):
    k = k.repeat_interleave(n, dim=1)
    v = v.repeat_interleave(n, dim=1)
    return F.scaled_dot_product_attention(q, k, v)


def transposed_not_heads(q, k: torch.Tensor, v: torch.Tensor):
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    return F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2))


def stored(self, q, k: torch.Tensor, v: torch.Tensor):
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    self.cache = k
    return F.scaled_dot_product_attention(q, k, v)


def in_a_loop(q, k: torch.Tensor, v: torch.Tensor, blocks):
    for block in blocks:
        k = k.repeat_interleave(4, dim=1)
        v = v.repeat_interleave(4, dim=1)
        q = F.scaled_dot_product_attention(q, k, v)
    return q


def other_callee(q, k: torch.Tensor, v: torch.Tensor):
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    return elsewhere(q, k, v)


def by_hand(q, k: torch.Tensor, v: torch.Tensor):
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    return helper(q, k, v)


def helper(q, k, v):
    return (q @ k.mT).softmax(-1) @ v
"""


def test_look_alikes_are_not_flagged():
    assert lines(LOOK_ALIKES) == []


def test_the_text_test_needs_the_call():
    tables = op_tables()
    assert ReplicatedForBroadcast.may_match(["k = k.repeat_interleave(4, dim=1)"], 0, tables)
    assert not ReplicatedForBroadcast.may_match(["k = k.flip(1)"], 0, tables)


# litgpt's MultiheadLatentAttention: the key's head joins a part without rotary and a rotary
# part (decoupled rotary), the value's does not: head sizes differ, no kernel groups them. The
# partial rotary of CausalSelfAttention rejoins pieces of the key itself: still flagged.
HEADS = """\
import torch
import torch.nn.functional as F


def latent(q, k_pass: torch.Tensor, k_roped: torch.Tensor, v: torch.Tensor, n: int):
    k = torch.cat((k_pass, k_roped), dim=-1)
    k = k.repeat_interleave(n, dim=1)
    v = v.repeat_interleave(n, dim=1)
    return F.scaled_dot_product_attention(q, k, v)


def partial_rotary(q, k: torch.Tensor, k_roped: torch.Tensor, v: torch.Tensor, n: int):
    k = torch.cat((k_roped, k[..., 8:]), dim=-1)
    k = k.repeat_interleave(n, dim=1)
    v = v.repeat_interleave(n, dim=1)
    return F.scaled_dot_product_attention(q, k, v)
"""


def test_a_key_head_joined_from_other_tensors_is_not_flagged():
    assert lines(HEADS) == [14]


# fair-esm's relative orientation (a difference), speechbrain's wav2vec negatives (a comparison
# used as an index), and look-alikes: a batch expand reshaped (swin's window mask, added to a
# bias of batch 1), a flatten read by an index, a name read again in a later function.
FLATTENED = """\
import torch


def orientation(X_ca: torch.Tensor, X_dest: torch.Tensor, k: int):
    X_src = X_ca.unsqueeze(2).expand(-1, -1, k, -1).flatten(1, 2)
    E_vectors = X_src - X_dest
    return E_vectors


def negatives(T: int, num_neg: int, neg_indcs: torch.Tensor):
    targets = torch.arange(T).unsqueeze(-1).expand(-1, num_neg).flatten()
    neg_indcs[neg_indcs >= targets] += 1
    return neg_indcs


def window_mask(bias: torch.Tensor, mask: torch.Tensor, b: int, n: int):
    mask = mask.unsqueeze(1).unsqueeze(0).expand(b, -1, -1, -1, -1).reshape(-1, 1, n, n)
    return bias + mask


def indexed(x: torch.Tensor, idx: torch.Tensor):
    i = idx.unsqueeze(1).expand(-1, 4).flatten()
    return x[i] * 2


def later(x: torch.Tensor, f: torch.Tensor):
    g = f.unsqueeze(1).expand(-1, 4, -1).flatten(0, 1)
    return x * g


def other(g: torch.Tensor):
    return g.view(-1)
"""


def test_an_expand_flattened_and_only_read_element_wise():
    assert lines(FLATTENED) == [5, 11, 27]


def test_the_text_test_of_a_flattened_expand():
    tables = op_tables()
    assert ReplicatedForBroadcast.may_match(["f = x.expand(-1, 4).flatten()"], 0, tables)
    assert not ReplicatedForBroadcast.may_match(["f = x.expand(-1, 4)"], 0, tables)


# kornia's pairwise distances (repeats over dimensions of size 1, inline), a squeeze-excite's
# context (bound, then multiplied), a per-channel vector tiled (speechbrain's quaternion norm);
# a repeat of an unsqueezed dimension is FL007's (an expand, with its fix): FL049 yields.
TILED = """\
import torch


def distances(d1: torch.Tensor, d2: torch.Tensor):
    d1_sq = (d1**2).sum(dim=1, keepdim=True)
    d2_sq = (d2**2).sum(dim=1, keepdim=True)
    return d1_sq.repeat(1, d2.size(0)) + d2_sq.repeat(1, d1.size(0)).t() - 2.0 * d1 @ d2.t()


def context(x: torch.Tensor, avg: torch.Tensor, t: int):
    context = avg.repeat(1, t, 1)
    return x * context


def unsqueezed(hidden: torch.Tensor, mask: torch.Tensor):
    m = mask.unsqueeze(-1).repeat(1, 1, hidden.shape[2])
    return hidden * m
"""


def test_a_repeat_or_tile_only_read_element_wise():
    assert lines(TILED) == [7, 11]
    both = lint_source(TILED, "m.py", LintOptions(codes=frozenset({"FL007", "FL049"})))
    assert [(f.code, f.line) for f in both.findings] == [("FL049", 7), ("FL049", 11), ("FL007", 16)]
