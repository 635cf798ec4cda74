"""FL027: a logarithm's composite written out: ``log(x / (1 - x))`` (``torch.logit``), its clamped
form (``torch.logit(x, eps)``), ``log(sigmoid(x))`` (``F.logsigmoid``) and ``p * log(p)``
(``torch.special.entr``): one kernel each."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, reaching_assignment
from fusionlint.analysis.nodes import Walker, code_of, factor_orders, same_expression
from fusionlint.analysis.numbers import is_one
from fusionlint.analysis.torch_calls import unary_operand
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# Every pattern takes a logarithm (``log``, ``log1p``) as a function or a method.
_LOG_TEXT = re.compile(r"log(?:1p)?\s*\(")


class LogByHand(Rule):
    code = "FL027"
    name = "log-by-hand"
    message = "a logarithm's composite written out that one torch op computes in one kernel"
    rationale = """
        Eager PyTorch runs each op of a written-out formula as a kernel that writes a tensor.
        The inverse of the sigmoid, `torch.log(x / (1 - x))` (DETR-style box refinement), is
        three kernels; `torch.logit(x)` one. Its clamped form, `x = x.clamp(min=0, max=1)`, `x1 =
        x.clamp(min=eps)`, `x2 = (1 - x).clamp(min=eps)`, `torch.log(x1 / x2)` (the
        `inverse_sigmoid` of Deformable DETR and its descendants), is six; `torch.logit(x,
        eps)` of the clamp to [0, 1] two (fusionrt's eager count for a (64, 256, 128) input:
        6 -> 2 kernels, 48 -> 16 MiB written). `torch.log(torch.sigmoid(x))` is two, `F.logsigmoid(x)` one, and exact
        where the written-out form rounds to `log(0)`; an entropy's `p * torch.log(p)` is two,
        `-torch.special.entr(p)` one (and 0 where `p` is 0, where the product is NaN). fusionrt
        fuses either form into one kernel (it records `logit`, `logsigmoid` and `entr` as
        their element-wise decompositions), so the rewrite is claimed in eager only.

        Flagged: `log(x / (1 - x))`, `log(x) - log(1 - x)`, `log(x) - log1p(-x)` (`1.0` too);
        `log(a / b)` where `a` is `x.clamp(min=eps)` and `b` is `(1 - x).clamp(min=eps)`,
        inline or names assigned in the same block, `x` clamped to [0, 1] (inline or by the
        statement before, where the finding points); `log(sigmoid(x))`, `sigmoid(x).log()`; `p * log(p)` and `-p * log(p)` (either
        order); `torch.` functions or methods throughout. Not flagged: an `eps` added inside the
        logarithm (`log(sigmoid(x) + eps)`, `p * log(p + eps)`: no op adds it), a ratio of
        unrelated tensors, the clamped form of an `x` not clamped to [0, 1] (the clamps differ).
    """
    use_instead = "`torch.logit(x)`, `torch.logit(x, eps)`, `F.logsigmoid(x)`, `-torch.special.entr(p)`."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the fused ops do not round like the written-out formulas (that is part of
        their point: `logsigmoid` and `entr` are exact where the composite gives `-inf` or
        NaN), and `torch.logit(x, eps)` clamps `1 - x` where the written-out form clamps `x`'s
        complement after it (they differ by at most `eps` in the logarithm). Write the op by
        hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x = x.clamp(min=0, max=1)
    x1 = x.clamp(min=eps)
    x2 = (1 - x).clamp(min=eps)
    return torch.log(x1 / x2)
""",
            at=((5, 9),),
            fixed=None,
            good="""\
import torch


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return torch.logit(x.clamp(min=0, max=1), eps)
""",
            call="inverse_sigmoid(torch.sigmoid(randn(64, 256, 128)))",
        ),
        Example(
            bad="""\
import torch


def biased_logits_and_entropy(logits: torch.Tensor, anchors: torch.Tensor):
    logits = logits + logits.sigmoid().log()
    prob = logits.softmax(dim=-1)
    entropy = -(prob * torch.log(prob)).sum(dim=-1)
    return logits, entropy, torch.log(anchors / (1 - anchors))
""",
            at=((5, 23), (7, 17), (8, 29)),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def biased_logits_and_entropy(logits: torch.Tensor, anchors: torch.Tensor):
    logits = logits + F.logsigmoid(logits)
    prob = logits.softmax(dim=-1)
    entropy = torch.special.entr(prob).sum(dim=-1)
    return logits, entropy, torch.logit(anchors)
""",
            call="biased_logits_and_entropy(randn(64, 1000), torch.sigmoid(randn(64, 300, 4)))",
        ),
    )
    valid = (
        # an eps inside the logarithm; a ratio of other tensors; another tensor's log
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, p: torch.Tensor, q: torch.Tensor, eps: float):
    a = -torch.log(torch.sigmoid(x) + eps)
    b = torch.log(x / (1 - y))
    c = p * torch.log(p + eps)
    d = p * torch.log(q)
    return a, b, c, d, torch.log(x) - torch.log(1 - y)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _LOG_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _LOG_TEXT.search(text) is not None and ("/" in text or "-" in text or "sigmoid" in text or "*" in text)

    def check(self, scope: Scope) -> Iterator[Violation]:
        statements: dict[int, StatementRef] = {}
        for key in ("log", "log1p"):
            for site in scope.sites.get(key, ()):
                statements.setdefault(id(site.statement.node), site.statement)
        for ref in statements.values():
            finder = _Formulas(scope, ref)
            for part in own_parts(ref.node):
                finder.walk(part)
            yield from finder.found


class _Formulas(Walker):
    """The written-out composites of one statement, outermost only."""

    def __init__(self, scope: Scope, ref: StatementRef) -> None:
        self.scope = scope
        self.ref = ref
        self.found: list[Violation] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        scope = self.scope
        argument = unary_operand(scope, node, "log")
        if argument is None:
            return True
        inner = unary_operand(scope, argument, "sigmoid")
        if inner is not None and scope.is_tensor(inner):
            return self._found(node, f"`log(sigmoid(x))` written out: `F.logsigmoid({code_of(inner)})`")
        ratio = _ratio(argument)
        if ratio is None:
            return True
        x = _complement(ratio[1])
        if x is not None and same_expression(x, ratio[0]) and scope.is_tensor(x):
            return self._found(node, f"the logit written out: `torch.logit({code_of(x)})`")
        clamped = _clamped_logit(scope, self.ref, *ratio)
        if clamped is None:
            return True
        x, eps, at = clamped
        return self._found(at or node, f"the logit of a clamped value written out: `torch.logit({code_of(x)}, {eps})`")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        scope = self.scope
        if isinstance(node.operator, cst.Subtract):
            x = unary_operand(scope, node.left, "log")
            complement = _log_complement(scope, node.right)
            if x is not None and complement is not None and same_expression(x, complement) and scope.is_tensor(x):
                return self._found(node, f"the logit written out: `torch.logit({code_of(x)})`")
            return True
        for p, log in factor_orders(node):
            logged = unary_operand(scope, log, "log")
            negated = isinstance(p, cst.UnaryOperation) and isinstance(p.operator, cst.Minus)
            q = p.expression if negated else p  # type: ignore[attr-defined]
            if logged is not None and same_expression(logged, q) and scope.is_tensor(q):
                entr = f"torch.special.entr({code_of(q)})"
                formula = f"`-p * log(p)` written out: `{entr}`" if negated else f"`p * log(p)` written out: `-{entr}`"
                return self._found(node, formula)
        return True

    def _found(self, node: cst.CSTNode, formula: str) -> bool:
        self.found.append(Violation(node, message=f"{formula} computes it in one kernel"))
        return False


def _ratio(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return expr.left, expr.right
    return None


def _complement(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``1 - x``."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) and is_one(expr.left):
        return expr.right
    return None


def _log_complement(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``log(1 - x)`` or ``log1p(-x)``."""
    argument = unary_operand(scope, expr, "log")
    if argument is not None:
        return _complement(argument)
    argument = unary_operand(scope, expr, "log1p")
    if isinstance(argument, cst.UnaryOperation) and isinstance(argument.operator, cst.Minus):
        return argument.expression
    return None


def _clamped_logit(scope: Scope, ref: StatementRef, numerator: cst.BaseExpression, denominator: cst.BaseExpression
                   ) -> tuple[cst.BaseExpression, str, cst.CSTNode | None] | None:
    """(x, eps, the clamp of ``x`` to [0, 1] before it, if a statement before makes it) of ``a / b``
    where ``a`` is ``x.clamp(min=eps)`` and ``b`` is ``(1 - x).clamp(min=eps)``, inline or names
    assigned in the same block, and ``x`` is clamped to [0, 1]."""
    a, b = (_resolved(ref, side) for side in (numerator, denominator))
    low_a, low_b = _clamp_min(a), _clamp_min(b)
    if low_a is None or low_b is None or not same_expression(low_a[1], low_b[1]):
        return None
    x, complement = low_a[0], _complement(low_b[0])
    if complement is None or not same_expression(x, complement) or not scope.is_tensor(x):
        return None
    if _is_unit_clamp(x):
        return x, code_of(low_a[1]), None
    found = reaching_assignment(ref, x.value) if isinstance(x, cst.Name) else None
    if found is None or not _is_unit_clamp(found[1]):
        return None  # outside [0, 1] the two clamps and ``logit``'s differ
    return x, code_of(low_a[1]), found[1]  # the formula starts at the clamp


def _resolved(ref: StatementRef, expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, cst.Name):
        found = reaching_assignment(ref, expr.value)
        if found is not None:
            return found[1]
    return expr


def _clamp_min(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(x, low) of ``x.clamp(min=low)`` / ``x.clamp_min(low)``."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)) or len(expr.args) != 1:
        return None
    arg, method = expr.args[0], expr.func.attr.value
    if method in ("clamp", "clip") and arg.keyword is not None and arg.keyword.value == "min" \
            or method == "clamp_min" and arg.keyword is None:
        return expr.func.value, arg.value
    return None


def _is_unit_clamp(expr: cst.BaseExpression) -> bool:
    """``x.clamp(min=0, max=1)`` or ``x.clamp(0, 1)``."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)) or expr.func.attr.value not in ("clamp", "clip"):
        return False
    values = [code_of(arg.value) for arg in expr.args]
    return len(values) == 2 and values[0] in ("0", "0.0") and values[1] in ("1", "1.0")
