"""FL017 beyond its own examples: which rotations are seen, and the text test."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.rotate_half_copy import RotateHalfCopy

OPTIONS = LintOptions(codes=frozenset({"FL017"}))


def lines(source: str) -> list[int]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [f.line for f in result.findings]


# x_transformers: `from torch import cat, stack`, einops-style reshapes, scaled products.
INTERLEAVED = """\
import torch
from torch import cat, stack


def rotate_half(x):
    x = x.unflatten(-1, (-1, 2))
    x1, x2 = x.unbind(dim=-1)
    x = stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(t, freqs, scale=1):
    rot_dim = freqs.shape[-1]
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)
    return cat((t, t_unrotated), dim=-1)
"""


def test_an_imported_stack_and_three_factors_are_seen():
    assert lines(INTERLEAVED) == [15]


ELSEWHERE = """\
import torch
from other import rotate_half


def rotate_signs(x):
    return x * torch.tensor([-1.0, 1.0])


def apply(q, cos, sin):
    return q * cos + rotate_half(q) * sin, q * cos + rotate_signs(q) * sin
"""


def test_a_rotation_whose_body_is_not_seen_or_does_not_concatenate_is_not_flagged():
    assert lines(ELSEWHERE) == []


def test_the_text_test_passes_every_flagged_statement():
    for source in (INTERLEAVED, *(example.bad for example in RotateHalfCopy.examples)):
        text = source.splitlines()
        for line in lines(source):
            assert RotateHalfCopy.may_match([text[line - 1]], 0, op_tables())


def test_the_text_test_skips_sums_without_a_rotation_call():
    for text in ("y = x * cos + x2 * sin", "z = rotate_half(x)", "h = proj(x) * 2 + b"):
        assert not RotateHalfCopy.may_match([text], 0, op_tables())
