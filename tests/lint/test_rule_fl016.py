"""FL016 beyond its own examples: the forms of an interpolation, its ends' types, and the text test."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.lerp_by_hand import LerpByHand

OPTIONS = LintOptions(codes=frozenset({"FL016"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


FORMS = """\
import torch


def forms(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor, beta: float):
    one = w * b + (1. - w) * a
    two = a + (b - a) * w
    three = b * (1 + beta) - a * beta
    four = torch.sigmoid(a * (1 - w[:, None]) + b.float() * w[:, None])
    return one, two, three, four
"""


def test_every_form_names_its_ends_and_weight():
    assert findings(FORMS) == [
        (5, "linear interpolation written out: `torch.lerp(a, b, w)` computes it in one kernel"),
        (6, "linear interpolation written out: `torch.lerp(a, b, w)` computes it in one kernel"),
        (7, "linear interpolation written out: `torch.lerp(a, b, 1 + beta)` computes it in one kernel"),
        (8, "linear interpolation written out: `torch.lerp(a, b.float(), w[:, None])` computes it in one kernel"),
    ]


def test_an_extrapolation_may_spell_its_weight_w_plus_one():
    source = "import torch\n\n\ndef f(total: torch.Tensor, mean: torch.Tensor, old: torch.Tensor):\n    return (total + 1) * mean - total * old\n"
    assert findings(source) == [
        (5, "linear interpolation written out: `torch.lerp(old, mean, total + 1)` computes it in one kernel"),
    ]


NOT_TENSORS = """\
import torch


def schedule(start, end, t):
    return start * (1 - t) + end * t


def mixed(x: torch.Tensor, count: int, w: torch.Tensor):
    return x * (1 - w) + count * w, x + w * (x - 2)
"""


def test_ends_that_may_be_numbers_are_not_flagged():
    assert findings(NOT_TENSORS) == []


# timm's mixup: one name holds a NumPy array in one branch and a tensor in the other.
NUMPY_BRANCH = """\
import numpy as np
import torch


def mix(mixed_i, mixed_j, lam: float, is_np: bool):
    if is_np:
        return mixed_i.astype(np.float32) * lam + mixed_j.astype(np.float32) * (1 - lam)
    return mixed_i.clone() * lam + mixed_j.clone() * (1 - lam)
"""


def test_a_numpy_astype_is_no_tensor():
    assert [line for line, _ in findings(NUMPY_BRANCH)] == [8]


MASK_TOKEN = """\
import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, dim: int, use_mask_token: bool):
        super().__init__()
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim)) if use_mask_token else None
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, bool_masked_pos):
        embeddings = self.norm(x)
        mask_tokens = self.mask_token.expand(x.shape[0], x.shape[1], -1)
        mask = bool_masked_pos.unsqueeze(-1).type_as(mask_tokens)
        return embeddings * (1.0 - mask) + mask_tokens * mask
"""


def test_a_parameter_made_only_on_a_condition_is_a_tensor():
    assert [line for line, _ in findings(MASK_TOKEN)] == [15]


def test_the_text_test_passes_every_flagged_statement():
    for source in (FORMS, MASK_TOKEN, *(example.bad for example in LerpByHand.examples)):
        lines = source.splitlines()
        for line, _ in findings(source):
            assert LerpByHand.may_match([lines[line - 1]], 0, op_tables())


def test_the_text_test_skips_plain_arithmetic():
    for text in ("y = x * 2 + b", "z = (a - b) / c", "n = count + 1", "loss = 1 - iou"):
        assert not LerpByHand.may_match([text], 0, op_tables())
