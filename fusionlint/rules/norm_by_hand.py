"""FL026: a vector norm written out, ``sqrt(sum(x ** 2, d))`` (``torch.linalg.vector_norm``), and
the hypotenuse, ``sqrt(a ** 2 + b ** 2)`` (``torch.hypot``): one kernel each."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts
from fusionlint.analysis.nodes import Walker, code_of, same_expression
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# Every pattern takes a square root (``sqrt``, ``pow(0.5)``, ``** 0.5``) of a sum of squares.
_ROOT_TEXT = re.compile(r"sqrt\s*\(|pow\s*\(|\*\*\s*0?\.5")
_SQUARE_TEXT = re.compile(r"\*\*\s*2|pow\s*\(|square\s*\(|\*")
_ROOT_SITES = ("sqrt", "pow", "sum")  # a root of a sum of squares calls one of them


class NormByHand(Rule):
    code = "FL026"
    name = "norm-by-hand"
    message = "a vector norm (or a hypotenuse) written out: `torch.linalg.vector_norm` (`torch.hypot`) computes it in one kernel"
    rationale = """
        Eager PyTorch runs each op of a written-out norm as a kernel that writes a tensor:
        `x.pow(2).sum(-1).sqrt()` (the length of each vector, as point-cloud and graph models
        take distances) is three kernels, the first writing a tensor as large as `x`;
        `torch.linalg.vector_norm(x, dim=-1)` (`x.norm(dim=-1)`) is one (fusionrt's eager count
        for a (64, 256, 128) input: 3 -> 1 kernels, 8.1 -> 0.06 MiB written). A distance `(a -
        b).pow(2).sum(-1).sqrt()` goes from four kernels to two. The magnitude of a complex
        spectrum from its parts, `torch.sqrt(re ** 2 + im ** 2)`, is four kernels; `torch.hypot(re,
        im)` one (4 -> 1, 32 -> 8 MiB written). A fusing backend (fusionrt, torch.compile)
        fuses the written-out forms into one kernel anyway: the rewrite pays in eager only.

        Flagged: a square root (`torch.sqrt`, `.sqrt()`, `.pow(0.5)`, `** 0.5`) of a sum
        (`.sum(...)`, `torch.sum(...)`, over any dims, `keepdim` kept) of a square (`x ** 2`,
        `.pow(2)`, `.square()`, `x * x`) of a tensor; a square root of the sum of two squares
        of tensors. Not flagged: a root of a sum with an `eps` added (`sqrt(sum(x ** 2) + eps)`:
        no op adds it), a mean of squares (an RMS: no op computes it alone), a sum with a
        `dtype`, three squares or more.
    """
    use_instead = "`torch.linalg.vector_norm(x, dim=d, keepdim=k)` (`x.norm(dim=d)`), `torch.hypot(a, b)`."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the fused ops do not round like the written-out squares (they do not overflow
        where `x ** 2` does, and `vector_norm`'s gradient at a zero vector is 0 where the
        written-out root's is NaN). Write the op by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def edge_lengths(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (source - target).pow(2).sum(dim=-1).sqrt()
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def edge_lengths(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(source - target, dim=-1)
""",
            call="edge_lengths(randn(65536, 3), randn(65536, 3))",
        ),
        Example(
            bad="""\
import torch


def magnitude_and_unit(re: torch.Tensor, im: torch.Tensor, x: torch.Tensor):
    magnitude = torch.sqrt(re ** 2 + im ** 2)
    unit = x / torch.sqrt(torch.sum(x * x, dim=1, keepdim=True))
    return magnitude, unit
""",
            at=((5, 17), (6, 16)),
            fixed=None,
            good="""\
import torch


def magnitude_and_unit(re: torch.Tensor, im: torch.Tensor, x: torch.Tensor):
    magnitude = torch.hypot(re, im)
    unit = x / torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return magnitude, unit
""",
            call="magnitude_and_unit(randn(8, 257, 400), randn(8, 257, 400), randn(64, 256, 32))",
        ),
    )
    valid = (
        # an eps under the root; a mean of squares; three squares; a number's square; a sum with a dtype
        """\
import math

import torch


def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, sigma: float):
    a = torch.sqrt((x ** 2).sum(-1) + 1e-6)
    b = x.pow(2).mean(-1).sqrt()
    c = torch.sqrt(x ** 2 + y ** 2 + z ** 2)
    d = torch.sqrt(x ** 2 + sigma ** 2)
    e = x.pow(2).sum(-1, dtype=torch.float64).sqrt()
    return a, b, c, d, e, math.sqrt(sigma ** 2 + 1)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _ROOT_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _ROOT_TEXT.search(text) is not None and _SQUARE_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        statements: dict[int, StatementRef] = {}
        for key in _ROOT_SITES:
            for site in scope.sites.get(key, ()):
                statements.setdefault(id(site.statement.node), site.statement)
        for ref in statements.values():
            finder = _Roots(scope)
            for part in own_parts(ref.node):
                finder.walk(part)
            for node, message in finder.found:
                yield Violation(node, message=message)


class _Roots(Walker):
    """(node, message) of each written-out norm or hypotenuse, outermost only."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.found: list[tuple[cst.BaseExpression, str]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        return self._root(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        return self._root(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _root(self, node: cst.BaseExpression) -> bool:
        radicand = _root_of(self.scope, node)
        if radicand is None:
            return True
        message = _norm(self.scope, radicand) or _hypot(self.scope, radicand)
        if message is None:
            return True
        self.found.append((node, message))
        return False


def _root_of(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``s`` of ``torch.sqrt(s)``, ``s.sqrt()``, ``s.pow(0.5)``, ``torch.pow(s, 0.5)``, ``s ** 0.5``."""
    if isinstance(expr, cst.BinaryOperation):
        return expr.left if isinstance(expr.operator, cst.Power) and _is_value(expr.right, 0.5) else None
    return _applied(scope, expr, "sqrt") or _power(scope, expr, 0.5)


def _norm(scope: Scope, radicand: cst.BaseExpression) -> str | None:
    """The advice for a root of ``sum(x ** 2, ...)`` of a tensor ``x``."""
    summed = _sum_of(scope, radicand)
    if summed is None:
        return None
    squared, args = summed
    x = _square_of(scope, squared)
    if x is None or not scope.is_tensor(x):
        return None
    call = ", ".join([code_of(x), *args])
    return f"a vector norm written out: `torch.linalg.vector_norm({call})` computes it in one kernel"


def _hypot(scope: Scope, radicand: cst.BaseExpression) -> str | None:
    """The advice for a root of ``a ** 2 + b ** 2``, ``a`` and ``b`` tensors."""
    if not (isinstance(radicand, cst.BinaryOperation) and isinstance(radicand.operator, cst.Add)):
        return None
    a, b = _square_of(scope, radicand.left), _square_of(scope, radicand.right)
    if a is None or b is None or not (scope.is_tensor(a) and scope.is_tensor(b)):
        return None
    return f"a hypotenuse written out: `torch.hypot({code_of(a)}, {code_of(b)})` computes it in one kernel"


def _sum_of(scope: Scope, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, list[str]] | None:
    """(``p``, the other arguments as code) of ``p.sum(...)`` or ``torch.sum(p, ...)``: dims and
    ``keepdim``, positional or by keyword (``dim=``); None with another keyword (``dtype=``)."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute) or expr.func.attr.value != "sum" \
            or any(arg.star for arg in expr.args):
        return None
    args = list(expr.args)
    if scope.torch_name(expr.func) == "torch.sum":
        if not args or args[0].keyword is not None:
            return None
        operand, args = args[0].value, args[1:]
    elif scope.torch_name(expr.func) is None:
        operand = expr.func.value
    else:
        return None
    keywords = [arg.keyword.value for arg in args if arg.keyword is not None]
    if not set(keywords) <= {"dim", "keepdim", "axis"} or len(args) > 2:
        return None
    written = []
    for i, arg in enumerate(args):
        key = arg.keyword.value if arg.keyword is not None else ("dim", "keepdim")[i]
        written.append(f"{'dim' if key == 'axis' else key}={code_of(arg.value)}")
    return operand, written


def _square_of(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``x ** 2``, ``x.pow(2)``, ``torch.pow(x, 2)``, ``x.square()``, ``torch.square(x)``, ``x * x``."""
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Power) and _is_value(expr.right, 2):
            return expr.left
        if isinstance(expr.operator, cst.Multiply) and same_expression(expr.left, expr.right):
            return expr.left
        return None
    return _applied(scope, expr, "square") or _power(scope, expr, 2)


def _applied(scope: Scope, expr: cst.BaseExpression, op: str) -> cst.BaseExpression | None:
    """``x`` of ``torch.<op>(x)`` or ``x.<op>()``."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute) or expr.func.attr.value != op:
        return None
    if scope.torch_name(expr.func) is None:
        return expr.func.value if not expr.args else None
    if scope.torch_name(expr.func) == f"torch.{op}" and len(expr.args) == 1 and expr.args[0].keyword is None \
            and not expr.args[0].star:
        return expr.args[0].value
    return None


def _power(scope: Scope, expr: cst.BaseExpression, exponent: float) -> cst.BaseExpression | None:
    """``x`` of ``x.pow(e)`` or ``torch.pow(x, e)``."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute) or expr.func.attr.value != "pow" \
            or any(arg.keyword is not None or arg.star for arg in expr.args):
        return None
    if scope.torch_name(expr.func) is None and len(expr.args) == 1 and _is_value(expr.args[0].value, exponent):
        return expr.func.value
    if scope.torch_name(expr.func) == "torch.pow" and len(expr.args) == 2 and _is_value(expr.args[1].value, exponent):
        return expr.args[0].value
    return None


def _is_value(expr: cst.BaseExpression, value: float) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float)) and expr.evaluated_value == value
