"""Which expressions hold tensors, by one set of heuristics over either syntax tree.

The rules ask about libcst nodes; what a same-file function returns is read from the stdlib
``ast`` of the whole file, because the engine's libcst tree lacks the functions it masked out.
Both trees are seen through ``views``, so the heuristics exist once.
"""
from __future__ import annotations

import ast
from typing import Iterable, Iterator

from fusionlint.analysis.facts import ModuleFacts, torch_call_returns_tensor
from fusionlint.analysis.views import (
    ATTR, BINOP, CALL, COMPARE, IFEXP, NAME, NONE, SEQ, STRING, SUBSCRIPT, UNARY, View, ast_view, dotted_path,
)
from fusionlint.ops import MATMULS, VIEW_ATTRIBUTES, OpTables, op_tables

TORCH_OP_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")
_NON_TENSOR_METHODS = frozenset(
    """item tolist size dim ndimension numel nelement stride data_ptr is_contiguous element_size
    numpy get_device storage untyped_storage is_floating_point is_complex equal type register_hook
    backward dim_order nbytes itemsize is_set_to astype __len__ __repr__ __str__""".split()
)
_TENSOR_ATTRIBUTES = VIEW_ATTRIBUTES | {"data", "grad", "real", "imag"}
_MODULE_TENSORS = frozenset({"weight", "bias"})
_EINOPS = frozenset({"einops.rearrange", "einops.repeat", "einops.reduce", "einops.einsum"})
# Methods that, of the values a model file handles, only a tensor has; and those a numpy array
# has too, which tell a tensor only in a file that does not import numpy (as does ``a @ b``).
_TENSOR_ONLY_METHODS = frozenset(
    """clone contiguous matmul softmax log_softmax view_as permute unsqueeze masked_fill masked_fill_
    detach type_as expand_as bmm cpu numpy""".split()
)
_NUMPY_METHODS = frozenset({"transpose", "view", "item", "tolist"})
_DIM_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "softmax", "log_softmax", "norm", "std", "var"})
_UNION_TYPES = ("Optional", "Union", "typing.Optional", "typing.Union")
# Annotations of containers whose iteration yields their element type: ``list[Tensor]``.
_SEQUENCE_TYPES = frozenset(
    f"{prefix}{name}" for prefix in ("", "typing.", "collections.abc.")
    for name in ("list", "List", "tuple", "Tuple", "Sequence", "Iterable", "Iterator", "MutableSequence")
)
_CONTAINERS = ("list", "dict", "sequential")


class Typing:
    """The tensor and module names of one scope, and the questions asked about its expressions.

    ``tensors`` and ``modules`` grow by ``resolve``: flow-insensitive, to a fixpoint.
    """

    def __init__(self, facts: ModuleFacts, ops: OpTables, view: View, class_name: str | None) -> None:
        self.facts = facts
        self.ops = ops
        self.view = view
        self.class_name = class_name
        self.tensors: set[str] = set()
        self.modules: set[str] = set()  # local names bound to an nn.Module (``for blk in self.blocks``)
        self.tensor_lists: set[str] = set()  # parameters annotated ``list[Tensor]`` and the like

    def torch_name(self, expr: object) -> str | None:
        dotted = dotted_path(self.view, expr)
        return self.facts.canonical(dotted) if dotted else None

    def _self_attr(self, view: tuple) -> str | None:
        """``fc`` for ``self.fc`` inside a method, else None."""
        if view[0] == ATTR and self.class_name is not None:
            owner = self.view(view[1])
            if owner[0] == NAME and owner[1] == "self":
                return view[2]
        return None

    # --- tensors ---------------------------------------------------------------------------------

    def is_tensor(self, expr: object) -> bool:
        view = self.view(expr)
        kind = view[0]
        if kind == NAME:
            return view[1] in self.tensors
        if kind == ATTR:
            attr = self._self_attr(view)
            if attr is not None:
                return attr in self.facts.tensor_attrs(self.class_name)
            if view[2] in _MODULE_TENSORS and self.is_module(view[1]):
                return True
            return view[2] in _TENSOR_ATTRIBUTES and self.is_tensor(view[1])
        if kind == CALL:
            return self.call_returns_tensor(view)
        if kind == BINOP:
            return self.is_tensor(view[1]) or self.is_tensor(view[2])
        if kind == UNARY:
            return not view[2] and self.is_tensor(view[1])
        if kind == SUBSCRIPT:
            return self.is_tensor(view[1])
        if kind == COMPARE:
            return any(self.is_tensor(operand) for operand in view[1])
        if kind == IFEXP:
            return self.is_tensor(view[1]) or self.is_tensor(view[2])
        return False

    def call_returns_tensor(self, call: tuple) -> bool:
        func, positional = call[1], call[2]
        callee = self.view(func)
        if callee[0] == ATTR and self.is_tensor(callee[1]):
            return callee[2] not in _NON_TENSOR_METHODS
        if self.is_module(func):
            return self._module_returns_tensor(func)
        if callee[0] == ATTR and self.is_module(callee[1]):
            return self._method_returns_tensor(callee[1], callee[2])
        attr = self._self_attr(callee)
        if attr is not None:
            return returns_tensor(self.facts, self.class_name, attr)
        if callee[0] == NAME and callee[1] in self.facts.functions:
            return returns_tensor(self.facts, None, callee[1])
        canonical = self.torch_name(func)
        if canonical is None:
            return False
        if canonical in _EINOPS:
            return any(self.is_tensor(arg) for arg in positional[:1])
        return torch_call_returns_tensor(canonical)

    # --- modules ---------------------------------------------------------------------------------

    def is_module(self, expr: object) -> bool:
        """``self.fc``, ``self.layers[i]`` or a local bound to a module: a callable nn.Module."""
        view = self.view(expr)
        if view[0] == NAME:
            return view[1] in self.modules
        if view[0] == SUBSCRIPT:
            return self._container(view[1]) is not None
        attr = self._self_attr(view)
        return attr is not None and self.facts.module_attr(self.class_name, attr) not in (None, "list", "dict")

    def _container(self, expr: object) -> str | None:
        """The kind of ``self.blocks`` holding an ``nn.ModuleList`` ("list"), ``ModuleDict`` ("dict")
        or ``Sequential`` ("sequential"), or of a slice of it; None for anything else."""
        view = self.view(expr)
        if view[0] == SUBSCRIPT:
            return self._container(view[1])
        attr = self._self_attr(view)
        kind = self.facts.module_attr(self.class_name, attr) if attr is not None else None
        return kind if kind in _CONTAINERS else None

    def _module_returns_tensor(self, func: object) -> bool:
        """A module's call: a tensor, unless it is a same-file class whose ``forward`` returns none."""
        attr = self._self_attr(self.view(func))
        kind = self.facts.module_attr(self.class_name, attr) if attr is not None else None
        if kind in (None, "nn", "sequential") or not self.facts.has_method(kind, "forward"):
            return True
        return returns_tensor(self.facts, kind, "forward")

    def _method_returns_tensor(self, module: object, method: str) -> bool:
        """``self.altup.predict(x)``: a method of a same-file module class that returns tensors."""
        attr = self._self_attr(self.view(module))
        kind = self.facts.module_attr(self.class_name, attr) if attr is not None else None
        return kind not in (None, *_CONTAINERS, "nn") and self.facts.has_method(kind, method) and returns_tensor(
            self.facts, kind, method
        )

    def loop_modules(self, target: object, iterable: object) -> Iterator[str]:
        """Names a ``for`` binds to modules: ``blk`` in ``for blk in self.blocks`` or
        ``for i, blk in enumerate(self.blocks)``."""
        view, bound = self.view(iterable), self.view(target)
        if view[0] == CALL and dotted_path(self.view, view[1]) == "enumerate" and view[2]:
            if not (bound[0] == SEQ and len(bound[1]) == 2 == bound[2]):
                return
            iterable, bound = view[2][0], self.view(bound[1][1])
        if bound[0] == NAME and self._container(iterable) in ("list", "sequential"):  # a ModuleDict yields keys
            yield bound[1]

    # --- names -----------------------------------------------------------------------------------

    def is_tensor_annotation(self, annotation: object) -> bool:
        view = self.view(annotation)
        if view[0] == STRING:
            return self._is_tensor_type(view[1].strip())
        if view[0] == SUBSCRIPT:  # Optional[Tensor], Union[Tensor, None]
            return dotted_path(self.view, view[1]) in _UNION_TYPES and any(self.is_tensor_annotation(el) for el in view[2])
        if view[0] == BINOP and view[3] == "|":
            return self.is_tensor_annotation(view[1]) or self.is_tensor_annotation(view[2])
        dotted = dotted_path(self.view, annotation)
        return dotted is not None and self._is_tensor_type(dotted)

    def is_tensor_sequence_annotation(self, annotation: object) -> bool:
        """``list[Tensor]``, ``Sequence[torch.Tensor]``, ``tuple[Tensor, ...]`` (also in ``Optional``)."""
        view = self.view(annotation)
        if view[0] == STRING:
            return False
        if view[0] == BINOP and view[3] == "|":
            return self.is_tensor_sequence_annotation(view[1]) or self.is_tensor_sequence_annotation(view[2])
        if view[0] != SUBSCRIPT:
            return False
        base = dotted_path(self.view, view[1])
        if base in _UNION_TYPES:
            return any(self.is_tensor_sequence_annotation(el) for el in view[2])
        return base in _SEQUENCE_TYPES and any(self.is_tensor_annotation(el) for el in view[2])

    def _is_tensor_type(self, dotted: str) -> bool:
        canonical = self.facts.canonical(dotted)
        if canonical is None:
            return False
        last = canonical.rpartition(".")[2]
        return last.endswith("Tensor") or last == "Parameter"

    def param_is_tensor(self, annotation: object | None, default: object | None, forward: bool) -> bool | None:
        """True/False from a parameter's annotation or ``forward``; None when only its use can tell."""
        if annotation is not None:
            return self.is_tensor_annotation(annotation)
        if forward and (default is None or self.view(default)[0] == NONE):
            return True
        return None

    def used_as_tensor(self, expr: object) -> Iterator[str]:
        """Names that ``expr`` uses the way only a tensor is used: the receiver of a tensor-only
        method (``x.clone()``, ``x.sum(dim=1)``), an operand of ``@``, the input of a torch op
        (``torch.softmax(x, -1)``), any operand of a matmul (``torch.matmul(x, y)``)."""
        view = self.view(expr)
        if view[0] == BINOP and view[3] == "@":
            if not self.facts.imports_numpy:
                yield from self._names((view[1], view[2]))
        elif view[0] == CALL:
            callee = self.view(view[1])
            canonical = self.torch_name(view[1]) if callee[0] in (NAME, ATTR) else None
            if canonical is not None:
                module, _, name = canonical.rpartition(".")
                if module in TORCH_OP_MODULES and self.ops.op_class(name) is not None:
                    yield from self._names(view[2] if name in MATMULS else view[2][:1])
            elif callee[0] == ATTR and (
                callee[2] in _TENSOR_ONLY_METHODS
                or (callee[2] in _NUMPY_METHODS and not self.facts.imports_numpy)
                or (callee[2] in _DIM_REDUCTIONS and "dim" in view[3])
            ):
                yield from self._names((callee[1],))

    def _names(self, exprs: Iterable[object]) -> Iterator[str]:
        for expr in exprs:
            view = self.view(expr)
            if view[0] == NAME and view[1] not in ("self", "cls") and view[1] not in self.facts.imported:
                yield view[1]

    def resolve(self, assignments: list[tuple[object, object]], loops: list[tuple[object, object]]) -> None:
        """Grow ``tensors`` and ``modules`` over the scope's assignments and loops to a fixpoint."""
        for target, iterable in loops:
            self.modules.update(self.loop_modules(target, iterable))
        pending = list(assignments)
        pending_loops = list(loops)
        changed = True
        while changed and (pending or pending_loops):
            changed = False
            rest = []
            for target, value in pending:
                modules = len(self.modules)
                names = self._tensor_targets(target, value)
                if names or len(self.modules) > modules:
                    self.tensors |= names
                    changed = True
                else:
                    rest.append((target, value))
            pending = rest
            rest_loops = []
            for target, iterable in pending_loops:
                names = self._loop_tensors(target, iterable)
                if names:
                    self.tensors |= names
                    changed = True
                else:
                    rest_loops.append((target, iterable))
            pending_loops = rest_loops

    def _loop_tensors(self, target: object, iterable: object) -> set[str]:
        """Names a ``for`` binds to tensors: ``row`` in ``for row in x`` over a tensor or a
        ``list[Tensor]`` parameter, through ``enumerate`` and ``zip``."""
        bound, source = self.view(target), self.view(iterable)
        if source[0] == CALL and source[2]:
            func = dotted_path(self.view, source[1])
            if func == "enumerate" and len(source[2]) == 1:
                if bound[0] == SEQ and len(bound[1]) == 2 == bound[2]:
                    return self._loop_tensors(bound[1][1], source[2][0])
                return set()
            if func == "zip":
                if bound[0] == SEQ and len(bound[1]) == len(source[2]) == bound[2]:
                    return {n for t, it in zip(bound[1], source[2]) for n in self._loop_tensors(t, it)}
                return set()
        if bound[0] != NAME:
            return set()
        if self.is_tensor(iterable) or (source[0] == NAME and source[1] in self.tensor_lists):
            return {bound[1]}
        return set()

    def _tensor_targets(self, target: object, value: object) -> set[str]:
        bound = self.view(target)
        if bound[0] == NAME:
            if self.is_module(value):
                self.modules.add(bound[1])
                return set()
            return {bound[1]} if self.is_tensor(value) else set()
        if bound[0] == SEQ:
            elements = bound[1]
            source = self.view(value)
            if source[0] == SEQ and len(source[1]) == source[2] == len(elements) == bound[2]:
                found = set()
                for t, v in zip(elements, source[1]):
                    found |= self._tensor_targets(t, v)
                return found
            if source[0] == CALL and self.call_returns_tensor(source):  # split, chunk, max(dim)
                return {v[1] for v in map(self.view, elements) if v[0] == NAME}
        return set()


# --------------------------------------------------------------------------- same-file functions


def returns_tensor(facts: ModuleFacts, class_name: str | None, name: str) -> bool:
    """Does the same-file function ``name`` (a method of ``class_name`` or of a same-file base)
    return a tensor? By its return annotation, else by its ``return`` values. Each function is
    analysed once, when first asked; a call back into a function still being analysed counts
    as no tensor (the fixpoint from below)."""
    key = (class_name, name)
    known = facts.returns.get(key)
    if known is not None:
        return known
    facts.returns[key] = False
    functions = facts.functions.get(name, ()) if class_name is None else facts.methods(class_name, name)
    result = any(_function_returns_tensor(facts, function, class_name) for function in functions)
    facts.returns[key] = result
    return result


def _function_returns_tensor(facts: ModuleFacts, function: ast.FunctionDef | ast.AsyncFunctionDef, class_name: str | None) -> bool:
    typing = Typing(facts, op_tables(), ast_view, class_name)
    if function.returns is not None:
        return typing.is_tensor_annotation(function.returns)
    body = _FunctionBody(function)
    if not body.returns:
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults, *arguments.kw_defaults]
    params = list(zip([*positional, *arguments.kwonlyargs], defaults))
    if class_name is not None and params and not any(dotted_path(ast_view, d) == "staticmethod" for d in function.decorator_list):
        params = params[1:]  # self / cls
    forward = function.name == "forward"
    typed = set()
    for param, default in params:
        tensor = typing.param_is_tensor(param.annotation, default, forward)
        if tensor:
            typing.tensors.add(param.arg)
        elif tensor is not None:
            typed.add(param.arg)
            if typing.is_tensor_sequence_annotation(param.annotation):
                typing.tensor_lists.add(param.arg)
    typing.tensors |= {name for expr in body.uses for name in typing.used_as_tensor(expr)} - typed
    typing.resolve(body.assignments, body.loops)
    return any(typing.is_tensor(value) for value in body.returns)


class _FunctionBody:
    """What a function's own body holds (nested functions and classes left out): its ``return``
    values, assignments, ``for`` loops, and the calls and ``@`` that may use names as tensors."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.returns: list[ast.expr] = []
        self.assignments: list[tuple[ast.expr, ast.expr]] = []
        self.loops: list[tuple[ast.expr, ast.expr]] = []
        self.uses: list[ast.expr] = []
        todo = list(function.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Return) and node.value is not None:
                self.returns.append(node.value)
            elif isinstance(node, ast.Assign):
                self.assignments += [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                self.assignments.append((node.target, node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                self.loops.append((node.target, node.iter))
            elif isinstance(node, ast.Call) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)):
                self.uses.append(node)
            todo.extend(ast.iter_child_nodes(node))
