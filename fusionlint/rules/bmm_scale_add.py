"""FL012: ``torch.bmm(a, b) * alpha + beta * c`` written out, where ``torch.baddbmm`` (``addmm``
for ``mm``) scales and adds in the GEMM's epilogue."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, ancestors
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, fused_call, replace_nodes

_PRODUCT_TEXT = re.compile(r"\b(?:bmm|mm)\s*\(")
_FUSED = {"bmm": "torch.baddbmm", "mm": "torch.addmm"}


class BmmScaleAdd(Rule):
    code = "FL012"
    name = "bmm-scale-add"
    message = "a batched matmul scaled and added by hand: `torch.baddbmm` (`torch.addmm`) does it in one kernel"
    rationale = """
        `torch.bmm(a, b) * alpha + c` runs three kernels in eager PyTorch: the product is
        written, read and written again by the scaling, and once more by the addition (with
        `beta * c`, a fourth). `torch.baddbmm(c, a, b, alpha=alpha, beta=beta)` computes
        `beta * c + alpha * (a @ b)` in the GEMM's epilogue: one kernel, one write. fusionrt's
        eager count for four 64 x 32 by 32 x 48 products goes from 3 kernels and 144 KiB
        written to 1 and 48 KiB; with `beta * c` fusionrt itself saves too (2 -> 1 writes), as
        it runs `beta * c` as a kernel of its own before the product.

        Flagged: `+` of a tensor `c` (or `beta * c`) and `torch.bmm(a, b)` (or `a.bmm(b)`),
        possibly multiplied by `alpha` or divided by `d`, where `alpha`, `beta` and `d` are
        not known to be tensors (the fused ops take numbers only); the same with `torch.mm`
        when there is a scale (without one, FL011 reports `b + torch.mm(a, c)`). Not flagged:
        `torch.matmul` and `@` (they also take 1-D and 4-D operands, which `baddbmm` does not),
        a scale that is a tensor, a subtraction, scores that FL010 rewrites with the whole
        attention into `F.scaled_dot_product_attention`.
    """
    use_instead = "`torch.baddbmm(c, a, b, beta=beta, alpha=alpha)`; `torch.addmm(c, a, b, beta=beta, alpha=alpha)` for `mm`."
    fix_safety = FixSafety.UNSAFE
    pays_in = (EAGER,)
    yields_to = frozenset({"FL010"})  # the whole attention as F.scaled_dot_product_attention
    fix_notes = """
        The fix writes the fused op in place of the sum. It is **unsafe**: the fused op rounds
        differently (scaled and added to the accumulator), it wants `c` in the operands' dtype
        and broadcastable to the product's shape (`+` promotes and broadcasts both ways), and
        a scale that is a one-element tensor at run time would be read on the host. `fusionlint
        check --fix --verify` runs both versions on random inputs and applies the fix only if
        they agree.
    """
    examples = (
        Example(
            bad="""\
import torch


def biased_scores(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    scores = torch.bmm(q, k.transpose(1, 2)) * scale + bias
    return scores.softmax(-1)
""",
            at=((5, 14),),
            fixed="""\
import torch


def biased_scores(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=scale)
    return scores.softmax(-1)
""",
            call="biased_scores(randn(4, 64, 32), randn(4, 64, 32), randn(4, 64, 64), 0.125)",
        ),
        Example(
            bad="""\
import torch


def mix(h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 0.9 * h + a.mm(b) / 10
""",
            at=((5, 12),),
            fixed="""\
import torch


def mix(h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.addmm(h, a, b, beta=0.9, alpha=1 / 10)
""",
            call="mix(randn(64, 48), randn(64, 32), randn(32, 48))",
        ),
    )
    valid = (
        # a scale that is a tensor; `torch.matmul`, which also takes 4-D operands
        """\
import torch


def f(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, temperature: torch.Tensor):
    s = torch.bmm(q, k) * temperature + mask
    t = torch.matmul(q, k) * 0.5 + mask
    return s, t
""",
        # an unscaled `mm` (FL011's), a subtraction, an addend that is a number
        """\
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.mm(a, b) + c, c - torch.bmm(a, b) * 2, torch.bmm(a, b) * 2 + 1
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _PRODUCT_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return "+" in text and _PRODUCT_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for key in ("bmm", "mm"):
            for site in scope.sites.get(key, ()):
                operands = None if site.conditional else _operands(scope, site.node)
                if operands is None:
                    continue
                found = _scaled_sum(scope, site.statement.node, site.node)
                if found is None:
                    continue
                total, addend, beta, alpha = found
                if key == "mm" and alpha is None and beta is None:
                    continue
                fix = None
                func = scope.facts.spelling(_FUSED[key])
                if func is not None and isinstance(site.statement.node, cst.SimpleStatementLine):
                    keywords = [("beta", beta), ("alpha", alpha)]
                    fused = fused_call(func, (addend, *operands), keywords).with_changes(lpar=total.lpar, rpar=total.rpar)
                    statement = site.statement.node
                    fix = (StatementEdit(statement, (replace_nodes(statement, {total: fused}),)),)
                yield Violation(total, fix=fix)


def _operands(scope: Scope, product: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(a, b) of ``torch.bmm(a, b)`` or ``a.bmm(b)`` (likewise ``mm``)."""
    op = scope.op(product)
    if op is None or op[0] not in _FUSED or not isinstance(product, cst.Call):
        return None
    args = product.args
    if any(a.keyword is not None or a.star for a in args):
        return None
    if isinstance(product.func, cst.Attribute) and scope.is_tensor(product.func.value) and len(args) == 1:
        return product.func.value, args[0].value
    if len(args) == 2 and op[2] is args[0].value:
        return args[0].value, args[1].value
    return None


def _parent(statement: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
    path = ancestors(statement, node)
    return path[0] if path else None


def _scaled_sum(scope: Scope, statement: cst.CSTNode, product: cst.CSTNode):
    """(the sum, c, beta, alpha) of ``product [* alpha | / d] + [beta *] c``; beta and alpha None
    when absent, alpha ``1 / d`` for a division."""
    term, alpha = product, None  # type: cst.CSTNode, cst.BaseExpression | None
    parent = _parent(statement, product)
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Divide):
        if parent.left is not product or not _is_number(scope, parent.right):
            return None
        alpha = cst.BinaryOperation(cst.Integer("1"), cst.Divide(), _bracketed(parent.right))
    elif isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply):
        alpha = parent.right if parent.left is product else parent.left
        if not _is_number(scope, alpha):
            return None
    if alpha is not None:
        term, parent = parent, _parent(statement, parent)
    if not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add)):
        return None
    other = parent.right if parent.left is term else parent.left
    addend, beta = other, None
    if isinstance(other, cst.BinaryOperation) and isinstance(other.operator, cst.Multiply):
        for tensor, scale in ((other.right, other.left), (other.left, other.right)):
            if scope.is_tensor(tensor) and _is_number(scope, scale):
                addend, beta = tensor, scale
                break
    if not scope.is_tensor(addend):
        return None
    return parent, addend, beta, alpha


def _is_number(scope: Scope, expr: cst.BaseExpression) -> bool:
    """Not known to be a tensor, and of a kind that can hold a number."""
    kinds = (cst.Integer, cst.Float, cst.Name, cst.Attribute, cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript)
    return isinstance(expr, kinds) and not scope.is_tensor(expr)


def _bracketed(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, cst.BinaryOperation) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


