"""Torch calls named by their op, spelled as a function (``torch.exp(x)``) or as a method
(``x.exp()``): what the rules that read a formula ask of a call."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from fusionlint.analysis.scope import Scope


@dataclass(frozen=True)
class Reduction:
    """``x.<op>(dim, keepdim=True)`` or ``torch.<op>(x, dim, keepdim=True)``."""

    operand: cst.BaseExpression
    dim: cst.BaseExpression
    keywords: dict[str, cst.BaseExpression]  # the others than ``dim`` and ``keepdim``


def unary_operand(scope: Scope, expr: cst.BaseExpression | None, op: str) -> cst.BaseExpression | None:
    """``x`` of ``torch.<op>(x)`` or ``x.<op>()``."""
    if not isinstance(expr, cst.Call):
        return None
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == op and not expr.args \
            and scope.torch_name(expr.func) is None:
        return expr.func.value
    if len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
        if scope.torch_name(expr.func) == f"torch.{op}":
            return expr.args[0].value
    return None


def keepdim_reduction(scope: Scope, call: cst.BaseExpression, op: str) -> Reduction | None:
    """The reduction ``call`` is, if it is ``op`` over a dim (positional or ``dim=``) with
    ``keepdim=True``; None for another call or a second positional argument."""
    if not isinstance(call, cst.Call) or any(arg.star for arg in call.args):
        return None
    args = list(call.args)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == op and scope.torch_name(call.func) is None:
        operand = call.func.value
    elif scope.torch_name(call.func) == f"torch.{op}" and args and args[0].keyword is None:
        operand, args = args[0].value, args[1:]
    else:
        return None
    keywords = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
    positional = [arg.value for arg in args if arg.keyword is None]
    if len(positional) > 1 or (positional and "dim" in keywords):
        return None
    dim = positional[0] if positional else keywords.pop("dim", None)
    keepdim = keywords.pop("keepdim", None)
    if dim is None or not (isinstance(keepdim, cst.Name) and keepdim.value == "True"):
        return None
    return Reduction(operand, dim, keywords)
