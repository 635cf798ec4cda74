"""FL024: a copy (``y = x.clone()``) updated in place slice by slice from itself (``y[:, 0] =
y[:, 0] / w``, ...): computing the slices out of place builds the result in one write."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, scope_statements
from fusionlint.analysis.flow import inner_blocks
from fusionlint.analysis.nodes import children, code_of
from fusionlint.analysis.rescale import mentions
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

_CLONE_TEXT = re.compile(r"\s*(\w+)\s*=.*\bclone\s*\(")
_MIN_UPDATES = 2
_WINDOW = 8  # statements after the copy looked at


class CopyUpdatedBySlices(Rule):
    code = "FL024"
    name = "copy-updated-by-slices"
    message = "a copy updated slice by slice in place: compute the slices out of place and build the result once"
    rationale = """
        `y = x.clone()` followed by in-place updates of slices of `y` from themselves
        (`y[:, 0::3] = y[:, 0::3] * s + a`, `y[:, 2::3] = y[:, 2::3].sigmoid()`) writes the
        whole tensor once for the copy, then each slice's new value, then copies it into `y`:
        a keypoint decoder that updates x, y and visibility this way is 13 kernels in eager and
        7 under fusionrt (every in-place slice write is a write of its own), where computing
        the slices from a view of `x` and joining them with one `torch.cat` is 6 and 3. When
        every slice is scaled by a number of its own (`coords[..., 0] / w`, `coords[..., 1] /
        h`), one broadcasting op does it all: `coords / torch.tensor([w, h])`, 5 -> 1 kernels
        in eager and under fusionrt.

        Flagged: `y = x.clone()` (or `torch.clone(x)`), `x` a tensor, followed by at least two
        statements `y[s] = f(y[s])` (the same basic slice `s`: slices, integers, `...`; `f`
        reading `y` through that slice only) or `y[s] op= v` (`v` not reading `y`), also inside
        an `if` (without `else`) holding only such updates, before anything else reads `y`.
        Not flagged: a single update, a slice set from other values (`y[:, 0] = 0`), an index
        by a tensor or a mask (a scatter), a copy read between its updates.
    """
    use_instead = """
        Compute each slice from a view of the original and join them once (`torch.cat`,
        `torch.stack`), or, where each slice is scaled by a number of its own, scale the whole
        tensor by a broadcast vector: `coords_input / torch.tensor([w, h])`.
    """
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the out-of-place form depends on how the slices tile the tensor (a strided
        slice per channel becomes a view with a channel axis), which the rule does not know.
    """
    examples = (
        Example(
            bad="""\
import torch


def normalize_coords(coords_input: torch.Tensor, width: int, height: int) -> torch.Tensor:
    coords = coords_input.clone()
    coords[:, :, 0] = coords[:, :, 0] / width
    coords[:, :, 1] = coords[:, :, 1] / height
    return coords
""",
            at=((5, 5),),
            fixed=None,
            good="""\
import torch


def normalize_coords(coords_input: torch.Tensor, width: int, height: int) -> torch.Tensor:
    return coords_input / torch.tensor([width, height], dtype=coords_input.dtype)
""",
            call="normalize_coords(randn(4, 5, 2), 1024, 768)",
        ),
        Example(  # strided slices of keypoints (x, y, visibility), one under an `if`
            bad="""\
import torch


def decode(kpts: torch.Tensor, anchors: torch.Tensor, strides: torch.Tensor, ndim: int) -> torch.Tensor:
    y = kpts.clone()
    if ndim == 3:
        y[:, 2::ndim] = y[:, 2::ndim].sigmoid()
    y[:, 0::ndim] = (y[:, 0::ndim] * 2.0 + anchors[0]) * strides
    y[:, 1::ndim] = (y[:, 1::ndim] * 2.0 + anchors[1]) * strides
    return y
""",
            at=((5, 5),),
            fixed=None,
            good="""\
import torch


def decode(kpts: torch.Tensor, anchors: torch.Tensor, strides: torch.Tensor, ndim: int) -> torch.Tensor:
    y = kpts.view(kpts.shape[0], -1, ndim, kpts.shape[-1])
    xy = (y[:, :, :2] * 2.0 + anchors) * strides
    if ndim == 3:
        xy = torch.cat((xy, y[:, :, 2:3].sigmoid()), 2)
    return xy.view(kpts.shape)
""",
            call="decode(randn(2, 51, 400), randn(2, 400), randn(1, 400), 3)",
        ),
    )
    valid = (
        # one update; a slice set from other values; a mask; a read between the updates
        """\
import torch


def f(x: torch.Tensor, mask: torch.Tensor, w: float):
    a = x.clone()
    a[:, 0] = a[:, 0] / w
    b = x.clone()
    b[:, 0] = 0
    b[:, 1] = x[:, 0]
    c = x.clone()
    c[mask] = c[mask] * 2
    c[:, 1] = c[:, 1] * 2
    d = x.clone()
    d[:, 0] = d[:, 0] * w
    total = d.sum()
    d[:, 1] = d[:, 1] * w
    return a, b, c, d, total
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return re.compile(r"\bclone\s*\(")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        made = _CLONE_TEXT.match(block[index])
        if made is None:
            return False
        updated = re.compile(r"\s*(?:%s\s*\[|if\b)" % made.group(1))  # an update, or an `if` holding some
        return any(updated.match(block[later]) for later in range(index + 1, min(index + 1 + _WINDOW, len(block))))

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            name = _cloned_into(scope, ref)
            if name is not None and _updates_before_read(ref, name) >= _MIN_UPDATES:
                yield Violation(ref.simple)


def _cloned_into(scope: Scope, ref: StatementRef) -> str | None:
    """``y`` of ``y = x.clone()`` or ``y = torch.clone(x)``, ``x`` a tensor."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    value = small.value
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "clone" and not value.args:
        source = func.value
    elif scope.torch_name(func) == "torch.clone" and len(value.args) == 1 and value.args[0].keyword is None:
        source = value.args[0].value
    else:
        return None
    return small.targets[0].target.value if scope.is_tensor(source) else None


def _updates_before_read(ref: StatementRef, name: str) -> int:
    """How many slice updates of ``name`` follow ``ref`` in the next statements of its block
    (directly, or as the whole body of an ``if`` without ``else``) before another statement
    reads ``name``."""
    count = 0
    for later in ref.later():
        if later.index > ref.index + _WINDOW:
            break
        node = later.node
        if not mentions(node, name):
            continue
        if isinstance(node, cst.If) and node.orelse is None and not any(mentions(part, name) for part in own_parts(node)):
            body = [statement for suite in inner_blocks(node) for statement in _statements(suite)]
            if body and all(_slice_update(statement, name) for statement in body):
                count += len(body)
                continue
        if not _slice_update(node, name):
            break
        count += 1
    return count


def _statements(suite: cst.CSTNode) -> list[cst.CSTNode]:
    return list(suite.body) if isinstance(suite, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [suite]


def _slice_update(statement: cst.CSTNode, name: str) -> bool:
    """``name[s] = f(name[s])`` or ``name[s] op= v``, ``s`` a basic slice."""
    if isinstance(statement, cst.SimpleStatementLine):
        if len(statement.body) != 1:
            return False
        statement = statement.body[0]
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target, value, augmented = statement.targets[0].target, statement.value, False
    elif isinstance(statement, cst.AugAssign):
        target, value, augmented = statement.target, statement.value, True
    else:
        return False
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name):
        return False
    if not all(_basic(element.slice) for element in target.slice):
        return False
    if augmented:
        return not mentions(value, name)
    reads = _reads_of(value, name)
    return bool(reads) and all(isinstance(read, cst.Subscript) and code_of(read) == code_of(target) for read in reads)


def _basic(index: cst.BaseSlice) -> bool:
    """A slice (``a:b:c``), an integer literal or ``...``: indexing that makes a view."""
    if isinstance(index, cst.Slice):
        return True
    value = index.value
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Ellipsis))


def _reads_of(node: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """The outermost expressions reading ``name``: ``name[...]`` where it is subscripted, else
    the name itself."""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
        return [node]
    if isinstance(node, cst.Name):
        return [node] if node.value == name else []
    return [read for child in children(node) for read in _reads_of(child, name)]
