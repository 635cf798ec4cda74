"""FL040: a Python loop (or a comprehension fed to ``torch.stack``/``torch.cat``) running the same
tensor work once per slice of a dim (``for i in range(n): out[:, i] = f(x[:, i])``) where one
batched op does every slice at once."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, scope_statements
from fusionlint.analysis.nodes import children
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, ELEMENTWISE, MATMULS, VIEW, VIEW_ATTRIBUTES, OpTables
from fusionlint.rule import Example, Rule, Violation

# The text of a candidate: a loop header over a tensor's slices, or a statement (of a loop body or a
# comprehension) that indexes a tensor at a name, ``x[:, i]``, ``x[i, :]``, ``x[..., i:i + 1]``,
# and writes (``out[:, i] =``), appends or joins. A loop over ``range`` is found by its body: its
# header alone would hold every function with a loop.
# The bracket first, then what precedes it: a search that starts with a class of word characters
# tries every position of the file.
_SLICED = r"\[(?<=[\w)\]]\[)[^\]\[]*?(?:,\s*[A-Za-z_]\w*\s*[,\]:]|\[\s*[A-Za-z_]\w*\s*(?:,|:\s*[A-Za-z_]\w*\s*\+\s*1))"
_SLICED_TEXT = re.compile(_SLICED)
_UNBIND_HEADER = re.compile(r"^\s*for\b.*\b(?:unbind|split)\s*\(")
_OUTPUT_TEXT = re.compile(r"^\s*[\w.]+\s*(?:\[.*\]\s*(?:[-+*/]|//)?=[^=]|=[^=]|:)|\.append\s*\(|\b(?:stack|cat|concat|concatenate)\s*\(")
_NEEDLE = re.compile(_SLICED + r"|\bunbind\b|\bsplit\b")
_JOINS = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.concatenate"})
# Ops whose result on the whole tensor differs from the slices' results joined: batch statistics
# (a training batch norm), random draws, a loss averaged over what it is given.
_NOT_BATCHABLE = frozenset({"batch_norm", "dropout", "cross_entropy"})
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
               cst.MatrixMultiply)
_CONSTANTS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)


class LoopOverSlices(Rule):
    code = "FL040"
    name = "loop-over-slices"
    message = "the same tensor work once per slice in a Python loop: one batched op does every slice"
    rationale = """
        A loop that runs the same ops on each slice of a dim, `for i in range(n): out[:, i] =
        f(x[:, i])`, or a comprehension joined by `torch.stack`/`torch.cat` (`torch.stack([x[:,
        i] @ w for i in range(n)], 1)`), launches the work `n` times, and each result is
        written, then copied again into the output or the joined tensor. When every op of the
        body broadcasts along that dim, one call on the whole tensor computes the same values
        in one pass: element-wise work with loop-invariant operands runs on `x` itself, a
        matmul or linear with one weight takes `x` with the dim as a batch dim, a convolution
        takes the slices folded into its batch (or `groups=`), a reduction over the other dims
        reduces `x` once, and operands sliced along the same dim (`x[:, i] * s[i]`) broadcast
        as `x * s[None, :]` (per-slice weights stacked in one tensor: `bmm`/`baddbmm`; the
        modules of an `nn.ModuleList` indexed by the loop, `self.heads[i](x[:, i])`, likewise
        once their weights are one parameter, as SAM's mask decoder could hold its hypernetwork
        MLPs: 13 -> 3 kernels under fusionrt, 33 -> 5 in eager). An
        activation over 8 slices: 16 kernels and 16 writes under fusionrt (32 in eager) -> 1
        and 1; a matmul with a shared weight over 8 slices, 9 -> 1 kernels; a 2-coordinate
        loop, 4 -> 1.

        Flagged: a `for` over `range(...)` (one or two arguments), over `x.unbind(d)` /
        `x.split(1, d)` of a tensor, or over `zip`/`enumerate` of such, whose body only assigns
        temporaries, writes `out[..., i, ...]` (also `op=`) or appends to a list that is then
        joined by `torch.stack`/`torch.cat`; and `torch.stack`/`torch.cat` of a comprehension of
        the same form. The loop index must appear only as a whole index of a tensor (`x[:, i]`,
        `x[..., i:i + 1]`), and every op on a slice must be a torch element-wise op, view,
        reduction, matmul, linear or convolution (a function, method or `torch.nn` module of
        those, or the loop's module of an `nn.ModuleList` the class holds), its other operands
        loop-invariant. Not flagged: a recurrence (a value carried
        from one iteration to the next, `h = f(h, x[:, i])`, `acc += ...`, `x[:, i - 1]`), a call
        of an unknown function or module (it may have side effects or keep state), a host sync
        (`.item()`), a branch in the body, a batch norm or dropout per slice, indexing a list by the
        index (per-slice weights that would have to be stacked on every
        call write more than the loop: 8 matmuls with a list of 8 weights are 9 -> 2 kernels
        but 8 -> 20 KiB written), and loops that only copy slices.
    """
    use_instead = """
        Run the body once on the whole tensor and let the dim broadcast: `torch.sigmoid(x * w +
        b)` for `out[:, i] = torch.sigmoid(x[:, i] * w + b)`, `x @ w` for `torch.stack([x[:, i] @
        w for i in ...], 1)`, `F.conv2d(x.reshape(B * C, 1, H, W), k).reshape(B, C, ...)` (or
        `groups=C` with the kernel expanded) for a convolution per channel, `x.sum(-1)` for a
        stack of per-slice sums, `torch.bmm` over a stacked weight tensor for `x[:, i] @ W[i]`.
    """
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the batched call depends on where the sliced dim lands in each op (a matmul
        needs it as a batch dim, a convolution in its batch or groups, a reduction's dims move
        by one), which the rule does not know from the slices alone.
    """
    examples = (
        Example(
            bad="""\
import torch


def gate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in range(x.shape[1]):
        out[:, i] = torch.sigmoid(x[:, i] * w + b)
    return out
""",
            at=((7, 9),),
            fixed=None,
            good="""\
import torch


def gate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x * w + b)
""",
            call="gate(randn(4, 8, 16), randn(16), randn(16))",
        ),
        Example(  # a shared weight per token, the slices joined by a stack
            bad="""\
import torch


def project(tokens: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.stack([tokens[:, i] @ w for i in range(tokens.shape[1])], dim=1)
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def project(tokens: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return tokens @ w
""",
            call="project(randn(4, 8, 16), randn(16, 32))",
        ),
        Example(  # one filter per channel: the channels folded into the batch
            bad="""\
import torch
import torch.nn.functional as F


def blur(inputs: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    return torch.cat(
        [F.conv2d(inputs[:, c].unsqueeze(1), kernel) for c in range(inputs.shape[1])], dim=1
    )
""",
            at=((6, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def blur(inputs: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    b, c, h, w = inputs.shape
    out = F.conv2d(inputs.reshape(b * c, 1, h, w), kernel)
    return out.reshape(b, c, *out.shape[-2:])
""",
            call="blur(randn(2, 3, 16, 16), randn(1, 1, 5, 5))",
        ),
        Example(  # unbind, appended, stacked; a reduction over the other dims
            bad="""\
import torch
import torch.nn.functional as F


def pooled(frames: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    outs = []
    for frame in frames.unbind(1):
        h = F.gelu(F.linear(frame, w, b))
        outs.append(h.mean(-1))
    return torch.stack(outs, dim=1)
""",
            at=((9, 9),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def pooled(frames: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(F.linear(frames, w, b)).mean(-1)
""",
            call="pooled(randn(4, 6, 16), randn(32, 16), randn(32))",
        ),
        Example(  # one linear layer per mask token, as SAM's mask decoder runs its hypernetwork MLPs
            bad="""\
import torch
from torch import nn


class TokenHeads(nn.Module):
    def __init__(self, w: torch.Tensor, b: torch.Tensor):
        super().__init__()
        self.n = w.shape[0]
        self.heads = nn.ModuleList([nn.Linear(w.shape[1], w.shape[2]) for _ in range(self.n)])
        with torch.no_grad():
            for head, wi, bi in zip(self.heads, w, b):
                head.weight.copy_(wi.t())
                head.bias.copy_(bi)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        outs = []
        for i in range(self.n):
            outs.append(torch.relu(self.heads[i](tokens[:, i])))
        return torch.stack(outs, dim=1)
""",
            at=((18, 13),),
            fixed=None,
            good="""\
import torch
from torch import nn


class TokenHeads(nn.Module):
    def __init__(self, w: torch.Tensor, b: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(w.clone())
        self.bias = nn.Parameter(b[:, None].clone())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.baddbmm(self.bias, tokens.transpose(0, 1), self.weight)).transpose(0, 1)
""",
            call="TokenHeads(randn(4, 32, 16), randn(4, 16))(randn(3, 4, 32))",
        ),
    )
    valid = (
        # a recurrence; an accumulator; a neighbouring slice; an unknown function; a list of weights;
        # a host sync; a branch; a copy of slices only
        """\
import torch


def f(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, ws: list, layers, step):
    for i in range(x.shape[1]):
        h = torch.tanh(x[:, i] @ w + h)
    acc = 0
    for i in range(x.shape[1]):
        acc += x[:, i] * w
    y = torch.empty_like(x)
    for i in range(1, x.shape[1]):
        y[:, i] = y[:, i - 1] * 0.9 + x[:, i]
    a = torch.stack([step(x[:, i]) for i in range(x.shape[1])], 1)
    b = torch.stack([x[:, i] @ ws[i] for i in range(len(ws))], 1)
    c = torch.stack([layers[i](x[:, i]) for i in range(len(layers))], 1)
    outs = []
    for i in range(x.shape[1]):
        if x[:, i].sum().item() > 0:
            outs.append(x[:, i] * 2)
    d = torch.stack([x[:, i] for i in range(x.shape[1])], -1)
    e = torch.stack([x[:, i] * i for i in range(x.shape[1])], 1)
    return h, acc, y, a, b, c, torch.cat(outs), d, e
""",
        # a batch norm per slice (its statistics are the slice's); a list read in the loop
        """\
import torch
import torch.nn.functional as F


def g(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor):
    outs = []
    for t in x.unbind(1):
        outs.append(F.batch_norm(t, rm, rv, training=True))
    ys = []
    for t in x.unbind(1):
        ys.append(t * 2 + (ys[-1] if ys else 0))
    return torch.stack(outs, 1), torch.stack(ys, 1)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _UNBIND_HEADER.match(text):
            return True
        return _SLICED_TEXT.search(text) is not None and _OUTPUT_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if any(_loop_names(scope, target, iterable) is not None for target, iterable in scope.loops):
            yield from self._loops(scope)
        for key in ("stack", "cat", "concat", "concatenate"):
            for site in scope.sites.get(key, ()):
                body = _batchable_join(scope, site.node)
                if body is not None:
                    yield Violation(site.node, message=_message(body))

    def _loops(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            if type(ref.node) is cst.For:
                body = _batchable_loop(scope, ref)
                if body is not None:
                    yield Violation(_first_output(ref.node), message=_message(body), spans=(ref.node,))


def _first_output(loop: cst.For) -> cst.CSTNode:
    """Where a loop's finding points: its first statement that writes a slice or appends one
    (the per-slice work that one batched op replaces)."""
    for statement in loop.body.body:  # type: ignore[union-attr]
        small = statement.body[0]  # type: ignore[attr-defined]  (the body holds simple statements only)
        if isinstance(small, (cst.Expr, cst.AugAssign)) or (
                isinstance(small, cst.Assign) and not isinstance(small.targets[0].target, cst.Name)):
            return small
    return loop


def _message(body: "_Body") -> str:
    """The batched op that does the loop's work, by what the body runs on each slice."""
    if body.modules:
        return ("one `ModuleList` module per slice in a Python loop: stack their weights once as one parameter "
                "and run every slice in one batched op (`baddbmm` for linear layers, one lookup with per-slice "
                "offsets for embeddings)")
    if "conv" in body.kinds:
        return ("the same convolution once per slice in a Python loop: fold the slices into the batch "
                "(or `groups=`) and convolve once")
    if "matmul" in body.kinds:
        return ("the same matmul once per slice in a Python loop: one matmul over the whole tensor does every "
                "slice (the looped dim a batch dim; `bmm` for a weight sliced by the index)")
    return ("the same tensor work once per slice in a Python loop: run it once on the whole tensor, "
            "it broadcasts along the looped dim")


@dataclass
class _Body:
    """What a loop body may do so that one batched call does all of its iterations: the loop
    index read only as an index of tensors, slices only through ops that broadcast."""

    scope: Scope
    indices: frozenset[str]  # names bound to the loop index
    slices: frozenset[str]  # names bound to a slice (``for t in x.unbind(1)``)
    assigned: frozenset[str]  # every name the body binds
    written: frozenset[str]  # tensors written at the index and lists appended to: read by no op
    temps: set[str] = field(default_factory=set)  # temporaries assigned so far
    ops: int = 0  # ops on slices
    modules: bool = False  # a ModuleList's module per slice (``self.mlps[i](x[:, i])``)
    kinds: set[str] = field(default_factory=set)  # "matmul", "conv" for such ops on slices
    sliced: bool = False  # a tensor read at the index

    def varies(self, expr: cst.CSTNode) -> bool:
        """Does ``expr`` read the index, a slice or a temporary (a value of this iteration)?"""
        if isinstance(expr, cst.Name):
            return expr.value in self.indices or expr.value in self.slices or expr.value in self.assigned
        return any(self.varies(child) for child in children(expr))

    def invariant(self, expr: cst.BaseExpression) -> bool:
        """The same value in every iteration, computed by nothing that could have side effects:
        no call but torch ops."""
        if self.varies(expr) or _reads_any(expr, self.written):
            return False
        return all(self.scope.op(node) is not None for node in _calls(expr))

    def value(self, expr: cst.BaseExpression) -> bool:
        """May ``expr`` be computed on the whole tensor instead of on one slice?"""
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in self.indices or name in self.written:
                return False  # the index used as a number; a result read before it is whole
            if name in self.assigned:
                return name in self.temps or name in self.slices
            return True
        if isinstance(expr, _CONSTANTS):
            return True
        if not self.varies(expr):
            return self.invariant(expr)
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in VIEW_ATTRIBUTES and self.value(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            if not isinstance(expr.operator, _ARITHMETIC):
                return False
            self.ops += 1
            if isinstance(expr.operator, cst.MatrixMultiply):
                self.kinds.add("matmul")
            return self.value(expr.left) and self.value(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                return False
            self.ops += 1
            return self.value(expr.expression)
        if isinstance(expr, cst.Call):
            return self.call(expr)
        return False

    def subscript(self, expr: cst.Subscript) -> bool:
        base = expr.value
        at_index = [element for element in expr.slice if _at_index(element.slice, self.indices)]
        if at_index:
            # a tensor the loop does not change, read at the index: one slice of it
            if len(at_index) != 1 or not isinstance(base, cst.Name) or base.value in self.assigned \
                    or base.value in self.written:
                return False
            if not self.scope.is_tensor(base):
                return False  # a list or a ModuleList: per-slice values to stack first
            self.sliced = True
            return all(element is at_index[0] or self.basic(element.slice) for element in expr.slice)
        return self.value(base) and all(self.basic(element.slice) for element in expr.slice)

    def basic(self, index: cst.BaseSlice) -> bool:
        """A view's index with loop-invariant parts: ``:``, ``a:b``, an integer, ``...``, ``None``."""
        if isinstance(index, cst.Slice):
            return all(part is None or self.invariant(part) for part in (index.lower, index.upper, index.step))
        value = index.value
        if isinstance(value, cst.Name) and value.value == "None":
            return True
        return isinstance(value, cst.Ellipsis) or (not isinstance(value, cst.Subscript) and self.invariant(value)
                                                    and not self.scope.is_tensor(value))

    def call(self, expr: cst.Call) -> bool:
        scope = self.scope
        if self.per_slice_module(expr.func):
            self.modules = True
            self.ops += 1
            return all(not arg.star and self.value(arg.value) for arg in expr.args)
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "contiguous" and not expr.args:
            return self.value(expr.func.value)
        op = scope.op(expr) or scope.module_op(expr)
        if op is None or op[0] in _NOT_BATCHABLE or op[1] not in (ELEMENTWISE, COMPUTE, VIEW):
            return False
        if op[1] == COMPUTE and op[0] not in MATMULS and op[0] not in _REDUCTIONS:
            return False
        if any(arg.star for arg in expr.args):
            return False
        if op[1] != VIEW:
            self.ops += 1
        if op[0] in MATMULS:
            self.kinds.add("conv" if op[0].startswith("conv") else "matmul")
        func = expr.func
        if isinstance(func, cst.Attribute) and scope.is_tensor(func.value) and not self.value(func.value):
            return False
        return all(self.value(arg.value) for arg in expr.args)

    def per_slice_module(self, func: cst.BaseExpression) -> bool:
        """``self.mlps[i]``, ``self.mlps`` an ``nn.ModuleList`` of the class: one module per slice,
        whose weights stacked once as parameters serve every slice in one batched matmul."""
        class_name = self.scope.class_name
        if not (class_name and isinstance(func, cst.Subscript) and len(func.slice) == 1
                and isinstance(func.slice[0].slice, cst.Index) and _at_index(func.slice[0].slice, self.indices)):
            return False
        owner = func.value
        return (isinstance(owner, cst.Attribute) and isinstance(owner.value, cst.Name) and owner.value.value == "self"
                and self.scope.facts.module_attr(class_name, owner.attr.value) == "list")

    def statement(self, statement: cst.BaseStatement) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        small = statement.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                name = target.value
                if name in self.indices or name in self.slices or name in self.written:
                    return False
                if name not in self.temps and _reads_any(small.value, {name}):
                    return False  # read before this iteration assigned it: carried over
                ok = self.value(small.value)
                self.temps.add(name)
                return ok
            return self.write(target, small.value)
        if isinstance(small, cst.AugAssign):
            return isinstance(small.target, cst.Subscript) and self.write(small.target, small.value, augmented=True)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name)
                    and len(call.args) == 1 and not call.args[0].keyword and not call.args[0].star):
                return False
            name = func.value.value
            if name in self.assigned or name in self.indices or name in self.slices:
                return False
            return self.value(call.args[0].value)
        return False

    def write(self, target: cst.BaseAssignTargetExpression, value: cst.BaseExpression, augmented: bool = False) -> bool:
        """``out[..., i, ...] = value`` (or ``op=``): each iteration writes its own slice."""
        if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)):
            return False
        name = target.value.value
        if name in self.assigned or name in self.indices or name in self.slices or not self.scope.is_tensor(target.value):
            return False
        at_index = [element for element in target.slice if _at_index(element.slice, self.indices)]
        if len(at_index) != 1 or not all(element is at_index[0] or self.basic(element.slice) for element in target.slice):
            return False
        if augmented:
            self.ops += 1
            self.sliced = True
        return self.value(value)


_REDUCTIONS = frozenset(
    """sum nansum mean nanmean amax amin prod std var norm vector_norm logsumexp softmax log_softmax
    layer_norm rms_norm group_norm normalize""".split()
)


def _at_index(index: cst.BaseSlice, indices: frozenset[str]) -> bool:
    """``i`` or ``i:i + 1``, ``i`` a loop index."""
    if isinstance(index, cst.Index):
        return isinstance(index.value, cst.Name) and index.value.value in indices
    lower, upper = index.lower, index.upper
    return (isinstance(lower, cst.Name) and lower.value in indices and index.step is None
            and isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Add)
            and isinstance(upper.left, cst.Name) and upper.left.value == lower.value
            and isinstance(upper.right, cst.Integer) and upper.right.value == "1")


def _reads_any(node: cst.CSTNode, names: set[str] | frozenset[str]) -> bool:
    if not names:
        return False
    if isinstance(node, cst.Name):
        return node.value in names
    return any(_reads_any(child, names) for child in children(node))


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    if isinstance(node, cst.Call):
        yield node
    for child in children(node):
        yield from _calls(child)


def _slicing_iterable(scope: Scope, expr: cst.BaseExpression) -> bool:
    """``x.unbind(d)``, ``torch.unbind(x, d)`` or ``x.split(1, d)`` of a tensor ``x``."""
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    if isinstance(func, cst.Attribute) and scope.is_tensor(func.value):
        if func.attr.value == "unbind":
            return True
        if func.attr.value == "split":
            return bool(expr.args) and isinstance(expr.args[0].value, cst.Integer) and expr.args[0].value.value == "1"
        return False
    return scope.torch_name(func) == "torch.unbind" and bool(expr.args) and scope.is_tensor(expr.args[0].value)


def _loop_names(scope: Scope, target: cst.BaseExpression, iterable: cst.BaseExpression
                ) -> tuple[frozenset[str], frozenset[str]] | None:
    """(index names, slice names) a loop header binds, or None when it is no loop over slices."""
    if not isinstance(iterable, cst.Call) or not isinstance(target, (cst.Name, cst.Tuple)):
        return None
    func = iterable.func
    name = func.value if isinstance(func, cst.Name) else None
    args = [arg.value for arg in iterable.args]
    if any(arg.keyword or arg.star for arg in iterable.args):
        return None
    if name == "range" and 1 <= len(args) <= 2 and isinstance(target, cst.Name):
        if len(args) == 1 and isinstance(args[0], cst.Integer) and int(args[0].value, 0) < 2:
            return None
        return frozenset({target.value}), frozenset()
    if _slicing_iterable(scope, iterable) and isinstance(target, cst.Name):
        return frozenset(), frozenset({target.value})
    elements = [element.value for element in target.elements] if isinstance(target, cst.Tuple) else []
    if not all(isinstance(element, cst.Name) for element in elements):
        return None
    if name == "zip" and args and len(args) == len(elements) and all(_slicing_iterable(scope, a) for a in args):
        return frozenset(), frozenset(element.value for element in elements)
    if name == "enumerate" and len(args) == 1 and len(elements) == 2 and _slicing_iterable(scope, args[0]):
        return frozenset({elements[0].value}), frozenset({elements[1].value})
    return None


def _bound_in(body: Sequence[cst.BaseStatement]) -> frozenset[str]:
    names: set[str] = set()
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            names.add(target.target.value)
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and isinstance(small.target, cst.Name):
                    names.add(small.target.value)
    return frozenset(names)


def _batchable_loop(scope: Scope, ref: StatementRef) -> "_Body | None":
    """What the loop ``ref`` runs per slice, when one batched call does it all; else None."""
    loop = ref.node
    assert isinstance(loop, cst.For)
    if loop.orelse is not None or loop.asynchronous is not None or not isinstance(loop.body, cst.IndentedBlock):
        return None
    names = _loop_names(scope, loop.target, loop.iter)
    if names is None:
        return None
    statements = loop.body.body
    lists, outputs = _outputs(statements)
    if not lists and not outputs:
        return None
    body = _Body(scope, names[0], names[1], _bound_in(statements), lists | outputs)
    if not all(body.statement(statement) for statement in statements):
        return None
    if not body.ops or not (body.sliced or body.slices):
        return None
    return body if all(_joined_after(scope, ref, name) for name in lists) else None


def _outputs(statements: Sequence[cst.BaseStatement]) -> tuple[frozenset[str], frozenset[str]]:
    """(lists appended to, tensors written through a subscript) by a loop body's statements."""
    lists, tensors = set(), set()
    for statement in statements:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
                    lists.add(func.value.value)
                continue
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                [getattr(small, "target", None)]
            tensors.update(t.value.value for t in targets if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name))
    return frozenset(lists), frozenset(tensors)


def _joined_after(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is the list ``name`` empty before the loop ``ref``, and joined by ``torch.stack``/``cat``
    by the first statement after it that reads it?"""
    before = next((earlier for earlier in ref.earlier() if _reads_any(earlier.node, {name})), None)
    small = before.simple if before is not None else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
    elif isinstance(small, cst.AnnAssign):
        target, value = small.target, small.value
    else:
        return False
    if not (isinstance(target, cst.Name) and isinstance(value, cst.List) and not value.elements):
        return False
    after = next((later for later in ref.later() if _reads_any(later.node, {name})), None)
    if after is None:
        return False
    return any(scope.torch_name(call.func) in _JOINS and call.args and isinstance(call.args[0].value, cst.Name)
               and call.args[0].value.value == name for call in _calls(after.node))


def _batchable_join(scope: Scope, call: cst.CSTNode) -> "_Body | None":
    """What ``torch.stack([f(x[:, i]) for i in range(n)], d)`` (``cat``, a generator too) runs
    per slice, when one batched call does it all; else None."""
    if not (isinstance(call, cst.Call) and scope.torch_name(call.func) in _JOINS and call.args):
        return None
    comprehension = call.args[0].value
    if not isinstance(comprehension, (cst.ListComp, cst.GeneratorExp)):
        return None
    clause = comprehension.for_in
    if clause.inner_for_in is not None or clause.ifs or clause.asynchronous is not None:
        return None
    names = _loop_names(scope, clause.target, clause.iter)
    if names is None:
        return None
    body = _Body(scope, names[0], names[1], frozenset(), frozenset())
    if not body.value(comprehension.elt) or not body.ops or not (body.sliced or body.slices):
        return None
    return body
