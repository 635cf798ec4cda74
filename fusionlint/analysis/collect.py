"""The one pass over the parsed tree: scopes, their parameters, the sites the rules ask about, and
the facts liveness needs."""
from __future__ import annotations

import libcst as cst

from fusionlint.analysis.callers import tensors_from_callers
from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.nodes import Walker, dotted_name, is_method_call, root_name
from fusionlint.analysis.scope import Block, Scope, Site, StatementRef
from fusionlint.analysis.tensors import SHAPE_ATTRIBUTES, documented_tensors
from fusionlint.ops import VIEW_ATTRIBUTES, OpTables

_AUTOGRAD_MARKERS = frozenset(
    {"requires_grad_", "requires_grad", "backward", "detach", "detach_", "retain_grad", "grad", "autograd"}
)
_DYNAMIC_SCOPE_CALLS = frozenset({"locals", "vars", "eval", "exec"})


def collect_scopes(module: cst.Module, facts: ModuleFacts, ops: OpTables) -> list[Scope]:
    """Walk the tree once and return the module scope and one scope per function, resolved."""
    collector = _Collector(facts, ops)
    collector.walk(module)
    for scope in collector.scopes:
        scope.resolve_tensors()
    tensors_from_callers(collector.scopes)
    return collector.scopes


class _Collector(Walker):
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
        block = Block(node.body, parent, node)  # type: ignore[arg-type]
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
        commented = _type_comment(node)
        documentable = set()
        for i, param in enumerate(params):
            annotation = param.annotation.annotation if param.annotation is not None else None
            if annotation is None and commented is not None and len(commented) == len(params) and not param.star:
                annotation = commented[i]
                if isinstance(annotation, cst.Name) and annotation.value == "Tensor":
                    annotation = _TORCH_TENSOR  # TorchScript reads a bare `Tensor` in these comments, imported or not
            tensor = scope.typing.declare(param.name.value, annotation, param.default, forward)
            group = scope.params if tensor else scope.typed if tensor is not None else scope.untyped
            group.add(param.name.value)
            if tensor is None and (param.default is None or _is_none(param.default)):
                documentable.add(param.name.value)
        if documentable:
            docstring = _docstring(node)
            documented = documented_tensors(docstring, documentable)
            scope.params |= documented
            scope.untyped -= documented
            scope.typing.tensor_lists |= documented_tensors(docstring, documentable - documented, lists=True)

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
        scope.used_as_tensor.update(scope.typing.used_as_tensor(node))
        if name == "append" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star:
            scope.appends.append((func.value.value, node.args[0].value))
        self._site(name, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        scope = self.scope
        if scope is None:
            return
        name = node.attr.value
        if name in VIEW_ATTRIBUTES:
            self._site(name, node)
        elif name in SHAPE_ATTRIBUTES:
            scope.used_as_tensor.update(scope.typing.used_as_tensor(node))
        elif name in _AUTOGRAD_MARKERS and id(node) not in self.copy_detaches:
            scope.autograd = True

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.scope is not None and any(
            type(element.slice) is cst.Index and type(element.slice.value) is cst.Name and element.slice.value.value == "None"
            for element in node.slice
        ):
            self.scope.used_as_tensor.update(self.scope.typing.used_as_tensor(node))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self._site("@", node)
            if self.scope is not None:
                self.scope.used_as_tensor.update(self.scope.typing.used_as_tensor(node))

    def visit_For(self, node: cst.For) -> None:
        if self.scope is not None:
            self.scope.loops.append((node.target, node.iter))

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if self.scope is not None:
            self.scope.comprehensions.append((node.target, node.iter))

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
            if isinstance(node.target, cst.Name) and scope.typing.is_tensor_sequence_annotation(node.annotation.annotation):
                scope.typing.tensor_lists.add(node.target.value)  # ``outs: list[Tensor] = []``

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


_TORCH_TENSOR = cst.parse_expression("torch.Tensor")


def _is_none(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "None"


def _docstring(node: cst.FunctionDef) -> str | None:
    """The function's docstring, as written (not dedented); None without one."""
    body = node.body
    first = body.body[0] if isinstance(body, cst.IndentedBlock) and body.body else None
    if type(first) is not cst.SimpleStatementLine or type(first.body[0]) is not cst.Expr:
        return None
    value = first.body[0].value
    if type(value) is cst.SimpleString or type(value) is cst.ConcatenatedString:
        text = value.evaluated_value
        return text if isinstance(text, str) else None
    return None


def _type_comment(node: cst.FunctionDef) -> list[cst.BaseExpression] | None:
    """The parameter types of a TorchScript-era signature comment, ``# type: (Tensor, int) -> Tensor``,
    on the ``def`` line or the first line of the body; None without one."""
    body = node.body
    comment = body.header.comment if isinstance(body, cst.IndentedBlock) else None
    if comment is None and isinstance(body, cst.IndentedBlock) and body.body:
        first = body.body[0].leading_lines
        comment = first[0].comment if first else None
    text = comment.value[1:].strip() if comment is not None else ""
    if not text.startswith("type:") or "->" not in text:
        return None
    try:
        types = cst.parse_expression(text[5:].partition("->")[0].strip())
    except cst.ParserSyntaxError:
        return None
    if isinstance(types, cst.Tuple):
        return [element.value for element in types.elements]
    return [types] if types.lpar else None
