"""Which parameters of a same-file function the function only reads: a tensor handed to it is
neither written in place nor handed back as it is or as a view, so a copy made for the call is
not needed (``self.altup.scale_corrected_output(x.clone())``, whose body is ``(x * s).type_as(x)``)."""
from __future__ import annotations

import ast

from fusionlint.analysis.facts import ModuleFacts, built_in_place
from fusionlint.analysis.views import View, ast_view, dotted_path
from fusionlint.ops import NN_MODULE_OPS, VIEW, VIEW_ATTRIBUTES, op_tables

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


def writes_argument(facts: ModuleFacts, class_name: str | None, name: str, param: int | str, depth: int = 2) -> bool:
    """May the same-file function ``name`` (a method of ``class_name``, or a top-level function)
    write its ``param`` argument (an index among the parameters after ``self``, or a keyword) in
    place: an in-place method, an item store or ``+=`` on a name bound to it or to a view of it
    (whatever that name is bound to later: the names are not followed through the body), ``out=``
    or ``inplace=True`` with it, or handing it to a same-file function (or a module built
    ``inplace=True``) that may? Unknown callees are taken to read their arguments, as a module's
    ``forward`` reads its input. True where the function is not found or takes ``*args``."""
    functions = facts.functions.get(name, []) if class_name is None else facts.methods(class_name, name)
    return not functions or any(_writes(facts, class_name, function, param, depth) for function in functions)


def _writes(facts: ModuleFacts, class_name: str | None, function: ast.FunctionDef | ast.AsyncFunctionDef,
            param: int | str, depth: int) -> bool:
    arguments = function.args
    params = [*arguments.posonlyargs, *arguments.args][1 if class_name is not None else 0:]
    if isinstance(param, str):
        if param not in {a.arg for a in (*params, *arguments.kwonlyargs)}:
            return arguments.kwarg is not None
        held = _bound_to(function, param)
    elif param < len(params):
        held = _bound_to(function, params[param].arg)
    else:
        return arguments.vararg is not None
    for node in ast.walk(function):
        if node is function:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                and any(isinstance(n, ast.Name) and n.id in held for n in ast.walk(node)):
            return True  # a closure may do anything with it
        if isinstance(node, ast.AugAssign) and _root(node.target) in held:
            return True
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load) \
                and _root(node.value) in held:
            return True
        if isinstance(node, ast.Attribute) and _root(node.value) in held and not _tensor_attribute(node.attr):
            return True  # `signal.audio_data`: no tensor, an object whose methods may do anything
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") and _root(node.func.value) in held:
            return True
        given = [(i, a) for i, a in enumerate(node.args) if _root(a) in held]
        given += [(k.arg, k.value) for k in node.keywords if k.arg is not None and _root(k.value) in held]
        if not given:
            continue
        if any(k.arg in ("out", "inplace") for k in node.keywords) or any(isinstance(a, ast.Starred) for _, a in given):
            return True
        if _builds_in_place(facts, class_name, node.func):
            return True
        callee = facts.callee(class_name, ast_view, node.func)
        if callee is not None and (depth <= 0 or any(
                writes_argument(facts, callee[0], callee[1], at, depth - 1) for at, _ in given)):
            return True
    return False


# What a tensor has besides its ops, views and metadata.
_TENSOR_ATTRIBUTES = frozenset({
    "data", "grad", "real", "imag", "item", "tolist", "numpy", "cpu", "cuda", "is_contiguous", "stride", "data_ptr",
    "storage_offset", "element_size", "nelement", "is_floating_point", "is_complex", "layout", "names", "clone",
    "type", "unbind", "split", "chunk", "tensor_split", "new_tensor", "is_leaf", "grad_fn", "any", "all",
})


def _tensor_attribute(name: str) -> bool:
    return name in _TENSOR_ATTRIBUTES or name in METADATA or name in MAY_ALIAS or name in VIEW_ATTRIBUTES \
        or name.endswith("_") or op_tables().op_class(name) is not None


def _root(expr: ast.expr) -> str | None:
    """``x`` of ``x``, ``x[i]``, ``x.t()``, ``x.view(...).float()``: the name a value reads through views."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not _is_self(expr.func.value):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and not _is_self(expr.value):
            expr = expr.value
        elif isinstance(expr, ast.Starred):
            expr = expr.value
        else:
            return None


def _builds_in_place(facts: ModuleFacts, class_name: str | None, func: ast.expr) -> bool:
    """``self.act(x)`` where the class builds ``self.act`` with ``inplace=True`` anywhere in its value
    (``nn.Sequential(nn.ReLU(inplace=True), ...)``)."""
    if class_name is None or not (isinstance(func, ast.Attribute) and _is_self(func.value)):
        return False
    return any(built_in_place(node) for assign in facts.member_values(class_name, func.attr)
               for node in ast.walk(assign.value) if isinstance(node, ast.Call))


def may_return_argument(facts: ModuleFacts, class_name: str | None, name: str, position: int, depth: int = 2) -> bool:
    """May the same-file function ``name`` hand back its ``position``-th argument, or a view of
    it: a ``return`` of a name bound to it (through views, anywhere in the body), of an identity
    module's or a same-file function's result on it (``self.drop(x)``: a dropout is the identity
    when not training)? A module class the file cannot see is taken to make its output. True
    where the function is not found."""
    functions = facts.functions.get(name, []) if class_name is None else facts.methods(class_name, name)
    return not functions or any(_may_return(facts, class_name, function, position, depth) for function in functions)


def _may_return(facts: ModuleFacts, class_name: str | None, function: ast.FunctionDef | ast.AsyncFunctionDef,
                position: int, depth: int) -> bool:
    arguments = function.args
    params = [*arguments.posonlyargs, *arguments.args][1 if class_name is not None else 0:]
    if position >= len(params) or arguments.vararg is not None:
        return True
    held = _bound_to(function, params[position].arg)
    todo = [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]
    while todo:
        value = todo.pop()
        if isinstance(value, (ast.Tuple, ast.List)):
            todo += value.elts
        elif isinstance(value, ast.IfExp):
            todo += [value.body, value.orelse]
        elif _root(value) in held:
            return True
        elif isinstance(value, ast.Call) and any(_root(a) in held for a in value.args):
            if _hands_back(facts, class_name, value.func):
                return True
            callee = facts.callee(class_name, ast_view, value.func)
            if callee is not None and (depth <= 0 or any(
                    may_return_argument(facts, callee[0], callee[1], i, depth - 1)
                    for i, a in enumerate(value.args) if _root(a) in held)):
                return True
    return False


def _bound_to(function: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> set[str]:
    """``param`` and the names bound to it or to a view of it anywhere in ``function``, and the
    containers holding one (``inputs = [x]``, ``inputs.append(x)``: ``inputs[i] += v`` writes it)."""
    held = {param}
    nodes = [node for node in ast.walk(function) if isinstance(node, (ast.Assign, ast.Call))]
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if isinstance(node, ast.Assign) and _holds(node.value, held):
                targets = [bound for target in node.targets for bound in ast.walk(target) if isinstance(bound, ast.Name)]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "extend", "insert", "add") and any(_holds(a, held) for a in node.args):
                targets = [node.func.value] if isinstance(node.func.value, ast.Name) else []
            else:
                continue
            for bound in targets:
                if bound.id not in held:
                    held.add(bound.id)
                    changed = True
    return held


def _holds(value: ast.expr, held: set[str]) -> bool:
    """Does ``value`` hold one of the ``held`` names' tensors: a view of it, or a display listing one?"""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return any(_holds(element, held) for element in value.elts)
    if isinstance(value, ast.Dict):
        return any(_holds(element, held) for element in value.values)
    return _root(value) in held


# torch.nn modules that may return their input (the identity, a dropout when not training).
_MAY_HAND_BACK = ("Identity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "Flatten", "Unflatten")


def _hands_back(facts: ModuleFacts, class_name: str | None, func: ast.expr) -> bool:
    """``self.drop(x)`` where the class builds ``self.drop`` with an identity-like module anywhere in its value."""
    if class_name is None or not (isinstance(func, ast.Attribute) and _is_self(func.value)):
        return False
    return any(isinstance(node, ast.Call) and (dotted_path(ast_view, node.func) or "").rpartition(".")[2].endswith(
        _MAY_HAND_BACK) for assign in facts.member_values(class_name, func.attr) for node in ast.walk(assign.value))
