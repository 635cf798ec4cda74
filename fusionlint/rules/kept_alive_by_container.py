"""FL005: an element-wise intermediate stored in a list, dict or attribute while later work fuses it."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope,
    StatementRef,
    children,
    count_name,
    dotted_name,
    is_elementwise_expr,
    names_of,
    root_name,
    scope_statements,
    statements_after,
    statements_before,
)
from fusionlint.model import FUSIONRT
from fusionlint.ops import COMPUTE, ELEMENTWISE, FUSED_REDUCTIONS, VIEW, VIEW_ATTRIBUTES, OpTables
from fusionlint.rule import Example, Rule, Violation
from fusionlint.statement_text import assignments, may_be_elementwise_expr

_STORE_METHODS = frozenset({"append", "appendleft", "insert", "extend"})
# Tensor attributes and methods that read metadata, not data.
_METADATA = frozenset(
    """shape dtype device ndim is_cuda requires_grad size dim numel stride is_contiguous element_size
    nelement ndimension""".split()
)
# The text of the three store forms, each capturing where the stored name is written:
# ``c.append(h`` (``insert``, ``extend``), ``c += (h,`` / ``c = c + (h,``, ``obj.attr = h`` / ``c[k] = h``.
_STORE_CALL = re.compile(r"\.\s*(?:append|appendleft|insert|extend)\s*\((.*)", re.S)
_STORE_CONCAT = re.compile(r"(?:\+=|=\s*\w+\s*\+)\s*[(\[](.*)", re.S)
_STORE_ASSIGN = re.compile(r"^\s*[\w.]*\w(?:\s*\.\s*\w+|\s*\[[^\]]*\])\s*=\s*\(*\s*([A-Za-z_]\w*)", re.M)
# in the text of each of the three stores above: the call, the `+` or `+=` before a bracket, the
# assignment of a name
_STORE_TEXT = re.compile(
    r"\.\s*(?:append|appendleft|insert|extend)\s*\(|\+=?\s*[(\[]|\]\s*=\s*\(*\s*[A-Za-z_]|\.\s*\w+\s*=\s*\(*\s*[A-Za-z_]"
)
_WORD = re.compile(r"[A-Za-z_]\w*")


class KeptAliveByContainer(Rule):
    code = "FL005"
    name = "kept-alive-by-container"
    message = "element-wise intermediate kept alive by a container or attribute across later work: it must be written"
    rationale = """
        A lazy fusing backend writes a recorded tensor to global memory only when something
        still needs it after its kernel: a later kernel, the caller, or a Python reference
        that is alive when the stream is flushed. An element-wise intermediate that the
        following element-wise work (or a reduction's prologue) reads is normally fused into
        that work and never written. Appending it to a list, putting it in a dict or storing it
        on an object (`self.last_gate = g`, `trace.append(h)`) keeps a reference alive, so
        fusionrt must write it: one full-size write per stored tensor, per loop iteration.
        fusionrt measures a three-step `trace.append(h)` loop at 4 writes (128 KiB) against 2
        (64 KiB) when only the final state is kept, and `self.last_gate = g` at 2 writes
        against 1.

        Flagged: `c.append(t)` (`insert`, `extend`), `c += (t,)`, `c[k] = t` and `obj.attr = t`,
        where `t` (or a view or `.detach()` of it) was computed by element-wise ops earlier in
        the same block, every later read of `t` is element-wise or a fusing reduction (so
        nothing else would write it), and the container is a side channel: `self`, or a
        parameter or local that the function never reads back for compute or returns. Not
        flagged: the outputs of matmuls and convolutions (always written), containers later
        consumed by `torch.cat`, `torch.stack` or returned (the values are needed), lists of
        non-tensors, NumPy arrays, `self.weight = nn.Parameter(...)` in `__init__`.
    """
    pays_in = (FUSIONRT,)
    use_instead = """
        Keep only what the computation needs: store the final value after the work, store it
        under a debug flag, or register a forward hook where the intermediate is the output of
        a module. (Storing a reduction such as `h.mean()` instead is no cheaper under fusionrt:
        each reduction starts a new kernel.)
    """
    fix_notes = """
        No fix: removing the store changes what the container holds, which other code may read.
    """
    examples = (
        Example(
            bad="""\
import torch


def encode(x: torch.Tensor, y: torch.Tensor, trace: list) -> torch.Tensor:
    h = x
    for _ in range(3):
        h = torch.tanh(h * 2 + y)
        trace.append(h)
    return h * 0.5
""",
            at=((8, 9),),
            fixed=None,
            call="encode(randn(64, 128), randn(64, 128), [])",
            good="""\
import torch


def encode(x: torch.Tensor, y: torch.Tensor, trace: list) -> torch.Tensor:
    h = x
    for _ in range(3):
        h = torch.tanh(h * 2 + y)
    trace.append(h)
    return h * 0.5
""",
        ),
        Example(
            bad="""\
import torch


class Gate(torch.nn.Module):
    def forward(self, x, y):
        g = torch.sigmoid(x + y)
        self.last_gate = g
        return x * g + y
""",
            at=((7, 9),),
            fixed=None,
            call="Gate()(randn(64, 128), randn(64, 128))",
            good="""\
import torch


class Gate(torch.nn.Module):
    def forward(self, x, y):
        g = torch.sigmoid(x + y)
        return x * g + y
""",
        ),
        Example(
            bad="""\
import torch


def attend(x: torch.Tensor, y: torch.Tensor, stats: dict) -> torch.Tensor:
    s = x * 0.125 + y
    stats["logits"] = s.detach()
    return torch.softmax(s, -1) * y
""",
            at=((6, 5),),
            fixed=None,
            call="attend(randn(64, 128), randn(64, 128), {})",
            good="""\
import torch


def attend(x: torch.Tensor, y: torch.Tensor, stats: dict) -> torch.Tensor:
    s = x * 0.125 + y
    return torch.softmax(s, -1) * y
""",
        ),
        Example(  # a tuple kept for logging (the transformers idiom), never returned
            bad="""\
import torch
import torch.nn.functional as F


def mlp(x: torch.Tensor, w: torch.Tensor, logger) -> torch.Tensor:
    seen = ()
    h = F.gelu(x)
    seen += (h,)
    out = h * torch.sigmoid(x)
    logger.debug("%d activations", len(seen))
    return out @ w
""",
            at=((8, 5),),
            fixed=None,
        ),
    )
    valid = (
        # parameters and buffers set up in __init__; a list of non-tensors
        """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim))
        self.scale = dim ** -0.5
        self.names = []

    def forward(self, x):
        h = torch.relu(x * self.scale)
        self.names.append("relu")
        return h @ self.weight + h
""",
        # the container is consumed by compute or returned: its values are needed
        """\
import torch


def run(x: torch.Tensor, steps: int) -> torch.Tensor:
    outs = []
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 2)
        outs.append(h)
    return torch.stack(outs).sum(0) + h
""",
        """\
import torch


def encoder(x: torch.Tensor, layers) -> tuple:
    all_states = ()
    h = x
    for layer in layers:
        h = torch.relu(h + 1)
        all_states = all_states + (h,)
        h = layer(h)
    return h, all_states
""",
        # the stored value is written anyway: a matmul reads it, or a matmul produced it
        """\
import torch


class Mlp(torch.nn.Module):
    def forward(self, x, w):
        h = torch.relu(x * 2)
        self.act = h
        y = x @ w
        self.pre = y
        return (h @ w) + y + 1
""",
        # stored after the last use (nothing later fuses with it); NumPy values
        """\
import numpy as np
import torch


def f(x: torch.Tensor, arr: np.ndarray, log: dict) -> torch.Tensor:
    a = torch.sigmoid(x) * 2
    out = a + 1
    log["a"] = a
    b = arr * 2
    log["b"] = b
    return out * b.sum() + b.mean()
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _STORE_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """A store whose text names a variable that another statement of the block assigns
        element-wise work (``check`` looks for the producer in the store's own block only)."""
        text = block[index]
        words = {w for m in _STORE_CALL.finditer(text) for w in _WORD.findall(m.group(1))}
        words |= {w for m in _STORE_CONCAT.finditer(text) for w in _WORD.findall(m.group(1))}
        words |= {m.group(1) for m in _STORE_ASSIGN.finditer(text)}
        if not words:
            return False  # spares the walk over the block's assignments, most statements asked
        return any(
            name in words and may_be_elementwise_expr(value, ops)
            for j in range(len(block))
            if j != index
            for name, value in assignments(block[j])
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.dynamic:
            return
        for ref in scope_statements(scope):
            if not isinstance(ref.node, cst.SimpleStatementLine):
                continue
            for small in ref.node.body:
                for node, container, value in _stores(scope, small):
                    name = _stored_name(scope, value)
                    if name is None or name in scope.escaped or name in scope.params:
                        continue
                    if not _fresh_elementwise(scope, ref, name) or not _side_channel(scope, ref, container):
                        continue
                    if not _only_fused_later(scope, ref, name):
                        continue
                    yield Violation(
                        node,
                        message=f"`{name}` is kept alive by `{_describe(container)}` while later element-wise "
                        "work reads it: fusionrt must write it instead of fusing it away; keep only what "
                        "you need, after the work",
                    )


# --------------------------------------------------------------------------- stores

_Store = tuple[cst.CSTNode, cst.BaseExpression, cst.BaseExpression]


def _stores(scope: Scope, small: cst.BaseSmallStatement) -> Iterator[_Store]:
    """(node to report, container, stored value) for each store into a container in ``small``."""
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STORE_METHODS and not scope.is_tensor(func.value):
            args = [a.value for a in call.args if a.keyword is None and not a.star]
            method = func.attr.value
            if method == "extend":
                values = _literal_elements(args[0]) if args else []
            else:
                values = args[1:2] if method == "insert" else args[:1]
            for value in values:
                yield call, func.value, value
    elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        if not scope.is_tensor(small.target):
            for value in _literal_elements(small.value):
                yield small.target, small.target, value
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        value = small.value
        if isinstance(target, cst.Name):
            if (
                isinstance(value, cst.BinaryOperation)
                and isinstance(value.operator, cst.Add)
                and isinstance(value.left, cst.Name)
                and value.left.value == target.value
                and target.value not in scope.tensors
            ):
                for element in _literal_elements(value.right):
                    yield target, target, element
        elif isinstance(target, cst.Attribute) and not scope.is_tensor(target.value):
            yield target, target, value
        elif isinstance(target, cst.Subscript) and _is_key(target) and not scope.is_tensor(target.value):
            if root_name(target.value) not in scope.tensors:
                yield target, target, value


def _is_key(target: cst.Subscript) -> bool:
    """``d["k"]``, ``d[key]``: a mapping key, not tensor indexing (``t[..., 0]``, ``t[:, i]``)."""
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return False
    key = target.slice[0].slice.value
    return isinstance(key, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Name, cst.Attribute))


def _literal_elements(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [e.value for e in expr.elements if isinstance(e, cst.Element)]
    return []


def _stored_name(scope: Scope, value: cst.BaseExpression) -> str | None:
    """``h`` for ``h``, ``h.detach()``, ``h.view(...)``, ``h.T``: the tensor whose storage is kept."""
    while True:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            op = scope.op(value)
            if op is None or not (op[0] == "detach" or op[1] == VIEW) or value.func.value is not op[2]:
                return None
            value = value.func.value
        elif isinstance(value, cst.Attribute) and value.attr.value in VIEW_ATTRIBUTES:
            value = value.value
        else:
            break
    return value.value if isinstance(value, cst.Name) and value.value in scope.tensors else None


def _describe(container: cst.BaseExpression) -> str:
    if isinstance(container, cst.Subscript):
        return (dotted_name(container.value) or "a container") + "[...]"
    return dotted_name(container) or "a container"


# --------------------------------------------------------------------------- the stored value


def _fresh_elementwise(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is ``name``, at ``ref``, the result of element-wise ops computed earlier in the same block
    (in a loop body: or later, by the previous iteration)? That is the kind of value a fusing
    backend never writes unless something keeps it."""
    for earlier in statements_before(ref):
        if earlier.block is not ref.block:
            return False
        node = earlier.node
        if not isinstance(node, cst.SimpleStatementLine):
            if count_name(node, name):
                return False  # assigned or used in a branch or loop: unknown
            continue
        if name not in names_of(node)[1]:
            continue
        small = earlier.simple
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            return False
        target, value = small.targets[0].target, small.value
        return (
            isinstance(target, cst.Name)
            and not isinstance(value, (cst.Name, cst.Integer, cst.Float))
            and is_elementwise_expr(scope, value)
        )
    return False


def _side_channel(scope: Scope, ref: StatementRef, container: cst.BaseExpression) -> bool:
    """Does the container only carry values out of the computation: ``self``, or a parameter or
    local (``c``, ``c.attr``, ``c[key]``) that the rest of the function never reads back?"""
    root = root_name(container)
    if root is None or root == "self":
        return True
    if root in scope.escaped:
        return False
    return all(_only_stored_into(later.node, root) for later in statements_after(ref))


def _only_stored_into(node: cst.CSTNode, name: str) -> bool:
    """Is every mention of ``name`` in ``node`` another store into it (or ``len(name)``, a log call)?"""
    if isinstance(node, cst.Name):
        return node.value != name
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STORE_METHODS and _is(func.value, name):
            return all(_only_stored_into(a.value, name) for a in node.args)
        if isinstance(func, cst.Name) and func.value == "len" and node.args and _is(node.args[0].value, name):
            return True
    if isinstance(node, (cst.AugAssign, cst.Assign)):
        targets = [node.target] if isinstance(node, cst.AugAssign) else [t.target for t in node.targets]
        value = node.value
        if isinstance(value, cst.BinaryOperation) and _is(value.left, name) and any(_is(t, name) for t in targets):
            value = value.right  # name = name + (x,)
        into = [t.value if isinstance(t, (cst.Subscript, cst.Attribute)) and _is(t.value, name) else t for t in targets]
        return all(_is(t, name) or _only_stored_into(t, name) for t in into) and _only_stored_into(value, name)
    return all(_only_stored_into(child, name) for child in children(node))


def _is(expr: cst.CSTNode, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


# --------------------------------------------------------------------------- later reads


def _only_fused_later(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is ``name`` read later, and only by element-wise ops, views and fusing reductions (reads
    a fusing backend would otherwise serve from the kernel that computes it)?"""
    reads = 0
    for later in statements_after(ref):
        for fused in _reads(scope, later.node, name, fused=False):
            if not fused:
                return False
            reads += 1
        if isinstance(later.node, cst.SimpleStatementLine) and name in names_of(later.node)[1]:
            break
    return reads > 0


def _reads(scope: Scope, node: cst.CSTNode, name: str, fused: bool) -> Iterator[bool]:
    """For each read of ``name`` in ``node``: is it by an op that fuses it (True) or by anything
    else, a matmul, an unknown call, a return, a container (False)? Metadata reads are skipped."""
    if isinstance(node, cst.Name):
        if node.value == name:
            yield fused
        return
    if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        if count_name(node, name):
            yield False
        return
    if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        if node.value is not None:
            yield from _reads(scope, node.value, name, False)
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(node, cst.AugAssign) or not isinstance(target, cst.Name):
                yield from _reads(scope, target, name, False)
        return
    inner: bool | None = None  # how the operands of ``node`` are read; None: not an op
    if isinstance(node, cst.Attribute):
        if node.attr.value in _METADATA:
            return
        inner = fused if node.attr.value in VIEW_ATTRIBUTES else False
        yield from _reads(scope, node.value, name, inner)
        return
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _METADATA:
            yield from (r for a in node.args for r in _reads(scope, a.value, name, False))
            return
        op = scope.op(node)
        inner = op is not None and (op[1] in (ELEMENTWISE, VIEW) or (op[1] == COMPUTE and op[0] in FUSED_REDUCTIONS))
        if isinstance(func, cst.Attribute):
            yield from _reads(scope, func.value, name, inner)
        else:
            yield from _reads(scope, func, name, False)
        for arg in node.args:
            yield from _reads(scope, arg.value, name, inner)
        return
    if isinstance(node, cst.BinaryOperation):
        inner = not isinstance(node.operator, cst.MatrixMultiply)
    elif isinstance(node, cst.UnaryOperation):
        inner = not isinstance(node.operator, cst.Not)
    elif isinstance(node, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons):
            return
        inner = True
    elif isinstance(node, cst.Subscript):
        basic = all(
            isinstance(e.slice, cst.Slice)
            or (isinstance(e.slice, cst.Index) and isinstance(e.slice.value, (cst.Integer, cst.Ellipsis)))
            or (isinstance(e.slice, cst.Index) and _is(e.slice.value, "None"))
            for e in node.slice
        )
        yield from _reads(scope, node.value, name, basic)
        for element in node.slice:
            yield from _reads(scope, element, name, False)
        return
    for child in children(node):
        yield from _reads(scope, child, name, bool(inner))
