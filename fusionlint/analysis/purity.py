"""Which parameters of a same-file function the function only reads: a tensor handed to it is
neither written in place nor handed back as it is or as a view, so a copy made for the call is
not needed (``self.altup.scale_corrected_output(x.clone())``, whose body is ``(x * s).type_as(x)``)."""
from __future__ import annotations

import ast

from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.views import View, ast_view, dotted_path
from fusionlint.ops import VIEW, NN_MODULE_OPS, op_tables

# Ops that may return their input itself (``x.to(x.dtype)`` is ``x``): an alias, like a view.
MAY_ALIAS = frozenset({"to", "float", "double", "half", "bfloat16", "int", "long", "bool", "type_as", "contiguous",
                       "dropout", "detach"})
# Reads of metadata, and factories that take only its dtype and device: no data is touched, and
# the answer does not depend on the layout (not ``stride``, ``is_contiguous``, ``data_ptr``).
METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "size", "dim", "numel",
                      "new_zeros", "new_ones", "new_empty", "new_full"})
_TORCH_OP_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")


def only_reads(facts: ModuleFacts, class_name: str | None, name: str, position: int) -> bool:
    """Does every definition of the same-file function ``name`` (a method of ``class_name``, or a
    top-level function when it is None) only read its ``position``-th parameter (``self`` not
    counted): arithmetic, metadata and known tensor ops that make a new tensor, through views
    and casts used the same way, or a same-file function that only reads it in turn? Each
    function is judged once; a call back into one being judged counts as a write."""
    key = (class_name, name, position)
    known = facts.reads_only.get(key)
    if known is not None:
        return known
    facts.reads_only[key] = False
    functions = facts.functions.get(name, []) if class_name is None else facts.methods(class_name, name)
    result = bool(functions) and all(_reads_only(facts, class_name, function, position) for function in functions)
    facts.reads_only[key] = result
    return result


def _reads_only(facts: ModuleFacts, class_name: str | None, function: ast.FunctionDef | ast.AsyncFunctionDef,
                position: int) -> bool:
    arguments = function.args
    if arguments.vararg is not None or arguments.kwarg is not None:
        return False
    params = [*arguments.posonlyargs, *arguments.args]
    if class_name is not None:
        params = params[1:]
    if position >= len(params):
        return False
    param = params[position].arg
    parents: dict[int, ast.AST] = {}
    uses: list[ast.Name] = []
    for node in ast.walk(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and node is not function:
            if any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(node)):
                return False  # a closure may do anything with it
        if isinstance(node, ast.Name) and node.id == param:
            uses.append(node)
    return all(_read(facts, class_name, use, param, parents) for use in uses)


def _read(facts: ModuleFacts, class_name: str | None, use: ast.Name, param: str, parents: dict[int, ast.AST]) -> bool:
    """Is this occurrence of the parameter a read whose value, or alias, goes nowhere but into a
    new tensor?"""
    if isinstance(use.ctx, ast.Store):
        parent = parents.get(id(use))
        return isinstance(parent, ast.Assign)  # rebound: its other uses are judged too
    ops = op_tables()
    node: ast.AST = use
    while True:
        parent = parents.get(id(node))
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return True
        if isinstance(parent, ast.Subscript):
            if parent.value is not node:
                return True  # used as an index
            if not isinstance(parent.ctx, ast.Load):
                return False  # `x[i] = v`
            node = parent
            continue
        if isinstance(parent, ast.Attribute) and parent.value is node:
            call = parents.get(id(parent))
            if parent.attr in METADATA:
                return True
            if not (isinstance(call, ast.Call) and call.func is parent) or parent.attr.endswith("_"):
                return False
            if parent.attr in MAY_ALIAS or ops.op_class(parent.attr) == VIEW:
                node = call
                continue
            return ops.op_class(parent.attr) is not None or parent.attr == "clone"
        if isinstance(parent, ast.Call) and node in parent.args:
            if any(keyword.arg == "out" for keyword in parent.keywords):
                return False
            op = _op(facts, class_name, parent)
            if op == "alias":
                node = parent
                continue
            if op == "new":
                return True
            position = parent.args.index(node)  # type: ignore[arg-type]
            return callee_only_reads(facts, class_name, ast_view, parent.func, position)
        if isinstance(parent, ast.Assign) and parent.value is node:
            return all(isinstance(target, ast.Name) and target.id == param for target in parent.targets)
        if isinstance(parent, ast.Expr):
            return True
        return False  # returned, stored, passed to unknown code


def _op(facts: ModuleFacts, class_name: str | None, call: ast.Call) -> str | None:
    """What a call makes of an argument: "alias" (a view or a cast of it), "new" (another tensor),
    None when unknown."""
    func = call.func
    if isinstance(func, ast.Attribute) and not _is_self(func.value) and _torch_name(facts, func) is None:
        # a tensor method's argument (`y.type_as(x)`, `y.add(x)`) is read; the result is not it
        known = func.attr in MAY_ALIAS or op_tables().op_class(func.attr) is not None
        imported = isinstance(func.value, ast.Name) and func.value.id in facts.imported  # `np.add(x)`: no method
        return "new" if known and not func.attr.endswith("_") and not imported else None
    return op_kind(facts, class_name, call)


def op_kind(facts: ModuleFacts, class_name: str | None, call: ast.Call) -> str | None:
    """"alias" for a torch function, or a torch.nn module attribute, that runs a view or a cast
    of its input, "new" for one that runs another known op (not in place), else None."""
    name = op_name(facts, class_name, call)
    if not name or name.endswith("_"):
        return None
    ops = op_tables()
    if name in MAY_ALIAS or ops.op_class(name) == VIEW:
        return "alias"
    return "new" if ops.op_class(name) is not None else None


def op_name(facts: ModuleFacts, class_name: str | None, call: ast.Call) -> str | None:
    """The op a call of a torch function (``F.gelu``), or of a torch.nn module attribute
    (``self.norm`` of an ``nn.LayerNorm``), runs; None for any other call."""
    canonical = _torch_name(facts, call.func)
    if canonical is not None:
        module, _, name = canonical.rpartition(".")
        return name if module in _TORCH_OP_MODULES else None
    if class_name is not None and isinstance(call.func, ast.Attribute) and _is_self(call.func.value):
        return NN_MODULE_OPS.get(facts.nn_class(class_name, call.func.attr) or "")
    return None


def _torch_name(facts: ModuleFacts, func: ast.expr) -> str | None:
    dotted = dotted_path(ast_view, func)
    return facts.canonical(dotted) if dotted else None


def callee_only_reads(facts: ModuleFacts, class_name: str | None, view: View, func: object, position: int) -> bool:
    """Is ``func`` (a callee, in either syntax tree through ``view``) a same-file function that
    only reads its ``position``-th argument (``ModuleFacts.callee`` says which callees are)?"""
    callee = facts.callee(class_name, view, func)
    return callee is not None and only_reads(facts, callee[0], callee[1], position)


def _is_self(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Name) and expr.id == "self"
