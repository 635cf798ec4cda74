"""File-level facts, read from the stdlib ``ast`` of the whole file: cheap, and it survives the
engine's masking of the text libcst parses. What a class holds is read the first time a rule
asks (most classes of a file are never asked about)."""
from __future__ import annotations

import ast
import functools
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Iterator, Mapping, NamedTuple

import libcst as cst

from fusionlint.analysis.views import ATTR, CALL, IFEXP, NAME, SUBSCRIPT, View, ast_view, dotted_path

_LIBRARIES = ("torch", "einops", "einx")
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
# nn classes that are not modules, or whose call is no tensor
_NON_MODULES = frozenset({"Parameter", "Buffer", "ParameterList", "ParameterDict", "Module"})
_CONTAINERS = {"ModuleList": "list", "ModuleDict": "dict", "Sequential": "sequential"}
# Registries of element-wise activation modules, read by key (``ACT2FN[config.hidden_act]``): each
# entry is a module whose call makes a new tensor, or (its ``linear`` entry) returns its input
# unchanged; none writes its input. Their ``nn_class`` is the registry's name.
ACTIVATION_REGISTRIES = frozenset({"ACT2FN"})
# Helpers, imported by name, that build a layer (transformers', diffusers' and timm's).
_MODULE_BUILDERS = frozenset({"get_activation", "create_act_layer", "create_conv2d", "create_pool2d", "create_aa"})
# Libraries of arrays that are no torch tensors (a kernel language's blocks index and multiply as tensors do).
_ARRAY_LIBRARIES = frozenset({"numpy", "triton", "helion"})
# Helpers that return a layer class to build modules from (timm's ``get_act_layer("gelu")``).
_LAYER_GETTERS = frozenset({"get_act_layer", "get_norm_layer", "get_norm_act_layer"})
_NESTED_DEFINITIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_FACTORY_TYPES = frozenset({"Callable", "Type", "type"})
_UNIONS = frozenset({"Optional", "Union"})


@dataclass(frozen=True)
class ClassFacts:
    tensor_attrs: frozenset[str]  # self.<attr> that hold tensors (parameters, buffers, torch calls)
    module_attrs: dict[str, str]  # self.<attr> -> "nn", "list", "dict", "sequential" or a same-file class
    nn_classes: dict[str, str]  # self.<attr> -> its torch.nn class ("Softmax"), for an "nn" module
    values: dict[str, list[ast.Assign]]  # self.<attr> -> its assignments other than of constants


class MethodLayers(NamedTuple):
    """Names a method binds to layer classes and to modules, each with the kind of module."""

    classes: dict[str, str]
    instances: dict[str, str]


_NO_LAYERS = MethodLayers({}, {})


@dataclass(frozen=True)
class ModuleFacts:
    """Facts read from the stdlib ``ast`` of the whole file (cheap, and survives masking)."""

    aliases: dict[str, str]  # local name -> canonical dotted path ("F" -> "torch.nn.functional")
    tree: ast.Module  # the whole file's, for what is read on demand
    # numpy or a kernel language (triton, helion): then ``a @ b``, ``a.transpose(...)``, ``a[:, None]`` may be of its arrays
    imports_arrays: bool = False
    imported: frozenset[str] = frozenset()  # names bound by imports (modules: ``np.matmul`` is no method)
    classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(default_factory=dict)  # top level
    # ``self.<attr> = ...`` and ``register_buffer("<name>", ...)`` anywhere, for the classes around them
    members: list[ast.Assign | ast.Call] = field(default_factory=list)
    returns: dict[tuple[str | None, str], bool | tuple[bool, ...]] = field(default_factory=dict)  # filled by tensors.returned
    reads_only: dict[tuple[str | None, str, int], bool] = field(default_factory=dict)  # filled by purity.only_reads
    returns_new: dict[tuple[str | None, str], bool] = field(default_factory=dict)  # filled by fresh.returns_new
    any_layout: dict[tuple[str | None, str, int, frozenset[str]], str | None] = field(default_factory=dict)  # filled by layout
    _class_facts: dict[str, ClassFacts] = field(default_factory=dict)
    _layers: dict[int, MethodLayers] = field(default_factory=dict)  # by id of the method
    member_tensors: dict[tuple[str, str], bool] = field(default_factory=dict)  # filled by tensors.member_holds_tensor
    # the same, its untyped parameters tensors
    returns_given_tensors: dict[tuple[str | None, str], bool | tuple[bool, ...]] = field(default_factory=dict)
    typings: dict[tuple[int, bool], object] = field(default_factory=dict)  # a function's resolved names: filled by tensors
    # Where the file lies (None: no package to look into, as for a notebook), and the sha256 of its
    # bytes for a file read by ``project`` (whose findings of other files depend on it).
    path: str | None = None
    digest: str | None = None
    # local name -> (level, module, name) of each ``from <module> import <name> [as <local>]``
    import_sources: dict[str, tuple[int, str | None, str]] = field(default_factory=dict)
    # Filled by ``project``: the files consulted (path -> sha256 of its bytes and its facts when
    # parsed, (None, None) where no file lies), and what names, members and bases resolved to.
    uses: dict[str, tuple[str | None, "ModuleFacts | None"]] = field(default_factory=dict)
    resolved: dict[object, tuple["ModuleFacts", str] | None] = field(default_factory=dict)

    @functools.cached_property
    def identifiers(self) -> frozenset[str]:
        """Every name bound or read anywhere in the file, for a fix's fresh names: read the first
        time one asks (most files get no such fix)."""
        names: set[str] = set()
        for node in _walk(self.tree):
            kind = type(node)
            if kind is ast.Name:
                names.add(node.id)
            elif kind is ast.arg:
                names.add(node.arg)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
                names.add(node.name)
            elif kind is ast.alias:
                names.add(node.asname or node.name.partition(".")[0])
            elif kind is ast.Global or kind is ast.Nonlocal:
                names.update(node.names)
        return frozenset(names)

    @property
    def imports_torch(self) -> bool:
        return any(path.partition(".")[0] == "torch" for path in self.aliases.values())

    def canonical(self, dotted: str) -> str | None:
        """``F.linear`` -> ``torch.nn.functional.linear``; None when not a torch (or einops, einx) name."""
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def spelling(self, canonical: str) -> str | None:
        """How this file writes ``canonical`` (``torch.nn.functional.linear`` -> ``F.linear``)
        through its imports, the most specific one first; None when it cannot (for fixes)."""
        best: tuple[str, str] | None = None
        for local, path in self.aliases.items():
            if (canonical == path or canonical.startswith(path + ".")) and (best is None or len(path) > len(best[1])):
                best = (local, path)
        return None if best is None else best[0] + canonical[len(best[1]):]

    # --- classes ---------------------------------------------------------------------------------

    def tensor_attrs(self, class_name: str) -> frozenset[str]:
        return self._class(class_name).tensor_attrs

    def module_attr(self, class_name: str, attr: str) -> str | None:
        return self._class(class_name).module_attrs.get(attr)

    def assigns_member(self, class_name: str, attr: str) -> bool:
        """Does the class (or a same-file base) assign ``self.<attr>`` something other than a constant?"""
        return attr in self._class(class_name).values

    def member_values(self, class_name: str, attr: str) -> list[ast.Assign]:
        return self._class(class_name).values.get(attr, [])

    def method_around(self, class_name: str, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The method of the class or of a same-file base whose body holds ``node``."""
        for cls in self._lineage(class_name):
            if cls.lineno <= node.lineno <= (cls.end_lineno or cls.lineno):
                for method in cls.body:
                    if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                            and method.lineno <= node.lineno <= (method.end_lineno or method.lineno):
                        return method
        return None

    def nn_class(self, class_name: str, attr: str) -> str | None:
        """``Softmax`` for ``self.softmax = nn.Softmax(dim=-1)``."""
        return self._class(class_name).nn_classes.get(attr)

    def methods(self, class_name: str, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The definitions of method ``name`` in the class, else in its nearest same-file base that has it."""
        for cls in self._lineage(class_name):
            found = [
                node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
            ]
            if found:
                return found
        return []

    def has_method(self, class_name: str, name: str) -> bool:
        return bool(self.methods(class_name, name))

    def callee(self, class_name: str | None, view: View, func: object) -> tuple[str | None, str] | None:
        """(class or None, function) of a same-file callee, in either syntax tree through
        ``view``: ``helper(x)``, ``self.forward(x)``, ``self.altup.scale(x)`` (a method of a
        same-file module attribute), ``self.block(x)`` (its same-file class's ``forward``)."""
        callee = view(func)
        if callee[0] == NAME:
            return (None, callee[1]) if callee[1] in self.functions else None
        if callee[0] != ATTR or class_name is None:
            return None
        owner = view(callee[1])
        if owner[0] == NAME and owner[1] == "self":
            if self.has_method(class_name, callee[2]):
                return class_name, callee[2]
            kind = self.module_attr(class_name, callee[2])
            return (kind, "forward") if kind in self.classes and self.has_method(kind, "forward") else None
        if owner[0] == ATTR and view(owner[1])[:2] == (NAME, "self"):
            kind = self.module_attr(class_name, owner[2])
            return (kind, callee[2]) if kind in self.classes and self.has_method(kind, callee[2]) else None
        return None

    def is_module_class(self, class_name: str) -> bool:
        """Does the class derive (through same-file classes) from a torch.nn class, or define a
        ``forward`` (a module deriving from an imported base: ``class T5Stack(T5PreTrainedModel)``)?"""
        return self.torch_base(class_name) is not None or self.has_method(class_name, "forward")

    def torch_base(self, class_name: str) -> str | None:
        """The torch.nn class the class derives from through same-file classes (``Embedding``
        for ``class Positions(nn.Embedding)``, ``Module``), else None."""
        for cls in self._lineage(class_name):
            for base in cls.bases:
                canonical = self.canonical(dotted_path(ast_view, base) or "") or ""
                if canonical.startswith("torch.nn."):
                    return canonical.rpartition(".")[2]
        return None

    def same_file_bases(self, class_name: str) -> list[str]:
        """The same-file classes the class names as its bases, in order (where ``super()`` looks)."""
        return [base.id for cls in self.classes.get(class_name, ()) for base in cls.bases
                if isinstance(base, ast.Name) and base.id in self.classes]

    def imported_bases(self, class_name: str) -> list[str]:
        """The bases of the class and of its same-file bases that the file imports by name
        (``from .llama import LlamaMLP``), nearest first."""
        return [base.id for cls in self._lineage(class_name) for base in cls.bases
                if isinstance(base, ast.Name) and base.id not in self.classes and base.id in self.import_sources]

    def _lineage(self, class_name: str) -> list[ast.ClassDef]:
        """The class's definitions, then those of its same-file bases, breadth first."""
        seen, order, todo = set(), [], [class_name]
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            for cls in self.classes.get(name, ()):
                order.append(cls)
                todo += [base.id for base in cls.bases if isinstance(base, ast.Name)]
        return order

    def _class(self, class_name: str) -> ClassFacts:
        known = self._class_facts.get(class_name)
        if known is None:
            tensors: set[str] = set()
            modules: dict[str, str] = {}
            nn_classes: dict[str, str] = {}
            values: dict[str, list[ast.Assign]] = {}
            for cls in reversed(self._lineage(class_name)):  # the class's own assignments win
                self._read_class(cls, tensors, modules, nn_classes, values)
            known = self._class_facts[class_name] = ClassFacts(frozenset(tensors), modules, nn_classes, values)
        return known

    def _read_class(
        self, cls: ast.ClassDef, tensors: set[str], modules: dict[str, str], nn_classes: dict[str, str],
        values: dict[str, list[ast.Assign]],
    ) -> None:
        """``self.w = nn.Parameter(...)`` / ``torch.ones(...)`` / ``register_buffer("w", ...)`` are
        tensors; ``self.fc = nn.Linear(...)`` / ``Block(...)`` (a same-file module class) modules."""
        last = cls.end_lineno or cls.lineno
        for node in self.members:
            if not cls.lineno <= node.lineno <= last:
                continue
            if isinstance(node, ast.Call):  # register_buffer("name", ...)
                tensors.add(node.args[0].value)  # type: ignore[attr-defined]
                continue
            targets = [t.attr for t in node.targets if _is_self_attr(t)]  # type: ignore[attr-defined]
            unpacked = [
                e.attr for t in node.targets if type(t) is ast.Tuple for e in t.elts if _is_self_attr(e)  # type: ignore[attr-defined]
            ]
            if type(node.value) is not ast.Constant:
                for target in targets + unpacked:  # ``self.pool, self.fc = create_classifier(...)``
                    values.setdefault(target, []).append(node)
            if _is_tensor_call(node.value, self):
                tensors.update(targets)
            kind = self._member_kind(cls, node)
            if kind is not None:
                modules.update(dict.fromkeys(targets, kind))
            if kind == "nn" and isinstance(node.value, ast.Subscript):
                nn_classes.update(dict.fromkeys(targets, _last(dotted_path(ast_view, node.value.value))))
            elif kind == "nn" and isinstance(node.value, ast.Call) and not built_in_place(node.value) \
                    and _is_nn_class(canonical := self.canonical(dotted_path(ast_view, node.value.func) or "")):
                nn_classes.update(dict.fromkeys(targets, _last(canonical)))
            else:
                for target in targets:
                    nn_classes.pop(target, None)

    def module_kind(self, value: object, view: View = ast_view, layer_classes: Mapping[str, str] = {}) -> str | None:
        """What ``value`` (in either syntax tree, through ``view``) builds: "nn" for a torch.nn
        module or an activation from a registry or builder (``ACT2FN[act]``,
        ``get_activation(act)``), "list"/"dict"/"sequential" for its containers, the class name of
        a same-file module class, "op" for a functional op held as a value (``F.gelu``,
        ``partial(F.softmax, dim=-1)``), called as a module is; None for anything else. A call of
        one of ``layer_classes`` (names bound to layer classes: ``norm_layer(dim)``) builds the
        kind it maps to."""
        seen = view(value)
        if seen[0] == IFEXP:
            return self.module_kind(seen[1], view, layer_classes) or self.module_kind(seen[2], view, layer_classes)
        if seen[0] == SUBSCRIPT:
            return "nn" if _last(dotted_path(view, seen[1])) in ACTIVATION_REGISTRIES else None
        if seen[0] != CALL:
            return "op" if self._functional_op(dotted_path(view, value)) else None
        dotted = dotted_path(view, seen[1])
        if dotted is None:
            return None
        if dotted in layer_classes:
            return layer_classes[dotted]
        if dotted in ("partial", "functools.partial") and seen[2]:
            return "op" if self._functional_op(dotted_path(view, seen[2][0])) else None
        canonical = self.canonical(dotted)
        if _is_nn_class(canonical):
            return _CONTAINERS.get(_last(canonical), "nn")
        if dotted in self.classes and self.is_module_class(dotted):
            return dotted
        return "nn" if _last(dotted) in _MODULE_BUILDERS else None

    def _member_kind(self, cls: ast.ClassDef, member: ast.Assign) -> str | None:
        """What ``self.<attr> = value`` holds, as ``module_kind`` says, also through the layers the
        method binds (``self.norm = norm_layer(dim)``, ``self.act = activation`` of
        ``activation=nn.GELU()``) and the classes the file imports (``self.mlp = Mlp(dim)``)."""
        value = member.value
        layers = self._method_layers(cls, member)
        if isinstance(value, ast.Name):
            return layers.instances.get(value.id)
        return self.module_kind(value, ast_view, layers.classes) or self._imported_layer(value)

    def _method_layers(self, cls: ast.ClassDef, member: ast.Assign) -> MethodLayers:
        """The layers of the method of ``cls`` that assigns ``member`` (none unless it assigns or
        calls a plain name: most members need no look)."""
        value = member.value
        while isinstance(value, ast.IfExp):
            value = value.body if isinstance(value.body, ast.Call) else value.orelse
        if not (isinstance(value, ast.Name) or isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return _NO_LAYERS
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and method.lineno <= member.lineno <= (method.end_lineno or method.lineno):
                known = self._layers.get(id(method))
                if known is None:
                    known = self._layers[id(method)] = self._read_layers(method)
                return known
        return _NO_LAYERS

    def _read_layers(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> MethodLayers:
        """Names the function binds to layer classes, injected as its constructor's parameters
        are (``act_layer=nn.GELU``, ``norm_layer: Callable[..., nn.Module]``,
        ``partial(nn.LayerNorm, eps=1e-6)``) or in its body (``norm_layer = norm_layer or
        nn.BatchNorm2d``), and names it binds to modules (``activation=nn.GELU()``, ``blocks =
        nn.ModuleList()``), each with the kind of module it builds or is."""
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = [None] * (len(positional) - len(arguments.defaults)) + [*arguments.defaults, *arguments.kw_defaults]
        layers = MethodLayers({}, {})
        for param, default in zip([*positional, *arguments.kwonlyargs], defaults):
            self._bind(layers, param.arg, default, param.annotation)
        for node in _statements(function.body):
            if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                self._bind(layers, node.targets[0].id, node.value, None)
        return layers

    def _bind(self, layers: MethodLayers, name: str, value: ast.expr | None, annotation: ast.expr | None) -> None:
        kind = self._factory_kind(value, layers.classes) or self._factory_annotation(annotation)
        if kind is not None:
            layers.classes[name] = kind
            return
        if value is None:
            return
        kind = self.module_kind(value, ast_view, layers.classes) or self._imported_layer(value)
        if kind is not None:
            layers.instances[name] = kind

    def _factory_kind(self, expr: ast.expr | None, known: Mapping[str, str]) -> str | None:
        """The kind of module a call of ``expr`` builds when it is a layer class: a torch.nn or
        same-file module class, a class the file imports (in a file using torch), a ``partial``
        of one, a name in ``known``, either side of an ``or`` or an if-expression; None for
        anything else."""
        if isinstance(expr, ast.BoolOp):
            return next(filter(None, (self._factory_kind(value, known) for value in expr.values)), None)
        if isinstance(expr, ast.IfExp):
            return self._factory_kind(expr.body, known) or self._factory_kind(expr.orelse, known)
        if isinstance(expr, ast.Call):
            dotted = dotted_path(ast_view, expr.func)
            if dotted in ("partial", "functools.partial") and expr.args:
                return self._factory_kind(expr.args[0], known)
            return "nn" if _last(dotted) in _LAYER_GETTERS else None
        dotted = dotted_path(ast_view, expr) if expr is not None else None
        if dotted is None:
            return None
        if dotted in known:
            return known[dotted]
        if dotted in self.classes:
            return dotted if self.is_module_class(dotted) else None
        canonical = self.canonical(dotted)
        if _is_nn_class(canonical):
            return _CONTAINERS.get(_last(canonical), "nn")
        return "nn" if self._imported_class(dotted) else None  # ``conv_block = conv_block or ConvNormAct``

    def _imported_layer(self, value: ast.expr) -> str | None:
        """"nn" for a member built by a class the file imports (``self.mlp = Mlp(dim)``,
        ``layers.ConvNormAct(...)``): in a file using torch, a layer of the library's own."""
        if not isinstance(value, ast.Call):
            return None
        return "nn" if self._imported_class(dotted_path(ast_view, value.func)) else None

    def _imported_class(self, dotted: str | None) -> bool:
        """A CapWords name the file imports, or reads from a module it imports, in a file using torch."""
        name = _last(dotted)
        return (
            dotted is not None and dotted.partition(".")[0] in self.imported and name[:1].isupper()
            and not name.isupper() and self.imports_torch
        )

    def _factory_annotation(self, annotation: ast.expr | None) -> str | None:
        """"nn" for ``Callable[..., nn.Module]``, ``type[nn.LayerNorm]`` (also in ``Optional``)."""
        if not isinstance(annotation, ast.Subscript):
            return None
        base = _last(dotted_path(ast_view, annotation.value))
        members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if base in _UNIONS:
            return next(filter(None, map(self._factory_annotation, members)), None)
        if base in _FACTORY_TYPES:
            dotted = dotted_path(ast_view, members[-1])
            canonical = self.canonical(dotted) if dotted else None
            return "nn" if canonical == "torch.nn.Module" or _is_nn_class(canonical) else None
        return None

    def _functional_op(self, dotted: str | None) -> bool:
        """``F.gelu``, ``torch.special.erf``: a torch function that is an op, never a dtype or constant."""
        canonical = self.canonical(dotted) if dotted else None
        return canonical is not None and canonical.startswith(("torch.nn.functional.", "torch.special."))


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a body and of the blocks in it, in order; nested functions and classes
    left out, and no expression walked."""
    for statement in body:
        yield statement
        if type(statement) in _NESTED_DEFINITIONS:
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, name, ()))
        for handler in getattr(statement, "handlers", ()):
            yield from _statements(handler.body)


def _last(dotted: str | None) -> str:
    """``ACT2FN`` of ``activations.ACT2FN``; empty for None."""
    return (dotted or "").rpartition(".")[2]


def _is_nn_class(canonical: str | None) -> bool:
    """A torch.nn module class (``torch.nn.LayerNorm``), not a parameter nor ``Module`` itself."""
    name = _last(canonical)
    return bool(canonical) and canonical.startswith("torch.nn.") and name[:1].isupper() and name not in _NON_MODULES


def built_in_place(call: ast.Call | cst.Call) -> bool:
    """``nn.ReLU(inplace=True)``, ``nn.ReLU(True)`` (in either syntax tree): a module that
    writes its input, so its call is not the op of its class."""
    if isinstance(call, ast.Call):
        keywords = [(k.arg, k.value) for k in call.keywords]
        first = call.args[0] if call.args else None
    else:
        keywords = [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
        first = call.args[0].value if call.args and call.args[0].keyword is None else None
    flags = [value for key, value in keywords if key == "inplace"]
    flags += [first] if _bool_literal(first) is not None else []
    return any(_bool_literal(flag) is not False for flag in flags)


def _bool_literal(expr: object) -> bool | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def module_facts(tree: ast.Module, path: str | None = None, digest: str | None = None) -> ModuleFacts:
    """The facts of a file's tree; ``path`` where it lies, when its package's other files may be
    consulted (``project``), ``digest`` the sha256 of the bytes the tree was read from."""
    aliases: dict[str, str] = {}
    sources: dict[str, tuple[int, str | None, str]] = {}
    arrays = False
    imported: set[str] = set()
    classes: dict[str, list[ast.ClassDef]] = defaultdict(list)
    members: list[ast.Assign | ast.Call] = []
    for node in _file_statements(tree):
        kind = type(node)  # compared by identity
        if kind is ast.ClassDef:
            classes[node.name].append(node)
        elif kind is ast.Import:
            for alias in node.names:
                imported.add(alias.asname or alias.name.partition(".")[0])
                library = alias.name.partition(".")[0]
                arrays = arrays or library in _ARRAY_LIBRARIES
                if library in _LIBRARIES:
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases[library] = library
        elif kind is ast.ImportFrom:
            for alias in node.names:
                imported.add(alias.asname or alias.name.partition(".")[0])
                if alias.name != "*":
                    sources[alias.asname or alias.name] = (node.level, node.module, alias.name)
            if node.level or not node.module:
                continue
            arrays = arrays or node.module.partition(".")[0] in _ARRAY_LIBRARIES
            if node.module.partition(".")[0] in _LIBRARIES:
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif kind is ast.Assign:
            if any(_is_self_attr(target) or type(target) is ast.Tuple and any(map(_is_self_attr, target.elts))
                   for target in node.targets):
                members.append(node)
        elif (
            kind is ast.Call
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            members.append(node)
    functions: dict[str, list] = defaultdict(list)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name].append(node)
    return ModuleFacts(aliases, tree, arrays, frozenset(imported), dict(classes), dict(functions), members,
                       path=path, digest=digest, import_sources=sources)


def _file_statements(tree: ast.Module) -> Iterator[ast.AST]:
    """The statements of a file (with the calls that are expression statements, where
    ``register_buffer`` is called), in ``ast.walk``'s order: the facts are read off statements,
    and a walk over every expression took most of the time."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        fields = _BLOCK_FIELDS.get(type(node))
        if fields is None:
            fields = _BLOCK_FIELDS[type(node)] = tuple(f for f in node._fields if f in _BLOCKS)
        for name in fields:
            todo.extend(getattr(node, name))
        if type(node) is ast.Expr and type(node.value) is ast.Call:
            todo.append(node.value)
        yield node


# The fields that hold statements (or the handlers and cases around them), in each node type's field order.
_BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {ast.Call: ()}


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``'s nodes in ``ast.walk``'s order (breadth first), in a third less time."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                todo.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                todo.append(value)
        yield node


def _is_self_attr(target: ast.expr) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def torch_call_returns_tensor(canonical: str) -> bool:
    """Does a call of the torch name ``canonical`` return tensors (``torch.ones``, ``F.gelu``,
    ``nn.Parameter``; not ``torch.device`` nor anything of ``torch.cuda``, ``torch.nn.init``, ...)?"""
    if canonical in _TENSOR_TORCH_NN or canonical.startswith("torch.nn.functional."):
        return True
    return (
        canonical.startswith("torch.")
        and canonical not in _NON_TENSOR_TORCH
        and not canonical.startswith(_NON_TENSOR_TORCH_PREFIXES)
    )


def _is_tensor_call(value: ast.expr, facts: ModuleFacts) -> bool:
    if isinstance(value, ast.IfExp):  # ``nn.Parameter(...) if use_mask_token else None``
        return _is_tensor_call(value.body, facts) or _is_tensor_call(value.orelse, facts)
    if not isinstance(value, ast.Call):
        return False
    dotted = dotted_path(ast_view, value.func)
    canonical = facts.canonical(dotted) if dotted else None
    return canonical is not None and torch_call_returns_tensor(canonical)
