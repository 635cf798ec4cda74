"""FL047: tensor work in a loop whose operands the loop never changes (``memory + pos`` passed to
every layer, a mask rebuilt on every decoder step): it runs once per iteration for one result."""
from __future__ import annotations

import ast
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, bound_names, children, per_scope, root_name, scope_statements
from fusionlint.analysis.nodes import code_of, node_types
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, ELEMENTWISE, VIEW, OpTables
from fusionlint.rule import Example, Rule, Violation

_LOOP_TEXT = re.compile(r"\bfor\s|\bwhile[\s(]")
_RANDOM = frozenset(
    """rand rand_like randn randn_like randint randint_like randperm bernoulli multinomial normal poisson
    dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout gumbel_softmax rrelu""".split()
)
# Casts and moves: free when the tensor already has the dtype or device, so no work of their own.
_CASTS = frozenset(
    "to float half double bfloat16 int long bool short type_as type cuda cpu contiguous detach".split()
)
# Fresh buffers: an allocation alone is no work to hoist (and a loop often fills the one it makes).
_ALLOCATIONS = frozenset(
    """zeros ones empty full arange eye linspace logspace tensor as_tensor from_numpy zeros_like ones_like
    empty_like full_like new_zeros new_ones new_empty new_full new_tensor clone""".split()
)
# Torch functions outside the op tables that compute a fresh tensor from their inputs.
_STRUCTURAL = frozenset(
    """cat concat concatenate stack hstack vstack triu tril flip roll repeat repeat_interleave tile cumsum
    cumprod pad interpolate one_hot outer kron diag diag_embed""".split()
)
# Methods that change the container they are called on, and nothing else.
_CONTAINER_METHODS = frozenset("append extend insert pop update add setdefault clear remove discard".split())
_PURE_BUILTINS = frozenset(
    "len range print isinstance int float bool min max abs tuple list zip enumerate str getattr hasattr".split()
)
_BUILTIN_OPS = frozenset("min max abs sum all any pow round divmod".split())
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "T", "mT", "H", "mH", "real", "imag"})
_SKIPPED = node_types(cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.FunctionDef, cst.ClassDef)
_NOT_RUN = node_types(cst.Lambda, cst.FunctionDef, cst.ClassDef)
_BOUND = node_types(cst.AssignTarget, cst.AnnAssign, cst.NamedExpr, cst.For, cst.CompFor)
_UNSURE = node_types(cst.IfExp, cst.BooleanOperation, cst.Yield) | _SKIPPED
_OPERATIONS = node_types(cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)
_PARTS = _OPERATIONS | node_types(cst.Call, cst.Subscript)
_LOOPS = frozenset({cst.For, cst.While})


class LoopInvariantWork(Rule):
    code = "FL047"
    name = "loop-invariant-work"
    message = "tensor work in a loop whose operands the loop never changes: compute it once before the loop"
    rationale = """
        A loop body runs all of its statements on every iteration. Tensor work there whose
        operands the loop never changes, `memory + pos` handed to each of the layers of a
        decoder (`for layer in self.layers: x = layer(x, memory + pos)`, as SAM 2's memory
        attention does in every layer), `keys + key_pe` per block, a padding mask or a scale
        rebuilt on every decoding step from inputs fixed before the loop, produces the same
        result on every iteration: eager PyTorch launches its kernels and writes its result
        once per iteration, where computing it once before the loop writes it once (the
        examples: 16 -> 13, 12 -> 9 and 12 -> 9 kernels in eager). A fusing backend saves as
        much where the work is a reduction or a compute-bound op, or feeds one (a linear layer
        reads the sum as its input: fusionrt 12 -> 9 writes; a mean recomputed per step: 8 -> 2
        kernels); but element-wise work read by element-wise work alone fuses into the kernel
        that reads it, where it costs no write (fusionrt 1 -> 1 kernel): such a finding says it
        pays in eager only.

        Flagged: in a `for` or `while` loop, an expression on the loop body's level (also in an
        `if`, an `if`/`else` expression or a `with` whose condition the loop does not change,
        so that it runs on every iteration or never) that computes a tensor with an
        element-wise, reduction or compute-bound op, or a torch function that builds a tensor
        from others (`cat`, `triu`, `pad`, ...), from operands none of which the loop rebinds
        (its target included), writes in place (`x.add_()`, `x[i] = v`, `out=`) or changes by
        a method call; an expression that reads an attribute (`self.pos`, `p.grad`) also needs
        a loop calling no code that could change it (a method of the object, a function; the
        loop's own layers and torch ops are fine). The outermost such expression of a statement
        is reported. Not flagged: views, casts and moves alone (free, or no-ops when nothing
        changes), allocations (`torch.zeros(n)`: a loop often fills the buffer it makes), a
        result the loop then writes in place, anything calling code other than torch ops
        (a module may draw dropout or keep state), random ops, work in a lambda, comprehension,
        nested loop's own body (reported for that loop), a branch that depends on the
        iteration, or a generator's loop (its caller may change state between iterations).
    """
    training_note = """
        With autograd on, the hoisted value is one tensor that every iteration reads, so its
        gradient is summed over the iterations in kernels of their own where each iteration's
        copy had its own: fusionrt measures the layer example at 39 -> 35 writes and 6.3 -> 5.3
        MB written, but 31 -> 34 kernels (the reduction examples still save: 22 -> 19 and
        16 -> 7 kernels). In training it still saves writes, not always kernels.
    """
    use_instead = "Compute the expression once before the loop, into a name, and read the name in the loop."
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: moving the work before the loop changes when it runs (a loop that runs no
        iteration would now compute it, and an error it raises moves), and a call of unknown
        code in the loop may change an operand through an alias. Hoist it by hand.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def decode(x: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for i in range(4):
        x = x + F.linear(memory + pos, w[i]).mean(1, keepdim=True)
    return x
""",
            at=((7, 26),),
            fixed=None,
            call="decode(randn(8, 1, 64), randn(8, 128, 64), randn(8, 128, 64), randn(4, 64, 64))",
            good="""\
import torch
import torch.nn.functional as F


def decode(x: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    keys = memory + pos
    for i in range(4):
        x = x + F.linear(keys, w[i]).mean(1, keepdim=True)
    return x
""",
        ),
        Example(  # a scale rebuilt on every decoding step from an input fixed before the loop
            bad="""\
import torch


def decode(x: torch.Tensor, ref: torch.Tensor, w: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        scale = torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-6)
        x = torch.tanh((x * scale) @ w)
    return x
""",
            at=((6, 17),),
            fixed=None,
            call="decode(randn(64, 128), randn(64, 128), randn(128, 128), 4)",
            good="""\
import torch


def decode(x: torch.Tensor, ref: torch.Tensor, w: torch.Tensor, steps: int) -> torch.Tensor:
    scale = torch.rsqrt(ref.pow(2).mean(-1, keepdim=True) + 1e-6)
    for _ in range(steps):
        x = torch.tanh((x * scale) @ w)
    return x
""",
        ),
        Example(  # a reduction of a fixed input, under an if the loop does not change
            bad="""\
import torch


def center(x: torch.Tensor, ref: torch.Tensor, norm: bool) -> torch.Tensor:
    for _ in range(4):
        if norm:
            x = torch.tanh(x - ref.mean(0, keepdim=True))
    return x
""",
            at=((7, 32),),
            fixed=None,
            call="center(randn(64, 256), randn(512, 256), True)",
            good="""\
import torch


def center(x: torch.Tensor, ref: torch.Tensor, norm: bool) -> torch.Tensor:
    mu = ref.mean(0, keepdim=True)
    for _ in range(4):
        if norm:
            x = torch.tanh(x - mu)
    return x
""",
        ),
    )
    valid = (
        # operands the loop changes: rebound, the target, written in place, a branch on the iteration
        """\
import torch


def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, n: int):
    for i in range(n):
        x = x * 2
        y = a[i] + b
        a.add_(1)
        c = a * b
        if i == 0:
            d = b.sum()
    while n > 0:
        b[0] = b[0] + 1
        e = b.exp()
        n -= 1
    return x, y, c, d, e
""",
        # views and casts alone; allocations; a result filled in place; random ops; unknown code
        """\
import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor, n: int):
        outs = []
        for layer in self.layers:
            v = m.transpose(0, 1)
            c = m.float()
            buf = torch.zeros(n)
            acc = m * 2
            acc[0] = 0
            noise = torch.randn_like(m) * 0.1
            self.step()
            s = self.scale * 2
            outs.append(layer(x, self.proj(m) + 1))
        return outs, v, c, buf, acc, noise, s
""",
        # in a comprehension or lambda; a generator's loop; Python numbers
        """\
import torch


def g(xs: list, m: torch.Tensor, k: int):
    out = [x + m.exp() for x in xs]
    for x in xs:
        f = lambda: m.exp()
        yield x + m.exp()
    for x in xs:
        z = k * 2 + 1
    return out, f, z
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _LOOP_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index].lstrip()
        if not text.startswith(("for ", "while ", "while(", "async for ")):
            return False
        statements = getattr(block, "body", None)  # the engine's blocks carry their ``ast`` statements
        loop = statements[index] if statements is not None and index < len(statements) else None
        return not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or _may_hold_invariant_work(loop, ops)

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.is_module:
            return
        for ref in scope_statements(scope):
            loop = ref.node
            if type(loop) not in _LOOPS or type(loop.body) is not cst.IndentedBlock:  # type: ignore[attr-defined]
                continue
            effects = _Effects(scope)
            if type(loop) is cst.For:
                effects.bind(loop.target)
                effects.modules.update(bound_names(loop.target))
            effects.walk(loop.body)
            if effects.generator:
                continue
            invariant = _Invariant(scope, effects)
            for statement in _every_iteration(loop.body.body, invariant):
                for node, computed in invariant.outermost(statement):
                    code = code_of(node)  # type: ignore[arg-type]
                    quoted = code if len(code) <= 60 and "\n" not in code else code[:57].split("\n")[0] + "..."
                    both = computed or _holds_compute(scope, node)
                    yield Violation(
                        node,
                        message=f"`{quoted}` reads nothing the loop changes, yet runs on every iteration: "
                        "compute it once before the loop and read the result here (its kernels once instead "
                        "of once per iteration)",
                        pays_in=() if both else (EAGER,),
                    )


class _Effects:
    """What a loop may change: the names it rebinds or writes in place, the names it changes
    through a method, and whether it calls code that may change what an attribute holds."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.changed: set[str] = set()  # rebound, written in place or changed by a method
        self.mutated: set[str] = set()  # written in place or changed by a method (not only rebound)
        self.modules: set[str] = set()  # the loop's targets: layers called in it are modules
        self.unknown_call = False
        self.generator = False

    def bind(self, target: cst.CSTNode) -> None:
        names = bound_names(target)  # type: ignore[arg-type]
        if names:
            self.changed.update(names)
        else:
            self.write(target)

    def write(self, target: cst.CSTNode) -> None:
        name = root_name(target)  # type: ignore[arg-type]
        if name:
            self.changed.add(name)
            self.mutated.add(name)

    def walk(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind in _NOT_RUN:
            return  # defined, not run (calling it later is a call of unknown code)
        if kind is cst.Name:
            return
        if kind is cst.Yield or kind is cst.Await:
            self.generator = True
        elif kind in _BOUND:
            self.bind(node.target)  # type: ignore[attr-defined]
        elif kind is cst.AugAssign:
            self.write(node.target)  # type: ignore[attr-defined]  # a tensor's ``+=`` writes in place
        elif kind is cst.AsName:
            self.bind(node.name)  # type: ignore[attr-defined]
        elif kind is cst.Del:
            self.write(node.target)  # type: ignore[attr-defined]
        elif kind is cst.Global or kind is cst.Nonlocal:
            self.unknown_call = True
        elif kind is cst.Call:
            self.call(node)  # type: ignore[arg-type]
        for child in children(node):
            self.walk(child)

    def call(self, node: cst.Call) -> None:
        scope, func = self.scope, node.func
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                self.write(arg.value)
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method.endswith("_") and not method.startswith("_"):
                self.write(func.value)
                return
            op = scope.op(node)
            if op is not None and op[1] is not None or scope.torch_name(func) is not None:
                return
            if type(func.value) is cst.Name and func.value.value == "self" and scope.class_name \
                    and scope.facts.nn_class(scope.class_name, method):
                return  # a torch.nn layer of the module: changes none of its attributes
            if type(func.value) is cst.Name and func.value.value in self.modules:
                return  # a layer's own method
            self.write(func.value)
            if method not in _CONTAINER_METHODS:
                self.unknown_call = True
        elif type(func) is cst.Name:
            if func.value in _PURE_BUILTINS or func.value in self.modules or scope.torch_name(func) is not None:
                return
            self.unknown_call = True
        elif type(func) is not cst.Subscript:  # ``self.layers[i](x)``: a layer
            self.unknown_call = True


class _Invariant:
    """Which expressions of a loop's body compute tensors from values the loop never changes."""

    def __init__(self, scope: Scope, effects: _Effects) -> None:
        self.scope = scope
        self.effects = effects

    def unchanged(self, expr: cst.CSTNode) -> bool:
        """Reads ``expr`` only values the loop leaves alone (names and, with no unknown call, attributes)?"""
        todo = [expr]
        while todo:
            node = todo.pop()
            kind = type(node)
            if kind is cst.Name:
                if node.value in self.effects.changed:  # type: ignore[attr-defined]
                    return False
                continue
            if kind is cst.Attribute:
                if self.scope.torch_name(node) is not None:  # type: ignore[arg-type]
                    continue
                if self.effects.unknown_call and not (
                    node.attr.value in _METADATA and self.scope.is_tensor(node.value)  # type: ignore[attr-defined]
                ):
                    return False
                todo.append(node.value)  # type: ignore[attr-defined]
                continue
            if kind is cst.Arg:
                todo.append(node.value)  # type: ignore[attr-defined]
                continue
            if kind is cst.Call and type(node.func) is cst.Attribute \
                    and self.scope.torch_name(node.func) is None:  # type: ignore[attr-defined]
                todo.append(node.func.value)  # type: ignore[attr-defined]  # a method's receiver, not its name
                todo.extend(node.args)  # type: ignore[attr-defined]
                continue
            todo.extend(children(node))
        return True

    def work(self, expr: cst.CSTNode) -> bool | None:
        """Does ``expr`` compute a tensor by torch ops alone (True), or only view, cast or allocate
        (False)? None where it calls other code, draws random numbers or is no tensor work."""
        scope, found = self.scope, False
        todo = [expr]
        while todo:
            node = todo.pop()
            kind = type(node)
            if kind in _UNSURE:
                return None
            if kind is cst.Call:
                op = scope.op(node)
                if op is None:
                    return None
                name, kind = op[0], op[1]
                if name in _RANDOM or name.endswith("_") or any(
                    arg.keyword is not None and arg.keyword.value == "out" for arg in node.args
                ):
                    return None
                if kind in (ELEMENTWISE, COMPUTE) and name not in _CASTS or name in _STRUCTURAL:
                    found = True
                elif kind is None and name not in _ALLOCATIONS and name not in _CASTS:
                    return None
                if type(node.func) is cst.Attribute and scope.torch_name(node.func) is None:
                    todo.append(node.func.value)
                todo.extend(arg.value for arg in node.args)
                continue
            if kind in _OPERATIONS and type(getattr(node, "operator", None)) is not cst.Not and scope.is_tensor(node):
                found = True
            todo.extend(children(node))
        return found

    def hoistable(self, expr: cst.BaseExpression) -> bool:
        if type(expr) not in _PARTS:
            return False
        names = {node.value for node in _names(expr)}  # no typing yet: most parts read a changed name
        if names & self.effects.changed or names <= _range_bounds(self.scope):
            return False
        return bool(self.work(expr)) and self.unchanged(expr) and self.scope.is_tensor(expr)

    def outermost(self, statement: cst.BaseStatement) -> Iterator[tuple[cst.CSTNode, bool]]:
        """The outermost loop-invariant tensor work of a simple statement the loop runs, and
        whether it is read by compute-bound work (a matmul, a reduction, a layer)."""
        if type(statement) is not cst.SimpleStatementLine:
            return
        for small in statement.body:  # type: ignore[attr-defined]
            kind = type(small)
            if (kind is cst.Assign or kind is cst.AnnAssign) and small.value is not None:  # type: ignore[attr-defined]
                targets = [t.target for t in small.targets] if kind is cst.Assign else [small.target]  # type: ignore[attr-defined]
                if any(root_name(t) in self.effects.mutated for t in targets):  # type: ignore[arg-type]
                    continue  # a result the loop writes in place: one per iteration is needed
                yield from self._parts(small.value, False)  # type: ignore[attr-defined]
            elif kind is cst.AugAssign or kind is cst.Expr:
                yield from self._parts(small.value, False)  # type: ignore[attr-defined]

    def _parts(self, node: cst.CSTNode, computed: bool) -> Iterator[tuple[cst.CSTNode, bool]]:
        kind = type(node)
        if kind in _SKIPPED or kind is cst.Name:
            return
        if kind in _PARTS and self.hoistable(node):  # type: ignore[arg-type]
            yield node, computed
            return
        if kind is cst.IfExp:
            yield from self._parts(node.test, False)  # type: ignore[attr-defined]
            if self.unchanged(node.test) and self.work(node.test) is not None:  # type: ignore[attr-defined]
                yield from self._parts(node.body, computed)  # type: ignore[attr-defined]
                yield from self._parts(node.orelse, computed)  # type: ignore[attr-defined]
            return
        if kind is cst.BooleanOperation:
            yield from self._parts(node.left, False)  # type: ignore[attr-defined]
            return
        if kind is cst.Attribute or kind is cst.Arg:
            yield from self._parts(node.value, computed)  # type: ignore[attr-defined]
            return
        reads = self._computes(node)
        for child in children(node):
            yield from self._parts(child, reads)

    def _computes(self, node: cst.CSTNode) -> bool:
        """Is ``node`` compute-bound work reading its operands: a matmul, a reduction or another
        compute op, or the call of a layer (the loop's own, ``self.proj``, ``self.layers[i]``)?"""
        kind = type(node)
        if kind is cst.BinaryOperation:
            return type(node.operator) is cst.MatrixMultiply  # type: ignore[attr-defined]
        if kind is not cst.Call:
            return False
        op = self.scope.op(node)
        if op is not None:
            return op[1] == COMPUTE
        func = node.func  # type: ignore[attr-defined]
        return type(func) is cst.Subscript or type(func) is cst.Name and func.value in self.effects.modules or (
            type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
            and self.scope.class_name is not None and self.scope.facts.nn_class(self.scope.class_name, func.attr.value)
            is not None
        ) or self.scope.module_op(node) is not None


def _holds_compute(scope: Scope, expr: cst.CSTNode) -> bool:
    """Does the expression run a compute-bound op itself (a reduction, a matmul, a softmax)?"""
    todo = [expr]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:  # type: ignore[attr-defined]
            return True
        if kind is cst.Call:
            op = scope.op(node)
            if op is not None and op[1] == COMPUTE:
                return True
        todo.extend(children(node))
    return False


_AST_IDENTITY = frozenset({ast.Is, ast.IsNot, ast.In, ast.NotIn})


def _ast_roots(node: ast.AST) -> list[str] | None:
    """The variables an operand reads (``a`` and ``i`` of ``a.b[i].d(e)``, the call's arguments
    not included); None for an operand that reads none, or reads a model's configuration
    (``self.config.n_layers``: Python numbers)."""
    roots: list[str] = []
    todo = [node]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is ast.Name:
            if node.id not in _PURE_BUILTINS and node.id != "config":  # type: ignore[attr-defined]
                roots += (node.id,)  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            if node.attr == "config":  # type: ignore[attr-defined]
                return None
            todo += (node.value,)  # type: ignore[attr-defined]
        elif kind is ast.Subscript:
            todo += (node.value, node.slice)  # type: ignore[attr-defined]
        elif kind is ast.Call:
            todo += (node.func,)  # type: ignore[attr-defined]
        elif kind is ast.Tuple or kind is ast.List:
            todo += node.elts  # type: ignore[attr-defined]
    return roots or None


def _may_hold_invariant_work(loop: ast.For | ast.AsyncFor | ast.While, ops: OpTables) -> bool:
    """Cheap test on the ``ast`` of a loop's body: holds a statement that ``check`` reads (one of
    the body, of an ``if`` or a ``with`` in it) an operation, or a call of an op the tables know,
    whose operands' variables the loop does not assign (the innermost work of a loop-invariant
    expression is one)? The names it sees assigned are a subset of those ``check`` sees
    changed, so it never hides a finding."""
    assigned: set[str] = set()
    targets: list[ast.AST] = [] if type(loop) is ast.While else [loop.target]  # type: ignore[union-attr]
    values: list[ast.AST] = []
    statements = list(loop.body)
    while statements:
        statement = statements.pop()
        kind = type(statement)
        if kind is ast.Assign:
            targets += statement.targets  # type: ignore[attr-defined]
            values += (statement.value,)  # type: ignore[attr-defined]
        elif kind is ast.AnnAssign or kind is ast.AugAssign:
            targets += (statement.target,)  # type: ignore[attr-defined]
            if statement.value is not None:  # type: ignore[attr-defined]
                values += (statement.value,)  # type: ignore[attr-defined]
        elif kind is ast.Expr:
            values += (statement.value,)  # type: ignore[attr-defined]
        elif kind is ast.If:
            statements += statement.body  # type: ignore[attr-defined]
            statements += statement.orelse  # type: ignore[attr-defined]
        elif kind is ast.With:
            statements += statement.body  # type: ignore[attr-defined]
    while targets:  # the roots of what the statements assign (``a`` of ``a``, ``a.b[i]``, ``a, *b``)
        target = targets.pop()
        kind = type(target)
        if kind is ast.Name:
            assigned.add(target.id)  # type: ignore[attr-defined]
        elif kind is ast.Tuple or kind is ast.List:
            targets += target.elts  # type: ignore[attr-defined]
        elif kind is ast.Attribute or kind is ast.Subscript or kind is ast.Starred:
            targets += (target.value,)  # type: ignore[attr-defined]
    work: list[ast.AST] = []
    while values:  # the operations and calls of the values, not inside lambdas or comprehensions
        node = values.pop()
        kind = type(node)
        if kind is ast.BinOp:
            work += (node,)
            values += (node.left, node.right)  # type: ignore[attr-defined]
        elif kind is ast.Call:
            work += (node,)
            values += (node.func,)  # type: ignore[attr-defined]
            values += node.args  # type: ignore[attr-defined]
            for keyword in node.keywords:  # type: ignore[attr-defined]
                values += (keyword.value,)
        elif kind is ast.Compare:
            work += (node,)
            values += (node.left,)  # type: ignore[attr-defined]
            values += node.comparators  # type: ignore[attr-defined]
        elif kind is ast.UnaryOp:
            work += (node,)
            values += (node.operand,)  # type: ignore[attr-defined]
        elif kind is ast.Attribute or kind is ast.Starred:
            values += (node.value,)  # type: ignore[attr-defined]
        elif kind is ast.Subscript:
            values += (node.value, node.slice)  # type: ignore[attr-defined]
        elif kind is ast.Tuple or kind is ast.List:
            values += node.elts  # type: ignore[attr-defined]
        elif kind is ast.IfExp:
            values += (node.test, node.body, node.orelse)  # type: ignore[attr-defined]
        elif kind is ast.BoolOp:
            values += node.values  # type: ignore[attr-defined]
        elif kind is ast.Slice:
            values += [part for part in (node.lower, node.upper, node.step) if part is not None]  # type: ignore[attr-defined]
    for node in work:
        kind = type(node)
        if kind is ast.BinOp:
            operands: tuple[ast.AST, ...] = (node.left, node.right)  # type: ignore[attr-defined]
        elif kind is ast.Compare:
            if any(type(op) in _AST_IDENTITY for op in node.ops) or any(  # type: ignore[attr-defined]
                type(side) is ast.Constant and not isinstance(side.value, (int, float))  # type: ignore[attr-defined]
                for side in node.comparators  # type: ignore[attr-defined]
            ):
                continue  # ``x is None``, ``mode == "add"``: no tensor work
            operands = (node.left, *node.comparators)  # type: ignore[attr-defined]
            if all(type(side) is ast.Constant or _ast_self_member(side) for side in operands):
                continue  # ``self.feature_size == 1``: a setting, no tensor work
        elif kind is ast.UnaryOp:
            if type(node.op) is ast.Not:  # type: ignore[attr-defined]
                continue
            operands = (node.operand,)  # type: ignore[attr-defined]
        else:
            func = node.func  # type: ignore[attr-defined]
            name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
            if type(func) is ast.Name and name in _BUILTIN_OPS:
                continue  # Python's min, max, abs, sum
            if not (ops.op_class(name) in (ELEMENTWISE, COMPUTE) or name in _STRUCTURAL):
                continue
            operands = (*node.args, *(k.value for k in node.keywords))  # type: ignore[attr-defined]
            if type(func) is ast.Attribute:
                operands += (func.value,)
        reads: list[str] = []
        for operand in operands:
            roots = _ast_roots(operand)
            if roots:
                reads += roots
        if reads and assigned.isdisjoint(reads):
            return True
    return False


def _ast_self_member(node: ast.AST) -> bool:
    """``self.a.b``: a member, in a comparison a setting."""
    while type(node) is ast.Attribute:
        node = node.value  # type: ignore[attr-defined]
    return type(node) is ast.Name and node.id == "self"  # type: ignore[attr-defined]


def _names(expr: cst.CSTNode) -> Iterator[cst.Name]:
    """The variables an expression reads (not attribute names, keywords or torch's functions)."""
    todo = [expr]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is cst.Name:
            yield node  # type: ignore[misc]
        elif kind is cst.Attribute or kind is cst.Arg:
            todo.append(node.value)  # type: ignore[attr-defined]
        else:
            todo.extend(children(node))


@per_scope
def _range_bounds(scope: Scope) -> frozenset[str]:
    """Names a ``for`` of the scope hands to ``range`` (``for i in range(steps)``): Python ints, even
    where an unannotated ``forward`` argument passes for a tensor."""
    found: set[str] = set()
    for _, iterable in scope.loops:
        if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "range":  # type: ignore[attr-defined]
            found.update(arg.value.value for arg in iterable.args if type(arg.value) is cst.Name)  # type: ignore[attr-defined]
    return frozenset(found)


def _every_iteration(statements: Sequence[cst.BaseStatement], invariant: _Invariant) -> Iterator[cst.BaseStatement]:
    """The statements a loop body runs on every iteration (or, under a condition the loop does not
    change, on none): its own, and those of a ``with`` or of an ``if`` whose test is unchanged."""
    for statement in statements:
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            yield statement
        elif kind is cst.With and type(statement.body) is cst.IndentedBlock:  # type: ignore[attr-defined]
            yield from _every_iteration(statement.body.body, invariant)
        elif kind is cst.If and invariant.unchanged(statement.test) \
                and invariant.work(statement.test) is not None:
            if type(statement.body) is cst.IndentedBlock:
                yield from _every_iteration(statement.body.body, invariant)
            orelse = statement.orelse
            if type(orelse) is cst.Else and type(orelse.body) is cst.IndentedBlock:  # type: ignore[union-attr]
                yield from _every_iteration(orelse.body.body, invariant)
            elif type(orelse) is cst.If:
                yield from _every_iteration([orelse], invariant)
