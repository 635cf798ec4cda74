"""Statements in flow order: what a scope runs, what a statement evaluates itself, and what may run
before or after it."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

from fusionlint.analysis.nodes import node_types
from fusionlint.analysis.scope import Block, Scope, StatementRef

_SUITES = node_types(cst.BaseSuite)
_CLAUSES = node_types(cst.Else, cst.Finally)
_DEFINITIONS = node_types(cst.FunctionDef, cst.ClassDef)


def inner_blocks(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    """The blocks nested directly in a compound statement (an ``elif`` counts as a block)."""
    if type(statement) in _DEFINITIONS:
        return []
    found: list[cst.BaseSuite] = []
    for field_name in ("body", "orelse", "finalbody"):
        part = getattr(statement, field_name, None)
        kind = type(part)
        if kind in _SUITES:
            found.append(part)
        elif kind in _CLAUSES:
            found.append(part.body)
        elif kind is cst.If:
            found.append(cst.IndentedBlock(body=[part]))
    for handler in getattr(statement, "handlers", ()):
        found.append(handler.body)
    for case in getattr(statement, "cases", ()):
        found.append(case.body)
    return found


def scope_statements(scope: Scope) -> Iterator[StatementRef]:
    """Every statement the scope runs itself, outer before inner (nested functions and classes
    are scopes of their own: their bodies are left out). A one-line suite (``if c: x = 1``)
    belongs to its compound statement."""
    node = scope.node
    if isinstance(node, cst.Module):
        statements, owner = tuple(node.body), node
    elif isinstance(node.body, cst.IndentedBlock):
        statements, owner = tuple(node.body.body), node.body
    else:
        statements, owner = (node.body,), node.body
    yield from _block_refs(Block(statements, None, owner))


def _block_refs(block: Block) -> Iterator[StatementRef]:
    for i, statement in enumerate(block.statements):
        ref = StatementRef(statement, block, i)
        yield ref
        for suite in inner_blocks(statement):
            if isinstance(suite, cst.IndentedBlock):
                yield from _block_refs(Block(tuple(suite.body), ref, suite))


def own_parts(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The code a statement evaluates at its own level: a whole simple statement, or a compound
    statement's header (``if`` test, ``for`` target and iterable, ``with`` items) and one-line
    suites; not its indented blocks, nor the bodies of definitions."""
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return [statement]
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return [d.decorator for d in statement.decorators]
    parts: list[cst.CSTNode] = []
    for field_name in ("test", "target", "iter", "subject"):
        part = getattr(statement, field_name, None)
        if isinstance(part, cst.CSTNode):
            parts.append(part)
    parts += [item.item for item in getattr(statement, "items", ())]
    parts += [suite for suite in inner_blocks(statement) if isinstance(suite, cst.SimpleStatementSuite)]
    return parts


def _loop_body_of(ref: StatementRef) -> bool:
    parent = ref.block.parent
    return parent is not None and isinstance(parent.node, (cst.For, cst.While)) and ref.block.node is parent.node.body


def statements_after(ref: StatementRef) -> Iterator[StatementRef]:
    """The statements that may run after ``ref`` in its scope, nearest first: the rest of its
    block, then of each enclosing block. In a loop body the body comes again from its start
    up to ``ref`` itself (the next iteration) before the code after the loop."""
    while True:
        yield from ref.later()
        if _loop_body_of(ref):
            block = ref.block
            for i in range(ref.index + 1):
                yield StatementRef(block.statements[i], block, i)
        if ref.block.parent is None:
            return
        ref = ref.block.parent


def statements_before(ref: StatementRef) -> Iterator[StatementRef]:
    """The statements that may have run before ``ref`` in its scope, nearest first: the mirror
    of ``statements_after`` (in a loop body, the body's later statements ran in the previous
    iteration, ``ref`` itself included)."""
    while True:
        yield from ref.earlier()
        if _loop_body_of(ref):
            block = ref.block
            for i in range(len(block.statements) - 1, ref.index - 1, -1):
                yield StatementRef(block.statements[i], block, i)
        if ref.block.parent is None:
            return
        ref = ref.block.parent
