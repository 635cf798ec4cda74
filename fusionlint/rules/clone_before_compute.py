"""FL002: a copy (``.clone()``, ``.detach().clone()``, ``.contiguous()`` of a fresh result) of a
tensor passed to a compute-bound op while the tensor is used again."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope, Site, StatementRef, children, count_name, is_elementwise_expr, is_method_call, names_of, reaching_value,
)
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import FUSED_REDUCTIONS, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, assign, fresh_name, line_of, replace_nodes

_COPY = re.compile(r"\b(?:clone|contiguous)\s*\(")


class CloneBeforeCompute(Rule):
    code = "FL002"
    name = "clone-before-compute"
    message = "a copy of a tensor passed to a fused reduction while the tensor is used again later: it keeps it alive"
    rationale = """
        A lazy fusing backend writes a tensor to global memory when it is still used after the
        kernel that reads it. Here the tensor is read by a reduction that fuses the block before
        it on read (`sum`, `mean`, `amax`, `softmax`, `layer_norm`, ...) through a copy
        (`.clone()`, `.detach().clone()`, or `.contiguous()` of a fresh element-wise result,
        which is already contiguous) *and* by later element-wise code. The later use keeps the
        tensor, and every element-wise value it is combined with, alive across the reduction,
        so they are all written (`a = x * 2`, `b = y + 1`, then `t3 + a * b`: `a` and `b` are
        both written; fusionrt 4 -> 3 writes once `a * b` moves up). Computing the later
        element-wise use first and passing the tensor itself makes the reduction its last use:
        the producer fuses into it on read and only the combined value crosses it (Burn's
        fusion guide: "cloning a tensor before a compute-bound op keeps it alive"). The copy
        itself is a dead temporary of the fused block; the rule points at the pattern it
        comes with.

        Not flagged: copies passed to a matmul or convolution (its input is written anyway,
        and a later use hoisted above it would be kept alive across it instead: fusionrt shows
        no saving), copies that protect a later in-place write of the tensor (`a.add_()`,
        `a[...] = ...`, `a += ...`, `out=a`), copies in functions that use autograd
        (`backward`, `requires_grad_`, a `detach` not cloned at once, `.grad`), `.contiguous()`
        of anything but a fresh element-wise result (a transposed input really is copied), and
        copies of values that are not known to be tensors.
    """
    use_instead = """
        Move the later element-wise use above the reduction and pass the tensor without
        the copy (`a`, or `a.detach()` for `a.detach().clone()`).
    """
    fix_safety = FixSafety.UNSAFE
    pays_in = (FUSIONRT, EAGER)
    fix_notes = """
        The fix hoists each later element-wise expression that reads the tensor (`a * b`) into a
        new variable (`tmp`) just before the reduction, and drops the copy: `.clone()`
        and `.contiguous()` go, `.detach().clone()` keeps `.detach()`, so no gradient flows
        where none did. It is offered only when every later read of the tensor sits in such an
        expression, the expressions use only names that keep their values between the two
        places, and the tensor is not read again afterwards. It is **unsafe**: it relies on the
        static guess that these names hold tensors, whose element-wise ops have no side
        effects, and it runs the hoisted expression earlier (so an exception raised by the
        reduction would now come after it, and `tmp` stays alive longer).
    """
    examples = (
        Example(
            bad="""\
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    out = t3 + a * b
    return out
""",
            at=((7, 10),),
            fixed="""\
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    tmp = a * b
    t3 = a.sum(-1, keepdim=True)
    out = t3 + tmp
    return out
""",
            call="block(randn(64, 128), randn(64, 128))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


class GatedNorm(torch.nn.Module):
    def forward(self, hidden, gate_in):
        h = F.gelu(hidden)
        g = torch.sigmoid(gate_in)
        normed = F.layer_norm(h.clone(), (128,))
        return normed + h * g  # noqa: E501
""",
            at=((9, 31),),
            fixed="""\
import torch
import torch.nn.functional as F


class GatedNorm(torch.nn.Module):
    def forward(self, hidden, gate_in):
        h = F.gelu(hidden)
        g = torch.sigmoid(gate_in)
        tmp = h * g
        normed = F.layer_norm(h, (128,))
        return normed + tmp  # noqa: E501
""",
            call="GatedNorm().forward(randn(64, 128), randn(64, 128))",
        ),
        Example(  # `.detach().clone()`: the fix keeps `.detach()`
            bad="""\
import torch


def norm_gap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    total = a.detach().clone().sum(-1, keepdim=True)
    return total - a * b
""",
            at=((7, 13),),
            fixed="""\
import torch


def norm_gap(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    tmp = a * b
    total = a.detach().sum(-1, keepdim=True)
    return total - tmp
""",
            call="norm_gap(randn(64, 128), randn(64, 128))",
        ),
        Example(  # `.contiguous()` of a fresh element-wise result is a no-op that keeps `a` alive
            bad="""\
import torch


def scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    b = y * 0.5
    peak = a.contiguous().amax(-1, keepdim=True)
    return a * b / peak
""",
            at=((7, 12),),
            fixed="""\
import torch


def scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    b = y * 0.5
    tmp = a * b
    peak = a.amax(-1, keepdim=True)
    return tmp / peak
""",
            call="scaled(randn(64, 128), randn(64, 128))",
        ),
    )
    valid = (
        # a copy passed to a matmul: its input is written anyway, nothing to save by reordering
        """\
import torch


def scores(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = a.clone() @ w
    return h + a * 2
""",
        # `.contiguous()` of a transposed input really copies; of a value from elsewhere: unknown
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = x.t().contiguous().sum(-1)
    z = y.contiguous().sum(-1)
    return s + x.t() * 2 + z + y
""",
        # `.detach().clone()` protecting an in-place update, or next to `backward`
        """\
import torch


def f(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    old = p.detach().clone().sum()
    p.sub_(g)
    return old + p * 2


def g(a: torch.Tensor) -> torch.Tensor:
    loss = a.detach().clone().sum()
    (a * 2).sum().backward()
    return loss + a * 2
""",
        # the clone protects a later in-place write
        """\
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    t = a.clone().sum(-1)
    a.add_(1)
    return t + a
""",
        """\
import torch


def f(a: torch.Tensor, i: int) -> torch.Tensor:
    t = a.clone().sum()
    a[i] = 0
    return t + a
""",
        """\
import torch


def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    t = torch.matmul(a.clone(), b)
    torch.mul(b, 2, out=a)
    return t + a
""",
        # needed for autograd
        """\
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    loss = a.clone().sum()
    loss.backward()
    return loss + a
""",
        # not used again afterwards: the clone is wasted but keeps nothing alive
        """\
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    return a.clone().sum(-1)
""",
        # not a tensor (a config object, a NumPy array)
        """\
import numpy as np
import torch


def f(config: "Config", arr: np.ndarray):
    total = config.clone().sum()
    s = arr.copy().sum()
    return total + config.scale + s + arr
""",
        # a file that never imports torch
        """\
def block(x: "Tensor", y: "Tensor"):
    a = x * 2
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * y
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _COPY

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _COPY.search(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.autograd:
            return
        for site in (*scope.sites.get("clone", ()), *scope.sites.get("contiguous", ())):
            cloned = _copied_name(scope, site)
            if cloned is None or cloned.value in scope.inplace:
                continue
            if cloned.value in names_of(site.statement.node)[1]:
                continue  # `a = a.clone().sum()`: the old value is not used again
            consumer = _compute_consumer(scope, site)
            if consumer is None:
                continue
            later = _later_reads(site.statement, cloned.value)
            if not later and count_name(site.statement.node, cloned.value) < 2:
                continue
            yield Violation(
                site.node,
                fix=_fix(scope, site, cloned.value, later),
                message=f"`{cloned.value}` is {_copy_kind(site.node)} for `{consumer}` and used again later: "
                "compute the later use first and pass it without the copy",
            )


def _copied_name(scope: Scope, site: Site) -> cst.Name | None:
    """The tensor variable copied by ``x.clone()``, ``torch.clone(x)``, ``x.detach().clone()``, or
    ``x.contiguous()`` where ``x`` is a fresh element-wise result (so already contiguous)."""
    call = site.node
    if isinstance(call.func, cst.Attribute):
        target = call.func.value
        if is_method_call(target, "detach"):
            target = target.func.value  # type: ignore[union-attr]
    elif scope.torch_name(call.func) == "torch.clone" and call.args and not call.args[0].keyword:
        target = call.args[0].value
    else:
        return None
    if not isinstance(target, cst.Name) or target.value not in scope.tensors:
        return None
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "contiguous":
        fresh = reaching_value(site.statement, target.value)
        if fresh is None or isinstance(fresh, cst.Name) or not is_elementwise_expr(scope, fresh):
            return None
    return target


def _copy_kind(call: cst.Call) -> str:
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "contiguous":
        return "made `.contiguous()` (a fresh element-wise result already is)"
    if isinstance(call.func, cst.Attribute) and is_method_call(call.func.value, "detach"):
        return "copied with `.detach().clone()`"
    return "cloned"


def _compute_consumer(scope: Scope, site: Site) -> str | None:
    """The compute-bound op that takes the clone directly as an operand, by name."""
    finder = _ConsumerFinder(scope, site.node)
    site.statement.node.visit(finder)
    return finder.found


class _ConsumerFinder(cst.CSTVisitor):
    def __init__(self, scope: Scope, operand: cst.CSTNode) -> None:
        super().__init__()
        self.scope = scope
        self.operand = operand
        self.found: str | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None:
            return False
        if isinstance(node, (cst.Call, cst.BinaryOperation)):
            op = self.scope.op(node)
            if op is not None and op[0] in FUSED_REDUCTIONS and self._takes(node):
                self.found = op[0]
                return False
        return True

    def _takes(self, node: cst.Call | cst.BinaryOperation) -> bool:
        if isinstance(node, cst.BinaryOperation):
            return node.left is self.operand or node.right is self.operand
        if isinstance(node.func, cst.Attribute) and node.func.value is self.operand:
            return True
        return any(arg.value is self.operand for arg in node.args)


def _later_reads(ref: StatementRef, name: str) -> list[StatementRef]:
    """Later statements of the block that read ``name``, up to its next assignment."""
    reads = []
    for later in ref.later():
        used, assigned = names_of(later.node)
        if name in used:
            reads.append(later)
        if name in assigned:
            break
    return reads


def _fix(scope: Scope, site: Site, name: str, later: list[StatementRef]) -> tuple[StatementEdit, ...] | None:
    ref = site.statement
    call = site.node
    clone_args = call.args if isinstance(call.func, cst.Attribute) else call.args[1:]
    if site.conditional or ref.simple is None or not later or clone_args:
        return None
    if count_name(ref.node, name) != 1 or scope.read_after(later[-1], name):
        return None
    hoisted: list[cst.SimpleStatementLine] = []
    edits: list[StatementEdit] = []
    names: list[str] = []
    for use in later:
        if use.simple is None or not _straight(ref, use):
            return None
        replacements = {}
        for expr in _hoistable(scope, use.simple, name, _assigned_between(ref, use)):
            tmp = fresh_name(scope, "tmp", names)
            names.append(tmp)
            hoisted.append(assign(tmp, expr))
            replacements[expr] = cst.Name(tmp)
        new_use = replace_nodes(use.node, replacements)
        if name in names_of(new_use)[0]:
            return None  # a read of the tensor that cannot move
        edits.append(StatementEdit(use.node, (new_use,)))
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else call.args[0].value
    without_clone = replace_nodes(ref.node, {call: receiver.with_changes(lpar=call.lpar, rpar=call.rpar)})
    return (StatementEdit(ref.node, (*hoisted, without_clone)), *edits)


def _straight(ref: StatementRef, use: StatementRef) -> bool:
    """Only simple statements between the two (no branch can skip or repeat part of the way)."""
    return all(
        isinstance(ref.block.statements[i], cst.SimpleStatementLine) for i in range(ref.index, use.index)
    )


def _assigned_between(ref: StatementRef, use: StatementRef) -> set[str]:
    """Names assigned between ``ref`` (included) and ``use`` (excluded): they may not move up."""
    assigned: set[str] = set()
    for i in range(ref.index, use.index):
        assigned |= names_of(ref.block.statements[i])[1]
    return assigned


def _hoistable(scope: Scope, statement: cst.BaseSmallStatement, name: str, assigned: set[str]) -> list:
    """Maximal element-wise subexpressions reading ``name`` that can be computed earlier."""
    found: list[cst.BaseExpression] = []
    _add_hoistable(scope, statement, name, assigned, found)
    return found


def _add_hoistable(scope: Scope, node: cst.CSTNode, name: str, assigned: set[str], found: list) -> None:
    if isinstance(node, cst.BaseExpression) and _movable(scope, node, name, assigned):
        found.append(node)
        return
    if isinstance(node, cst.Lambda):
        return
    for child in children(node):
        _add_hoistable(scope, child, name, assigned, found)


def _movable(scope: Scope, expr: cst.BaseExpression, name: str, assigned: set[str]) -> bool:
    reads = names_of(line_of(cst.Expr(expr)))[0]
    return (
        name in reads
        and not isinstance(expr, cst.Name)
        and is_elementwise_expr(scope, expr)
        and not reads & assigned
        and not reads & scope.inplace
    )
