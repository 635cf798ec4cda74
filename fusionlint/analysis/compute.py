"""Compute-bound statements and the element-wise statements that may move past them."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from fusionlint.analysis.scope import Scope, StatementRef
from fusionlint.ops import COMPUTE, ELEMENTWISE


def is_elementwise_expr(scope: Scope, expr: cst.BaseExpression) -> bool:
    """Only names, constants and element-wise torch ops (arithmetic included): pure and cheap."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return not isinstance(expr.operator, cst.MatrixMultiply) and (
            is_elementwise_expr(scope, expr.left) and is_elementwise_expr(scope, expr.right)
        )
    if isinstance(expr, cst.UnaryOperation):
        return not isinstance(expr.operator, cst.Not) and is_elementwise_expr(scope, expr.expression)
    if isinstance(expr, cst.Call):
        op = scope.op(expr)
        if op is None or op[1] != ELEMENTWISE:
            return False
        func = expr.func
        parts = [a.value for a in expr.args if a.star == ""]
        if len(parts) != len(expr.args):
            return False
        if isinstance(func, cst.Attribute) and scope.is_tensor(func.value):
            parts.append(func.value)
        return all(is_elementwise_expr(scope, p) for p in parts)
    return False


@dataclass(frozen=True, eq=False)
class ComputeSite:
    """A statement holding a compute-bound op, and that op's name (``@`` for the operator)."""

    ref: StatementRef  # the innermost statement holding the op
    op: str


def compute_statements(scope: Scope, names: frozenset[str]) -> dict[int, ComputeSite]:
    """The statements (by node id) holding a torch compute-bound op named in ``names`` (``"@"``
    for the operator), each with the first such op found."""
    found: dict[int, ComputeSite] = {}
    for name in sorted(names):
        for site in scope.sites.get(name, ()):
            op = scope.op(site.node)
            if op is not None and op[1] == COMPUTE and id(site.statement.node) not in found:
                found[id(site.statement.node)] = ComputeSite(site.statement, op[0])
    return found


def elementwise_assignment(scope: Scope, ref: StatementRef) -> str | None:
    """The target of ``name = <element-wise tensor expression>`` (not a bare alias): a statement
    that may move past others, because it only computes. None for anything else."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    value = small.value
    if isinstance(value, cst.Name) or not scope.is_tensor(value) or not is_elementwise_expr(scope, value):
        return None
    return small.targets[0].target.value
