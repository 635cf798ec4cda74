"""FL013: element-wise arithmetic that one fused PyTorch op does in one eager kernel:
``x + alpha * y`` (``torch.add(..., alpha=)``), ``a * b + c`` (``torch.addcmul``),
``a / b * v + c`` (``torch.addcdiv``)."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts, scope_statements
from fusionlint.analysis.numbers import NumberNames
from fusionlint.analysis.nodes import factors_of, operations
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, fused_call, replace_nodes

# A product next to a sum: ``* b +``, ``/ b -``, ``+ a *`` (an operand between, with calls,
# subscripts and parentheses nested two deep; a factor nested deeper is not seen).
_NESTED = r"(?:\((?:[^()]|\([^()]*\))*\)|\[(?:[^\[\]]|\[[^\[\]]*\])*\])"
_OPERAND = rf"(?:[\w.]+|{_NESTED})(?:{_NESTED}[\w.]*)*"
_FUSABLE_TEXT = re.compile(rf"[*/]\s*-?{_OPERAND}\s*[+-](?!=)|[\w)\]]\s*[+-]\s*{_OPERAND}\s*[*/](?![*=])")
_STRING_STATEMENT = re.compile(r"\s*[rRbBuUfF]{0,2}['\"]")  # a docstring keeps a module whole
# A one-line string literal that is not an f-string holds no code: "org/model-0.3B" is no product.
_STRING = re.compile(r"""(?<!\w)([rRbBuUfF]{0,2})('[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")""")


def _code_of(text: str) -> str:
    return _STRING.sub(lambda m: m.group(0) if "f" in m.group(1).lower() else '""', text)


class ScalarFusedOp(Rule):
    code = "FL013"
    name = "scalar-fused-op"
    message = "element-wise arithmetic that one fused op does in one kernel (`torch.add(alpha=)`, `addcmul`, `addcdiv`)"
    rationale = """
        Eager PyTorch runs each operator as a kernel that writes its whole result: `x + 0.5 *
        y` is two kernels (the scaled `y`, then the sum), `a * b * 0.5 + c` three. PyTorch has
        fused ops for these: `torch.add(x, y, alpha=0.5)` (and `torch.sub`), `torch.addcmul(c,
        a, b, value=0.5)` and `torch.addcdiv(c, a, b, value=0.5)`, one kernel each. fusionrt's
        eager count for 256 x 256 operands goes from 2 kernels and 512 KiB written to 1 and
        256 KiB for `x + 0.5 * y`, from 3 kernels and 768 KiB to 1 and 256 KiB for `a * b *
        0.5 + c`. A fusing backend (fusionrt, torch.compile) fuses the written-out form
        anyway: the rewrite pays in eager only.

        Flagged, every operand known to be a tensor and every scale a number the code shows
        (a literal, `math.sqrt(...)`, a parameter annotated `float`/`int` or a local assigned
        only such values): `x + alpha * y` and `x - alpha * y`; `a * b + c` and `a * b * v +
        c`; `a / b + c` and `a / b * v + c`. The out-of-place fused ops broadcast all their
        operands together and promote dtypes as the written-out arithmetic does. Not flagged:
        a scale that may be a tensor (`self.gamma`: the fused ops take numbers only), in-place
        updates (`x += ...`), `a * b + c * d` (one fused op would leave a kernel of the two),
        a product of a batched matmul (FL012 reports `torch.baddbmm`), a sum inside attention
        that FL010 rewrites to `F.scaled_dot_product_attention`.
    """
    use_instead = "`torch.add(x, y, alpha=alpha)`, `torch.addcmul(c, a, b, value=v)`, `torch.addcdiv(c, a, b, value=v)`."
    fix_safety = FixSafety.UNSAFE
    pays_in = (EAGER,)
    yields_to = frozenset({"FL010", "FL012", "FL016"})
    fix_notes = """
        The fix writes the fused op in place of the sum. It is **unsafe**: the fused ops round
        differently (no rounding of the product to the operands' dtype before the sum), and
        they are stricter than the operators on dtypes: integer tensors take no float `alpha`,
        and `addcdiv` refuses integer tensors (`/` divides them as floats). `fusionlint check
        --fix --verify` runs both versions on random inputs and applies the fix only if they
        agree.
    """
    examples = (
        Example(
            bad="""\
import torch


def momentum_step(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float) -> torch.Tensor:
    buf = buf * 0.9 + grad
    return p - lr * buf
""",
            at=((5, 11), (6, 12)),
            fixed="""\
import torch


def momentum_step(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float) -> torch.Tensor:
    buf = torch.add(grad, buf, alpha=0.9)
    return torch.sub(p, buf, alpha=lr)
""",
            call="momentum_step(randn(256, 256), randn(256, 256), randn(256, 256), 0.01)",
        ),
        Example(
            bad="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return x * scale * 0.5 + shift
""",
            at=((5, 12),),
            fixed="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift, x, scale, value=0.5)
""",
            call="modulate(randn(8, 64, 32), randn(8, 1, 32), randn(8, 1, 32))",
        ),
        Example(
            bad="""\
import torch


def adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    denom = v.abs().sqrt() + 1e-8
    return m / denom * -0.001 + p
""",
            at=((6, 12),),
            fixed="""\
import torch


def adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    denom = v.abs().sqrt() + 1e-8
    return torch.addcdiv(p, m, denom, value=-0.001)
""",
            call="adam_like(randn(256, 256), randn(256, 256), randn(256, 256))",
        ),
    )
    valid = (
        # a scale that may be a tensor; an in-place update; a number added
        """\
import torch


class Scale(torch.nn.Module):
    def mix(self, x: torch.Tensor, y: torch.Tensor, gamma):
        x += 0.5 * y
        return x + self.gamma * y + gamma * y, x * y + 1.0
""",
        # a batched matmul scaled and added (FL012's); a subtraction of a product of tensors
        """\
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.bmm(a, b) * 0.5 + c, c - a * b
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # a fusable pair holds a product or a quotient
        return re.compile(r"[*/]")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _STRING_STATEMENT.match(text) is None and _FUSABLE_TEXT.search(_code_of(text)) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        numbers = NumberNames(scope)
        for ref in scope_statements(scope):
            statement = ref.node
            sums = [op for part in own_parts(statement)
                    for op in operations(part, (cst.Add, cst.Subtract), skip=(cst.AugAssign,))]
            rewritten: set[int] = set()  # operands of a reported sum: reported with it
            for total in sums:
                rewrite = None if id(total) in rewritten else _rewrite(scope, numbers, total)
                if rewrite is None:
                    continue
                func, args, value = rewrite
                rewritten.update(map(id, args))
                spelled = scope.facts.spelling(func)
                fix = None
                if spelled is not None and isinstance(statement, cst.SimpleStatementLine):
                    keyword = "value" if func.endswith(("addcmul", "addcdiv")) else "alpha"
                    fused = fused_call(spelled, args, [(keyword, value)]).with_changes(lpar=total.lpar, rpar=total.rpar)
                    fix = (StatementEdit(statement, (replace_nodes(statement, {total: fused}),)),)
                yield Violation(total, fix=fix, message=f"written-out arithmetic that `{func}` does in one kernel")




def _rewrite(scope: Scope, numbers: NumberNames, total: cst.BinaryOperation):
    """(fused op, its tensor arguments, its scale or None) for ``total``, or None."""
    add = isinstance(total.operator, cst.Add)
    sides = ((total.left, total.right), (total.right, total.left)) if add else ((total.right, total.left),)
    for term, other in sides:
        if not _is_scaled(term) or _is_scaled(other) or not scope.is_tensor(other) or _is_batched_product(scope, term):
            continue
        factors = factors_of(term)
        tensors = [f for f in factors if scope.is_tensor(f)]
        scales = [f for f in factors if not scope.is_tensor(f)]
        if len(scales) > 1 or not all(numbers.is_number(s) for s in scales):
            continue
        value = scales[0] if scales else None
        if add and len(tensors) == 2:
            return "torch.addcmul", (other, *tensors), value
        if add and len(tensors) == 1 and _is_quotient(scope, tensors[0]):
            quotient = tensors[0]
            return "torch.addcdiv", (other, quotient.left, quotient.right), value  # type: ignore[attr-defined]
        if len(tensors) == 1 and value is not None:
            return ("torch.add" if add else "torch.sub"), (other, tensors[0]), value
    return None


def _is_scaled(expr: cst.BaseExpression) -> bool:
    """A product or quotient: ``a * b + c * d`` is no one fused op (it would keep a kernel)."""
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide))


def _is_quotient(scope: Scope, expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide)
        and scope.is_tensor(expr.left) and scope.is_tensor(expr.right)
    )


def _is_batched_product(scope: Scope, term: cst.BaseExpression) -> bool:
    """A factor that is ``bmm``/``mm``: FL012 fuses the whole sum into the GEMM."""
    for factor in factors_of(term):
        op = scope.op(factor)
        if op is not None and op[0] in ("bmm", "mm"):
            return True
    return False


