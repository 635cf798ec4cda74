"""FL003: a computed tensor kept alive across a compute-bound op for an element-wise use after it."""
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
    names_of,
    statements_after,
)
from fusionlint.model import FUSIONRT, FixSafety
from fusionlint.ops import (
    COMPUTE,
    ELEMENTWISE,
    FUSED_REDUCTIONS,
    MATMULS,
    SYNC_BUILTINS,
    SYNC_METHODS,
    VIEW,
    OpTables,
)
from fusionlint.rule import Example, Rule, StatementEdit, Violation
from fusionlint.statement_text import assignments, may_be_elementwise_expr

_WORD = re.compile(r"[A-Za-z_]\w*")
# In a statement's text, the ops whose statements ``check`` moves work above (its ``compute_statements``).
_COMPUTE_CALL = re.compile(r"@|\b(?:%s)\s*\(" % "|".join(sorted(FUSED_REDUCTIONS | MATMULS)))


class KeptAliveAcrossCompute(Rule):
    code = "FL003"
    name = "kept-alive-across-compute"
    message = "computed tensor kept alive across a compute-bound op for an element-wise use after it"
    rationale = """
        A lazy fusing backend runs the element-wise code before a compute-bound op (a matmul, a
        reduction) in one kernel with it or just before it. A tensor computed there and read
        again by element-wise code *after* the op cannot stay in registers: it is kept alive
        across the op and must be written to global memory and read back (fusionrt reports it
        as `consumed-later`). When that later use depends only on values that already exist
        before the op, computing it before the op lets it join the same kernel, and the tensor
        dies there.

        Flagged only where fusionrt's `stream` policy writes less for the reordered code: the
        later statement `v = <element-wise expression>` can move above the op (nothing it reads
        is assigned in between, nothing in between reads or assigns `v`, no branch in between),
        and the tensors it lets die outnumber the one it creates. A tensor dies when it holds an
        element-wise result computed in the same block before the op, nothing after the op
        except this statement reads it, and it is not written anyway (read by a matmul or an
        unknown call, returned, held across a host sync). The new value `v` costs nothing when
        it is written anyway (returned, or passed to a matmul or a call); otherwise it now
        crosses the op in the tensors' place, so the statement must let two tensors die
        (`g = a * b`). Measured: two tensors combined after a row sum, 4 -> 3 writes; a value
        returned next to a matmul result, 3 -> 2 writes and 3 -> 2 kernels.

        Not flagged: a later use that reads the op's result (`h + a`), a single tensor whose
        replacement would be fused after the op anyway (moving it would cost a write), inputs
        and parameters (already in memory), functions that use autograd (saved tensors stay
        alive regardless) or write the tensors in place, NumPy arrays and other non-tensors,
        and the `.clone()` pattern FL002 reports.
    """
    use_instead = "Compute the later element-wise use before the compute-bound op, where its inputs already exist."
    fix_safety = FixSafety.UNSAFE
    pays_in = (FUSIONRT,)
    # A `.clone()` FL002 reports between the op and the use: FL002's fix moves this use too.
    yields_to = frozenset({"FL002"})
    fix_notes = """
        The fix moves the statement up to just before the compute-bound op, unchanged. It is
        offered with every finding: the checks above ensure every name keeps its value for the
        moved statement and for the statements it passes. It is **unsafe**: it relies on the
        static guess that the names hold tensors, whose element-wise ops have no side effects,
        and it runs the statement earlier, so an exception raised by the compute-bound op now
        comes after it, and the new value stays alive longer (peak memory).
    """
    examples = (
        Example(
            bad="""\
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    g = a * b
    return s + g
""",
            at=((8, 5),),
            fixed="""\
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    g = a * b
    s = (a - b).sum(-1, keepdim=True)
    return s + g
""",
            call="block(randn(64, 128), randn(64, 128))",
        ),
        Example(
            bad="""\
import torch


def project(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    a = torch.tanh(x)
    h = y @ w
    gate = torch.sigmoid(a) * 2  # returned: written anyway
    return h, gate
""",
            at=((7, 5),),
            fixed="""\
import torch


def project(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    a = torch.tanh(x)
    gate = torch.sigmoid(a) * 2  # returned: written anyway
    h = y @ w
    return h, gate
""",
            call="project(randn(64, 128), randn(64, 128), randn(128, 128))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def forward(self, hidden, context, w_in, w_out):
        act = F.silu(hidden)
        scores = F.linear(context, w_in)
        gated = act * 0.5
        return scores + F.linear(gated, w_out)
""",
            at=((9, 9),),
            fixed="""\
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def forward(self, hidden, context, w_in, w_out):
        act = F.silu(hidden)
        gated = act * 0.5
        scores = F.linear(context, w_in)
        return scores + F.linear(gated, w_out)
""",
            call="Block()(randn(32, 64), randn(32, 64), randn(64, 64), randn(64, 64))",
        ),
    )
    valid = (
        # the later use reads the op's result: it cannot move
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = x * 2
    h = a @ w
    out = h + a
    return out
""",
        # one tensor dies, but the moved value would cross the op in its place: no gain
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = x * 2
    h = a @ w
    b = a * y
    return h + b
""",
        # the tensor is read again after the moved statement: it stays alive anyway
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = a.sum(-1, keepdim=True)
    g = a * b
    return s + g + a
""",
        # a name the later use reads is assigned in between (data dependency)
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    s = a.sum(-1, keepdim=True)
    b = y + s
    g = a * b
    return g
""",
        # inputs are already in memory: nothing is kept alive
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    s = x.sum(-1)
    g = x * y
    return s, g
""",
        # a host sync later writes every tensor still held, whatever the order
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    g = a * b
    print(s.item())
    return s, g
""",
        # written in place, or needed by autograd
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum()
    a.mul_(3)
    g = a * b
    return s, g
""",
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor):
    a = x * 2
    b = y + 1
    s = (a - b).sum()
    s.backward()
    g = a * b
    return s, g
""",
        # a branch between the op and the use
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, flag: bool):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1, keepdim=True)
    if flag:
        s = s * 2
    g = a * b
    return s + g
""",
        # the `.clone()` pattern is FL002's finding (its fix moves the same use)
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    s = a.clone().sum(-1, keepdim=True)
    g = a * b
    return s + g
""",
        # NumPy arrays and other non-tensors
        """\
import numpy as np
import torch


def f(x: np.ndarray, y: np.ndarray):
    a = x * 2
    b = y + 1
    s = (a - b).sum(-1)
    g = a * b
    return s, g
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _COMPUTE_CALL

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """A compute-bound op between two element-wise assignments of its block, the later one
        reading what the earlier one assigns: ``check`` moves such a later one above the op."""
        if not 0 < index < len(block) - 1 or _COMPUTE_CALL.search(block[index]) is None:
            return False
        before = {
            name for j in range(index) for name, value in assignments(block[j]) if may_be_elementwise_expr(value, ops)
        }
        return any(
            may_be_elementwise_expr(value, ops) and not before.isdisjoint(_WORD.findall(value))
            for j in range(index + 1, len(block))
            for _, value in assignments(block[j])
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.autograd or scope.dynamic:
            return
        computes = compute_statements(scope, FUSED_REDUCTIONS | MATMULS | {"@"})
        seen: set[int] = set()
        for compute in computes.values():
            for use in compute.ref.later():
                if id(use.node) in seen:
                    continue
                seen.add(id(use.node))
                move = _move(scope, use, computes)
                if move is None:
                    continue
                target, dying = move
                op = computes[id(target.node)].op
                names = ", ".join(f"`{t}`" for t in dying)
                yield Violation(
                    use.simple,
                    fix=(
                        StatementEdit(target.node, (use.node.with_changes(leading_lines=()), target.node)),
                        StatementEdit(use.node, ()),
                    ),
                    message=f"{names} {'is' if len(dying) == 1 else 'are'} kept alive across `{op}` only for "
                    f"this element-wise use: compute it before `{op}`",
                    spans=tuple(use.block.statements[target.index : use.index]),
                )


# --------------------------------------------------------------------------- compute-bound ops


def _fuses(scope: Scope, call: cst.Call) -> bool:
    """Does fusionrt read this op's tensor operands inside a fused kernel (element-wise ops, views
    and the reductions it fuses on read), rather than from memory (matmuls, fallbacks, calls it
    cannot see into, which need their operands written)?"""
    op = scope.op(call)
    return op is not None and (op[1] in (ELEMENTWISE, VIEW) or op[0] in FUSED_REDUCTIONS)


def _handed_off(scope: Scope, node: cst.CSTNode, name: str) -> bool:
    """Is the tensor ``name`` written anyway by ``node``: returned or yielded, stored on an
    attribute, or passed (directly or through views) to an op or call that does not fuse it?"""
    if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None:
        values = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else [node.value]
        if any(_is_name(scope, getattr(v, "value", v), name) for v in values):
            return True
    elif isinstance(node, cst.Assign) and not all(isinstance(t.target, cst.Name) for t in node.targets):
        if _is_name(scope, node.value, name):
            return True
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        if _is_name(scope, node.left, name) or _is_name(scope, node.right, name):
            return True
    elif isinstance(node, cst.Call) and not _fuses(scope, node):
        operands = [arg.value for arg in node.args]
        if isinstance(node.func, cst.Attribute):
            operands.append(node.func.value)
        if any(_is_name(scope, operand, name) for operand in operands):
            return True
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    return any(_handed_off(scope, child, name) for child in children(node))


def _is_name(scope: Scope, expr: cst.BaseExpression, name: str) -> bool:
    """``name`` itself, or a view chain on it."""
    if isinstance(expr, cst.Name):
        return expr.value == name
    chain = scope.view_chain(expr)
    return chain is not None and chain[0].value == name


def _flushes(scope: Scope, node: cst.CSTNode) -> bool:
    """Does ``node`` hold a known flush of the lazy stream: a host sync on a tensor (``.item()``,
    ``print(t)``, ``if t:``) or a compute-bound op fusionrt runs eagerly (a fallback)?"""
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and scope.is_tensor(func.value):
            return True
        if isinstance(func, cst.Name) and func.value in SYNC_BUILTINS and any(scope.is_tensor(a.value) for a in node.args):
            return True
        op = scope.op(node)
        if op is not None and op[1] == COMPUTE and op[0] not in FUSED_REDUCTIONS | MATMULS:
            return True
    elif isinstance(node, (cst.If, cst.While)) and scope.is_tensor(node.test):
        return True
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    return any(_flushes(scope, child) for child in children(node))


# --------------------------------------------------------------------------- the move and its gain


def _move(scope: Scope, use: StatementRef, computes: dict[int, ComputeSite]) -> tuple[StatementRef, list[str]] | None:
    """Where ``use`` (``v = <element-wise>``) can move up to, just above the earliest compute
    statement it can pass, and the tensors that then die there; None if that gains nothing."""
    new = elementwise_assignment(scope, use)
    if new is None:
        return None
    reads = names_of(use.node)[0]
    if reads & scope.inplace or new in scope.inplace:
        return None
    statements = use.block.statements
    target = None
    for k in range(use.index - 1, -1, -1):
        statement = statements[k]
        if not isinstance(statement, cst.SimpleStatementLine) or _flushes(scope, statement):
            break
        statement_reads, statement_defs = names_of(statement)
        if statement_defs & reads or new in statement_reads or new in statement_defs:
            break
        if id(statement) in computes:
            target = StatementRef(statement, use.block, k)
    if target is None:
        return None
    dying = [t for t in sorted(reads & scope.tensors) if _dies(scope, use, target, t, new)]
    cost = 0 if _written_anyway(scope, use, new) else 1
    return (target, dying) if len(dying) > cost else None


def _written_anyway(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is the value ``ref`` assigns to ``name`` handed off (so written) before ``name`` is reassigned?"""
    for later in statements_after(ref):
        if _handed_off(scope, later.node, name):
            return True
        if name in names_of(later.node)[1]:
            return False
    return False


def _dies(scope: Scope, use: StatementRef, target: StatementRef, name: str, new: str) -> bool:
    """Once ``use`` runs before ``target``, is the tensor ``name`` no longer written?

    It must hold an element-wise result computed in this block before the op (a value still
    being computed, not an input), be read after the op by ``use`` only, and not be written
    anyway (handed to a matmul or a call, returned, alive at a host sync).
    """
    statements = use.block.statements
    for k in range(target.index - 1, -1, -1):
        if not isinstance(statements[k], cst.SimpleStatementLine):
            return False
        if name in names_of(statements[k])[1]:
            define = StatementRef(statements[k], use.block, k)
            break
    else:
        return False
    if elementwise_assignment(scope, define) != name:
        return False
    if any(name in names_of(statements[k])[0] for k in range(target.index + 1, use.index)):
        return False
    if name != new and scope.read_after(use, name):
        return False
    if any(_handed_off(scope, statements[k], name) for k in range(define.index + 1, use.index)):
        return False
    return not any(_flushes(scope, later.node) for later in statements_after(define))

