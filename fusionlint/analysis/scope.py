"""Scopes and blocks: a function or module body, its statements, and what the rules ask about it
(which names hold tensors, which op a node is, whether a value is read later)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import wraps
from typing import Callable, Iterator, Sequence, TypeVar

import libcst as cst

from fusionlint.analysis.facts import ModuleFacts, built_in_place
from fusionlint.analysis.nodes import bound_names, names_of
from fusionlint.analysis.tensors import TORCH_OP_MODULES, Typing
from fusionlint.analysis.views import cst_view
from fusionlint.ops import COMPUTE, NN_MODULE_OPS, VIEW, VIEW_ATTRIBUTES, OpTables

@dataclass(eq=False)
class Block:
    """A straight-line statement sequence: a module body or an indented block."""

    statements: Sequence[cst.BaseStatement]
    parent: "StatementRef | None"  # the compound statement owning this block; None at scope level
    node: cst.CSTNode


@dataclass(frozen=True, eq=False)
class StatementRef:
    node: cst.BaseStatement
    block: Block
    index: int

    @property
    def simple(self) -> cst.BaseSmallStatement | None:
        """The only small statement of a one-statement line, else None (no fix touches the rest)."""
        if isinstance(self.node, cst.SimpleStatementLine) and len(self.node.body) == 1:
            return self.node.body[0]
        return None

    def name_bound_to(self, value: cst.CSTNode) -> str | None:
        """The name this statement binds ``value`` to (``name = value``, one target), or None."""
        small = self.simple
        if not (isinstance(small, cst.Assign) and small.value is value and len(small.targets) == 1):
            return None
        target = small.targets[0].target
        return target.value if isinstance(target, cst.Name) else None

    def later(self) -> Iterator["StatementRef"]:
        block = self.block
        for i in range(self.index + 1, len(block.statements)):
            yield StatementRef(block.statements[i], block, i)

    def earlier(self) -> Iterator["StatementRef"]:
        """Statements before this one in its block, nearest first."""
        block = self.block
        for i in range(self.index - 1, -1, -1):
            yield StatementRef(block.statements[i], block, i)


@dataclass(frozen=True)
class Site:
    """An interesting node (a call, a ``.T``, an ``@``) and the statement holding it."""

    node: cst.CSTNode
    statement: StatementRef
    conditional: bool  # inside a lambda, comprehension, conditional expression or and/or


@dataclass(eq=False)
class Scope:
    """A function body or the module body, with what the rules ask about it."""

    node: cst.Module | cst.FunctionDef
    facts: ModuleFacts
    ops: OpTables
    class_name: str | None = None
    unit: cst.BaseStatement | None = None  # the top-level statement holding a function scope
    tensors: set[str] = field(default_factory=set)
    params: set[str] = field(default_factory=set)
    escaped: set[str] = field(default_factory=set)  # read by a closure or declared global/nonlocal
    inplace: set[str] = field(default_factory=set)  # written in place somewhere in the scope
    # mentions backward/requires_grad_/detach/... (a detach cloned at once does not count): clones may be needed
    autograd: bool = False
    dynamic: bool = False  # locals()/vars()/eval/exec: liveness unknowable
    sites: dict[str, list[Site]] = field(default_factory=lambda: defaultdict(list))
    assignments: list[tuple[cst.BaseExpression, cst.BaseExpression]] = field(default_factory=list)
    loops: list[tuple[cst.BaseExpression, cst.BaseExpression]] = field(default_factory=list)  # for target, iterable
    comprehensions: list[tuple[cst.BaseExpression, cst.BaseExpression]] = field(default_factory=list)  # as loops
    appends: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)  # ``outs.append(v)``: (outs, v)
    untyped: set[str] = field(default_factory=set)  # parameters only their use can tell tensors
    typed: set[str] = field(default_factory=set)  # parameters annotated (or defaulted) as no tensor
    used_as_tensor: set[str] = field(default_factory=set)  # names used the way only a tensor is
    typing: Typing = field(init=False, repr=False)
    memo: dict = field(default_factory=dict, repr=False)  # what ``per_scope`` functions computed

    def __post_init__(self) -> None:
        self.typing = Typing(self.facts, self.ops, cst_view, self.class_name)
        self.typing.tensors = self.tensors

    @property
    def is_module(self) -> bool:
        return isinstance(self.node, cst.Module)

    # --- tensors and op classes -------------------------------------------------------------

    def torch_name(self, expr: cst.BaseExpression) -> str | None:
        return self.typing.torch_name(expr)

    def op(self, node: cst.CSTNode) -> tuple[str, str | None, cst.BaseExpression | None] | None:
        """(op name, op class, main tensor operand) of a torch op node, or None.

        The main operand is the receiver of a method (``x`` in ``x.sum()``) or the first
        positional argument of a function (``x`` in ``torch.sum(x)``).
        """
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.MatrixMultiply) and (
                self.is_tensor(node.left) or self.is_tensor(node.right)
            ):
                return "@", COMPUTE, node.left
            return None
        if isinstance(node, cst.Attribute):
            if node.attr.value in VIEW_ATTRIBUTES and self.is_tensor(node.value):
                return node.attr.value, VIEW, node.value
            return None
        if not isinstance(node, cst.Call):
            return None
        func = node.func
        if isinstance(func, cst.Attribute) and self.is_tensor(func.value):
            name = func.attr.value
            return name, self.ops.op_class(name), func.value
        canonical = self.torch_name(func)
        if canonical is None:
            return None
        module, _, name = canonical.rpartition(".")
        if module not in TORCH_OP_MODULES:
            return None
        first = node.args[0].value if node.args and node.args[0].keyword is None and not node.args[0].star else None
        return name, self.ops.op_class(name), first

    def module_op(self, call: cst.CSTNode) -> tuple[str, str | None, cst.BaseExpression | None] | None:
        """``self.softmax(x)`` where ``self.softmax = nn.Softmax(...)``, or ``loss_fct(x, y)`` where
        the function assigns ``loss_fct = CrossEntropyLoss(...)``: (the op the module runs, its
        class, its input), as ``op`` gives them for ``torch.softmax(x)``; else None."""
        if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None or call.args[0].star:
            return None
        func = call.func
        if isinstance(func, cst.Name):
            nn_class = self._local_nn_class(func.value)
        elif self.class_name is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value == "self":
            nn_class = self.facts.nn_class(self.class_name, func.attr.value)
        else:
            return None
        name = NN_MODULE_OPS.get(nn_class or "")
        return (name, self.ops.op_class(name), call.args[0].value) if name else None

    def _local_nn_class(self, name: str) -> str | None:
        """``CrossEntropyLoss`` for a local that every assignment of the scope binds to
        ``CrossEntropyLoss(...)`` (a torch.nn class, not in place)."""
        if name in self.params or name in self.untyped or name in self.typed or name in self.escaped:
            return None
        if any(name in bound_names(target) for target, _ in self.loops):
            return None
        classes = set()
        for target, value in self.assignments:
            if name not in bound_names(target):
                continue
            canonical = self.torch_name(value.func) if isinstance(value, cst.Call) else None
            if not isinstance(target, cst.Name) or canonical is None or not canonical.startswith("torch.nn.") \
                    or built_in_place(value):  # type: ignore[arg-type]
                return None
            classes.add(canonical.rpartition(".")[2])
        return classes.pop() if len(classes) == 1 else None

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        return self.typing.is_tensor(expr)

    def is_tensor_annotation(self, annotation: cst.BaseExpression) -> bool:
        return self.typing.is_tensor_annotation(annotation)

    def resolve_tensors(self) -> None:
        """Grow ``tensors`` from the parameters and the names used as tensors over the scope's
        assignments and loops, to a fixpoint."""
        self.params |= self.untyped & self.used_as_tensor
        self.tensors |= self.params | (self.used_as_tensor - self.typed)
        self.retype()

    def retype(self) -> None:
        """Grow the tensor names over the scope's bindings, once more names are known."""
        self.typing.resolve(self.assignments, [*self.loops, *self.comprehensions], self.appends)

    # --- view chains ---------------------------------------------------------------------------

    def view_chain(self, expr: cst.BaseExpression) -> tuple[cst.Name, list[str]] | None:
        """``x.transpose(1, 2).unsqueeze(0)`` -> (x, ["transpose", "unsqueeze"]) for a tensor name x."""
        ops: list[str] = []
        while True:
            op = self.op(expr)
            if op is None or op[1] != VIEW or op[2] is None:
                break
            ops.append(op[0])
            expr = op[2]
        if ops and isinstance(expr, cst.Name) and expr.value in self.tensors:
            return expr, ops[::-1]
        return None

    # --- liveness ------------------------------------------------------------------------------

    def read_after(self, ref: StatementRef, name: str) -> bool:
        """May the value ``name`` holds right after ``ref`` be read later? Conservative: True if unsure."""
        if self.dynamic or name in self.escaped:
            return True
        while True:
            for later in ref.later():
                reads, defs = names_of(later.node)
                if name in reads:
                    return True
                if name in defs:
                    return False
            parent = ref.block.parent
            if parent is None:
                return self.is_module  # module globals may be read by anything later
            if parent.node is self.node:
                return False  # the end of the function: its locals die (closures are `escaped`)
            owner = parent.node
            if isinstance(owner, (cst.For, cst.While)) and ref.block.node is owner.body:
                if not _defined_before_read(ref, name):
                    return True
            elif isinstance(owner, (cst.Try, cst.TryStar)):
                if name in _reads_after_block(owner, ref.block.node):
                    return True
            ref = parent


_T = TypeVar("_T")


def per_scope(compute: Callable[[Scope], _T]) -> Callable[[Scope], _T]:
    """``compute(scope)`` computed once per scope and kept on it, so it dies with its file: a
    module-level cache (``lru_cache``) would keep the last files' trees alive, and the garbage
    collector would walk them again and again."""

    @wraps(compute)
    def cached(scope: Scope) -> _T:
        if compute not in scope.memo:
            scope.memo[compute] = compute(scope)
        return scope.memo[compute]

    return cached


def _defined_before_read(ref: StatementRef, name: str) -> bool:
    """In a loop body: is ``name`` assigned at block level before ``ref`` without an earlier read,
    so that the next iteration cannot see the value ``ref`` leaves behind?"""
    for i in range(ref.index):
        reads, defs = names_of(ref.block.statements[i])
        if name in reads:
            return False
        if name in defs:
            return True
    return False


def _reads_after_block(owner: cst.Try | cst.TryStar, block: cst.CSTNode) -> set[str]:
    """Names the handlers/else/finally of a ``try`` may read after ``block`` ran (partly)."""
    parts: list[cst.CSTNode] = []
    if owner.body is block:
        parts += list(owner.handlers)
        if owner.orelse is not None:
            parts.append(owner.orelse)
    if owner.finalbody is not None and owner.finalbody.body is not block:
        parts.append(owner.finalbody)
    reads: set[str] = set()
    for part in parts:
        reads |= names_of(part)[0]
    return reads
