"""Which expressions hold tensors, by one set of heuristics over either syntax tree.

The rules ask about libcst nodes; what a same-file function returns is read from the stdlib
``ast`` of the whole file, because the engine's libcst tree lacks the functions it masked out.
Both trees are seen through ``views``, so the heuristics exist once.
"""
from __future__ import annotations

import ast
import re
from typing import Collection, Iterable, Iterator, Union

import libcst as cst

from fusionlint.analysis.facts import ModuleFacts, torch_call_returns_tensor
from fusionlint.analysis.project import imported, inherited, member_class
from fusionlint.analysis.views import (
    ATTR, BINOP, CALL, COMPARE, COMPREHENSION, IFEXP, LAMBDA, NAME, NONE, OTHER, SEQ, STRING, SUBSCRIPT, UNARY, View,
    ast_view,
    dotted_path,
)
from fusionlint.ops import MATMULS, VIEW_ATTRIBUTES, OpTables, op_tables

TORCH_OP_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")
_NON_TENSOR_METHODS = frozenset(
    """item tolist size dim ndimension numel nelement stride data_ptr is_contiguous element_size
    numpy get_device storage untyped_storage is_floating_point is_complex equal type register_hook
    backward dim_order nbytes itemsize is_set_to astype __len__ __repr__ __str__""".split()
)
# Attributes of a tensor that hold tensors; ``values`` and ``indices`` of what ``max(dim)``, ``topk``,
# ``sort`` return (a named tuple, taken for a tensor; of a dense tensor they are methods, called).
_TENSOR_ATTRIBUTES = VIEW_ATTRIBUTES | {"data", "grad", "real", "imag", "values", "indices"}
_MODULE_TENSORS = frozenset({"weight", "bias"})
# Attributes that, of the values a model file handles, a tensor or a NumPy array has: in a file
# without numpy, ``x.shape[-1]`` tells that ``x`` is a tensor.
SHAPE_ATTRIBUTES = frozenset({"shape", "ndim"})
_EINOPS = frozenset({"einops.rearrange", "einops.repeat", "einops.reduce", "einops.einsum"})
# ``x, ps = pack([x, cls], 'b * d')``: the packed tensor and its shapes; ``unpack``: a list of tensors.
_EINOPS_PACKING: dict[str, tuple[bool, ...]] = {"einops.pack": (True, False), "einops.unpack": (True,)}
# Methods that, of the values a model file handles, only a tensor has; and those a numpy array
# has too, which tell a tensor only in a file that does not import numpy (as does ``a @ b``).
_TENSOR_ONLY_METHODS = frozenset(
    """clone contiguous matmul softmax log_softmax view_as permute unsqueeze masked_fill masked_fill_
    detach type_as expand_as bmm cpu numpy""".split()
)
_NUMPY_METHODS = frozenset({"transpose", "view", "item", "tolist"})
# Op names that are also methods of what else a model file handles: a NumPy array, a Python
# number, string or container, an nn.Module (``layer.to(device)``, ``model.float()``), a module's
# layer held by a local (``blk.norm(x)``, ``attn.softmax(s)``), a regex (``pattern.sub``). A
# method of any other op name (``x.clamp(0, 1)``, ``t.exp()``, ``m.unsqueeze(1)``) tells a tensor.
_SHARED_METHODS = frozenset(
    """all any argmax argmin argpartition argsort astype byteswap choose clip compress conj conjugate
    copy cumprod cumsum diagonal dot dump dumps fill flatten getfield item itemset max mean min
    nonzero partition prod ptp put ravel repeat reshape resize round searchsorted setfield setflags
    sort squeeze std sum swapaxes take tobytes tofile tolist trace transpose var view
    to float half double bfloat16 type cpu cuda apply
    linear bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    layer_norm group_norm batch_norm instance_norm rms_norm norm normalize cross_entropy
    scaled_dot_product_attention unfold relu relu6 gelu silu mish elu selu celu sigmoid tanh
    hardswish hardsigmoid hardtanh leaky_relu logsigmoid softplus softsign tanhshrink softmin
    sub select where einsum""".split()
) | frozenset(name for kind in (int, float, complex, str, bytes, list, tuple, dict, set) for name in dir(kind))
_DIM_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "softmax", "log_softmax", "norm", "std", "var"})
_UNION_TYPES = ("Optional", "Union", "typing.Optional", "typing.Union")
# Annotations of containers whose iteration yields their element type: ``list[Tensor]``.
_SEQUENCE_TYPES = frozenset(
    f"{prefix}{name}" for prefix in ("", "typing.", "collections.abc.")
    for name in ("list", "List", "tuple", "Tuple", "Sequence", "Iterable", "Iterator", "MutableSequence")
)
_CONTAINERS = ("list", "dict", "sequential")
_CONTAINER_BASES = {"ModuleList": "list", "ModuleDict": "dict", "Sequential": "sequential"}
_NOT_CALLABLE = (None, "list", "dict")  # module kinds whose call is no module's call

# What a call returns, as far as tensors go: True a tensor, a tuple the tensor flags of the
# elements of the tuple it returns (``return hidden, weights``; one flag: of every element),
# False anything else.
Returned = Union[bool, tuple[bool, ...]]
_FIRST_ONLY = (True, False)  # what a module returns that is no tensor: a tuple or model output led by one
_LIST_BUILDERS = (COMPREHENSION, SEQ)  # the views of values that build lists (and ``torch.jit.annotate``)
# torch.nn layers whose call returns a tuple, not one tensor.
_TUPLE_LAYERS = frozenset({"LSTM", "GRU", "RNN", "MultiheadAttention"})
# Builtins whose call iterates its arguments: ``map(f, xs)``, ``tuple(xs)``, ``list(xs)``.
_ITERATING_BUILTINS = frozenset({"map", "tuple", "list"})
_PARTIALS = ("partial", "functools.partial")


class Typing:
    """The tensor and module names of one scope, and the questions asked about its expressions.

    ``tensors``, ``modules`` and ``tuples`` grow by ``resolve``: flow-insensitive, to a fixpoint.
    """

    def __init__(self, facts: ModuleFacts, ops: OpTables, view: View, class_name: str | None) -> None:
        self.facts = facts
        self.ops = ops
        self.view = view
        self.class_name = class_name
        self.tensors: set[str] = set()
        self.modules: set[str] = set()  # local names bound to an nn.Module (``for blk in self.blocks``)
        self.module_classes: dict[str, str] = {}  # of those, what they hold where known: a same-file class, a container
        self.tensor_lists: set[str] = set()  # ``list[Tensor]`` parameters, lists built of tensors
        self.tuples: dict[str, tuple[bool, ...]] = {}  # names bound to a returned tuple: its tensor flags

    def torch_name(self, expr: object) -> str | None:
        dotted = dotted_path(self.view, expr)
        return self.facts.canonical(dotted) if dotted else None

    def _member(self, view: tuple) -> tuple[str, str] | None:
        """(class, attribute) of ``self.fc`` inside a method, or of ``attn.fc`` where ``attn``
        holds a same-file module class; else None."""
        if view[0] == ATTR:
            owner = self.view(view[1])
            if owner[0] == NAME:
                if owner[1] == "self" and self.class_name is not None:
                    return self.class_name, view[2]
                kind = self.module_classes.get(owner[1])
                if kind in self.facts.classes:
                    return kind, view[2]
        return None

    # --- tensors ---------------------------------------------------------------------------------

    def is_tensor(self, expr: object) -> bool:
        view = self.view(expr)
        kind = view[0]
        if kind == NAME:
            return view[1] in self.tensors
        if kind == ATTR:
            member = self._member(view)
            if member is not None:
                return self._member_is_tensor(*member)
            if view[2] in _MODULE_TENSORS and self.is_module(view[1]):
                return True
            return view[2] in _TENSOR_ATTRIBUTES and self.is_tensor(view[1])
        if kind == CALL:
            return self.call_returns(view) is True
        if kind == BINOP:
            return self.is_tensor(view[1]) or self.is_tensor(view[2])
        if kind == UNARY:
            return not view[2] and self.is_tensor(view[1])
        if kind == SUBSCRIPT:
            if self.is_tensor(view[1]):
                return True
            if _one_element(view[2]) and self._is_tensor_list(view[1]):
                return True
            flags = self._tuple(view[1])
            index = _int_index(view[2][0]) if flags and len(view[2]) == 1 else None
            return index is not None and _flag(flags, index)
        if kind == COMPARE:
            return not _tests_identity(expr) and any(self.is_tensor(operand) for operand in view[1])
        if kind == IFEXP:
            return self.is_tensor(view[1]) or self.is_tensor(view[2])
        return False

    def _member_is_tensor(self, class_name: str, attr: str) -> bool:
        """``self.w`` assigned a parameter, buffer or torch call, or a tensor by a method (``self.cache =
        k.detach()``); or the ``weight``/``bias`` of a class deriving from a torch.nn layer (``class
        Positions(nn.Embedding)``)."""
        if attr in self.facts.tensor_attrs(class_name) or member_holds_tensor(self.facts, class_name, attr):
            return True
        return (
            attr in _MODULE_TENSORS
            and self.facts.module_attr(class_name, attr) is None
            and self.facts.torch_base(class_name) not in (None, "Module")
        )

    def _is_tensor_list(self, expr: object) -> bool:
        view = self.view(expr)
        return view[0] == NAME and view[1] in self.tensor_lists

    def _tuple(self, expr: object) -> tuple[bool, ...] | None:
        """The tensor flags of the tuple ``expr`` holds: a name bound to a returned tuple, or a call."""
        view = self.view(expr)
        if view[0] == NAME:
            return self.tuples.get(view[1])
        if view[0] == CALL:
            returned = self.call_returns(view)
            return returned if isinstance(returned, tuple) else None
        return None

    def call_returns(self, call: tuple) -> Returned:
        func, positional = call[1], call[2]
        callee = self.view(func)
        if callee[0] == ATTR and self.is_tensor(callee[1]):
            return callee[2] not in _NON_TENSOR_METHODS or (callee[2] == "type" and bool(positional or call[3]))
        if self.is_module(func):
            return self._module_returns(func)
        if callee[0] == ATTR:
            if self.is_module(callee[1]):
                return self._method_returns(callee[1], callee[2]) or self._calls_member_on_tensors(call)
            owner = self.view(callee[1])
            if self.class_name is not None and owner[0] == NAME and owner[1] == "self":
                return (
                    self._self_method_returns(call, callee[2])
                    or self._passes_on_tensors(call, self.class_name, callee[2])
                    or self._calls_member_on_tensors(call)
                )
            if owner[0] == CALL and self.class_name is not None and dotted_path(self.view, owner[1]) == "super":
                return self._super_returns(callee[2], self._given_tensor(call))
            if owner[0] == NAME and owner[1] in self.facts.classes and self.facts.has_method(owner[1], callee[2]):
                # ``Attention.apply_mask(w, m)``: a static or class method of a same-file class
                return returned(self.facts, owner[1], callee[2]) or self._passes_on_tensors(call, owner[1], callee[2])
        if callee[0] == NAME and callee[1] in self.facts.functions:
            return returned(self.facts, None, callee[1]) or self._passes_on_tensors(call, None, callee[1])
        canonical = self.torch_name(func)
        if canonical is None:
            if callee[0] != NAME:
                return False
            if callee[1] in _ITERATING_BUILTINS and callee[1] not in self.facts.imported:
                return self._iterated(call, callee[1])
            return self._imported_returns(call)
        if canonical in _EINOPS:
            return any(self.is_tensor(arg) for arg in positional[:1])
        if canonical in _EINOPS_PACKING:
            return _EINOPS_PACKING[canonical]
        if canonical.startswith("einx."):  # einx.multiply("b n, b", x, w): the pattern, then the operands
            return any(self.is_tensor(arg) for arg in positional[1:])
        return torch_call_returns_tensor(canonical)

    def _iterated(self, call: tuple, builtin: str) -> Returned:
        """``map(f, xs)`` of a function that makes tensors (``lambda t: rearrange(t, ...)`` of
        tensors, ``partial(torch.cat, dim=-1)``), ``tuple(xs)`` or ``list(xs)`` of tensors: every
        element a tensor (the one flag ``(True,)``); else nothing known."""
        arguments = call[2]
        if call[3]:
            return False
        if builtin != "map":
            return (True,) if len(arguments) == 1 and (
                self.is_tensor(arguments[0]) or self._tensor_elements(arguments[0])
            ) else False
        if len(arguments) < 2:
            return False
        target = arguments[0]
        func = self.view(target)
        if func[0] == CALL and func[2] and dotted_path(self.view, func[1]) in _PARTIALS:
            target = func[2][0]
            func = self.view(target)
        canonical = self.torch_name(target) if func[0] == NAME or func[0] == ATTR else None
        if canonical is not None:
            return (True,) if canonical in _EINOPS or torch_call_returns_tensor(canonical) else False
        if self.is_module(target):  # ``map(self.norm, (q, k))``
            return (True,) if self._module_returns(target) is True else False
        iterables = arguments[1:]
        if not all(self.is_tensor(it) or self._tensor_elements(it) for it in iterables):
            return False
        if func[0] == LAMBDA:
            return (True,) if func[1] is not None and len(func[1]) == len(iterables) and self._given(func[1], func[2]) \
                else False
        if func[0] == NAME and func[1] in self.facts.functions:
            return (True,) if returned(self.facts, None, func[1]) is True \
                or returned(self.facts, None, func[1], given_tensors=True) is True else False
        return False

    def _given(self, names: list[str], body: object) -> bool:
        """Is ``body`` a tensor when ``names`` (a lambda's parameters) hold tensors?"""
        added = [name for name in names if name not in self.tensors]
        self.tensors.update(added)
        try:
            return self.is_tensor(body)
        finally:
            self.tensors.difference_update(added)

    def _passes_on_tensors(self, call: tuple, class_name: str | None, name: str,
                           facts: ModuleFacts | None = None) -> Returned:
        """A same-file helper (or one of ``facts``, another file's) given a tensor, returning a
        tensor when its untyped parameters hold tensors (``remove_cls(x)`` of ``return x[:, 1:]``;
        not ``exists(x)`` of ``return x is not None``)."""
        if not self._given_tensor(call):
            return False
        return returned(facts or self.facts, class_name, name, given_tensors=True)

    def _imported_returns(self, call: tuple) -> Returned:
        """``rotate_half(x)`` of a function imported from another file of the package, given a
        tensor, as a same-file one's call (``project``). A call given none (``is_available()``,
        ``logging.get_logger(name)``) is not followed: the file would be read for nothing."""
        name = self.view(call[1])[1]
        if name not in self.facts.import_sources or name[:1].isupper() or not self._given_tensor(call):
            return False
        found = imported(self.facts, name, "def {}(")
        if found is None or found[1] not in found[0].functions:
            return False
        other, function = found
        return returned(other, None, function) or self._passes_on_tensors(call, None, function, other)

    def _given_tensor(self, call: tuple) -> bool:
        """Is the call given a tensor, or a function of no parameters that makes one
        (``default(noise, lambda: torch.randn_like(x))``)?"""
        for arg in call[2]:
            if self.is_tensor(arg):
                return True
            if type(arg) is cst.Lambda or type(arg) is ast.Lambda:
                made = self.view(arg)
                if made[1] == [] and self.is_tensor(made[2]):
                    return True
        return False

    def _self_method_returns(self, call: tuple, method: str) -> Returned:
        """``self.<method>(...)``: of the class or a same-file base, else of a base of another file
        of the package (``class GemmaMLP(LlamaMLP)``)."""
        found = returned(self.facts, self.class_name, method)
        if found or not self.facts.import_sources or not self._given_tensor(call) \
                or self.facts.has_method(self.class_name, method):
            return found
        base = inherited(self.facts, self.class_name, method)
        if base is None:
            return False
        return returned(base[0], base[1], method) or self._passes_on_tensors(call, base[1], method, base[0])

    def _calls_member_on_tensors(self, call: tuple) -> bool:
        """``self.norm(x)``, ``self.head.fc(x)``: in a module class, a tensor passed to a member the
        class assigns (no method of it; also unpacked: ``self.pool, self.fc = create_classifier()``),
        or to an attribute of a module whose class is not in the file, or of a container. What a
        module holds and calls on tensors is, whatever built it (a factory, a constructor
        argument, a class of another file), almost always a layer."""
        callee = self.view(call[1])
        if callee[0] != ATTR:
            return False
        owner = self.view(callee[1])
        if owner[0] == NAME and owner[1] == "self":
            name = self.class_name
            member = (
                name is not None and self.facts.assigns_member(name, callee[2])
                and self.facts.is_module_class(name) and not self.facts.has_method(name, callee[2])
            )
        else:
            member = self.is_module(callee[1]) and self._module_class(callee[1]) in (None, "nn", *_CONTAINERS)
        return member and any(self.is_tensor(arg) for arg in call[2])

    def _super_returns(self, method: str, given_tensor: bool) -> Returned:
        """``super().forward(x)``: the method of the nearest same-file base that has it, else a
        torch.nn layer's ``forward`` (``class Positions(nn.Embedding)``), which returns a tensor."""
        for base in self.facts.same_file_bases(self.class_name):
            if self.facts.has_method(base, method):
                return returned(self.facts, base, method)
        found = inherited(self.facts, self.class_name, method) if given_tensor and self.facts.import_sources else None
        if found is not None:
            return returned(found[0], found[1], method)
        return method == "forward" and self.facts.torch_base(self.class_name) not in (None, "Module")

    # --- modules ---------------------------------------------------------------------------------

    def is_module(self, expr: object) -> bool:
        """``self.fc``, ``self.layers[i]``, ``nn.Linear(2, 2)``, ``ACT2FN["gelu"]`` or a name bound to a module: a
        callable nn.Module."""
        view = self.view(expr)
        if view[0] == NAME:
            return view[1] in self.modules
        if view[0] == SUBSCRIPT:  # a container's item, or an activation registry's (``ACT2FN[act]``)
            return self._container(view[1]) is not None or self.facts.module_kind(expr, self.view) == "nn"
        if view[0] == CALL:
            return self.facts.module_kind(expr, self.view) not in _NOT_CALLABLE
        member = self._member(view)
        return member is not None and self.facts.module_attr(*member) not in _NOT_CALLABLE

    def _module_class(self, expr: object) -> str | None:
        """What the module ``expr`` holds, as ``ModuleFacts.module_kind`` says, when it is known."""
        view = self.view(expr)
        if view[0] == NAME:
            return self.module_classes.get(view[1])
        member = self._member(view)
        return self.facts.module_attr(*member) if member is not None else None

    def _one_tensor(self, module: object) -> bool:
        """A module known to return one tensor, which unpacking splits (``mean, log_var =
        self.to_stats(x)`` of an ``nn.Sequential``): a container of layers, or a torch.nn layer
        other than those that return tuples (recurrent layers, ``MultiheadAttention``)."""
        kind = self._module_class(module)
        if kind == "sequential":
            return True
        member = self._member(self.view(module))
        layer = self.facts.nn_class(*member) if kind == "nn" and member is not None else None
        return layer is not None and layer not in _TUPLE_LAYERS

    def _container(self, expr: object) -> str | None:
        """The kind of ``self.blocks`` holding an ``nn.ModuleList`` ("list"), ``ModuleDict`` ("dict")
        or ``Sequential`` ("sequential"), also of a class of another file of the package deriving
        from one (``class ModuleList(nn.ModuleList, Module)``), or of a slice of it; None for
        anything else."""
        view = self.view(expr)
        if view[0] == SUBSCRIPT:
            return self._container(view[1])
        kind = self._module_class(expr)
        if kind == "nn":
            held = self._imported_module(expr)
            return _CONTAINER_BASES.get(held[0].torch_base(held[1]) or "") if held is not None else None
        return kind if kind in _CONTAINERS else None

    def _module_returns(self, func: object) -> Returned:
        """A module's call: a tensor, unless it is a same-file class whose ``forward`` returns
        none; then, of the tuple or model output it returns, at least the first element is."""
        kind = self._module_class(func)
        if kind == "nn":  # a class of another file of the package, whose forward returns a tuple
            held = self._imported_module(func)
            returns = returned(held[0], held[1], "forward") if held is not None else True
            return returns if isinstance(returns, tuple) else True
        if kind in (None, "sequential") or not self.facts.has_method(kind, "forward"):
            return True
        return returned(self.facts, kind, "forward") or _FIRST_ONLY

    def _method_returns(self, module: object, method: str) -> Returned:
        """``self.altup.predict(x)``: a method of a same-file module class, or of a module class
        of another file of the package, that returns tensors."""
        kind = self._module_class(module)
        if kind == "nn":
            held = self._imported_module(module)
            return returned(held[0], held[1], method) if held is not None and held[0].has_method(held[1], method) \
                else False
        if kind in (None, *_CONTAINERS) or not self.facts.has_method(kind, method):
            return False
        return returned(self.facts, kind, method)

    def _imported_module(self, module: object) -> tuple[ModuleFacts, str] | None:
        """(facts, class) of the module class of another file of the package that a member
        (``self.attn``) holds."""
        if not self.facts.import_sources:
            return None
        member = self._member(self.view(module))
        return member_class(self.facts, *member) if member is not None else None

    def loop_modules(self, target: object, iterable: object) -> Iterator[str]:
        """Names a ``for`` binds to modules: ``blk`` in ``for blk in self.blocks``, ``for i, blk
        in enumerate(self.blocks)`` or ``for blk, norm in zip(self.blocks, self.norms)``."""
        view, bound = self.view(iterable), self.view(target)
        if view[0] == CALL and view[2]:
            func = dotted_path(self.view, view[1])
            if func == "enumerate" and bound[0] == SEQ and len(bound[1]) == 2 == bound[2]:
                yield from self.loop_modules(bound[1][1], view[2][0])
            elif func == "zip" and bound[0] == SEQ and len(bound[1]) == len(view[2]) == bound[2]:
                for element, source in zip(bound[1], view[2]):
                    yield from self.loop_modules(element, source)
            return
        if self._container(iterable) in ("list", "sequential"):  # a ModuleDict yields keys
            if bound[0] == NAME:
                yield bound[1]
            elif bound[0] == SEQ:  # ``for attn, ff in self.layers``: what unpacks is a container of modules
                yield from (element[1] for element in map(self.view, bound[1]) if element[0] == NAME)

    # --- names -----------------------------------------------------------------------------------

    def declare(self, name: str, annotation: object | None, default: object | None, forward: bool) -> bool | None:
        """A parameter: True/False from its annotation or ``forward``, None when only its use can
        tell. A ``list[Tensor]`` or a module class (``attn: Attention``, ``fc: nn.Linear``) it is
        annotated with is noted for the names the scope binds from it."""
        tensor = self.param_is_tensor(annotation, default, forward)
        if tensor is False:
            flags = self.tuple_annotation(annotation)
            if flags:
                self.tuples[name] = flags
            if self.is_tensor_sequence_annotation(annotation):
                self.tensor_lists.add(name)
            else:
                self._declare_module(name, annotation)
        return tensor

    def _declare_module(self, name: str, annotation: object) -> None:
        dotted = dotted_path(self.view, annotation)
        if dotted is None:
            return
        if dotted in self.facts.classes:
            if self.facts.is_module_class(dotted):
                self.modules.add(name)
                self.module_classes[name] = dotted
            return
        canonical = self.facts.canonical(dotted) or ""
        last = canonical.rpartition(".")[2]
        if canonical.startswith("torch.nn.") and last[:1].isupper() and last not in ("Module", "Parameter", "Buffer"):
            self.modules.add(name)
            if last in ("ModuleList", "ModuleDict", "Sequential"):
                self.module_classes[name] = {"ModuleList": "list", "ModuleDict": "dict"}.get(last, "sequential")

    def is_tensor_annotation(self, annotation: object) -> bool:
        view = self.view(annotation)
        if view[0] == STRING:
            return self._is_tensor_type(view[1].strip())
        if view[0] == SUBSCRIPT:  # Optional[Tensor], Union[Tensor, None]; not Union[int, Tensor]
            return dotted_path(self.view, view[1]) in _UNION_TYPES and self._tensor_or_none(view[2])
        if view[0] == BINOP and view[3] == "|":
            return self._tensor_or_none(self._union_members(annotation))
        dotted = dotted_path(self.view, annotation)
        return dotted is not None and self._is_tensor_type(dotted)

    def _union_members(self, annotation: object) -> list[object]:
        view = self.view(annotation)
        if view[0] == BINOP and view[3] == "|":
            return self._union_members(view[1]) + self._union_members(view[2])
        return [annotation]

    def _tensor_or_none(self, members: Iterable[object]) -> bool:
        """Every member a tensor or None, one a tensor: a member of another type (an int size)
        may be what the name holds."""
        flags = [None if self.view(m)[0] == NONE or dotted_path(self.view, m) == "None" else self.is_tensor_annotation(m)
                 for m in members]
        return any(flags) and all(flag is not False for flag in flags)

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

    def tuple_annotation(self, annotation: object) -> tuple[bool, ...] | None:
        """The tensor flags of ``tuple[Tensor, Tensor | None]`` (also in ``Optional``); of
        ``tuple[Tensor, ...]`` and ``tuple[Tensor]`` (often written for "a tuple of tensors"),
        the one flag of all elements; None for any other annotation."""
        view = self.view(annotation)
        if view[0] == BINOP and view[3] == "|":
            return self.tuple_annotation(view[1]) or self.tuple_annotation(view[2])
        if view[0] != SUBSCRIPT:
            return None
        base = dotted_path(self.view, view[1])
        if base in _UNION_TYPES:
            return next(filter(None, map(self.tuple_annotation, view[2])), None)
        if base not in ("tuple", "Tuple", "typing.Tuple"):
            return None
        if len(view[2]) == 2 and self.view(view[2][1])[0] == OTHER:  # tuple[Tensor, ...]
            return (self.is_tensor_annotation(view[2][0]),)
        return tuple(self.is_tensor_annotation(el) for el in view[2])

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
        method (``x.clone()``, ``x.sum(dim=1)``, an op no other value has as a method:
        ``x.clamp(0, 1)``, also down a chain: ``x.pow(2).mean(-1, keepdim=True)``), an operand of ``@``, the input of a torch op (``torch.softmax(x, -1)``),
        any operand of a matmul (``torch.matmul(x, y)``); in a file without numpy, triton or helion
        (whose arrays do these too), the owner of ``x.shape`` and what is indexed with a new axis
        (``x[:, None]``)."""
        view = self.view(expr)
        if view[0] == BINOP and view[3] == "@":
            if not self.facts.imports_arrays:
                yield from self._names((view[1], view[2]))
        elif view[0] == ATTR:
            if view[2] in SHAPE_ATTRIBUTES and not self.facts.imports_arrays:
                yield from self._names((view[1],))
        elif view[0] == SUBSCRIPT:  # ``x[:, None]``: a new axis, which only an array takes
            if not self.facts.imports_arrays and any(self.view(index)[0] == NONE for index in view[2]):
                yield from self._names((view[1],))
        elif view[0] == CALL:
            callee = self.view(view[1])
            canonical = self.torch_name(view[1]) if callee[0] in (NAME, ATTR) else None
            if canonical is not None:
                module, _, name = canonical.rpartition(".")
                if module in TORCH_OP_MODULES and self.ops.op_class(name) is not None:
                    yield from self._names(view[2] if name in MATMULS else view[2][:1])
            elif callee[0] == ATTR and (
                self._tensor_only(callee[2])
                or (callee[2] in _NUMPY_METHODS and not self.facts.imports_arrays)
                or (callee[2] in _DIM_REDUCTIONS and ("dim" in view[3] or "keepdim" in view[3]))
            ):
                yield from self._names((callee[1],))

    def _names(self, exprs: Iterable[object]) -> Iterator[str]:
        """The names ``exprs`` are, or start a chain of tensor methods from (``x`` of
        ``x.float().pow(2)``; methods a NumPy array shares only in a file without numpy)."""
        for expr in exprs:
            view = self.view(expr)
            while view[0] == CALL:
                callee = self.view(view[1])
                if callee[0] != ATTR or not (
                    self._tensor_only(callee[2])
                    or (not self.facts.imports_arrays and self.ops.op_class(callee[2]) is not None)
                ):
                    break
                view = self.view(callee[1])
            if view[0] == NAME and view[1] not in ("self", "cls") and view[1] not in self.facts.imported:
                yield view[1]

    def _tensor_only(self, method: str) -> bool:
        return method in _TENSOR_ONLY_METHODS or (method not in _SHARED_METHODS and self.ops.op_class(method) is not None)

    def resolve(
        self, assignments: list[tuple[object, object]], loops: list[tuple[object, object]],
        appends: Iterable[tuple[str, object]] = (),
    ) -> None:
        """Grow ``tensors``, ``modules``, ``tuples`` and ``tensor_lists`` over the scope's
        assignments, loops (and comprehensions) and the values appended to its lists
        (``outs.append(blk(x))``), to a fixpoint."""
        for target, iterable in loops:
            self.modules.update(self.loop_modules(target, iterable))
        pending = list(assignments)
        pending_loops = list(loops)
        pending_appends = list(appends)
        changed = True
        while changed and (pending or pending_loops):
            changed = False
            rest = []
            known = len(self.modules) + len(self.tuples) + len(self.tensor_lists)
            for target, value in pending:
                names = self._tensor_targets(target, value)
                if names:
                    self.tensors |= names
                    changed = True
                else:  # a module or tuple it bound may turn out a tensor once more names are known
                    rest.append((target, value))
            changed = changed or len(self.modules) + len(self.tuples) + len(self.tensor_lists) > known
            pending = rest
            found = {name for name, value in pending_appends if self.is_tensor(value)}
            if found - self.tensor_lists:
                self.tensor_lists |= found
                changed = True
            pending_appends = [(name, value) for name, value in pending_appends if name not in self.tensor_lists]
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
        if self.is_tensor(iterable) or self._tensor_elements(iterable):
            return {bound[1]}
        return set()

    def _tensor_elements(self, expr: object) -> bool:
        """Is every element of what ``expr`` holds a tensor: a list of tensors, a display of
        tensors (``for t in (q, k, v)``), a tuple of tensors returned or annotated, what ``map``
        gives of tensors?"""
        view = self.view(expr)
        if view[0] == SEQ:
            return bool(view[1]) and len(view[1]) == view[2] and all(map(self.is_tensor, view[1]))
        if view[0] == NAME and view[1] in self.tensor_lists or view[0] == COMPREHENSION and self.is_tensor(view[1]):
            return True
        flags = self._tuple(expr)
        return bool(flags) and all(flags)

    def _tensor_targets(self, target: object, value: object) -> set[str]:
        bound, source = self.view(target), self.view(value)
        if bound[0] == NAME:
            kind = self.facts.module_kind(value, self.view) if source[0] in (CALL, ATTR, IFEXP, SUBSCRIPT) else None
            if kind not in _NOT_CALLABLE:
                self.modules.add(bound[1])
                if kind not in ("nn", "op"):
                    self.module_classes[bound[1]] = kind
                return set()
            builds_list = source[0] in _LIST_BUILDERS or source[0] == CALL and len(source[2]) == 2
            if builds_list and self._builds_tensor_list(source):
                self.tensor_lists.add(bound[1])
                return set()
            if source[0] == CALL:
                returns = self.call_returns(source)
            else:
                if self.is_module(value):
                    self.modules.add(bound[1])
                    return set()
                returns = self.is_tensor(value) or self._tuple(value) or False
            if returns is True:
                return {bound[1]}
            if returns and bound[1] not in self.tuples:
                self.tuples[bound[1]] = returns
            return set()
        if bound[0] == SEQ:
            elements = bound[1]
            if source[0] == SEQ and len(source[1]) == source[2] == len(elements) == bound[2]:
                found = set()
                for t, v in zip(elements, source[1]):
                    found |= self._tensor_targets(t, v)
                return found
            if source[0] != CALL and self._container(value) in ("list", "sequential"):
                # ``attn_space, attn_time = self.attn`` of an ``nn.ModuleList``
                self.modules.update(v[1] for v in map(self.view, elements) if v[0] == NAME)
                return set()
            if source[0] == CALL:
                returns = self.call_returns(source)
            elif source[0] == COMPREHENSION:  # ``q, k = (rearrange(t, ...) for t in (q, k))``
                returns = self.is_tensor(source[1])
            else:
                returns = self._tuple(value)
            if returns is True and source[0] == CALL and not self._one_tensor(source[1]) and (
                self.is_module(source[1]) or self._calls_member_on_tensors(source)
            ):
                returns = _FIRST_ONLY  # a module unpacked returns a tuple (``out, (h, c) = self.lstm(x)``)
            if returns is True:  # split, chunk, max(dim)
                return {v[1] for v in map(self.view, elements) if v[0] == NAME}
            if returns and len(elements) == bound[2] and len(returns) in (1, len(elements)):
                return {v[1] for i, v in enumerate(map(self.view, elements)) if _flag(returns, i) and v[0] == NAME}
        return set()


    def _builds_tensor_list(self, view: tuple) -> bool:
        """Does the value seen as ``view`` build a list of tensors: ``[a, b]`` of tensors,
        ``[blk(x) for blk in self.blocks]``, an empty list annotated as one of tensors
        (``torch.jit.annotate(List[Tensor], [])``)?"""
        if view[0] == COMPREHENSION:
            return self.is_tensor(view[1])
        if view[0] == SEQ and view[1] and len(view[1]) == view[2]:
            return all(map(self.is_tensor, view[1]))
        if view[0] == CALL and len(view[2]) == 2 and self.torch_name(view[1]) == "torch.jit.annotate":
            return self.is_tensor_sequence_annotation(view[2][0])
        return False


# A parameter's entry in a docstring: ``x : torch.Tensor`` (NumPy style) or ``x (Tensor): ...``
# (Google style, also ``x (`torch.FloatTensor` of shape ...)``); the type that follows.
_DOCUMENTED = re.compile(r"^[ \t]*\*{0,2}([A-Za-z_]\w*)[ \t]*(?:\(([^\n]*?)\)[ \t]*:|:[ \t]*([^\n]*?)[ \t]*$)", re.M)
_OPTIONAL = re.compile(r"(?:,?\s*\(?optional\)?|,?\s*(?:or|\|)\s*None|,\s*default.*|\s+of shape.*)$", re.I)
_TENSOR_TYPE = re.compile(r"(?:torch\.(?:cuda\.)?)?[A-Za-z]*Tensor")
_TENSOR_LIST_TYPE = re.compile(
    r"(?:[Ll]ist|[Tt]uple|Sequence)(?:\[(?:torch\.)?Tensor(?:, \.\.\.)?\]| of (?:torch\.)?[Tt]ensors?)"
)


def documented_tensors(docstring: str | None, names: Collection[str], lists: bool = False) -> set[str]:
    """Of ``names``, the parameters a docstring gives a tensor type (``mean : torch.Tensor``,
    ``waveform (Tensor): ...``, ``x (`torch.Tensor`, *optional*)``), nothing else in the type;
    ``lists``: a list or tuple of tensors (``feats : list of torch.Tensor``, ``xs (List[Tensor])``)."""
    found: set[str] = set()
    if not docstring or "Tensor" not in docstring:
        return found
    pattern = _TENSOR_LIST_TYPE if lists else _TENSOR_TYPE
    for match in _DOCUMENTED.finditer(docstring):
        name = match.group(1)
        if name in names and name not in found:
            kind = (match.group(2) if match.group(2) is not None else match.group(3)).replace("`", "").replace("*", "")
            if pattern.fullmatch(_OPTIONAL.sub("", kind.strip()).strip()):
                found.add(name)
    return found


def _flag(flags: tuple[bool, ...], index: int) -> bool:
    """Is element ``index`` of a tuple with these flags a tensor? One flag is every element's."""
    if len(flags) == 1:
        return flags[0]
    return -len(flags) <= index < len(flags) and flags[index]


def _tests_identity(compare: object) -> bool:
    """``a is None``, ``key in cache``: a comparison whose value is a bool, whatever its operands."""
    if type(compare) is cst.Comparison:
        return any(type(c.operator) in (cst.Is, cst.IsNot, cst.In, cst.NotIn) for c in compare.comparisons)
    return any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in compare.ops)  # type: ignore[attr-defined]


def _one_element(indices: list) -> bool:
    """Do a subscript's indices, in either syntax tree, take one element (``xs[i]``, not ``xs[1:]``)?
    A libcst view leaves slices out."""
    return len(indices) == 1 and type(indices[0]) is not ast.Slice


def _int_index(index: object) -> int | None:
    """The value of a non-negative integer literal index (``0``, ``1``), in either syntax tree."""
    if type(index) is ast.Constant:
        return index.value if type(index.value) is int else None
    return int(index.value, 0) if type(index) is cst.Integer else None  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- same-file functions


def returns_tensor(facts: ModuleFacts, class_name: str | None, name: str) -> bool:
    """Does the same-file function ``name`` (a method of ``class_name`` or of a same-file base)
    return a tensor?"""
    return returned(facts, class_name, name) is True


def returned(facts: ModuleFacts, class_name: str | None, name: str, given_tensors: bool = False) -> Returned:
    """What the same-file function ``name`` (a method of ``class_name`` or of a same-file base)
    returns: a tensor, a tuple with tensors, or neither. By its return annotation, else by its
    ``return`` values; ``given_tensors``: when its untyped parameters hold tensors (a helper
    that passes on what it is given: ``def remove_cls(x): return x[:, 1:]``). Each function is
    analysed once, when first asked; a call back into a function still being analysed counts as
    no tensor (the fixpoint from below)."""
    cache = facts.returns_given_tensors if given_tensors else facts.returns
    key = (class_name, name)
    known = cache.get(key)
    if known is not None:
        return known
    cache[key] = False
    functions = facts.functions.get(name, ()) if class_name is None else facts.methods(class_name, name)
    result = _combined(_function_returns(facts, function, class_name, given_tensors) for function in functions)
    cache[key] = result
    return result


def _combined(results: Iterable[Returned]) -> Returned:
    """A tensor if any result is; else the tuples of the first one's length, flags or-ed; else False."""
    tuples = []
    for result in results:
        if result is True:
            return True
        if result:
            tuples.append(result)
    if not tuples:
        return False
    same = [t for t in tuples if len(t) == len(tuples[0])]
    return tuple(any(flags) for flags in zip(*same))


def _function_returns(
    facts: ModuleFacts, function: ast.FunctionDef | ast.AsyncFunctionDef, class_name: str | None,
    given_tensors: bool = False,
) -> Returned:
    if function.returns is not None:
        if given_tensors:
            return False  # its annotation said it all
        typing = Typing(facts, op_tables(), ast_view, class_name)
        return typing.is_tensor_annotation(function.returns) or typing.tuple_annotation(function.returns) or False
    body = None
    if (id(function), given_tensors) not in facts.typings:
        body = _body(facts, function)
        if not body.returns:
            return False
    typing, body = _function_typing(facts, function, class_name, body, given_tensors)
    return _combined(_value_returns(typing, value) for value in body.returns)


def member_holds_tensor(facts: ModuleFacts, class_name: str, attr: str) -> bool:
    """Does a method of the class assign ``self.<attr>`` a tensor that is no torch call of its
    own (``self.cache = k.detach()``, ``self.freqs = freqs``), or is ``attr`` a property of the
    class that returns one (``@property def mean(self): return self.sum_x / self.counts``)? Read
    when first asked; a question met again while it is being answered counts as no."""
    key = (class_name, attr)
    known = facts.member_tensors.get(key)
    if known is not None:
        return known
    facts.member_tensors[key] = False
    if facts.module_attr(class_name, attr) is not None:
        return False
    values = facts.member_values(class_name, attr)
    bare = Typing(facts, op_tables(), ast_view, class_name) if values else None
    for assignment in values:
        value = assignment.value
        if type(value) not in _TENSOR_VALUES:
            continue
        if bare.is_tensor(value) or _is_tensor_in_method(facts, class_name, assignment):  # type: ignore[union-attr]
            facts.member_tensors[key] = True
            return True
    if not values and any(map(_is_property, facts.methods(class_name, attr))) and returned(facts, class_name, attr) is True:
        facts.member_tensors[key] = True
        return True
    return False


def _is_property(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(dotted_path(ast_view, d) in _PROPERTIES for d in function.decorator_list)


_PROPERTIES = frozenset({"property", "functools.cached_property", "cached_property"})


def _body(facts: ModuleFacts, function: ast.FunctionDef | ast.AsyncFunctionDef) -> "_FunctionBody":
    """The function's body as read for its names resolved either way, else read anew."""
    for given_tensors in (False, True):
        known = facts.typings.get((id(function), given_tensors))
        if known is not None:
            return known[1]  # type: ignore[index]
    return _FunctionBody(function)


# What a member may be assigned that makes a tensor without being a torch call itself.
_TENSOR_VALUES = frozenset({ast.Name, ast.BinOp, ast.Subscript, ast.Call, ast.Attribute, ast.IfExp})


def _roots(value: ast.expr) -> set[str]:
    """The names other than ``self`` a value starts from (``k`` of ``k.detach()``, ``freqs`` and
    ``scale`` of ``freqs * scale``): only its method's names tell what they hold."""
    kind = type(value)
    if kind is ast.Name:
        return set() if value.id == "self" else {value.id}
    if kind is ast.BinOp:
        return _roots(value.left) | _roots(value.right)
    if kind is ast.IfExp:
        return _roots(value.body) | _roots(value.orelse)
    if kind is ast.Call:
        return _roots(value.func)
    if kind is ast.Attribute or kind is ast.Subscript:
        return _roots(value.value)
    return set()


def _is_tensor_in_method(facts: ModuleFacts, class_name: str, assignment: ast.Assign) -> bool:
    """Is the value a tensor among its method's names? When it starts from parameters only
    (``config.dim``, ``k.detach()``), their declarations tell, without resolving the method."""
    roots = _roots(assignment.value)
    method = facts.method_around(class_name, assignment) if roots else None
    if method is None:
        return False
    arguments = method.args
    params = {a.arg: a for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    if roots.isdisjoint(params):
        return _function_typing(facts, method, class_name)[0].is_tensor(assignment.value)
    if not roots <= params.keys():
        return False  # a parameter and a local: the local's meaning is unknown without resolving
    typing = Typing(facts, op_tables(), ast_view, class_name)
    forward = method.name == "forward"
    typing.tensors |= {name for name in roots if typing.param_is_tensor(params[name].annotation, None, forward)}
    return typing.is_tensor(assignment.value)


def _function_typing(
    facts: ModuleFacts, function: ast.FunctionDef | ast.AsyncFunctionDef, class_name: str | None,
    body: "_FunctionBody | None" = None, given_tensors: bool = False,
) -> tuple[Typing, "_FunctionBody"]:
    """The function's names resolved as its own scope would resolve them (``given_tensors``: its
    untyped parameters tensors), once per function: a question met again while they are being
    resolved sees the names found so far. The facts keep the names, not the ``Typing``, which
    refers to them: a cycle would keep the file's trees alive until the garbage collector runs."""
    typing = Typing(facts, op_tables(), ast_view, class_name)
    known = facts.typings.get((id(function), given_tensors))
    if known is not None:
        names, body = known  # type: ignore[misc]
        typing.tensors, typing.modules, typing.module_classes, typing.tensor_lists, typing.tuples = names
        return typing, body
    body = body or _body(facts, function)
    names = (typing.tensors, typing.modules, typing.module_classes, typing.tensor_lists, typing.tuples)
    facts.typings[(id(function), given_tensors)] = (names, body)
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults, *arguments.kw_defaults]
    params = list(zip([*positional, *arguments.kwonlyargs], defaults))
    if class_name is not None and params and not any(dotted_path(ast_view, d) == "staticmethod" for d in function.decorator_list):
        params = params[1:]  # self / cls
    forward = function.name == "forward"
    typed = set()
    untyped = {}
    for param, default in params:
        tensor = typing.declare(param.arg, param.annotation, default, forward)
        if tensor or (tensor is None and given_tensors):
            typing.tensors.add(param.arg)
        elif tensor is not None:
            typed.add(param.arg)
        elif default is None or type(default) is ast.Constant and default.value is None:
            untyped[param.arg] = param
    if untyped:
        docstring = ast.get_docstring(function, clean=False)
        typing.tensors |= documented_tensors(docstring, untyped)
        typing.tensor_lists |= documented_tensors(docstring, untyped, lists=True)
    typing.tensors |= {name for expr in body.uses for name in typing.used_as_tensor(expr)} - typed
    typing.resolve(body.assignments, body.loops, body.appends)
    return typing, body


def _value_returns(typing: Typing, value: ast.expr) -> Returned:
    if typing.is_tensor(value):
        return True
    if isinstance(value, ast.Tuple):
        return tuple(typing.is_tensor(element) for element in value.elts)
    return typing._tuple(value) or False


_NESTED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_ONE_TARGET = frozenset({ast.AnnAssign, ast.AugAssign, ast.NamedExpr})


class _FunctionBody:
    """What a function's own body holds (nested functions and classes left out): its ``return``
    values, assignments, ``for`` loops and comprehensions, values appended to lists, and the
    calls, ``@`` and ``.shape`` that may use names as tensors. Node types are told by identity and
    expression contexts skipped: the walk meets every node of every function asked about."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.returns: list[ast.expr] = []
        self.assignments: list[tuple[ast.expr, ast.expr]] = []
        self.loops: list[tuple[ast.expr, ast.expr]] = []
        self.appends: list[tuple[str, ast.expr]] = []
        self.uses: list[ast.expr] = []
        todo: list = list(function.body)
        while todo:
            node = todo.pop()
            kind = type(node)
            if kind in _NESTED:
                continue
            if kind is ast.Return:
                if node.value is not None:
                    self.returns.append(node.value)
            elif kind is ast.Assign:
                self.assignments += [(target, node.value) for target in node.targets]
            elif kind in _ONE_TARGET:
                if node.value is not None:
                    self.assignments.append((node.target, node.value))
            elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
                self.loops.append((node.target, node.iter))
            elif (
                kind is ast.Call
                or (kind is ast.BinOp and type(node.op) is ast.MatMult)
                or (kind is ast.Attribute and node.attr in SHAPE_ATTRIBUTES)
                or (kind is ast.Subscript and _new_axis(node))
            ):
                self.uses.append(node)
                appended = _appended(node) if kind is ast.Call else None
                if appended is not None:
                    self.appends.append(appended)
            for name in getattr(node, "_fields", ()):  # a list may hold names (global) or None (dict keys)
                if name != "ctx":
                    value = getattr(node, name, None)
                    if type(value) is list:
                        todo += value
                    elif isinstance(value, ast.AST):
                        todo.append(value)


def _new_axis(subscript: ast.Subscript) -> bool:
    """``x[:, None]``, ``x[None]``: an index that adds an axis."""
    index = subscript.slice
    return any(type(i) is ast.Constant and i.value is None for i in (index.elts if type(index) is ast.Tuple else (index,)))


def _appended(call: ast.Call) -> tuple[str, ast.expr] | None:
    """(``outs``, ``v``) of ``outs.append(v)``."""
    func = call.func
    if type(func) is ast.Attribute and func.attr == "append" and type(func.value) is ast.Name and len(call.args) == 1:
        return func.value.id, call.args[0]
    return None
