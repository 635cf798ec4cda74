"""FL019: a tensor scaled by one plus another, ``x * (1 + s)``: ``torch.addcmul(x, x, s)`` is one
eager kernel where the written-out form is two."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, scope_statements
from fusionlint.analysis.nodes import code_of, operations
from fusionlint.analysis.numbers import one_plus
from fusionlint.analysis.rescale import mentions
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

_ONE_PLUS_TEXT = re.compile(r"(?<![\w.])1(?:\.0*)?\s*\+|\+\s*1(?:\.0*)?\s*\)")
_PRODUCT_OF_NAME_TEXT = re.compile(r"\s*(\w+)\s*=\s*(?:\w+\s*\*(?![*=])|[^=#]*\*\s*\w+\s*(?:#.*)?$)")  # `r = x * ...`, `r = ... * x`
_LOOK = 5  # statements between the product and its add looked at


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

        The same scale is often written as a residual added back to the product: `result = x *
        y`, then `result += x` (monai's residual squeeze-and-excitation, under an `if`): two
        passes over `x` in eager where `torch.addcmul(x, x, y)` makes one (eager 2 -> 1 kernels,
        128 -> 64 KiB written for a 2 x 16 x 8 x 8 x 8 input).

        Flagged: `x * (1 + s)`, `x * (s + 1)` and `(1 + s) * x` (`1.0` too), both `x` and `s`
        known to be tensors; `r += x` and `r = r + x` where the statement that last set `r`,
        with nothing between reading `r` or setting `x` (in the same block, or before the
        `if` whose arm adds; within five statements of each), is `r = x * s` or `r = s * x`,
        `x` a name and `s` a tensor. Not flagged: `s` that may be a number (`1 + s` is then no kernel),
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
        Example(  # the residual added back to the product
            bad="""\
import torch


def excite(x: torch.Tensor, gate: torch.Tensor, residual: bool) -> torch.Tensor:
    result = x * gate
    if residual:
        result += x
    return result
""",
            at=((7, 9),),
            fixed=None,
            good="""\
import torch


def excite(x: torch.Tensor, gate: torch.Tensor, residual: bool) -> torch.Tensor:
    if residual:
        return torch.addcmul(x, x, gate)
    return x * gate
""",
            call="excite(randn(2, 16, 8, 8, 8), randn(2, 16, 1, 1, 1), True)",
        ),
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
        # its text test needs a `*`: in the scale, or in the product added back to
        return re.compile(r"\*")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if "*" in text and _ONE_PLUS_TEXT.search(text) is not None:
            return True
        made = _PRODUCT_OF_NAME_TEXT.match(text)  # added back a few statements below, or in an `if` there
        if made is None:
            return False
        name = made.group(1)
        for i in range(index + 1, min(len(block), index + 1 + _LOOK)):
            later = block[i].lstrip()
            if later.startswith("if ") or later.startswith(name) and re.match(r"%s\s*(?:\+=|=\s*%s\s*\+)" % (name, name), later):
                return True
        return False

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            products = [op for part in own_parts(ref.node)
                        for op in operations(part, (cst.Multiply,), skip=(cst.Lambda,))]
            for product in products:
                found = _scaled(scope, product)
                if found is not None:
                    yield Violation(product, message=_message(*found))
            added = _added_back(scope, ref)
            if added is not None:
                node, result, (x, s) = added[0], added[1], (code_of(n) for n in added[2])
                message = f"`{result}` is `{x}` times `{s}` plus `{x}`: `torch.addcmul({x}, {x}, {s})` is one kernel"
                yield Violation(node, message=message)



def _message(x: cst.BaseExpression, s: cst.BaseExpression) -> str:
    """The finding's message; an ``x`` that is no name goes into one first (it would run twice)."""
    scaled, scale = code_of(x), code_of(s)
    if isinstance(x, cst.Name):
        return f"`{scaled}` scaled by one plus `{scale}`: `torch.addcmul({scaled}, {scaled}, {scale})` is one kernel"
    return f"`{scaled}` scaled by one plus `{scale}`: bound to a name `y`, `torch.addcmul(y, y, {scale})` is one kernel"


def _scaled(scope: Scope, product: cst.BinaryOperation) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(x, s) of ``x * (1 + s)`` (either order), both tensors, ``x`` no product and not ``s``."""
    for x, factor in ((product.left, product.right), (product.right, product.left)):
        s = one_plus(factor)
        if s is None or isinstance(x, cst.BinaryOperation) or code_of(s) == code_of(x):
            continue
        if scope.is_tensor(x) and scope.is_tensor(s):
            return x, s
    return None


def _added_back(
    scope: Scope, ref: StatementRef
) -> tuple[cst.CSTNode, str, tuple[cst.BaseExpression, cst.BaseExpression]] | None:
    """(the statement, ``r``, (x, s)) of ``r += x`` or ``r = r + x`` where ``r`` was last set to
    ``x * s`` (or ``s * x``), nothing in between reading ``r`` or setting ``x``."""
    small = ref.simple
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        target, x = small.target, small.value
    elif (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.BinaryOperation)
          and isinstance(small.value.operator, cst.Add) and isinstance(small.value.left, cst.Name)
          and isinstance(small.targets[0].target, cst.Name) and small.value.left.value == small.targets[0].target.value):
        target, x = small.targets[0].target, small.value.right
    else:
        return None
    if not (isinstance(target, cst.Name) and isinstance(x, cst.Name)) or target.value == x.value:
        return None
    product = _last_set(ref, target.value, x.value)
    if not (isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply)):
        return None
    for factor, s in ((product.left, product.right), (product.right, product.left)):
        if isinstance(factor, cst.Name) and factor.value == x.value and not mentions(s, x.value) and scope.is_tensor(s):
            return small, target.value, (x, s)
    return None


def _last_set(ref: StatementRef, name: str, x: str) -> cst.BaseExpression | None:
    """The value of ``name = value``, the nearest statement before ``ref`` (in its block, or
    before the ``if`` holding it) that mentions ``name`` or ``x``, among the ``_LOOK`` before
    each (what the text test sees)."""
    while True:
        if ref.index > _LOOK:
            window = ref.block.statements[ref.index - _LOOK:ref.index]
            if not any(mentions(statement, name) or mentions(statement, x) for statement in window):
                return None  # beyond the text test's reach
        for earlier in ref.earlier():
            if not (mentions(earlier.node, name) or mentions(earlier.node, x)):
                continue
            small = earlier.simple
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                if isinstance(target, cst.Name) and target.value == name:
                    return small.value
            return None
        parent = ref.block.parent
        if parent is None or not isinstance(parent.node, cst.If) or any(
            mentions(part, name) or mentions(part, x) for part in own_parts(parent.node)
        ):
            return None
        ref = parent
