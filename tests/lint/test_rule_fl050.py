"""FL050 beyond its own examples: which element-wise ops on expanded views are seen, and where
each pays."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import EAGER, FUSIONRT, LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL050"}))


def findings(source: str) -> list[tuple[int, tuple[str, ...]]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, tuple(f.pays_in)) for f in result.findings]


# speechbrain's masks_union: the masks expanded in `if`s, the union in a later `if`, the result
# negated and returned (written).
MASKS_UNION = """\
import torch


def masks_union(bsz: int, klen: int, num_heads: int, attn_mask: torch.Tensor, key_padding_mask: torch.Tensor):
    final_mask = None
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask.view(bsz, 1, 1, klen).expand(bsz, num_heads, klen, klen)
        final_mask = key_padding_mask
    if attn_mask is not None:
        attn_mask = attn_mask.view(1, 1, klen, klen).expand(bsz, num_heads, klen, klen)
        final_mask = attn_mask
    if attn_mask is not None and key_padding_mask is not None:
        final_mask = torch.logical_or(attn_mask, key_padding_mask)
    if final_mask is not None:
        final_mask = torch.logical_not(final_mask)
    return final_mask
"""


def test_two_masks_expanded_in_ifs_and_united():
    assert findings(MASKS_UNION) == [(13, (FUSIONRT, EAGER))]


# sam2's no-object embedding: the product is added in place to a full-size tensor, so fusionrt
# fuses it; eager writes the expanded product.
IN_PLACE_ADD = """\
import torch


def encode(features: torch.Tensor, logits: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
    is_obj = (logits > 0).float()
    features += (1 - is_obj[..., None, None]) * embed[..., None, None].expand(*features.shape)
    return features
"""


def test_a_product_of_small_operands_added_in_place_pays_in_eager():
    assert findings(IN_PLACE_ADD) == [(6, (EAGER,))]


# a negated expanded mask as a mask of masked_fill_ (open_clip's key mask); a number times an
# expand added to a full tensor (demucs); a mask cast to a dtype (transformers' _expand_mask).
SPELLINGS = """\
import torch


def additive(valid: torch.Tensor, seq_len: int, dtype: torch.dtype) -> torch.Tensor:
    key_mask = valid.unsqueeze(1).expand(-1, seq_len, -1)
    out = torch.zeros_like(key_mask, dtype=dtype)
    out.masked_fill_(~key_mask, float("-inf"))
    return out


def embed(x: torch.Tensor, emb: torch.Tensor, scale: float) -> torch.Tensor:
    emb = emb.t()[None, :, :, None].expand_as(x)
    return x + scale * emb


def expand_mask(mask: torch.Tensor, dtype: torch.dtype, tgt_len: int) -> torch.Tensor:
    bsz, src_len = mask.size()
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    return 1.0 - expanded_mask
"""


def test_other_spellings():
    assert findings(SPELLINGS) == [(7, (FUSIONRT, EAGER)), (13, (EAGER,)), (18, (FUSIONRT, EAGER))]


LOOK_ALIKES = """\
import torch


def full_other(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w.unsqueeze(0).expand_as(x)


def same_size(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.arange(4).expand((1, -1)) + 2


def device_move(x: torch.Tensor, position_ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    return position_ids.view(1, 1, -1).expand(3, batch_size, -1).to(x.device)


def parameter_cast(self, batch_size: int, target_dtype) -> torch.Tensor:
    return self.class_embedding.expand(batch_size, 1, -1).to(target_dtype)


def float_cast(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return pe.unsqueeze(0).expand(x.size(0), -1, -1).float()


def grid(a: torch.Tensor, b: torch.Tensor, h: int, w: int) -> torch.Tensor:
    y = a.unsqueeze(1).expand(h, w)
    x = b.unsqueeze(0).expand(h, w)
    return x + y


def index(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def rebound(x: torch.Tensor, m: torch.Tensor, n: int) -> torch.Tensor:
    m = m.unsqueeze(0).expand(n, -1)
    m = x
    return m > 0
"""


def test_look_alikes():
    assert findings(LOOK_ALIKES) == []
