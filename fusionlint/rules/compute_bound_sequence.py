"""FL006: element-wise work between two convolutions that could join the work on either side."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    ComputeSite,
    Scope,
    StatementRef,
    children,
    compute_statements,
    elementwise_assignment,
    is_elementwise_expr,
    names_of,
)
from fusionlint.model import FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, VIEW, OpTables
from fusionlint.rule import Example, Rule, Violation

# The compute-bound ops fusionrt runs on torch's kernels with nothing fused on either side
# (docs/semantics.md 3.8): the element-wise code before and after each forms blocks of its own.
# Matmuls are not here: fusionrt fuses element-wise work into them on read and on write, which
# makes the work between two matmuls part of one of them.
_UNFUSED = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
_UNFUSED_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(_UNFUSED)))


class ComputeBoundSequence(Rule):
    code = "FL006"
    name = "compute-bound-sequence"
    message = "element-wise work between two compute-bound ops runs as a kernel of its own: group it on one side"
    rationale = """
        Burn's fusion guide: "multiple compute-bound operations in a sequence can reduce fusion
        potential". A lazy fusing backend runs a compute-bound op on its own kernel and fuses
        the element-wise code around it into blocks; element-wise statements *between* two such
        ops form one more kernel, and each value they pass on is written. When every one of
        them either does not need the first op (it can run before it, in the element-wise
        block there) or is not needed by the second (it can run after it, in the element-wise
        block there), that kernel disappears, and values moved after the second op fuse with
        their consumers instead of being written.

        Scoped to what fusionrt measures: convolutions (`conv1d/2d/3d`, `conv_transpose*`),
        which it runs on torch's kernels with nothing fused on either side but a ReLU of the
        result (cuDNN's fused convolution-bias-ReLU; not flagged when it is all the work
        between two convolutions). Two convolutions
        with an element-wise statement between them that could join the block before the
        first: 5 -> 4 kernels; an activation of the first one's output that could join the
        block after the second: 4 -> 3 writes and kernels. Not flagged: matmuls (fusionrt fuses
        element-wise work into a matmul on read and on write, so the work between two matmuls
        is part of one of them, and moving it costs more), reductions (element-wise work between
        two reductions over the same rows is fused on read), work that needs the first op's
        result *and* feeds the second (a conv - activation - conv stack: nothing can move), and
        moves that find no element-wise work to join on the other side (the kernel only
        changes place).
    """
    use_instead = """
        Compute element-wise work that does not need the first op before it, next to the
        element-wise work already there, and element-wise work the second op does not need
        after it.
    """
    fix_safety = FixSafety.NONE
    pays_in = (FUSIONRT,)
    # A statement between the two that FL003 moves, with a fix.
    yields_to = frozenset({"FL003"})
    fix_notes = """
        No fix. Moving the statements is the reordering FL003 does, but here it spans several
        statements in two directions, and whether the moved work really joins the blocks on
        either side depends on shapes the linter cannot see (a statement of another shape
        forms its own kernel wherever it goes); the message names what could move where.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def two_branches(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = img * 2
    c1 = F.conv2d(a, k1, padding=1)
    g = other + 1
    c2 = F.conv2d(g, k2, padding=1)
    return c1 + c2
""",
            at=((8, 5),),
            fixed=None,
            call="two_branches(randn(2, 8, 16, 16), randn(2, 8, 16, 16), randn(8, 8, 3, 3), randn(8, 8, 3, 3))",
            good="""\
import torch
import torch.nn.functional as F


def two_branches(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = img * 2
    g = other + 1
    c1 = F.conv2d(a, k1, padding=1)
    c2 = F.conv2d(g, k2, padding=1)
    return c1 + c2
""",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def towers(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(img, k1, padding=1)
    o1 = torch.sigmoid(c1)
    c2 = F.conv2d(other, k2, padding=1)
    return o1 + c2
""",
            at=((7, 5),),
            fixed=None,
            call="towers(randn(2, 8, 16, 16), randn(2, 8, 16, 16), randn(8, 8, 3, 3), randn(8, 8, 3, 3))",
            good="""\
import torch
import torch.nn.functional as F


def towers(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(img, k1, padding=1)
    c2 = F.conv2d(other, k2, padding=1)
    o1 = torch.sigmoid(c1)
    return o1 + c2
""",
        ),
    )
    valid = (
        # a ReLU of the first conv's result runs in the conv's kernel: nothing to move
        """\
import torch
import torch.nn.functional as F


def towers(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(img, k1, padding=1)
    o1 = torch.relu(c1)
    c2 = F.conv2d(other, k2, padding=1)
    return o1 + c2
""",
        # a conv stack: the activation needs the first conv and feeds the second
        """\
import torch
import torch.nn.functional as F


def stack(x: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor) -> torch.Tensor:
    h = F.conv2d(x, k1, padding=1)
    h = F.relu(h)
    return F.conv2d(h, k2, padding=1)
""",
        # nothing to join before the first conv: the kernel would only change place
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(x, k1)
    g = y + 1
    c2 = F.conv2d(g, k2)
    return c1, c2
""",
        # the first conv has an element-wise epilogue in its own statement: the work between
        # joins that block already
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor, b: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1) + b
    g = y + 1
    c2 = F.conv2d(g, k2)
    return c1 + c2
""",
        # the second conv computes its operand in its own statement: the work between joins it
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = y + 1
    c2 = F.conv2d(g * g, k2)
    return c1 + c2
""",
        # matmuls fuse the work around them on read and on write
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    a = x * 3
    h1 = a @ w1
    g = y * 2
    h2 = g @ w2
    return h1 + h2
""",
        # reductions over the same rows fuse the work between them on read
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s1 = x.sum(-1, keepdim=True)
    a = y * 2
    s2 = a.amax(-1, keepdim=True)
    return s1 + s2
""",
        # the work between is not element-wise (a reduction, a module call)
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor, norm):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = norm(y)
    c2 = F.conv2d(g, k2)
    return c1 + c2
""",
        # written in place between the two
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = y + 1
    g.clamp_(min=0)
    c2 = F.conv2d(g, k2)
    return c1 + c2
""",
        # FL003 reports it: `b` is kept alive across the first conv for the work between
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    b = y * 3
    c1 = F.conv2d(a, k1)
    g = a * b
    c2 = F.conv2d(g, k2)
    return c1 + c2
""",
        # not torch (NumPy, SciPy)
        """\
import numpy as np
from scipy.signal import convolve2d as conv2d
import torch


def f(x: np.ndarray, y: np.ndarray, k: np.ndarray):
    a = x * 2
    c1 = conv2d(a, k)
    g = y + 1
    c2 = conv2d(g, k)
    return c1 + c2
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _UNFUSED_CALL

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """A convolution with another at least two statements later in its block."""
        return _UNFUSED_CALL.search(block[index]) is not None and any(
            _UNFUSED_CALL.search(block[k]) for k in range(index + 2, len(block))
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        convs = compute_statements(scope, _UNFUSED)
        if len(convs) < 2:
            return
        for first in convs.values():
            second = _next_compute(first.ref, convs)
            if second is None:
                continue
            plan = _grouping(scope, first, second)
            if plan is None:
                continue
            up, down = plan
            gap = first.ref.block.statements[first.ref.index + 1 : second.ref.index]
            moves = []
            if up:
                moves.append(f"move {_names(up)} above the first (`{first.op}`)")
            if down:
                moves.append(f"move {_names(down)} below the second (`{second.op}`)")
            yield Violation(
                gap[0].body[0],
                message=f"element-wise work between `{first.op}` and `{second.op}` runs as a kernel of its own: "
                + " and ".join(moves),
                spans=tuple(gap),
            )


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _next_compute(ref: StatementRef, computes: dict[int, ComputeSite]) -> ComputeSite | None:
    """The next statement of the block with one of ``computes``, at least one statement later."""
    statements = ref.block.statements
    for k in range(ref.index + 1, len(statements)):
        found = computes.get(id(statements[k]))
        if found is not None:
            return found if k > ref.index + 1 else None
    return None


def _grouping(scope: Scope, first: ComputeSite, second: ComputeSite) -> tuple[list[str], list[str]] | None:
    """Which statements between the two ops can run before the first (up) and which after the
    second (down), when all can and each direction has element-wise work to join; else None."""
    statements = first.ref.block.statements
    if not (_bare_op(scope, _value(first.ref)) and _operands_bare(scope, _value(second.ref))):
        return None  # their own statements already hold element-wise work between them
    first_reads, first_defs = names_of(first.ref.node)
    second_reads, second_defs = names_of(second.ref.node)
    up: list[str] = []
    down: list[str] = []
    down_reads: set[str] = set()
    start = first.ref.index + 1
    if _relu_of(scope, _value(StatementRef(statements[start], first.ref.block, start)), first_defs):
        start += 1  # it runs in the convolution's kernel (cuDNN's fused conv-bias-ReLU)
    if start == second.ref.index:
        return None
    for k in range(start, second.ref.index):
        ref = StatementRef(statements[k], first.ref.block, k)
        target = elementwise_assignment(scope, ref)
        if target is None:
            return None
        reads = names_of(ref.node)[0]
        if reads & scope.inplace or target in scope.inplace:
            return None
        if not reads & (first_defs | set(down)) and target not in first_reads | first_defs | down_reads:
            up.append(target)
        elif target not in second_reads | second_defs and not reads & second_defs:
            down.append(target)
            down_reads |= reads
        else:
            return None
    if up and not _elementwise_before(scope, first.ref):
        return None
    if down and not _elementwise_after(scope, second.ref):
        return None
    return up, down


def _relu_of(scope: Scope, value: cst.BaseExpression | None, names: set[str]) -> bool:
    """``value`` is a ReLU of one of ``names``."""
    op = scope.op(value) if value is not None else None
    operands = _tensor_operands(scope, value) if op is not None and op[0] == "relu" else []
    return len(operands) == 1 and isinstance(operands[0], cst.Name) and operands[0].value in names


def _value(ref: StatementRef) -> cst.BaseExpression | None:
    small = ref.simple
    if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Return)):
        return small.value
    return None


def _tensor_operands(scope: Scope, call: cst.BaseExpression) -> list[cst.BaseExpression]:
    if not isinstance(call, cst.Call):
        return []
    operands = [arg.value for arg in call.args]
    if isinstance(call.func, cst.Attribute):
        operands.append(call.func.value)
    return [o for o in operands if scope.is_tensor(o)]


def _is_unfused(scope: Scope, expr: cst.BaseExpression | None) -> bool:
    op = scope.op(expr) if expr is not None else None
    return op is not None and op[1] == COMPUTE and op[0] in _UNFUSED


def _bare_op(scope: Scope, value: cst.BaseExpression | None) -> bool:
    """The statement's value is the op itself: no element-wise work on its result."""
    return _is_unfused(scope, value)


def _operands_bare(scope: Scope, value: cst.BaseExpression | None) -> bool:
    """The op's operands compute nothing (work there would run between the two ops)."""
    if value is None:
        return False
    calls = [value] if _is_unfused(scope, value) else [n for n in _walk(value) if _is_unfused(scope, n)]
    return len(calls) == 1 and all(_plain(scope, o) for o in _tensor_operands(scope, calls[0]))


def _plain(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A name, an attribute or a view of one: reading it runs no kernel."""
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return True
    if isinstance(expr, cst.Subscript):
        return _plain(scope, expr.value)
    op = scope.op(expr)
    return op is not None and op[1] == VIEW and op[2] is not None and _plain(scope, op[2])


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in children(node):
        yield from _walk(child)


def _elementwise_before(scope: Scope, ref: StatementRef) -> bool:
    """Is element-wise work open right before the op: the statement before assigns an
    element-wise result, or the op's own operands compute one?"""
    value = _value(ref)
    if any(not _plain(scope, o) and is_elementwise_expr(scope, o) for o in _tensor_operands(scope, value)):
        return True
    return ref.index > 0 and elementwise_assignment(scope, StatementRef(ref.block.statements[ref.index - 1], ref.block, ref.index - 1)) is not None


def _elementwise_after(scope: Scope, ref: StatementRef) -> bool:
    """Does element-wise work follow the op: on its result in its own statement, or in the next
    statement (an element-wise assignment, or a returned element-wise expression)?"""
    if not _bare_op(scope, _value(ref)):
        return True
    statements = ref.block.statements
    if ref.index + 1 >= len(statements):
        return False
    after = StatementRef(statements[ref.index + 1], ref.block, ref.index + 1)
    if elementwise_assignment(scope, after) is not None:
        return True
    small = after.simple
    return (
        isinstance(small, cst.Return)
        and small.value is not None
        and not isinstance(small.value, cst.Name)
        and scope.is_tensor(small.value)
        and is_elementwise_expr(scope, small.value)
    )
