"""A formula split over statements (``gate = torch.sigmoid(x)``, then ``x * gate``): a name bound
to a value just before the statement that reads it, read there once and never after, is a link
of the same chain, so a rule that reads the formula through such names sees every spelling of it
that one fused op replaces, whole or split."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

import libcst as cst

from fusionlint.analysis.nodes import count_name, names_of, reaching_assignment
from fusionlint.analysis.scope import Scope, Site, StatementRef, per_scope


@per_scope
def _assigned(scope: Scope) -> frozenset[str]:
    """The names some ``name = value`` of the scope binds: only those can feed a chain."""
    return frozenset(target.value for target, _ in scope.assignments if isinstance(target, cst.Name))


def fed_value(scope: Scope, ref: StatementRef, name: str) -> cst.BaseExpression | None:
    """The value of ``name = value`` earlier in ``ref``'s block (only simple statements between,
    none reading or assigning ``name``), where ``ref`` reads ``name`` once and nothing after reads
    that value: the rewrite of the whole chain at ``ref`` leaves the assignment dead."""
    if name not in _assigned(scope) or scope.dynamic or name in scope.escaped or count_name(ref.node, name) != 1:
        return None
    found = reaching_assignment(ref, name, unread=True)
    if found is None:
        return None
    if name not in names_of(ref.node)[1] and scope.read_after(ref, name):
        return None
    return found[1]


@dataclass(frozen=True, eq=False)
class Chain:
    """The statement a formula is read in, and its scope: ``value`` reads a name as the value it
    was fed (``fed_value``), once, where the name is the chain's earlier link."""

    scope: Scope
    ref: StatementRef

    def value(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(expr, cst.Name):
            fed = fed_value(self.scope, self.ref, expr.value)
            if fed is not None:
                return fed
        return expr


def chain_statements(sites: Iterable[Site]) -> list[StatementRef]:
    """The statements of ``sites`` (where a chain may start) and the next three after each that
    binds a name: where the chain may be, whole or ending in a later statement."""
    found: dict[int, StatementRef] = {}
    links: set[int] = set()
    for site in sites:
        ref = site.statement
        found.setdefault(id(ref.node), ref)
        if id(ref.node) in links:
            continue
        links.add(id(ref.node))
        small = ref.simple
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            for later in itertools.islice(ref.later(), 3):
                found.setdefault(id(later.node), later)
    return list(found.values())
