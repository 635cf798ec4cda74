"""A value made by one statement and rescaled by a number at the next statement that reads it
(``sim = q @ k.mT``, then ``sim = sim * scale``): the scale could have been applied earlier,
to a smaller operand."""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import libcst as cst

from fusionlint.analysis.flow import inner_blocks
from fusionlint.analysis.nodes import children, names_of
from fusionlint.analysis.scope import Block, Scope, StatementRef, per_scope


# ``name = name * s``, ``name = name / s``, ``name = s * name`` in a statement's text (``Rule.may_match``)
RESCALE_TEXT = re.compile(r"\s*(\w+)\s*=\s*(?:\1\s*[*/]|[\w.]+\s*\*\s*\1\s*(?:#.*)?$)")


@dataclass(frozen=True)
class Rescale:
    statement: StatementRef  # ``name = name * factor``
    node: cst.BinaryOperation  # its ``name * factor`` (``factor * name``, ``name / factor``)
    operator: cst.BaseBinaryOp  # Multiply or Divide
    factor: cst.BaseExpression
    same_block: bool  # False: after the ``if`` whose arm made the value, so other arms' values are scaled too


def rescaled_later(scope: Scope, ref: StatementRef, value: cst.CSTNode) -> Rescale | None:
    """Where ``ref`` is ``name = value``: the next statement that reads ``name``, if it is
    ``name = name * factor`` (or ``factor * name``, ``name / factor``) with ``factor`` not known
    to be a tensor and holding the same value at both statements; in ``ref``'s block, or after
    the ``if`` whose arm ``ref`` is."""
    name = ref.name_bound_to(value)
    if name is None:
        return None
    same_block, passed = True, []
    while True:
        block = ref.block
        readers = _readers(scope, block).get(name, ())
        k = bisect.bisect_right(readers, ref.index)
        if k < len(readers):
            i = readers[k]
            passed.extend(block.statements[ref.index + 1:i])
            found = _rescale(scope, StatementRef(block.statements[i], block, i), name, same_block)
            if found is None or names_of(found.factor)[0] & set().union(*map(_stores, passed)):
                return None
            return found
        passed.extend(block.statements[ref.index + 1:])
        parent = block.parent
        if parent is None or not isinstance(parent.node, cst.If):
            return None
        ref, same_block = parent, False


def _rescale(scope: Scope, ref: StatementRef, name: str, same_block: bool) -> Rescale | None:
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return None
    target, value = small.targets[0].target, small.value
    if not (isinstance(target, cst.Name) and target.value == name and isinstance(value, cst.BinaryOperation)):
        return None
    operator = value.operator
    if isinstance(value.left, cst.Name) and value.left.value == name and isinstance(operator, (cst.Multiply, cst.Divide)):
        factor = value.right
    elif isinstance(value.right, cst.Name) and value.right.value == name and isinstance(operator, cst.Multiply):
        factor = value.left
    else:
        return None
    if mentions(factor, name) or scope.is_tensor(factor):
        return None
    return Rescale(ref, value, operator, factor, same_block)


@per_scope
def _readers_by_block(scope: Scope) -> dict[int, tuple[Block, dict[str, list[int]]]]:
    """Filled by ``_readers``: the search for a value's next reader starts at every assignment,
    and walking the later statements from each made a long straight-line block quadratic. Each
    block is kept with its entry: a block dropped by the walk that made it could hand its id to
    another."""
    return {}


def _readers(scope: Scope, block: Block) -> dict[str, list[int]]:
    """For each name, the indices of the statements of ``block`` that hold it (what
    ``mentions`` finds), in order; computed once per block."""
    known = _readers_by_block(scope)
    if id(block) not in known:
        found: dict[str, list[int]] = {}
        for i, statement in enumerate(block.statements):
            for name in _names(statement):
                found.setdefault(name, []).append(i)
        known[id(block)] = (block, found)
    return known[id(block)][1]


def _names(statement: cst.CSTNode) -> set[str]:
    found, todo = set(), [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        else:
            todo.extend(children(node))
    return found


def mentions(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` hold the name anywhere (read or written)?"""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(mentions(child, name) for child in children(node))


def _stores(statement: cst.CSTNode) -> set[str]:
    """Every name a statement may assign, in nested blocks too."""
    found = set(names_of(statement)[1])
    for suite in inner_blocks(statement):
        for inner in suite.body if isinstance(suite, cst.IndentedBlock) else [suite]:
            found |= _stores(inner)
    return found
