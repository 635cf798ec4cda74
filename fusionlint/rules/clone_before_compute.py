"""FL002: ``.clone()`` of a tensor passed to a compute-bound op while the tensor is used again."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, children, Site, StatementRef, count_name, is_elementwise_expr, names_of
from fusionlint.model import FixSafety
from fusionlint.ops import COMPUTE, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, assign, fresh_name, line_of, replace_nodes

_CLONE = re.compile(r"\bclone\(")


class CloneBeforeCompute(Rule):
    code = "FL002"
    name = "clone-before-compute"
    message = "`.clone()` passed to a compute-bound op while the tensor is used again: it keeps a copy alive"
    rationale = """
        A lazy fusing backend writes a tensor to global memory when it is still used after the
        kernel that reads it. Here the tensor is used by a compute-bound op (a matmul or a
        reduction) *and* by later element-wise code, so its value must be materialized, and
        the `.clone()` adds a copy on top: one more write, one more read, and a fused block
        that cannot absorb the element-wise producer. Computing the later element-wise use
        first and passing the tensor itself to the compute-bound op makes that op the
        tensor's last use, so the producer fuses into it on read and nothing is written
        twice (Burn's fusion guide: "cloning a tensor before a compute-bound op keeps it
        alive").

        Not flagged: clones that protect a later in-place write of the tensor (`a.add_()`,
        `a[...] = ...`, `a += ...`, `out=a`), clones in functions that use autograd
        (`backward`, `requires_grad_`, `detach`, `.grad`), and clones of values that are not
        known to be tensors.
    """
    use_instead = """
        Move the later element-wise use above the compute-bound op and pass the tensor without
        cloning it.
    """
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix hoists each later element-wise expression that reads the tensor (`a * b`) into a
        new variable (`tmp`) just before the compute-bound op, and drops the `.clone()`. It is
        offered only when every later read of the tensor sits in such an expression, the
        expressions use only names that keep their values between the two places, and the
        tensor is not read again afterwards. It is **unsafe**: it relies on the static guess
        that these names hold tensors, whose element-wise ops have no side effects, and it
        runs the hoisted expression earlier (so an exception raised by the compute-bound op
        would now come after it, and `tmp` stays alive longer).
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


class Mlp(torch.nn.Module):
    def forward(self, hidden, weight):
        h = F.gelu(hidden)
        out = torch.matmul(h.clone(), weight)
        gate = torch.sigmoid(h) * 0.5  # noqa: E501
        return out * gate
""",
            at=((8, 28),),
            fixed="""\
import torch
import torch.nn.functional as F


class Mlp(torch.nn.Module):
    def forward(self, hidden, weight):
        h = F.gelu(hidden)
        tmp = torch.sigmoid(h) * 0.5
        out = torch.matmul(h, weight)
        gate = tmp  # noqa: E501
        return out * gate
""",
        ),
        Example(  # the later use is itself compute-bound: nothing to move, reported only
            bad="""\
import torch


def scores(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = a.clone() @ w
    return h + a.sum()
""",
            at=((5, 9),),
            fixed=None,
        ),
    )
    valid = (
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


def f(config, arr: np.ndarray):
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
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _CLONE.search(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.autograd:
            return
        for site in scope.sites.get("clone", ()):
            cloned = _cloned_name(scope, site.node)
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
                message=f"`{cloned.value}` is cloned for `{consumer}` and used again later: "
                "compute the later use first and pass it without `.clone()`",
            )


def _cloned_name(scope: Scope, call: cst.Call) -> cst.Name | None:
    if isinstance(call.func, cst.Attribute):
        target = call.func.value
    elif scope.torch_name(call.func) == "torch.clone" and call.args and not call.args[0].keyword:
        target = call.args[0].value
    else:
        return None
    return target if isinstance(target, cst.Name) and target.value in scope.tensors else None


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
            if op is not None and op[1] == COMPUTE and self._takes(node):
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

    def movable(expr: cst.BaseExpression) -> bool:
        reads = names_of(line_of(cst.Expr(expr)))[0]
        return (
            name in reads
            and not isinstance(expr, cst.Name)
            and is_elementwise_expr(scope, expr)
            and not reads & assigned
            and not reads & scope.inplace
        )

    def walk(node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseExpression) and movable(node):
            found.append(node)
            return
        if isinstance(node, cst.Lambda):
            return
        for child in children(node):
            walk(child)

    walk(statement)
    return found
