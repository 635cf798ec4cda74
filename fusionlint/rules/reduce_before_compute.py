"""FL008: a reduction computed after a matmul, combined with its result, although its input existed
before the matmul: computed first, the matmul's epilogue absorbs the combination."""
from __future__ import annotations

import re
from typing import Callable, Iterator, Sequence

import libcst as cst

from fusionlint.analysis import ComputeSite, Scope, StatementRef, children, compute_statements, names_of
from fusionlint.model import FUSIONRT, FixSafety
from fusionlint.ops import FUSED_REDUCTIONS, MATMULS, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, assign, fresh_name, replace_nodes

# Convolutions are left out: fusionrt measured a channel mean moved above a conv2d at one more
# write (3 -> 4), as the convolution does not take its input's producer on read.
_MATMULS = frozenset({name for name in MATMULS if not name.startswith("conv")} | {"@"})
_REDUCTION = re.compile(r"\b(?:" + "|".join(sorted(FUSED_REDUCTIONS)) + r")\s*\(")


class ReduceBeforeCompute(Rule):
    code = "FL008"
    name = "reduce-before-compute"
    message = "a reduction computed after a matmul and combined with its result: compute it first"
    rationale = """
        A lazy fusing backend runs the element-wise code that reads a matmul's result as the
        matmul's epilogue, in the same kernel, so the result is never written on its own. A reduction (`sum`, `mean`, `amax`, `softmax`, `layer_norm`, ...) is
        a kernel of its own: when it runs *after* the op and its result is combined with the
        op's (`h + a.sum(-1, keepdim=True)`), the op's result must be written, and read back by
        the kernel that combines them. When the reduction's input already exists before the op,
        computing the reduction first makes its result an ordinary operand of the epilogue:
        fusionrt measures `a = torch.tanh(x); h = a @ w; h + a.sum(-1, keepdim=True)` at 3
        writes in 3 kernels, and 2 in 2 with the sum computed before the matmul (96 -> 32 KiB
        written), the same for a softmax next to `F.linear` and for a reduction of an input
        (torch_geometric's `DenseSAGEConv`: `out = adj @ x; out = out / adj.sum(-1,
        keepdim=True).clamp(min=1)`, 5 -> 4 writes and kernels with the degree computed first).

        Flagged: a fused reduction after a statement holding a matmul (`@`, `matmul`, `bmm`,
        `einsum`, `F.linear`, ...) in the same block, with only simple statements between, that reads nothing
        assigned from the op's statement on, whose result an arithmetic operation or a call
        combines with the op's result (in the same statement, or through the name it is
        assigned to). Not flagged: a reduction of the op's result or of anything computed
        after the op; one only handed out next to the op's result (`return h, s`: for an input,
        nothing to save); across a branch or loop boundary; in a function that writes tensors
        in place; after a convolution (fusionrt measured a channel mean moved above `conv2d`
        at 3 -> 4 writes).
    """
    use_instead = "Compute the reduction before the matmul, where its input already exists."
    fix_safety = FixSafety.UNSAFE
    pays_in = (FUSIONRT,)
    fix_notes = """
        The fix computes the reduction into a new variable (`red`) just before the matmul's
        statement and uses the variable where the reduction was (a reduction that was a whole
        assignment moves as it is). It is **unsafe**: it relies on the static guess that the
        names hold tensors, whose reductions have no side effects, and it runs the reduction
        earlier, so an exception the op raises now comes after it, and the reduction's result
        stays alive across the op (a small tensor: one value per row).
    """
    training_note = """
        With autograd on, backward of the combination can need the matmul's result itself
        (`h * gate`: the gradient of `gate` is `grad * h`), so `h` is written anyway, and the
        reduction moved before the matmul must now be written too, as an operand of the
        matmul's epilogue, where the original fused it into the kernel that combines them.
        The second example as a training step: 10 -> 12 writes, 288 -> 352 KiB, 7 -> 6
        kernels. A combination whose backward needs no operand (`h + a.sum(-1, keepdim=True)`)
        still saves.
    """
    examples = (
        Example(
            bad="""\
import torch


def centered_scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    return h + a.sum(-1, keepdim=True)
""",
            at=((7, 16),),
            fixed="""\
import torch


def centered_scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    red = a.sum(-1, keepdim=True)
    h = a @ w
    return h + red
""",
            call="centered_scores(randn(64, 128), randn(128, 128))",
        ),
        Example(  # a whole assignment moves up as it is
            bad="""\
import torch
import torch.nn.functional as F


def gated(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = F.gelu(x * 2)
    h = F.linear(a, w)
    gate = torch.softmax(a, -1)
    return h * gate
""",
            at=((8, 12),),
            fixed="""\
import torch
import torch.nn.functional as F


def gated(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = F.gelu(x * 2)
    gate = torch.softmax(a, -1)
    h = F.linear(a, w)
    return h * gate
""",
            call="gated(randn(64, 128), randn(128, 128))",
        ),
    )
    valid = (
        # the reduction reads the op's result, or a value computed after the op
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    b = torch.tanh(x) * 2
    return h + h.sum(-1, keepdim=True) + b.amax(-1, keepdim=True)
""",
        # the reduction's result is only handed out next to the op's (of an input: nothing to save)
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    s = x.sum(-1)
    return h, s
""",
        # a branch between the op and the reduction; an in-place write of the input
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, flag: bool) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    if flag:
        h = h * 2
    return h + a.sum(-1, keepdim=True)


def g(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    a.mul_(2)
    return h + a.sum(-1, keepdim=True)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _REDUCTION

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _REDUCTION.search(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.inplace or scope.dynamic:
            return
        compute = compute_statements(scope, _MATMULS)
        for key in sorted(FUSED_REDUCTIONS):
            for site in scope.sites.get(key, ()):
                op = scope.op(site.node)
                if op is None or op[0] not in FUSED_REDUCTIONS or site.conditional or site.statement.simple is None:
                    continue
                before = _movable_above(scope, site.statement, site.node, compute)
                if before is None:
                    continue
                yield Violation(site.node, fix=_fix(scope, before, site.statement, site.node), spans=(before.ref.node,))


def _movable_above(
    scope: Scope, ref: StatementRef, reduction: cst.CSTNode, compute: dict[int, ComputeSite]
) -> ComputeSite | None:
    """The nearest matmul statement before ``ref`` in its block that the reduction can move
    above, when the reduction's result meets the op's result."""
    reads = _reads(reduction)
    assigned: set[str] = set()
    for earlier in ref.earlier():
        if not isinstance(earlier.node, cst.SimpleStatementLine):
            return None
        assigned |= names_of(earlier.node)[1]
        if reads & assigned:
            return None
        site = compute.get(id(earlier.node))
        if site is not None:
            results = names_of(earlier.node)[1]
            return site if results and _meets(ref, reduction, results) else None
    return None


def _meets(ref: StatementRef, reduction: cst.CSTNode, results: frozenset[str]) -> bool:
    """Is the reduction's value combined with the op's result by an operation (not only handed
    out next to it): in its own statement, or through the name it is assigned to?"""
    if _combined(ref.node, results, lambda node: node is reduction):
        return True
    name = ref.name_bound_to(reduction)
    if name is None:
        return False
    for later in ref.later():
        reads, defs = names_of(later.node)
        if name in reads:
            return _combined(later.node, results, lambda node: isinstance(node, cst.Name) and node.value == name)
        if defs & (results | {name}):
            return False
    return False


def _combined(statement: cst.CSTNode, results: frozenset[str], is_value: Callable[[cst.CSTNode], bool]) -> bool:
    """Does an arithmetic operation or a call in ``statement`` take both the value and a result?"""
    return _reads_both(statement, results, is_value)[2]


def _reads_both(node: cst.CSTNode, results: frozenset[str],
                is_value: Callable[[cst.CSTNode], bool]) -> tuple[bool, bool, bool]:
    """Whether ``node`` reads the value, whether it reads a result, and whether an arithmetic
    operation or a call in it takes both."""
    if is_value(node):
        return True, False, False
    if isinstance(node, cst.Name):
        return False, node.value in results, False
    value = result = combined = False
    for child in children(node):
        v, r, c = _reads_both(child, results, is_value)
        value, result, combined = value or v, result or r, combined or c
    return value, result, combined or value and result and isinstance(node, (cst.BinaryOperation, cst.Call))


def _reads(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    _add_reads(node, found)
    return found


def _add_reads(node: cst.CSTNode, found: set[str]) -> None:
    if isinstance(node, cst.Name):
        found.add(node.value)
    if isinstance(node, (cst.Attribute, cst.Arg)):
        _add_reads(node.value, found)
        return
    for child in children(node):
        _add_reads(child, found)


def _fix(scope: Scope, site: ComputeSite, ref: StatementRef, reduction: cst.CSTNode) -> tuple[StatementEdit, ...]:
    small = ref.simple
    if isinstance(small, cst.Assign) and small.value is reduction:
        return (StatementEdit(ref.node, ()), StatementEdit(site.ref.node, (ref.node, site.ref.node)))
    name = fresh_name(scope, "red")
    hoisted = assign(name, reduction)  # type: ignore[arg-type]
    return (
        StatementEdit(site.ref.node, (hoisted, site.ref.node)),
        StatementEdit(ref.node, (replace_nodes(ref.node, {reduction: cst.Name(name)}),)),
    )
