"""Which strings an expression of a scope may hold: an einsum equation is often an f-string
whose pieces are chosen by the operands' rank (``f'b h i d, {kv} -> b h i j'``, ``kv = 'b j d'
if k.ndim == 3 else 'b h j d'``), and a rule must judge every equation it may be."""
from __future__ import annotations

import itertools

import libcst as cst

from fusionlint.analysis.nodes import bound_names
from fusionlint.analysis.scope import Scope

_MOST = 16  # more combinations than this: too many to judge, say unknown


def string_values(scope: Scope, expr: cst.BaseExpression) -> list[str] | None:
    """Every string ``expr`` may hold, or None when that is unknown: a literal, a conditional
    expression of such, a name every assignment of which in the scope gives such, or an f-string
    whose placeholders (no conversion, no format spec) are such."""
    return _values(scope, expr, frozenset())


def _values(scope: Scope, expr: cst.BaseExpression, seen: frozenset[str]) -> list[str] | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return [value] if isinstance(value, str) else None
    if isinstance(expr, cst.IfExp):
        body, orelse = _values(scope, expr.body, seen), _values(scope, expr.orelse, seen)
        return body + orelse if body is not None and orelse is not None else None
    if isinstance(expr, cst.Name):
        return _name_values(scope, expr.value, seen)
    if isinstance(expr, cst.FormattedString):
        pieces: list[list[str]] = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                pieces.append([part.value])
                continue
            if part.conversion is not None or part.format_spec is not None:
                return None
            values = _values(scope, part.expression, seen)
            if values is None:
                return None
            pieces.append(values)
        combinations = 1
        for values in pieces:
            combinations *= len(values)
        if combinations > _MOST:
            return None
        return ["".join(choice) for choice in itertools.product(*pieces)]
    return None


def _name_values(scope: Scope, name: str, seen: frozenset[str]) -> list[str] | None:
    if name in seen or name in scope.escaped or name in scope.inplace:  # `eq += ...` is no assignment of its value
        return None
    if name in scope.params or name in scope.untyped or name in scope.typed:
        return None
    if any(name in bound_names(target) for target, _ in scope.loops):
        return None
    assigned = []
    for target, value in scope.assignments:
        if name in bound_names(target):
            if not isinstance(target, cst.Name):
                return None  # unpacked: its value is unknown
            assigned.append(value)
    if not assigned:
        return None
    found: list[str] = []
    for value in assigned:
        values = _values(scope, value, seen | {name})
        if values is None:
            return None
        found += [v for v in values if v not in found]
    return found

