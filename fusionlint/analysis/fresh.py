"""Whether a same-file function returns a tensor it made: what a caller gets from it (a
classification head's logits) is then held by no one else, as a torch op's result is, and a copy
of it protects nothing."""
from __future__ import annotations

import ast

from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.purity import MAY_ALIAS, op_kind
from fusionlint.analysis.views import ast_view
from fusionlint.ops import VIEW, op_tables


def returns_new(facts: ModuleFacts, class_name: str | None, name: str) -> bool:
    """Does every definition of the same-file function ``name`` (a method of ``class_name``, or
    a top-level function when it is None) return a tensor it made: a known op's result, a
    same-file function's that returns one, or a view or cast of such; never a parameter, an
    attribute, or what an unknown callee returned? Judged once; a call back into a function
    being judged counts as no."""
    key = (class_name, name)
    known = facts.returns_new.get(key)
    if known is not None:
        return known
    facts.returns_new[key] = False
    functions = facts.functions.get(name, []) if class_name is None else facts.methods(class_name, name)
    result = bool(functions) and all(_Body(facts, class_name, function).returns_new() for function in functions)
    facts.returns_new[key] = result
    return result


class _Body:
    """One function's own body: its parameters, ``return`` values and the values its names take."""

    def __init__(self, facts: ModuleFacts, class_name: str | None,
                 function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.facts = facts
        self.class_name = class_name
        arguments = function.args
        self.params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
        self.params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
        self.body = function.body
        self.returns: list[tuple[ast.expr | None, int | None]] = [  # with the index of a statement of the body
            (node.value, i) for i, node in enumerate(function.body) if isinstance(node, ast.Return)
        ]
        self.values: dict[str, list[ast.expr]] = {}
        self.unknown: set[str] = set()  # bound by unpacking, a loop, a with, an import...
        todo: list[ast.AST] = list(function.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Return) and node not in function.body:
                self.returns.append((node.value, None))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        self.values.setdefault(target.id, []).append(node.value)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.unknown.add(node.id)  # any other binding; an assignment's own is in values too
            todo.extend(ast.iter_child_nodes(node))
        self.unknown -= {name for name in self.values if self._only_assigned(function, name)}

    def _only_assigned(self, function: ast.AST, name: str) -> bool:
        """Is every binding of ``name`` a plain ``name = value`` (or ``name: T = value``)?"""
        stores = sum(1 for node in ast.walk(function) if isinstance(node, ast.Name) and node.id == name
                     and not isinstance(node.ctx, ast.Load))
        return stores == len(self.values[name])

    def returns_new(self) -> bool:
        return bool(self.returns) and all(
            value is not None and self._new(value, frozenset(), at) for value, at in self.returns
        )

    def _reaching(self, name: str, at: int) -> list[tuple[ast.expr | None, int | None]] | None:
        """The values of the ``name = value`` assignments that may reach the body's ``at``-th
        statement, each with the index of its statement where it is one of the body's (None
        for the value on entry: the argument of a parameter); None if unknown (a name bound
        otherwise: unpacked, by a loop, a ``with``, in a ``try``)."""
        return self._flow(self.body[:at], name, [(None, None)])

    def _flow(self, statements: list[ast.stmt], name: str, values: list[tuple[ast.expr | None, int | None]]
              ) -> list[tuple[ast.expr | None, int | None]] | None:
        for statement in statements:
            if isinstance(statement, ast.If):
                body = self._flow(statement.body, name, values)
                orelse = self._flow(statement.orelse, name, values)
                if body is None or orelse is None:
                    return None
                values = body + [value for value in orelse if value not in body]
            elif isinstance(statement, (ast.For, ast.While)):
                if isinstance(statement, ast.For) and name in _stores(statement.target):
                    return None
                body = self._flow(statement.body, name, values)
                if body is None:
                    return None
                values = values + [value for value in body if value not in values]  # the loop may not run
                orelse = self._flow(statement.orelse, name, values)
                if orelse is None:
                    return None
                values = orelse
            elif isinstance(statement, ast.With) and not any(
                    item.optional_vars is not None and name in _stores(item.optional_vars) for item in statement.items):
                body = self._flow(statement.body, name, values)
                if body is None:
                    return None
                values = body
            elif name in _stores(statement):
                targets = statement.targets if isinstance(statement, ast.Assign) else \
                    [statement.target] if isinstance(statement, ast.AnnAssign) and statement.value is not None else []
                if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                    return None
                index = next((i for i, top in enumerate(self.body) if top is statement), None)
                values = [(statement.value, index)]  # type: ignore[union-attr]
        return values

    def _new(self, expr: ast.expr, seen: frozenset[str], at: int | None = None) -> bool:
        """``at``: the index of the body's statement that holds ``expr``, where known."""
        if isinstance(expr, ast.Name):
            name = expr.id
            reaching = self._reaching(name, at) if at is not None else None
            if reaching is not None:  # unbound on entry, unless a parameter: no value comes from there
                values = [(value, i) for value, i in reaching if value is not None]
                return bool(values) and not (name in self.params and len(values) < len(reaching)) and all(
                    self._new(value, seen if i is not None else seen | {name}, i) for value, i in values)
            if name in seen:
                return True  # its other values decide
            if name in self.params or name in self.unknown or name not in self.values:
                return False
            return all(self._new(value, seen | {name}) for value in self.values[name])
        if isinstance(expr, (ast.BinOp, ast.UnaryOp)):
            return True  # arithmetic makes a new tensor
        if isinstance(expr, ast.IfExp):
            return self._new(expr.body, seen, at) and self._new(expr.orelse, seen, at)
        if isinstance(expr, ast.Subscript):
            return self._new(expr.value, seen, at)  # a view, or a gather, of what it indexes
        if isinstance(expr, ast.Call):
            return self._new_call(expr, seen, at)
        return False

    def _new_call(self, call: ast.Call, seen: frozenset[str], at: int | None) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "contiguous" and not call.args and _strided_view(func.value):
            return True  # a copy of a strided view: it is no alias
        kind = op_kind(self.facts, self.class_name, call)
        if kind == "new":
            return True
        if kind == "alias":
            return bool(call.args) and self._new(call.args[0], seen, at)
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "self"):
            method = func.attr
            if method in MAY_ALIAS or method.endswith("_") or op_tables().op_class(method) == VIEW:
                return self._new(func.value, seen, at)  # the receiver itself, or a view of it
            if op_tables().op_class(method) is not None or method == "clone":
                return self._is_tensor_method(func)
        callee = self.facts.callee(self.class_name, ast_view, func)
        return callee is not None and returns_new(self.facts, *callee)

    def _is_tensor_method(self, func: ast.Attribute) -> bool:
        """A known op's name called on a value that is not a module (``np.exp(x)``, ``math.sqrt``)."""
        receiver = func.value
        return not (isinstance(receiver, ast.Name) and receiver.id in self.facts.imported)


# Views that leave a tensor strided: ``.contiguous()`` of one copies it.
_STRIDED = frozenset({"t", "transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "expand", "expand_as",
                      "narrow", "diagonal", "unfold"})


def _strided_view(expr: ast.expr) -> bool:
    """``x.permute(...)``, ``x.transpose(1, 2)``, ``x.mT``: a view whose elements are not laid out
    in order."""
    if isinstance(expr, ast.Attribute):
        return expr.attr in ("T", "mT", "H", "mH")
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _STRIDED


def _stores(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
