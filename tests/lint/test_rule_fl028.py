"""FL028 beyond its own examples: which factors are boolean masks turned into numbers."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions
from fusionlint.ops import op_tables
from fusionlint.rules.mask_multiply import MaskMultiply

OPTIONS = LintOptions(codes=frozenset({"FL028"}))


def findings(source: str) -> list[int]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [f.line for f in result.findings]


FLAGGED = """\
import torch


def f(x: torch.Tensor, d: torch.Tensor, out: torch.Tensor, edges: torch.Tensor, theta: torch.Tensor, p: torch.Tensor):
    a = x * (d < 0.5).float()
    empty = (edges[:, 0] < edges[:, 1]) | (edges[:, 2] < edges[:, 3])
    b = out * (~empty).unsqueeze(-1)
    c = theta + (theta < 0).type_as(theta) * 6.28
    top = p > 0.9
    p *= (~top).float()
    e = (x > 0.1).to(x.dtype) * x
    g = x.mul(torch.logical_not(d.isnan())[:, None])
    valid = (d > 0) & ~d.isinf()
    h = x * valid.view(-1, 1).half()
    return a, b, c, e, g, h
"""


def test_casts_and_negations_of_booleans_are_flagged():
    assert findings(FLAGGED) == [5, 7, 8, 10, 11, 12, 14]


SILENT = """\
import torch


def f(x: torch.Tensor, mask: torch.Tensor, n: int, w: torch.Tensor):
    m = x > 0
    a = x * m  # a boolean as it is: one kernel
    b = x * (1 - mask)  # mask may hold weights
    c = x * mask.float()  # a parameter: maybe numbers already
    keep = (~m).float()
    d = x * keep
    e = (n > 1) * 2  # Python numbers
    g = x * (~w)  # w may be an integer tensor: a bitwise not
    x *= (x > 1).float()  # in place, not negated: masked_fill_ would need a `~`
    h = x * m.float()  # a bare name's cast: the text test does not look for it
    return a, b, c, d, keep, e, g, h
"""


def test_masks_that_may_hold_numbers_or_are_read_again_are_silent():
    assert findings(SILENT) == []


def test_the_text_test_passes_every_flagged_statement_or_its_link():
    for source in (FLAGGED, *(example.bad for example in MaskMultiply.examples)):
        lines = source.splitlines()
        for line in findings(source):
            assert any(MaskMultiply.may_match(lines, i, op_tables()) for i in range(max(line - 4, 0), line))
