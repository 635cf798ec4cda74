"""What the rules know about a file: torch imports, tensor names, op classes and liveness.

Heuristics (documented in docs/engine.md), all static and local to one file:

- torch names come from the file's imports (``import torch as th``, ``import torch.nn.functional
  as F``, ``from torch import Tensor, matmul``); a file that never imports torch has no tensors.
- a name holds a tensor when it is a parameter annotated ``Tensor``/``torch.*Tensor`` (also inside
  ``Optional[...]`` or ``... | None``), an argument of ``forward`` (unless annotated otherwise or
  defaulting to a non-``None`` constant), or is assigned from a tensor expression anywhere in its
  scope (flow-insensitive, to a fixpoint): a torch / ``F.*`` call that returns tensors, a tensor
  method or tensor attribute (``.T``, ``.data``) of a tensor, arithmetic and indexing with a tensor
  operand. ``self.<attr>`` is a (concrete) tensor when the class assigns it an ``nn.Parameter`` or
  a torch call, or registers it as a buffer.
- liveness is conservative along straight-line statement sequences: a read in a later statement,
  in a loop that repeats the statement, in an exception handler that may follow, in a nested
  function or lambda (a closure), or after ``locals()``/``eval`` keeps a name alive.
"""
from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.ops import COMPUTE, ELEMENTWISE, VIEW, VIEW_ATTRIBUTES, OpTables

_TORCH_OP_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")
_NON_TENSOR_TORCH_PREFIXES = tuple(
    f"torch.{m}."
    for m in """nn cuda backends distributed jit utils fx onnx compiler _dynamo autograd optim testing
    library hub distributions profiler amp cpu mps xpu export func overrides""".split()
)
_NON_TENSOR_TORCH = frozenset(
    "torch." + n
    for n in """device dtype Size finfo iinfo is_tensor is_floating_point is_complex is_grad_enabled
    get_default_dtype set_default_dtype manual_seed seed Generator no_grad enable_grad
    inference_mode set_grad_enabled autocast compile save load numel broadcast_shapes result_type
    promote_types can_cast typename is_autocast_enabled is_storage use_deterministic_algorithms
    set_printoptions get_rng_state set_rng_state is_nonzero""".split()
)
_TENSOR_TORCH_NN = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})
_NON_TENSOR_METHODS = frozenset(
    """item tolist size dim ndimension numel nelement stride data_ptr is_contiguous element_size
    numpy get_device storage untyped_storage is_floating_point is_complex equal type register_hook
    backward dim_order nbytes itemsize is_set_to __len__ __repr__ __str__""".split()
)
_TENSOR_ATTRIBUTES = VIEW_ATTRIBUTES | {"data", "grad", "real", "imag"}
_AUTOGRAD_MARKERS = frozenset(
    {"requires_grad_", "requires_grad", "backward", "detach", "detach_", "retain_grad", "grad", "autograd"}
)
_DYNAMIC_SCOPE_CALLS = frozenset({"locals", "vars", "eval", "exec"})


# --------------------------------------------------------------------------- file-level facts


@dataclass(frozen=True)
class ModuleFacts:
    """Facts read from the stdlib ``ast`` of the whole file (cheap, and survives masking)."""

    aliases: dict[str, str]  # local name -> canonical dotted torch path ("F" -> "torch.nn.functional")
    class_tensor_attrs: dict[str, frozenset[str]]  # class name -> its self.<attr> tensors
    identifiers: frozenset[str]  # every name bound or read anywhere in the file (for fresh names)

    @property
    def imports_torch(self) -> bool:
        return bool(self.aliases)

    def canonical(self, dotted: str) -> str | None:
        """``F.linear`` -> ``torch.nn.functional.linear``; None when not a torch name."""
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base


def module_facts(tree: ast.Module) -> ModuleFacts:
    aliases: dict[str, str] = {}
    classes: dict[str, set[str]] = defaultdict(set)
    identifiers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            identifiers.add(node.id)
        elif isinstance(node, ast.arg):
            identifiers.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            identifiers.add(node.name)
        elif isinstance(node, ast.alias):
            identifiers.add(node.asname or node.name.partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            identifiers.update(node.names)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "torch" or node.module.startswith("torch."):
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            classes[node.name] |= _class_tensor_attrs(node)
    class_attrs = {name: frozenset(attrs) for name, attrs in classes.items()}
    return ModuleFacts(aliases, class_attrs, frozenset(identifiers))


def _class_tensor_attrs(cls: ast.ClassDef) -> set[str]:
    """``self.w = nn.Parameter(...)`` / ``self.w = torch.ones(...)`` / ``register_buffer("w", ...)``."""
    attrs = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func)
            if callee.startswith(("torch.", "nn.Parameter", "Parameter")) or callee in ("nn.Buffer",):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        attrs.add(target.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            attrs.add(node.args[0].value)
    return attrs


# --------------------------------------------------------------------------- scopes and blocks


@dataclass(eq=False)
class Block:
    """A straight-line statement sequence: a module body or an indented block."""

    statements: Sequence[cst.BaseStatement]
    scope: "Scope"
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

    @property
    def is_module(self) -> bool:
        return isinstance(self.node, cst.Module)

    # --- tensors and op classes -------------------------------------------------------------

    def torch_name(self, expr: cst.BaseExpression) -> str | None:
        dotted = dotted_name(expr)
        return self.facts.canonical(dotted) if dotted else None

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
        if module not in _TORCH_OP_MODULES:
            return None
        first = node.args[0].value if node.args and node.args[0].keyword is None and not node.args[0].star else None
        return name, self.ops.op_class(name), first

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.tensors
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Name) and expr.value.value == "self" and self.class_name:
                return expr.attr.value in self.facts.class_tensor_attrs.get(self.class_name, ())
            return expr.attr.value in _TENSOR_ATTRIBUTES and self.is_tensor(expr.value)
        if isinstance(expr, cst.Call):
            return self._call_returns_tensor(expr)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self.is_tensor(expr.expression)
        if isinstance(expr, cst.Subscript):
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.Comparison):
            return self.is_tensor(expr.left) or any(self.is_tensor(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.IfExp):
            return self.is_tensor(expr.body) or self.is_tensor(expr.orelse)
        return False

    def _call_returns_tensor(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and self.is_tensor(func.value):
            return func.attr.value not in _NON_TENSOR_METHODS
        canonical = self.torch_name(func)
        if canonical is None:
            return False
        if canonical in _TENSOR_TORCH_NN:
            return True
        if canonical.startswith("torch.nn.functional."):
            return True
        return (
            canonical.startswith("torch.")
            and canonical not in _NON_TENSOR_TORCH
            and not canonical.startswith(_NON_TENSOR_TORCH_PREFIXES)
        )

    def is_tensor_annotation(self, annotation: cst.BaseExpression) -> bool:
        if isinstance(annotation, cst.SimpleString):
            text = annotation.evaluated_value
            return isinstance(text, str) and self._is_tensor_type(text.strip())
        if isinstance(annotation, cst.Subscript):  # Optional[Tensor], Union[Tensor, None]
            return any(
                isinstance(el.slice, cst.Index) and self.is_tensor_annotation(el.slice.value)
                for el in annotation.slice
            ) and dotted_name(annotation.value) in ("Optional", "Union", "typing.Optional", "typing.Union")
        if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
            return self.is_tensor_annotation(annotation.left) or self.is_tensor_annotation(annotation.right)
        dotted = dotted_name(annotation)
        return dotted is not None and self._is_tensor_type(dotted)

    def _is_tensor_type(self, dotted: str) -> bool:
        canonical = self.facts.canonical(dotted)
        if canonical is None:
            return False
        last = canonical.rpartition(".")[2]
        return last.endswith("Tensor") or last == "Parameter"

    def resolve_tensors(self) -> None:
        """Grow ``tensors`` from the parameters over the scope's assignments to a fixpoint."""
        self.tensors |= self.params
        pending = list(self.assignments)
        changed = True
        while changed and pending:
            changed = False
            rest = []
            for target, value in pending:
                names = self._tensor_targets(target, value)
                if names:
                    self.tensors |= names
                    changed = True
                else:
                    rest.append((target, value))
            pending = rest

    def _tensor_targets(self, target: cst.BaseExpression, value: cst.BaseExpression) -> set[str]:
        if isinstance(target, cst.Name):
            return {target.value} if self.is_tensor(value) else set()
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [el.value for el in target.elements if not isinstance(el, cst.StarredElement)]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                found = set()
                for t, v in zip(target.elements, value.elements):
                    found |= self._tensor_targets(t.value, v.value)
                return found
            if isinstance(value, cst.Call) and self._call_returns_tensor(value):  # split, chunk, max(dim)
                return {el.value for el in elements if isinstance(el, cst.Name)}
        return set()

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
        use = _NameUse()
        use.walk(part)
        reads |= use.reads
    return reads


# --------------------------------------------------------------------------- small helpers


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``torch.nn.functional.linear`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


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


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes that hold code (no whitespace, punctuation, attribute or keyword names).

    libcst's own traversal rebuilds every node it passes, several times slower than reading
    the dataclass fields; the rules only read, so this is all they need.
    """
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _CHILD_FIELDS[type(node)] = tuple(
            f.name for f in dataclasses.fields(node) if f.name not in _SKIPPED_FIELDS and "whitespace" not in f.name
        )
    found = []
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found.extend(v for v in value if isinstance(v, cst.CSTNode))
    return found


_HANDLERS: dict[tuple[type, type], tuple] = {}


class _Walker:
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
    for earlier in ref.earlier():
        if not isinstance(earlier.node, cst.SimpleStatementLine):
            return None
        if name not in names_of(earlier.node)[1]:
            continue
        small = earlier.simple
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value == name
        ):
            return small.value
        return None
    return None


def ancestors(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``node``'s parent up to ``root``, nearest first; None if ``node`` is not in it."""
    if root is node:
        return []
    for child in children(root):
        path = ancestors(child, node)
        if path is not None:
            return [*path, root]
    return None


class _NameUse(_Walker):
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


# --------------------------------------------------------------------------- the one pass


def collect_scopes(module: cst.Module, facts: ModuleFacts, ops: OpTables) -> list[Scope]:
    """Walk the tree once and return the module scope and one scope per function, resolved."""
    collector = _Collector(facts, ops)
    collector.walk(module)
    for scope in collector.scopes:
        scope.resolve_tensors()
    return collector.scopes


class _Collector(_Walker):
    """Records, per scope, the sites the rules ask about and the facts liveness needs."""

    def __init__(self, facts: ModuleFacts, ops: OpTables) -> None:
        self.facts = facts
        self.ops = ops
        self.scopes: list[Scope] = []
        self.scope_stack: list[Scope | None] = []  # None: a class body (not analysed)
        self.class_stack: list[str] = []
        self.statement_stack: list[StatementRef] = []
        self.refs: dict[int, StatementRef] = {}
        self.conditional = 0  # depth inside lambda/comprehension/if-expression/and-or
        self.lambdas = 0
        # ``x.detach().clone()``: a copy cut from the graph, which no later autograd code needs
        self.copy_detaches: set[int] = set()

    @property
    def scope(self) -> Scope | None:
        return self.scope_stack[-1] if self.scope_stack else None

    def _block(self, node: cst.Module | cst.IndentedBlock) -> None:
        parent = self.statement_stack[-1] if self.statement_stack else None
        scope = self.scope
        block = Block(node.body, scope, parent, node)  # type: ignore[arg-type]
        for i, statement in enumerate(node.body):
            self.refs[id(statement)] = StatementRef(statement, block, i)

    def walk(self, node: cst.CSTNode) -> None:
        ref = self.refs.get(id(node))
        if ref is None:
            super().walk(node)
            return
        self.statement_stack.append(ref)
        super().walk(node)
        self.statement_stack.pop()

    # --- scopes -------------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        scope = Scope(node, self.facts, self.ops)
        self.scopes.append(scope)
        self.scope_stack.append(scope)
        self._block(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.class_stack.append(node.name.value)
        self.scope_stack.append(None)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.class_stack.pop()
        self.scope_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        in_class = self.scope is None and bool(self.class_stack)
        scope = Scope(node, self.facts, self.ops, class_name=self.class_stack[-1] if in_class else None)
        scope.unit = self.statement_stack[0].node if self.statement_stack else node
        self._params(scope, node, in_class)
        self.scopes.append(scope)
        self.scope_stack.append(scope)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scope_stack.pop()

    def _params(self, scope: Scope, node: cst.FunctionDef, in_class: bool) -> None:
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        static = any(dotted_name(d.decorator) == "staticmethod" for d in node.decorators)
        if in_class and not static and params:
            params = params[1:]  # self / cls
        forward = node.name.value == "forward"
        for param in params:
            name = param.name.value
            if param.annotation is not None:
                tensor = scope.is_tensor_annotation(param.annotation.annotation)
            else:
                tensor = forward and (param.default is None or _is_none(param.default))
            if tensor:
                scope.params.add(name)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.lambdas += 1
        self.conditional += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.lambdas -= 1
        self.conditional -= 1

    def _enter_conditional(self, node: cst.CSTNode) -> None:
        self.conditional += 1

    def _leave_conditional(self, original_node: cst.CSTNode) -> None:
        self.conditional -= 1

    visit_IfExp = visit_BooleanOperation = visit_ListComp = visit_SetComp = _enter_conditional
    visit_DictComp = visit_GeneratorExp = _enter_conditional
    leave_IfExp = leave_BooleanOperation = leave_ListComp = leave_SetComp = _leave_conditional
    leave_DictComp = leave_GeneratorExp = _leave_conditional

    def visit_Name(self, node: cst.Name) -> None:
        name = node.value
        inner = True
        for scope in reversed(self.scope_stack):
            if scope is None:
                continue
            if not inner or self.lambdas:
                scope.escaped.add(name)
            inner = False

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._escape(item.name.value)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._escape(item.name.value)

    def _escape(self, name: str) -> None:
        for scope in self.scope_stack:
            if scope is not None:
                scope.escaped.add(name)

    # --- sites and facts ----------------------------------------------------------------------

    def _site(self, key: str, node: cst.CSTNode) -> None:
        scope = self.scope
        if scope is not None and self.statement_stack:
            scope.sites[key].append(Site(node, self.statement_stack[-1], self.conditional > 0))

    def visit_Call(self, node: cst.Call) -> None:
        scope = self.scope
        if scope is None:
            return
        func = node.func
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            if name == "clone" and is_method_call(func.value, "detach"):
                self.copy_detaches.add(id(func.value.func))  # type: ignore[union-attr]
            if name.endswith("_") and not name.startswith("_"):
                target = root_name(func.value)
                if target:
                    scope.inplace.add(target)
        elif isinstance(func, cst.Name):
            name = func.value
            if name in _DYNAMIC_SCOPE_CALLS:
                scope.dynamic = True
        else:
            return
        if name in _AUTOGRAD_MARKERS and id(func) not in self.copy_detaches:
            scope.autograd = True
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                target = root_name(arg.value)
                if target:
                    scope.inplace.add(target)
        self._site(name, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        scope = self.scope
        if scope is None:
            return
        name = node.attr.value
        if name in VIEW_ATTRIBUTES:
            self._site(name, node)
        elif name in _AUTOGRAD_MARKERS and id(node) not in self.copy_detaches:
            scope.autograd = True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self._site("@", node)

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self.scope
        if scope is None:
            return
        for target in node.targets:
            self._target(scope, target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        scope = self.scope
        if scope is not None and node.value is not None:
            self._target(scope, node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        scope = self.scope
        if scope is None:
            return
        target = root_name(node.target)
        if target:
            scope.inplace.add(target)  # tensor += is in place
        if isinstance(node.target, cst.Name):
            scope.assignments.append((node.target, node.value))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        scope = self.scope
        if scope is not None:
            self._target(scope, node.target, node.value)

    def _target(self, scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            name = root_name(target)
            if name and isinstance(target, cst.Subscript):
                scope.inplace.add(name)
            return
        scope.assignments.append((target, value))


def is_method_call(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == name


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def has_op_class(scope: Scope, node: cst.CSTNode, op_class: str) -> bool:
    """Does ``node`` contain a torch op of ``op_class`` (outside lambdas)?"""
    if isinstance(node, cst.Lambda):
        return False
    if isinstance(node, (cst.Call, cst.BinaryOperation, cst.Attribute)):
        op = scope.op(node)
        if op is not None and op[1] == op_class:
            return True
    return any(has_op_class(scope, child, op_class) for child in children(node))


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


# --------------------------------------------------------------------------- statements in flow order


def inner_blocks(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    """The blocks nested directly in a compound statement (an ``elif`` counts as a block)."""
    found: list[cst.BaseSuite] = []
    for field_name in ("body", "orelse", "finalbody"):
        part = getattr(statement, field_name, None)
        if isinstance(part, cst.BaseSuite):
            found.append(part)
        elif isinstance(part, (cst.Else, cst.Finally)):
            found.append(part.body)
        elif isinstance(part, cst.If):
            found.append(cst.IndentedBlock(body=[part]))
    for handler in getattr(statement, "handlers", ()):
        found.append(handler.body)
    for case in getattr(statement, "cases", ()):
        found.append(case.body)
    return found if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else []


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
    yield from _block_refs(Block(statements, scope, None, owner))


def _block_refs(block: Block) -> Iterator[StatementRef]:
    for i, statement in enumerate(block.statements):
        ref = StatementRef(statement, block, i)
        yield ref
        for suite in inner_blocks(statement):
            if isinstance(suite, cst.IndentedBlock):
                yield from _block_refs(Block(tuple(suite.body), block.scope, ref, suite))


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


# --------------------------------------------------------------------------- compute statements and moves


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
