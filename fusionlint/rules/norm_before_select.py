"""FL022: every token normalized, then a few of them picked (``x = self.norm(x)``, then ``x[:, 0]``):
a per-token norm commutes with picking tokens, so pick first and normalize only those."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, is_elementwise_expr, names_of, reaching_value, scope_statements
from fusionlint.analysis.numbers import int_literal
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# A norm's call assigned to a name (``x = self.ln_final(x)``, ``h = F.layer_norm(h, ...)``).
_NORMED_TEXT = re.compile(r"\s*(\w+)\s*(?::[^=]*)?=\s*[\w.]*(?:norm|ln)\w*\s*\(", re.IGNORECASE)
# Norms over the last dim (the module's own normalized shape is read as the last dim).
_PER_TOKEN = frozenset({"layer_norm", "rms_norm", "normalize"})
_METADATA = frozenset({"shape", "size", "device", "dtype", "ndim"})


class NormBeforeSelect(Rule):
    code = "FL022"
    name = "norm-before-select"
    message = "every token normalized, then a few picked: pick them first and normalize only those"
    rationale = """
        A layer norm (or RMS norm) works on each token alone, over its last dim, so picking
        tokens commutes with it: `self.norm(x)[:, 0]` is `self.norm(x[:, 0])`. Normalizing the
        whole sequence and then keeping one token per sample (a class token, the last token,
        the end-of-text token `x[arange(b), text.argmax(-1)]`) reads and writes every token
        for nothing, in eager PyTorch and in a fusing backend alike: open_clip's text pooling,
        measured on its labels, writes 80 -> 3 KiB under fusionrt and in eager.

        Flagged: `y = norm(x)` (a `torch.nn.LayerNorm`/`RMSNorm` module of the class,
        `F.layer_norm`, `F.rms_norm`, `F.normalize(x, dim=-1)`) whose next reader picks tokens
        of `y` by index (`y[:, 0]`, `y[:, -1, :]`, `y[0]`, `y[idx]`, `y[arange(b), idx]`, the
        index not made from `y`), and nothing reads `y` after that. Not flagged: a slice of
        tokens (`y[:, 1:]`: most of them stay), a mean or another reduction over tokens (the
        mean of normalized tokens is not the normalized mean), `y` read again (returned as
        the last hidden state too: every token is needed normalized).
    """
    use_instead = "Pick the tokens first: `pooled = self.norm(x[:, 0])`."
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the rule reads the norm's dims from its call, not from the module's
        constructor (a norm built over two dims, `nn.LayerNorm([n, d])`, does not commute with
        picking tokens), and `y[:, 0]` picks a token only where `y` has a batch dim. Move the
        index by hand.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def class_token(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = F.layer_norm(x, x.shape[-1:], weight, bias)
    return x[:, 0]
""",
            at=((7, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def class_token(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x[:, 0], x.shape[-1:], weight, bias)
""",
            call="class_token(randn(8, 197, 64), randn(64), randn(64))",
        ),
        Example(  # the end-of-text token of each sample, by a gather of rows
            bad="""\
import torch
import torch.nn.functional as F


def text_pool(x: torch.Tensor, proj: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x @ proj
    x = F.layer_norm(x, (x.shape[-1],), w, b)
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return pooled
""",
            at=((8, 14),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def text_pool(x: torch.Tensor, proj: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x @ proj
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return F.layer_norm(pooled, (x.shape[-1],), w, b)
""",
            call="text_pool(randn(8, 77, 64), randn(64, 64), randn(8, 77), randn(64), randn(64))",
        ),
    )
    valid = (
        # the normalized tokens are returned too; a slice keeps most tokens; a mean over tokens
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    pooled = h[:, 0]
    s = F.layer_norm(x, x.shape[-1:], w, b)
    tail = s[:, 1:]
    m = F.layer_norm(x, x.shape[-1:], w, b)
    return h, pooled, tail, m.mean(1)
""",
        # the norm's input is element-wise work a fusing backend computes inside the norm: picked
        # first, the whole input would be written for the pick (fusionrt: 3 -> 4 kernels)
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x * 2.0
    x = F.layer_norm(x, x.shape[-1:], w, b)
    return x[:, 0]
""",
        # the index is made from the normalized tokens; a norm over the batch dim (dim=0)
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    best = h[:, h.norm(dim=-1).argmax()]
    g = F.normalize(x, dim=0)
    return best, g[0]
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return re.compile(r"(?:norm|ln)\w*\s*\(", re.IGNORECASE)  # the norm's call

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        normed = _NORMED_TEXT.match(block[index])
        if normed is None:
            return False
        picked = re.compile(r"\b%s\s*\[" % normed.group(1))
        return any(picked.search(block[later]) for later in range(index + 1, min(index + 4, len(block))))

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            name = _normed_name(scope, ref)
            if name is None:
                continue
            reader = _next_reader(ref, name)
            if reader is None:
                continue
            picks = _picks(reader.node, name)
            if picks and not _read_after(scope, reader, name):
                yield Violation(picks[0])


def _normed_name(scope: Scope, ref: StatementRef) -> str | None:
    """``y`` where ``ref`` is ``y = norm(x)``, a norm over the last dim."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
        return None
    target, call = small.targets[0].target, small.value
    if not isinstance(target, cst.Name):
        return None
    op = scope.module_op(call) or scope.op(call)
    if op is None or op[0] not in _PER_TOKEN or op[2] is None:
        return None
    if op[0] == "normalize" and not _over_last_dim(call):
        return None
    return None if _pending_elementwise(scope, ref, op[2]) else target.value


def _pending_elementwise(scope: Scope, ref: StatementRef, expr: cst.BaseExpression) -> bool:
    """Is the norm's input element-wise work of this block (``x = x * 2`` above)? A fusing backend
    computes it inside the norm's kernel; picked first, the whole input is written for the pick
    instead (fusionrt: a kernel more, as many bytes)."""
    if isinstance(expr, cst.Name):
        value = reaching_value(ref, expr.value)
        return value is not None and not isinstance(value, cst.Name) and is_elementwise_expr(scope, value)
    return is_elementwise_expr(scope, expr)


def _over_last_dim(call: cst.Call) -> bool:
    """``F.normalize(x, dim=-1)`` (its default dim is 1)."""
    dims = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "dim"]
    dims += [arg.value for i, arg in enumerate(call.args) if arg.keyword is None and i == 2]
    return len(dims) == 1 and int_literal(dims[0]) == -1


def _next_reader(ref: StatementRef, name: str) -> StatementRef | None:
    """The next statement of the block that reads ``name``, if a simple one."""
    for later in ref.later():
        if not isinstance(later.node, cst.SimpleStatementLine):
            return None
        reads, defs = names_of(later.node)
        if name in reads:
            return later
        if name in defs:
            return None
    return None


def _picks(statement: cst.CSTNode, name: str) -> list[cst.Subscript]:
    """The token picks ``name[...]`` in ``statement``, if every read of ``name`` there is one."""
    picks: list[cst.Subscript] = []
    reads = 0
    todo: list[cst.CSTNode] = [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
            if not _picks_tokens(node, name):
                return []
            picks.append(node)
            continue
        if isinstance(node, cst.Name) and node.value == name:
            reads += 1
        todo.extend(node.children)
    return [] if reads else picks


def _picks_tokens(subscript: cst.Subscript, name: str) -> bool:
    """``y[:, 0]``, ``y[:, -1, :]``, ``y[0]``, ``y[idx]``, ``y[arange(b), idx]``: full slices,
    then one or two indices (numbers or index tensors, not made from ``y``), then full slices."""
    parts = []
    for element in subscript.slice:
        if not isinstance(element.slice, cst.Index):
            if not (isinstance(element.slice, cst.Slice) and element.slice.lower is None
                    and element.slice.upper is None and element.slice.step is None):
                return False
            parts.append(":")
        elif isinstance(element.slice.value, cst.Ellipsis) or _made_from(element.slice.value, name):
            return False
        elif isinstance(element.slice.value, cst.Name) and element.slice.value.value == "None":
            return False
        else:
            parts.append("i")
    text = "".join(parts)
    return re.fullmatch(r":*i{1,2}:*", text) is not None


def _made_from(expr: cst.CSTNode, name: str) -> bool:
    """Does ``expr`` read the values of ``name`` (not only its metadata: ``name.shape``)?"""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == name:
        return expr.attr.value not in _METADATA
    if isinstance(expr, cst.Name):
        return expr.value == name
    return any(_made_from(child, name) for child in expr.children)


def _read_after(scope: Scope, reader: StatementRef, name: str) -> bool:
    """Is the normalized value read after the statement that picks from it?"""
    if name in names_of(reader.node)[1]:
        return False  # rebound: ``x = x[:, 0]``
    return scope.read_after(reader, name)
