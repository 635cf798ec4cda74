"""FL019: a tensor scaled by one plus another, ``x * (1 + s)``: ``torch.addcmul(x, x, s)`` is one
eager kernel where the written-out form is two."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts, scope_statements
from fusionlint.analysis.nodes import code_of, operations
from fusionlint.analysis.numbers import one_plus
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

_ONE_PLUS_TEXT = re.compile(r"(?<![\w.])1(?:\.0*)?\s*\+|\+\s*1(?:\.0*)?\s*\)")


class UnitOffsetScale(Rule):
    code = "FL019"
    name = "unit-offset-scale"
    message = "a tensor scaled by one plus another (`x * (1 + s)`): `torch.addcmul(x, x, s)` is one kernel"
    rationale = """
        Adaptive and unit-offset norms scale by one plus a learned or predicted tensor:
        `normed * (gamma + 1.)` (x_transformers' adaptive LayerNorm, Gemma's RMS norm
        `output * (1.0 + self.weight)`, DiT's `x * (1 + scale[:, None])`). In eager PyTorch
        that is two kernels, the sum written before the product reads it; `torch.addcmul(x, x,
        s)` computes `x + x * s` in one. The sum is often small (one value per channel or per
        sample), so the saving is mostly a launch: fusionrt's eager count for a (8, 196, 256)
        input scaled per sample goes from 3 kernels to 2 after a layer norm. A fusing backend
        fuses the written-out form, mostly: the rewrite pays in eager (under fusionrt too where
        the sum of a sliced scale is a kernel of its own: the second example, 2 -> 1).

        Flagged: `x * (1 + s)`, `x * (s + 1)` and `(1 + s) * x` (`1.0` too), both `x` and `s`
        known to be tensors. Not flagged: `s` that may be a number (`1 + s` is then no kernel),
        `x` a product (`x * c * (1 + s)`: folding the scale into the small factor, FL014's
        rewrite, comes first), `x * (x + 1)` (a polynomial, not a scale), a product that a
        sum's fused op takes (`x * (1 + s) + shift`: FL013's `torch.addcmul(shift, x, 1 + s)`;
        `(w + 1) * b - w * a`: FL016's `torch.lerp`).
    """
    use_instead = "`torch.addcmul(x, x, s)` (`x` computed once, into a name)."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    yields_to = frozenset({"FL013", "FL016"})
    fix_notes = """
        No fix: `x + x * s` rounds differently from `x * (1 + s)`, `x` must be a name (an
        expression would run twice), and `addcmul` is strict where `*` promotes (a `float32`
        `x` with a `float64` or integer `s`).
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def adaptive_layer_norm(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    normed = F.layer_norm(x, x.shape[-1:])
    return normed * (gamma + 1.0)
""",
            at=((7, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def adaptive_layer_norm(x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    normed = F.layer_norm(x, x.shape[-1:])
    return torch.addcmul(normed, normed, gamma)
""",
            call="adaptive_layer_norm(randn(8, 196, 256), randn(8, 1, 256))",
        ),
        Example(
            bad="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, None])
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(x, x, scale[:, None])
""",
            call="modulate(randn(8, 196, 256), randn(8, 256))",
        ),
    )
    valid = (
        # a number offset by one; a product scaled (FL014's); a modulation with a shift (FL013's)
        """\
import torch


def f(x: torch.Tensor, gamma: torch.Tensor, shift: torch.Tensor, eps: float):
    a = x * (1 + eps)
    b = x * 0.5 * (gamma + 1.0)
    c = x * (1 + gamma) + shift
    return a, b, c
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # its text test needs a `*`
        return re.compile(r"\*")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return "*" in text and _ONE_PLUS_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            products = [op for part in own_parts(ref.node)
                        for op in operations(part, (cst.Multiply,), skip=(cst.Lambda,))]
            for product in products:
                found = _scaled(scope, product)
                if found is not None:
                    x, s = (code_of(node) for node in found)
                    yield Violation(product, message=f"`{x}` scaled by one plus `{s}`: `torch.addcmul({x}, {x}, {s})` is one kernel")



def _scaled(scope: Scope, product: cst.BinaryOperation) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(x, s) of ``x * (1 + s)`` (either order), both tensors, ``x`` no product and not ``s``."""
    for x, factor in ((product.left, product.right), (product.right, product.left)):
        s = one_plus(factor)
        if s is None or isinstance(x, cst.BinaryOperation) or code_of(s) == code_of(x):
            continue
        if scope.is_tensor(x) and scope.is_tensor(s):
            return x, s
    return None
