"""One view of an expression over both syntax trees (libcst's and the stdlib ``ast``), so that the
heuristics that read expressions are written once."""
from __future__ import annotations

import ast
from typing import Callable

import libcst as cst

# The kinds of an expression's view; the fields after the kind differ per kind.
NAME, ATTR, CALL, BINOP, UNARY, SUBSCRIPT, COMPARE, IFEXP, SEQ, STRING, NONE, OTHER, COMPREHENSION, LAMBDA = range(14)
View = Callable[[object], tuple]


def cst_view(expr: cst.CSTNode) -> tuple:
    """(kind, fields...) of a libcst expression: NAME name | ATTR value attr | CALL func positional
    keywords | BINOP left right operator | UNARY operand is_not | SUBSCRIPT value indices |
    COMPARE operands | IFEXP body orelse | SEQ elements count | STRING text | NONE | OTHER |
    COMPREHENSION element (of a list comprehension or generator) | LAMBDA parameters body (the
    names of its positional parameters, None with ``*args`` or keyword-only ones).

    Node types are told by identity: isinstance of a libcst class runs ABCMeta's Python
    ``__instancecheck__``, and the classes read here have no subclasses."""
    node_type = type(expr)
    if node_type is cst.Name:
        return (NONE,) if expr.value == "None" else (NAME, expr.value)
    if node_type is cst.Attribute:
        return ATTR, expr.value, expr.attr.value
    if node_type is cst.Call:
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        keywords = [a.keyword.value for a in expr.args if a.keyword is not None]
        return CALL, expr.func, positional, keywords
    if node_type is cst.BinaryOperation:
        operator = "@" if isinstance(expr.operator, cst.MatrixMultiply) else "|" if isinstance(expr.operator, cst.BitOr) else ""
        return BINOP, expr.left, expr.right, operator
    if node_type is cst.UnaryOperation:
        return UNARY, expr.expression, isinstance(expr.operator, cst.Not)
    if node_type is cst.Subscript:
        return SUBSCRIPT, expr.value, [el.slice.value for el in expr.slice if isinstance(el.slice, cst.Index)]
    if node_type is cst.Comparison:
        return COMPARE, [expr.left, *(c.comparator for c in expr.comparisons)]
    if node_type is cst.IfExp:
        return IFEXP, expr.body, expr.orelse
    if node_type is cst.Tuple or node_type is cst.List:
        return SEQ, [el.value for el in expr.elements if not isinstance(el, cst.StarredElement)], len(expr.elements)
    if node_type is cst.SimpleString:
        text = expr.evaluated_value
        return (STRING, text) if isinstance(text, str) else (OTHER,)
    if node_type is cst.ListComp or node_type is cst.GeneratorExp:
        return COMPREHENSION, expr.elt
    if node_type is cst.Lambda:
        params = expr.params
        simple = type(params.star_arg) is not cst.Param and not params.kwonly_params and params.star_kwarg is None
        names = [p.name.value for p in (*params.posonly_params, *params.params)] if simple else None
        return LAMBDA, names, expr.body
    return (OTHER,)


def ast_view(expr: ast.AST) -> tuple:
    """The same view of a stdlib ``ast`` expression."""
    if isinstance(expr, ast.Name):
        return NAME, expr.id
    if isinstance(expr, ast.Attribute):
        return ATTR, expr.value, expr.attr
    if isinstance(expr, ast.Call):
        positional = [a for a in expr.args if not isinstance(a, ast.Starred)]
        return CALL, expr.func, positional, [k.arg for k in expr.keywords if k.arg]
    if isinstance(expr, ast.BinOp):
        operator = "@" if isinstance(expr.op, ast.MatMult) else "|" if isinstance(expr.op, ast.BitOr) else ""
        return BINOP, expr.left, expr.right, operator
    if isinstance(expr, ast.UnaryOp):
        return UNARY, expr.operand, isinstance(expr.op, ast.Not)
    if isinstance(expr, ast.Subscript):
        index = expr.slice
        return SUBSCRIPT, expr.value, list(index.elts) if isinstance(index, ast.Tuple) else [index]
    if isinstance(expr, ast.Compare):
        return COMPARE, [expr.left, *expr.comparators]
    if isinstance(expr, ast.IfExp):
        return IFEXP, expr.body, expr.orelse
    if isinstance(expr, (ast.Tuple, ast.List)):
        return SEQ, [el for el in expr.elts if not isinstance(el, ast.Starred)], len(expr.elts)
    if isinstance(expr, ast.Constant):
        return (NONE,) if expr.value is None else (STRING, expr.value) if isinstance(expr.value, str) else (OTHER,)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
        return COMPREHENSION, expr.elt
    if isinstance(expr, ast.Lambda):
        args = expr.args
        simple = args.vararg is None and not args.kwonlyargs and args.kwarg is None
        return LAMBDA, [a.arg for a in (*args.posonlyargs, *args.args)] if simple else None, expr.body
    return (OTHER,)


def dotted_path(view: View, expr: object) -> str | None:
    """``torch.nn.functional.linear`` for a chain of names and attributes, else None."""
    parts = []
    seen = view(expr)
    while seen[0] == ATTR:
        parts.append(seen[2])
        seen = view(seen[1])
    if seen[0] != NAME:
        return None
    parts.append(seen[1])
    return ".".join(reversed(parts))
