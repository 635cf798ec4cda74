"""Which parameters of a same-file function or module take a tensor in any layout: a transposed
or sliced view handed to ``self.block(x)`` works as well as its contiguous copy when the block's
``forward`` only reads ``x`` with ops that accept any strides, so a ``.contiguous()`` made for the
call is not needed. And which ops read a strided tensor as fast as a contiguous one."""
from __future__ import annotations

import ast

from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.project import imported, imported_callee
from fusionlint.analysis.purity import MAY_ALIAS, METADATA, op_name
from fusionlint.analysis.views import View, ast_view, dotted_path
from fusionlint.ops import ELEMENTWISE, VIEW, OpTables, op_tables

# Views that fail on a tensor whose strides they cannot reshape, so a `.contiguous()` before them
# is needed, and those that copy such a tensor themselves, so that one costs nothing more.
NEEDS_CONTIGUOUS = frozenset({"view", "view_as", "reshape", "reshape_as", "flatten", "ravel"})
# Ops the tables leave out that read their inputs into a new tensor (data movement, FFTs): a copy
# handed to them is only read.
READS_INTO_NEW = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "flip", "roll", "gather",
                            "index_select", "pad", "repeat", "tile", "fft", "ifft", "rfft", "irfft"})
# Ops that read a strided input without copying it first (element-wise ops too), data movement
# among them: it copies its input in any layout anyway. ``softmax``, the norms and convolutions
# make it contiguous themselves, so a `.contiguous()` before them saves nothing.
STRIDE_FREE = frozenset({"sum", "nansum", "mean", "amax", "amin", "max", "min", "prod", "matmul", "mm", "bmm",
                         "einsum", "@", "linear", *(READS_INTO_NEW - {"fft", "ifft", "rfft", "irfft"})})
# Runs the function it is handed on the arguments after it: ``checkpoint(self.block, x, mask)``
# is ``self.block(x, mask)``, recomputed in the backward pass.
CHECKPOINT = "torch.utils.checkpoint.checkpoint"
# einops' ops read their input in any layout: ``rearrange`` hands back a view of it (or copies it,
# as ``reshape`` would), the others read it into a new tensor.
_EINOPS = frozenset({"einops.rearrange", "einops.repeat", "einops.reduce"})
# Reads of the layout itself: their answer changes with it.
_LAYOUT_QUERIES = frozenset({"stride", "is_contiguous", "data_ptr", "storage", "untyped_storage", "numpy"})
FAST, SLOW = "fast", "slow"
# The same, where the callee may also return the tensor (or a view of it): ``DropPath``, an
# identity when not training, ``return x.transpose(1, 2)``. Its caller reads the call's result
# as the tensor too.
FAST_BACK, SLOW_BACK = "fast, handed back", "slow, handed back"


def combine(verdicts: list[str | None]) -> str | None:
    """One verdict for several uses: None if any needs the layout; FAST if any reads the strided
    tensor as fast as a copy; handed back if any returns it."""
    if not verdicts or None in verdicts:
        return None
    fast = any(v in (FAST, FAST_BACK) for v in verdicts)
    if any(v in (FAST_BACK, SLOW_BACK) for v in verdicts):
        return FAST_BACK if fast else SLOW_BACK
    return FAST if fast else SLOW


def handed_back(verdict: str | None) -> bool:
    return verdict in (FAST_BACK, SLOW_BACK)


def reads_strided(name: str, ops: OpTables | None = None) -> bool:
    """Does the op ``name`` read a strided input as fast as a contiguous one (by ``ops``, the
    default tables if None)?"""
    return (ops or op_tables()).op_class(name) == ELEMENTWISE or name in STRIDE_FREE


def callee_takes_any_layout(facts: ModuleFacts, class_name: str | None, view: View, func: object, position: int | str,
                            fast: frozenset[str] = frozenset()) -> str | None:
    """Does ``func`` (a callee, in either syntax tree through ``view``) name a function, or a
    module's ``forward``, of this file or another of its package (``project``), whose
    ``position``-th parameter takes any layout? FAST if some use reads it as fast as a
    contiguous copy (arithmetic, a matmul, a linear layer, the ops of ``fast``), SLOW if all of
    them copy a strided input themselves (a layer norm, a convolution); None if a use needs the
    layout (``.view()``, an in-place write, a return, unknown code)."""
    callee = facts.callee(class_name, view, func)
    if callee is not None:
        return takes_any_layout(facts, callee[0], callee[1], position, fast)
    other = imported_callee(facts, class_name, view, func)
    return None if other is None else takes_any_layout(other[0], other[1], other[2], position, fast)


def elements_take_any_layout(facts: ModuleFacts, class_name: str, attr: str, position: int | str,
                             fast: frozenset[str] = frozenset()) -> str | None:
    """``callee_takes_any_layout`` for the modules that ``self.<attr>``, a ``ModuleList`` or
    ``Sequential`` (built with its modules or appended them in the class), holds: the
    ``forward`` of every one of them for a list, whose elements are called one by one
    (``self.layers[i](x)``, ``for layer in self.layers``); of the first for a ``Sequential``,
    the only one its input reaches. Each must be a module class of this file or another of its
    package."""
    classes = _element_classes(facts, class_name, attr)
    if facts.module_attr(class_name, attr) == "sequential":
        classes = classes[:1]
    if not classes:
        return None
    verdicts = [takes_any_layout(*element, "forward", position, fast) for element in classes]
    return combine(verdicts)


def _element_classes(facts: ModuleFacts, class_name: str, attr: str) -> list[tuple[ModuleFacts, str]]:
    """The classes of the modules ``self.<attr>`` holds, in order (``nn.ModuleList([Block(d) for
    _ in range(n)])``, ``nn.Sequential(Conv(...), Norm(...))``, ``self.<attr>.append(Block(d))``);
    empty when one is not a call of a same-file module class that has a ``forward``."""
    found: list[ast.expr] = []
    for assign in facts.member_values(class_name, attr):
        call = assign.value
        if isinstance(call, ast.Subscript) and _self_attr(call.value) == attr:
            continue  # `self.layers = self.layers[:n]`: some of the same modules
        if not isinstance(call, ast.Call) or call.keywords or len(call.args) > 1 and facts.module_attr(
                class_name, attr) != "sequential":
            return []
        for arg in call.args:
            value = arg.value if isinstance(arg, ast.Starred) else arg
            if isinstance(value, (ast.List, ast.Tuple)):
                found += value.elts
            elif isinstance(value, (ast.ListComp, ast.GeneratorExp)):
                found.append(value.elt)
            else:
                found.append(value)
    for cls in facts.classes.get(class_name, ()):
        for node in ast.walk(cls):
            added = _added_to(node, attr)
            if added == "extend" or added == "append" and len(node.args) != 1:  # type: ignore[attr-defined]
                return []
            if added == "append":
                found.append(_built(facts, class_name, node.args[0]))  # type: ignore[attr-defined]
    names = [element.func.id for element in found if isinstance(element, ast.Call) and isinstance(element.func, ast.Name)]
    classes = [(facts, name) if name in facts.classes else imported(facts, name, "class {}") for name in names]
    if len(classes) != len(found) or not all(c is not None and c[0].has_method(c[1], "forward") for c in classes):
        return []
    return classes  # type: ignore[return-value]


def _built(facts: ModuleFacts, class_name: str, value: ast.expr) -> ast.expr:
    """The call that builds ``value``: itself, or for a name (``layer`` of ``layer =
    BasicLayer(...)`` then ``self.layers.append(layer)``) the value of the one assignment the
    method around it makes to that name."""
    method = facts.method_around(class_name, value) if isinstance(value, ast.Name) else None
    if method is None:
        return value
    bound = [node for node in ast.walk(method) if isinstance(node, ast.Name) and node.id == value.id  # type: ignore[attr-defined]
             and not isinstance(node.ctx, ast.Load)]
    assigns = [node for node in ast.walk(method) if isinstance(node, ast.Assign) and len(node.targets) == 1
               and isinstance(node.targets[0], ast.Name) and node.targets[0].id == value.id]  # type: ignore[attr-defined]
    return assigns[0].value if len(bound) == 1 and len(assigns) == 1 else value


def _added_to(node: ast.AST, attr: str) -> str | None:
    """"append" or "extend" for a call ``self.<attr>.append(...)`` or ``.extend(...)``."""
    func = node.func if isinstance(node, ast.Call) else None
    if not (isinstance(func, ast.Attribute) and func.attr in ("append", "extend")):
        return None
    owner = func.value
    is_member = isinstance(owner, ast.Attribute) and owner.attr == attr and isinstance(owner.value, ast.Name) \
        and owner.value.id == "self"
    return func.attr if is_member else None


def _self_attr(expr: ast.expr) -> str | None:
    """``attr`` of ``self.attr``."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return expr.attr
    return None


def _hands_back(name: str) -> bool:
    """Does the op ``name`` hand back its input, or a view of it, that works in any layout (not
    ``.contiguous()``, nor a view that needs a contiguous input)?"""
    if name == "contiguous" or name in NEEDS_CONTIGUOUS:
        return False
    return name in MAY_ALIAS or op_tables().op_class(name) == VIEW


def takes_any_layout(facts: ModuleFacts, class_name: str | None, name: str, position: int | str,
                     fast: frozenset[str] = frozenset()) -> str | None:
    """``callee_takes_any_layout`` for the function ``name`` of ``class_name`` (None: top level),
    over every definition of it. Judged once; a call back into one being judged needs the layout."""
    key = (class_name, name, position, fast)
    if key in facts.any_layout:
        return facts.any_layout[key]
    facts.any_layout[key] = None
    functions = facts.functions.get(name, []) if class_name is None else facts.methods(class_name, name)
    verdicts = [_Body(facts, class_name, function, fast).param_layout(position) for function in functions]
    result = combine(verdicts)
    facts.any_layout[key] = result
    return result


class _Body:
    """One function: each node's parent, the names it updates with ``+=`` (in place) or reads
    in a closure, and the names its loops bind to the modules of a container of the class."""

    def __init__(self, facts: ModuleFacts, class_name: str | None,
                 function: ast.FunctionDef | ast.AsyncFunctionDef, fast: frozenset[str]) -> None:
        self.facts, self.class_name, self.function, self.fast = facts, class_name, function, fast
        self.parents: dict[int, ast.AST] = {}
        self.updated: set[str] = set()
        self.in_closure: set[str] = set()
        self.members: dict[str, str] = {}  # `layer` of `for layer in self.layers` -> "layers"
        stores: dict[str, int] = {}
        for statement in function.body:
            for node in ast.walk(statement):
                for child in ast.iter_child_nodes(node):
                    self.parents[id(child)] = node
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                    self.in_closure |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    self.updated.add(node.target.id)
                elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    stores[node.id] = stores.get(node.id, 0) + 1
                elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                    member = _self_attr(node.iter.value if isinstance(node.iter, ast.Subscript) else node.iter)
                    if member is not None:
                        self.members[node.target.id] = member
            self.parents[id(statement)] = function
        self.members = {name: attr for name, attr in self.members.items() if stores.get(name) == 1}

    def param_layout(self, position: int | str) -> str | None:
        """How the parameter at ``position`` (an index among the positional ones, or the name a
        keyword argument gives) reads its tensor."""
        arguments = self.function.args
        params = [*arguments.posonlyargs, *arguments.args]
        if self.class_name is not None:
            params = params[1:]
        if isinstance(position, str):
            named = [p.arg for p in (*arguments.args, *arguments.kwonlyargs) if p.arg == position]
            return self._reads_layout(named[0], self._flow(self.function.body, named[0])[0]) \
                if named and named[0] != "self" else None
        if arguments.vararg is not None or position >= len(params):
            return None
        name = params[position].arg
        return self._reads_layout(name, self._flow(self.function.body, name)[0])

    def _reads_layout(self, name: str, reads: list[ast.Name] | None) -> str | None:
        """How ``reads`` of ``name`` read the tensor it holds."""
        if not reads or name in self.in_closure or name in self.updated:
            return None
        return combine([self._use_layout(use) for use in reads])

    def _flow(self, statements: list[ast.stmt], name: str) -> tuple[list[ast.Name], bool]:
        """The reads of ``name`` that the value it holds before ``statements`` may reach in
        them, and whether they surely bind it anew: a statement's own reads come before its
        binding (``x = self.norm(x)``), an ``if`` binds it where every branch does, a loop
        over the class's ``ModuleList`` where its body does (a model's stack of layers is not
        empty). A loop's body is read once: the value comes back to its top only where the
        body binds it, and then it is another value. A ``try`` is read whole."""
        reads: list[ast.Name] = []
        for statement in statements:
            if isinstance(statement, ast.If):
                reads += _loads(statement.test, name)
                body, in_body = self._flow(statement.body, name)
                orelse, in_orelse = self._flow(statement.orelse, name)
                reads += body + orelse
                if in_body and in_orelse:
                    return reads, True
            elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
                head = statement.test if isinstance(statement, ast.While) else statement.iter
                reads += _loads(head, name)
                if not isinstance(statement, ast.While) and name in _stores(statement.target):
                    return reads, False  # the loop's own name from here: nothing to follow
                body, in_body = self._flow(statement.body, name)
                reads += body + self._flow(statement.orelse, name)[0]
                if in_body and self._over_layers(statement):
                    return reads, True
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                reads += [use for item in statement.items for use in _loads(item.context_expr, name)]
                body, in_body = self._flow(statement.body, name)
                reads += body
                if in_body:
                    return reads, True
            else:
                reads += _loads(statement, name)
                if not isinstance(statement, ast.Try) and name in _stores(statement):
                    return reads, True
        return reads, False

    def _over_layers(self, loop: ast.stmt) -> bool:
        """``for layer in self.layers`` (or a slice of it), ``self.layers`` a ``ModuleList`` or
        ``Sequential`` of the class, without an ``else``."""
        if not isinstance(loop, ast.For) or loop.orelse or self.class_name is None:
            return False
        member = _self_attr(loop.iter.value if isinstance(loop.iter, ast.Subscript) else loop.iter)
        return member is not None and self.facts.module_attr(self.class_name, member) in ("list", "sequential")

    def _use_layout(self, use: ast.Name) -> str | None:
        node: ast.AST = use
        while True:
            parent = self.parents.get(id(node))
            if isinstance(parent, (ast.BinOp, ast.UnaryOp)):
                return FAST
            if isinstance(parent, ast.Compare):
                return SLOW if all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops) else FAST
            if isinstance(parent, (ast.BoolOp, ast.If, ast.While, ast.Assert)) or \
                    isinstance(parent, ast.IfExp) and node is parent.test:
                return SLOW  # a test: its truth, not its layout
            if isinstance(parent, ast.IfExp):
                node = parent  # one of its values: the expression's use decides
                continue
            if isinstance(parent, (ast.List, ast.Tuple)) and self._listed_for_data_movement(parent):
                return FAST
            if isinstance(parent, ast.Subscript):
                if parent.value is not node:
                    return SLOW  # an index
                if not isinstance(parent.ctx, ast.Load):
                    return None  # `x[i] = v`
                node = parent
                continue
            if isinstance(parent, ast.Attribute) and parent.value is node:
                return self._method_layout(parent)
            if isinstance(parent, ast.Call) and node in parent.args:
                return self._argument_layout(parent, parent.args.index(node))  # type: ignore[arg-type]
            if isinstance(parent, ast.keyword) and parent.arg is not None:
                return self._keyword_layout(self.parents.get(id(parent)), parent.arg)  # type: ignore[arg-type]
            if isinstance(parent, ast.Assign) and parent.value is node:
                return self._assigned_layout(parent)
            if isinstance(parent, ast.Expr):
                return SLOW
            if isinstance(parent, ast.Return) and parent.value is node:
                return SLOW_BACK  # the caller reads the call's result as the tensor
            return None  # stored, yielded, in a container: the layout may matter there

    def _listed_for_data_movement(self, listed: ast.List | ast.Tuple) -> bool:
        """``torch.cat([x, y], 1)``: an operand listed for data movement, which copies any layout."""
        call = self.parents.get(id(listed))
        return isinstance(call, ast.Call) and bool(call.args) and call.args[0] is listed \
            and op_name(self.facts, self.class_name, call) in READS_INTO_NEW

    def _method_layout(self, attribute: ast.Attribute) -> str | None:
        """``x.<name>(...)``: a view or a cast goes on to its own uses; another op reads ``x``."""
        name, call = attribute.attr, self.parents.get(id(attribute))
        if name in METADATA:
            return SLOW
        if name in _LAYOUT_QUERIES or not (isinstance(call, ast.Call) and call.func is attribute):
            return None
        if _hands_back(name):
            return self._use_layout(call)  # type: ignore[arg-type]
        return self._op_layout(name)

    def _argument_layout(self, call: ast.Call, position: int) -> str | None:
        """``f(..., x, ...)``: a torch function or layer, another tensor's method, or a same-file
        callee, ``x`` its ``position``-th positional argument."""
        if any(keyword.arg == "out" for keyword in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        canonical = self.facts.canonical(dotted_path(ast_view, call.func) or "")
        if canonical == CHECKPOINT:
            return self._called_layout(call, call.args[0], position - 1) if position > 0 else None
        if canonical in _EINOPS:  # `rearrange(x, "b c h w -> b h w c")` is a view, or a reshape's copy
            return None if position else self._use_layout(call) if canonical == "einops.rearrange" else FAST
        name = op_name(self.facts, self.class_name, call)
        if name is not None:
            if _hands_back(name):
                return self._use_layout(call) if position == 0 else None
            return self._op_layout(name)
        method = self._other_tensor_method(call.func)
        if method is not None:  # `y.type_as(x)` reads its dtype, `y.expand_as(x)` its shape
            return SLOW if method in MAY_ALIAS or op_tables().op_class(method) == VIEW else self._op_layout(method)
        return self._called_layout(call, call.func, position)

    def _keyword_layout(self, call: ast.Call, keyword: str) -> str | None:
        """``self.attn(hidden_states=x)``: only a same-file callee's parameter of that name is
        known (a torch op's keyword may be ``out=``, or an index)."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        if op_name(self.facts, self.class_name, call) is not None or self._other_tensor_method(call.func) is not None:
            return None
        if self.facts.canonical(dotted_path(ast_view, call.func) or "") == CHECKPOINT:
            return self._called_layout(call, call.args[0], keyword) if call.args else None
        return self._called_layout(call, call.func, keyword)

    def _called_layout(self, call: ast.Call, func: ast.expr, position: int | str) -> str | None:
        """``_callee_layout``, and where the callee may hand the tensor back, the uses of the
        call's result too."""
        verdict = self._callee_layout(func, position)
        if not handed_back(verdict):
            return verdict
        return combine([FAST if verdict == FAST_BACK else SLOW, self._use_layout(call)])  # type: ignore[arg-type]

    def _callee_layout(self, func: ast.expr, position: int | str) -> str | None:
        """How the same-file callee ``func`` takes its ``position``-th argument: a function, a
        module's ``forward``, or each module of a container held by the class (``self.layers[i]``,
        ``layer`` of ``for layer in self.layers``)."""
        member = self.members.get(func.id) if isinstance(func, ast.Name) else \
            _self_attr(func.value) if isinstance(func, ast.Subscript) else None
        if member is not None and self.class_name is not None \
                and self.facts.module_attr(self.class_name, member) == "list":
            return elements_take_any_layout(self.facts, self.class_name, member, position, self.fast)
        return callee_takes_any_layout(self.facts, self.class_name, ast_view, func, position, self.fast)

    def _other_tensor_method(self, func: ast.expr) -> str | None:
        """The name of ``y.add`` in ``y.add(x)``: a known op's method (not in place) of a value
        other than ``self`` or an imported module (``np.add``); else None."""
        if not isinstance(func, ast.Attribute) or func.attr.endswith("_"):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name) and (receiver.id == "self" or receiver.id in self.facts.imported):
            return None
        known = func.attr in MAY_ALIAS or op_tables().op_class(func.attr) is not None or func.attr in READS_INTO_NEW
        return func.attr if known else None

    def _op_layout(self, name: str) -> str | None:
        """How the known op ``name`` reads an operand: FAST, SLOW (it copies a strided one
        first), None if it writes it in place, needs its layout, or is not known."""
        if name.endswith("_") or name in NEEDS_CONTIGUOUS or name == "contiguous":
            return None
        if op_tables().op_class(name) is None and name not in READS_INTO_NEW:
            return None
        return FAST if reads_strided(name) or name in self.fast else SLOW

    def _assigned_layout(self, assign: ast.Assign) -> str | None:
        """``h = x``, ``x = x.transpose(1, 2)``: the name bound holds the tensor, or a view of
        it, from the next statement on: the reads it reaches decide, in its block and then
        after the statements around it (``if dims == 5: x = rearrange(x, ...)``). Unknown in
        a loop's body, whose top it may reach again, or a ``try``'s."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
            return None
        name = assign.targets[0].id
        reads: list[ast.Name] = []
        statement: ast.AST = assign
        while statement is not self.function:
            owner = self.parents.get(id(statement))
            if not isinstance(owner, (ast.If, ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            block = next(b for b in (owner.body, getattr(owner, "orelse", [])) if _holds(b, statement))
            later, bound = self._flow(block[[id(s) for s in block].index(id(statement)) + 1:], name)
            reads += later
            if bound:
                break
            statement = owner
        return self._reads_layout(name, reads)


def _holds(block: list[ast.stmt], statement: ast.AST) -> bool:
    return any(s is statement for s in block)


def _loads(node: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def _stores(node: ast.AST) -> set[str]:
    """The names a simple statement (or a loop's target) binds."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
