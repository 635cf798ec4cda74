"""FL016: linear interpolation written out (``a * (1 - w) + b * w``, ``a + w * (b - a)``,
``(1 + w) * b - w * a``): ``torch.lerp`` computes it in one kernel."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts, scope_statements
from fusionlint.analysis.nodes import code_of, factor_orders, operations, same_expression
from fusionlint.analysis.numbers import is_one
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# ``1 - w`` / ``1 + w`` / ``w + 1)`` next to a product, or a parenthesized difference as a factor: ``* (b - a)``,
# ``(b - a) *`` (its operands with calls and subscripts nested one deep; deeper is not seen).
_INNER = r"(?:[^()\n-]|\([^()]*\))*+"  # no minus at its own level: each scan stops at the next one
_LERP_TEXT = re.compile(rf"(?<![\w.])1(?:\.0*)?\s*[-+](?!=)|\+\s*1(?:\.0*)?\s*\)|\*\s*\({_INNER}-|-{_INNER}\)\s*\*")

Interpolation = tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression]  # start, end, weight


class LerpByHand(Rule):
    code = "FL016"
    name = "lerp-by-hand"
    message = "linear interpolation written out: `torch.lerp` computes it in one kernel"
    rationale = """
        A blend of two tensors by a weight, written as arithmetic, runs one eager kernel per
        operator, each writing a whole tensor: `(1 - z) * h + z * q` (a GRU's update) is four
        kernels, `h + z * (q - h)` three. `torch.lerp(h, q, z)` reads the three operands once
        and writes the result once: for 256 x 256 operands fusionrt's eager count goes from 4
        kernels and 1 MiB written to 1 kernel and 256 KiB. A fusing backend (fusionrt,
        torch.compile) fuses the written-out form into one kernel anyway: the rewrite pays in
        eager. With autograd on, fusionrt writes more for `torch.lerp` (the GRU example: 5 ->
        7 writes), as its backward keeps more of its inputs.

        Flagged, the two ends known to be tensors and the weight the same expression in both
        places: `a * (1 - w) + b * w` (terms and factors in any order; `1.0` too) and
        `a + w * (b - a)` are `torch.lerp(a, b, w)`; `(1 + w) * b - w * a` (or `(w + 1)`) is
        `torch.lerp(a, b, 1 + w)` (an extrapolation, as contrastive decoding writes it). The weight may be a
        tensor or a number. Not flagged: ends that may be Python numbers (`torch.lerp` takes
        tensors), two weights that are not the same expression, a product of more factors.
    """
    use_instead = "`torch.lerp(start, end, weight)` (`start.lerp(end, weight)`)."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: `torch.lerp` is not the same computation. It rounds once where the written-out
        form rounds after every operator (and switches formula at a weight of 0.5), and it is
        strict on dtypes where the operators promote: integer ends, or a weight tensor of
        another dtype than the ends (`float32` ends, a `float64` or boolean mask), are
        errors. Write the call by hand where the ends and a tensor weight share a float dtype.
    """
    examples = (
        Example(
            bad="""\
import torch


def gru_update(h: torch.Tensor, z: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (1 - z) * h + z * q
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def gru_update(h: torch.Tensor, z: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return torch.lerp(h, q, z)
""",
            call="gru_update(randn(256, 256), randn(256, 256).sigmoid(), randn(256, 256))",
        ),
        Example(
            bad="""\
import torch


def ema(average: torch.Tensor, value: torch.Tensor, decay: float) -> torch.Tensor:
    return average + (1.0 - decay) * (value - average)
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def ema(average: torch.Tensor, value: torch.Tensor, decay: float) -> torch.Tensor:
    return torch.lerp(average, value, 1.0 - decay)
""",
            call="ema(randn(256, 256), randn(256, 256), 0.99)",
        ),
        Example(
            bad="""\
import torch


def mask_tokens(x: torch.Tensor, token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = (mask > 0).unsqueeze(-1).type_as(x)
    return x * (1.0 - mask) + token.expand_as(x) * mask
""",
            at=((6, 12),),
            fixed=None,
            good="""\
import torch


def mask_tokens(x: torch.Tensor, token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = (mask > 0).unsqueeze(-1).type_as(x)
    return torch.lerp(x, token.expand_as(x), mask)
""",
            call="mask_tokens(randn(8, 196, 64), randn(1, 1, 64), randn(8, 196))",
        ),
    )
    valid = (
        # ends that are Python numbers (a running loss); two different weights
        """\
import torch


def f(running: float, loss: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, v: torch.Tensor):
    running = 0.9 * running + (1 - 0.9) * loss.item()
    return running, x * (1 - w) + y * v
""",
        # a difference whose subtrahend is not the other end; three factors
        """\
import torch


def g(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, w: torch.Tensor):
    return a + w * (b - c), (1 - w) * a * 2 + w * b
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # its text test needs a `*`
        return re.compile(r"\*")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return "*" in text and _LERP_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            sums = [op for part in own_parts(ref.node)
                    for op in operations(part, (cst.Add, cst.Subtract), skip=(cst.Lambda,))]
            for total in sums:
                found = _interpolation(total)
                if found is None or not all(scope.is_tensor(end) for end in found[:2]):
                    continue
                start, end, weight = (code_of(node) for node in found)
                lerp = f"torch.lerp({start}, {end}, {weight})"
                yield Violation(total, message=f"linear interpolation written out: `{lerp}` computes it in one kernel")



def _interpolation(total: cst.BinaryOperation) -> Interpolation | None:
    """(start, end, weight) of a sum that interpolates, or None."""
    if isinstance(total.operator, cst.Subtract):
        return _extrapolation(total.left, total.right)
    for one, other in ((total.left, total.right), (total.right, total.left)):
        found = _blend(one, other) or _step(one, other)
        if found is not None:
            return found
    return None


def _blend(start_term: cst.BaseExpression, end_term: cst.BaseExpression) -> Interpolation | None:
    """``start * (1 - w) + end * w``."""
    for start, complement in factor_orders(start_term):
        weight = _one_and(complement, cst.Subtract)
        if weight is None:
            continue
        for w, end in factor_orders(end_term):
            if same_expression(w, weight):
                return start, end, weight
    return None


def _step(start: cst.BaseExpression, product: cst.BaseExpression) -> Interpolation | None:
    """``start + w * (end - start)``."""
    for weight, difference in factor_orders(product):
        if isinstance(difference, cst.BinaryOperation) and isinstance(difference.operator, cst.Subtract):
            if same_expression(difference.right, start):
                return start, difference.left, weight
    return None


def _extrapolation(end_term: cst.BaseExpression, start_term: cst.BaseExpression) -> Interpolation | None:
    """``(1 + w) * end - w * start`` (``w + 1`` too): ``lerp(start, end, 1 + w)``."""
    for end, one_plus in factor_orders(end_term):
        weight = _one_and(one_plus, cst.Add) or _and_one(one_plus)
        if weight is None:
            continue
        for w, start in factor_orders(start_term):
            if same_expression(w, weight):
                return start, end, one_plus
    return None


def _one_and(expr: cst.BaseExpression, operator: type) -> cst.BaseExpression | None:
    """``w`` of ``1 - w`` (``operator`` Subtract) or ``1 + w`` (Add); ``1.0`` too."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, operator) and is_one(expr.left):
        return expr.right
    return None


def _and_one(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``w`` of ``w + 1``."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and is_one(expr.right):
        return expr.left
    return None
