"""Small helpers over libcst nodes: names, children, a read-only walker, reads and stores."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Iterator, Sequence

import libcst as cst

from fusionlint.analysis.views import cst_view, dotted_path

if TYPE_CHECKING:
    from fusionlint.analysis.scope import StatementRef



def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``torch.nn.functional.linear`` for a chain of names and attributes, else None."""
    return dotted_path(cst_view, expr)


def root_name(expr: cst.BaseExpression) -> str | None:
    """``a`` for ``a``, ``a[0]``, ``a.b[1:]``: the variable an in-place write through ``expr`` hits."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


_SKIPPED_FIELDS = frozenset(
    """lpar rpar leading_lines lines_after_decorators trailing_whitespace comma equal semicolon colon
    dot lbracket rbracket lbrace rbrace operator asynchronous header footer newline star keyword
    attr name""".split()
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The child nodes that hold code (no whitespace, punctuation, attribute or keyword names).

    libcst's own traversal rebuilds every node it passes, several times slower than reading
    the dataclass fields; the rules only read, so this is all they need. Within
    ``remembered_children`` each node's are computed once: the collector and the operation
    index walk the same trees.
    """
    memo = _REMEMBERED
    if memo is not None:
        hit = memo.get(id(node))
        if hit is not None:
            return hit[1]
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _CHILD_FIELDS[type(node)] = tuple(
            f.name for f in dataclasses.fields(node) if f.name not in _SKIPPED_FIELDS and "whitespace" not in f.name
        )
    found = []
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, (tuple, list)):
            found += [v for v in value if type(v) in _NODES]
        elif type(value) in _NODES:
            found.append(value)
    found = tuple(found)
    if memo is not None:
        memo[id(node)] = (node, found)  # the node held, so that its id is not reused meanwhile
    return found


_REMEMBERED: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] | None = None


@contextlib.contextmanager
def remembered_children() -> Iterator[None]:
    """``children`` answers from memory meanwhile (one file's analysis: its nodes stay alive)."""
    global _REMEMBERED
    outer = _REMEMBERED
    if outer is None:
        _REMEMBERED = {}
    try:
        yield
    finally:
        _REMEMBERED = outer


def node_types(*classes: type) -> frozenset[type]:
    """``classes`` and their subclasses: ``type(node) in node_types(A, B)`` answers
    ``isinstance(node, (A, B))`` without ABCMeta's check (libcst's nodes are ABCs), which runs
    Python code for each class a node is not; walks over every node of a file pay for it."""
    found: set[type] = set()
    todo = list(classes)
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return frozenset(found)


_NODES = node_types(cst.CSTNode)


_HANDLERS: dict[tuple[type, type], tuple] = {}


class Walker:
    """A read-only visitor over ``children``: ``visit_<Node>`` (False skips the children) and
    ``leave_<Node>`` methods, like libcst's ``CSTVisitor``."""

    def walk(self, node: cst.CSTNode) -> None:
        key = (type(self), type(node))
        handlers = _HANDLERS.get(key)
        if handlers is None:
            name = type(node).__name__
            handlers = _HANDLERS[key] = (getattr(type(self), f"visit_{name}", None), getattr(type(self), f"leave_{name}", None))
        visit, leave = handlers
        if visit is None or visit(self, node) is not False:
            for child in children(node):
                self.walk(child)
        if leave is not None:
            leave(self, node)


def parent_map(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """Each node under ``root`` (by id) -> its parent: a statement's nodes, for rules that look up
    from an operand to the op reading it."""
    found: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in children(node):
            found[id(child)] = node
            stack.append(child)
    return found


def expand_sizes(args: Sequence[cst.Arg]) -> list[cst.BaseExpression] | None:
    """The sizes an ``expand``/``view`` call is given, one argument each or one tuple or list of
    them; None with a star or a keyword (their count is unknown)."""
    if any(a.star or a.keyword is not None for a in args):
        return None
    values = [a.value for a in args]
    if len(values) == 1 and isinstance(values[0], (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in values[0].elements):
            return None
        values = [e.value for e in values[0].elements]
    return values


def count_name(node: cst.CSTNode, name: str) -> int:
    """How often the variable ``name`` occurs in ``node`` (attribute names are not variables)."""
    if isinstance(node, cst.Name):
        return int(node.value == name)
    return sum(count_name(child, name) for child in children(node))


def names_of(statement: cst.CSTNode) -> tuple[frozenset[str], frozenset[str]]:
    """(names read, names assigned unconditionally) by a statement; reads include closures."""
    use = _NameUse()
    use.walk(statement)
    defs = frozenset(use.stores) if isinstance(statement, cst.SimpleStatementLine) else frozenset()
    return frozenset(use.reads), defs


def reaching_value(ref: StatementRef, name: str) -> cst.BaseExpression | None:
    """The value of the nearest ``name = value`` before ``ref`` in its block, if that is surely
    what ``name`` holds at ``ref``: only simple statements between, none assigning ``name``."""
    found = reaching_assignment(ref, name)
    return found[1] if found else None


def reaching_assignment(
    ref: StatementRef, name: str, *, out_of_ifs: bool = False, unread: bool = False
) -> tuple[StatementRef, cst.BaseExpression] | None:
    """(statement, value) of the nearest ``name = value`` that surely reaches ``ref``: only simple
    statements between, none assigning ``name``. ``out_of_ifs``: an ``if`` body is entered from
    the statements before its ``if``, so the search goes on there. ``unread``: no statement
    between reads ``name`` either (the value reaches ``ref`` held by ``name`` alone)."""
    while True:
        for earlier in ref.earlier():
            if not isinstance(earlier.node, cst.SimpleStatementLine):
                return None
            reads, defs = names_of(earlier.node)
            if name not in defs:
                if unread and name in reads:
                    return None
                continue
            small = earlier.simple
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
                and small.targets[0].target.value == name
            ):
                return earlier, small.value
            return None
        owner = ref.block.parent
        entered_from_before = owner is not None and isinstance(owner.node, cst.If) and ref.block.node is owner.node.body
        if not (out_of_ifs and entered_from_before):
            return None
        test = _NameUse()
        test.walk(owner.node.test)
        if name in test.reads | test.stores:  # read, or assigned by a walrus
            return None
        ref = owner


def ancestors(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``node``'s parent up to ``root``, nearest first; None if ``node`` is not in it."""
    if root is node:
        return []
    for child in children(root):
        path = ancestors(child, node)
        if path is not None:
            return [*path, root]
    return None


class _NameUse(Walker):
    """Reads and plain-name stores; over-approximates reads (conservative for liveness)."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.stores: set[str] = set()

    def _store(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.stores.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._store(el.value)
        elif isinstance(target, cst.StarredElement):
            self._store(target.value)
        else:
            self.walk(target)

    def visit_Name(self, node: cst.Name) -> None:
        self.reads.add(node.value)

    def visit_Assign(self, node: cst.Assign) -> bool:
        self.walk(node.value)
        for target in node.targets:
            self._store(target.target)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:
            self.walk(node.value)
        self._store(node.target)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self.walk(node.value)
        self.walk(node.target)
        self._store(node.target)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self.walk(node.value)
        self._store(node.target)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self.walk(node.iter)
        self.walk(node.body)
        if node.orelse is not None:
            self.walk(node.orelse)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.default is not None:
            self.walk(node.default)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.walk(node.params)
        self.walk(node.body)
        for decorator in node.decorators:
            self.walk(decorator)
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False


def bound_names(target: cst.BaseExpression) -> list[str]:
    """The names an assignment target binds: ``a`` of ``a``, ``a, b`` of ``a, (b, *c)``... (not
    ``x[i]`` or ``x.y``, which write into a value)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in bound_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


def is_method_call(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == name


def code_of(expr: cst.BaseExpression) -> str:
    """An expression's source without its outer parentheses: how a message quotes it, and how
    two expressions are told to be the same."""
    return cst.Module([]).code_for_node(expr.with_changes(lpar=[], rpar=[]))


def same_expression(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return code_of(a) == code_of(b)


def factor_orders(expr: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``a * b`` or ``a.mul(b)`` -> [(a, b), (b, a)]; anything else -> []."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return [(expr.left, expr.right), (expr.right, expr.left)]
    if is_method_call(expr, "mul") and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:  # type: ignore[attr-defined]
        a, b = expr.func.value, expr.args[0].value  # type: ignore[attr-defined]
        return [(a, b), (b, a)]
    return []


def factors_of(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a * b * c`` -> [a, b, c], parenthesized products flattened too; anything else is one factor."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return [*factors_of(expr.left), *factors_of(expr.right)]
    return [expr]


def operations(node: cst.CSTNode, operators: tuple[type, ...],
               skip: tuple[type, ...] = ()) -> list[cst.BinaryOperation]:
    """The binary operations under ``node`` whose operator is one of ``operators``, outermost
    first; what is under a node of a ``skip`` type (a lambda, an augmented assignment) is not
    looked at."""
    found: list[cst.BinaryOperation] = []
    _add_operations(node, operators, node_types(*skip), found)
    return found


def _add_operations(node: cst.CSTNode, operators: tuple[type, ...], skip: frozenset[type],
                    found: list[cst.BinaryOperation]) -> None:
    kind = type(node)
    if kind in skip:
        return
    if kind is cst.BinaryOperation and isinstance(node.operator, operators):
        found.append(node)
    for child in children(node):
        _add_operations(child, operators, skip, found)
