"""Which expressions of a scope surely hold Python numbers (not tensors): what a rule may move
as a scale."""
from __future__ import annotations

import ast

import libcst as cst

from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.nodes import dotted_name
from fusionlint.analysis.scope import Scope
from fusionlint.analysis.views import ast_view, dotted_path

_NUMBER_TYPES = frozenset({"float", "int"})
_NUMBER_CALLS = frozenset({"float", "int", "math.sqrt", "math.log", "math.exp", "math.pow"})


class NumberNames:
    """Which local names surely hold numbers: parameters annotated ``float``/``int``, and locals
    every assignment of which gives a number (a ``for`` over ``range`` included); and which
    ``self.<attr>`` (``member_holds_number``)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.known: dict[str, bool] = {}
        node = scope.node
        if isinstance(node, cst.FunctionDef):
            for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
                annotation = param.annotation.annotation if param.annotation is not None else None
                if isinstance(annotation, cst.Name) and annotation.value in _NUMBER_TYPES:
                    self.known[param.name.value] = True
                elif param.name.value != "self":
                    self.known[param.name.value] = False

    def holds_number(self, name: str) -> bool:
        known = self.known.get(name)
        if known is not None:
            return known
        self.known[name] = False  # a name assigned from itself is not known to be a number
        values = [v for t, v in self.scope.assignments if isinstance(t, cst.Name) and t.value == name]
        iterables = [i for t, i in self.scope.loops if isinstance(t, cst.Name) and t.value == name]
        self.known[name] = (bool(values or iterables) and all(self.is_number(v) for v in values)
                            and all(isinstance(i, cst.Call) and dotted_name(i.func) == "range" for i in iterables))
        return self.known[name]

    def is_number(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return isinstance(expr.operator, (cst.Minus, cst.Plus)) and self.is_number(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return not isinstance(expr.operator, cst.MatrixMultiply) and self.is_number(expr.left) and self.is_number(expr.right)
        if isinstance(expr, cst.Call):
            return dotted_name(expr.func) in _NUMBER_CALLS
        if isinstance(expr, cst.Name):
            return self.holds_number(expr.value)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            owner = self.scope.class_name
            return owner is not None and member_holds_number(self.scope.facts, owner, expr.attr.value)
        return False


def member_holds_number(facts: ModuleFacts, class_name: str, attr: str) -> bool:
    """Does every value the class assigns ``self.<attr>`` give a number: a literal, ``math.sqrt(...)``,
    a parameter of its method annotated ``float``/``int`` or defaulting to a number, arithmetic of
    those (``self.scale = scale * 2``)? False for an attribute the file assigns no such value."""
    values = facts.member_values(class_name, attr)
    return bool(values) and all(
        _ast_number(assignment.value, facts.method_around(class_name, assignment)) for assignment in values
    )


def _ast_number(expr: ast.expr, method: ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
    kind = type(expr)
    if kind is ast.Constant:
        return type(expr.value) in (int, float)  # type: ignore[attr-defined]
    if kind is ast.UnaryOp:
        return type(expr.op) in (ast.USub, ast.UAdd) and _ast_number(expr.operand, method)  # type: ignore[attr-defined]
    if kind is ast.BinOp:
        return type(expr.op) is not ast.MatMult and all(  # type: ignore[attr-defined]
            _ast_number(side, method) for side in (expr.left, expr.right))  # type: ignore[attr-defined]
    if kind is ast.Call:
        return dotted_path(ast_view, expr.func) in _NUMBER_CALLS  # type: ignore[attr-defined]
    if kind is ast.Name and method is not None:
        return _number_parameter(method, expr.id)  # type: ignore[attr-defined]
    return False


def _number_parameter(method: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """A parameter annotated ``float``/``int``, or unannotated with a number as its default."""
    arguments = method.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults, *arguments.kw_defaults]
    for param, default in zip([*positional, *arguments.kwonlyargs], defaults):
        if param.arg != name:
            continue
        if param.annotation is not None:
            return type(param.annotation) is ast.Name and param.annotation.id in _NUMBER_TYPES
        return type(default) is ast.Constant and type(default.value) in (int, float)
    return False


def is_one(expr: cst.BaseExpression) -> bool:
    """The literal 1 (``1``, ``1.0``)."""
    return isinstance(expr, (cst.Integer, cst.Float)) and expr.evaluated_value == 1


def one_plus(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``1 + x`` or ``x + 1``."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        if is_one(expr.left):
            return expr.right
        if is_one(expr.right):
            return expr.left
    return None


def int_literal(expr: cst.BaseExpression) -> int | None:
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = int_literal(expr.expression)
        return None if inner is None else -inner
    return None
