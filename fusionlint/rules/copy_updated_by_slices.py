"""FL024: a copy (``y = x.clone()``) or a fresh buffer (``torch.zeros(...)``) built by in-place
writes of its slices or masks (``y[:, 0] = y[:, 0] / w``, ``y[m] = v[m]``, ``y[..., 0] = a``):
one out-of-place op (a broadcast, ``torch.where``, ``torch.cat``) writes the result once."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, scope_statements
from fusionlint.analysis.flow import inner_blocks
from fusionlint.analysis.nodes import children, code_of, reaching_assignment
from fusionlint.analysis.rescale import mentions
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import ELEMENTWISE, OpTables
from fusionlint.rule import Example, Rule, Violation

_MAKERS = frozenset({
    "clone", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
    "new_zeros", "new_ones", "new_full", "new_empty",
})
_IF = re.compile(r"if\b")
_MIN_UPDATES = 2
_WINDOW = 8  # statements after the copy looked at
_FILLS = {"zeros": "fill", "ones": "fill", "full": "fill", "empty": "empty"}  # what the rest of a fresh buffer holds
_MASK_CALLS = frozenset({
    "torch.isnan", "torch.isinf", "torch.isfinite", "torch.isclose", "torch.isposinf", "torch.isneginf",
    "torch.logical_and", "torch.logical_or", "torch.logical_not", "torch.logical_xor",
    "torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt", "torch.ge",
})
_MASK_METHODS = frozenset({"bool", "isnan", "isinf", "isfinite", "logical_not", "eq", "ne", "lt", "le", "gt", "ge"})
_COPY, _FILL, _EMPTY = "copy", "fill", "empty"
_SLICE, _MASK, _PIECE = "slice", "mask", "piece"
_MADE_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(_MAKERS)))
_MADE_TEXT = re.compile(r"\s*(\w+)\s*=.*" + _MADE_CALL.pattern)
_EMPTY_MODULE = cst.Module([])  # renders an index (a slice has no parentheses for `code_of` to drop)
_MASKED_COPY = ("a copy updated in place through a boolean mask: compute it out of place in one op "
                "(`x.masked_fill(m, v)`, `torch.where(m, f(x), x)`)")
_MASKED_FILL = ("a filled buffer written through boolean masks: one `torch.where` (or `masked_fill`) "
                "builds it out of place, without indexing by the masks")
_COPY_PIECES = ("a copy whose slices along one dimension are set in place from other values: build the result once, "
                "`torch.cat` of the new slices and the source's other ones (`torch.stack` where they cover it)")
_PIECES = ("a fresh buffer written piece by piece from other values, the pieces covering it: "
           "join them once with `torch.cat` or `torch.stack`")


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
        in eager and under fusionrt. Writing through a boolean mask costs more: `y[m] = v`
        finds the mask's elements and scatters into them, so a buffer built as `zeros_like(p)`,
        `[t] = p[t]`, `[~t] = -p[~t]` is 8 kernels where `torch.where(t, p, -p)` is 3 in eager
        and 1 under fusionrt, and `x.clone()` then `[m] = 0` is 3 -> 2 eager kernels with
        `masked_fill`. A fresh buffer written piece by piece from other values (`y[..., 0] =
        a`, `y[..., 1] = b`) is written once for its fill and once per piece, where
        `torch.stack` writes it once (6 -> 5 kernels in eager, 4 -> 2 under fusionrt).

        Flagged, when the writes follow the tensor's making before anything else reads it (also
        inside an `if` without `else` holding only such writes):
        a copy `y = x.clone()` (or `torch.clone(x)`), `x` a tensor, then at least two statements
        `y[s] = f(y[s])` (the same basic slice `s`: slices, integers, `...`; `f` reading `y`
        through that slice only), `y[s] op= v` (`v` not reading `y`) or `y[s].clamp_(0, w)`
        (in-place element-wise ops, chained or not, whose arguments do not read `y`: clipping
        boxes, 3 -> 1 kernels under fusionrt and 3 -> 2 in eager with one broadcast
        `torch.minimum(boxes.clamp(min=0), bounds)`), or statements `y[s] = v` setting slices
        along one dimension (the indices differ at one position, full elsewhere) from values
        that do not read `y`, mixed with those or not: a box format's conversion (`y[..., 0] =
        (x[..., 0] + x[..., 2]) / 2`, ...) writes the copy and then each piece, where one
        `torch.cat` of the new slices and the source's other ones writes the result once
        (fusionrt 9 -> 2 kernels, eager 11 -> 7, for four pieces written from `x`);
        a copy or a buffer filled with one value (`torch.zeros`, `ones_like`, `new_full`, ...),
        then only writes `y[m] = v` or `y[m] op= v`, `m` surely boolean (a comparison, `~`,
        `&`, `|` of one, `isnan`, `.bool()`, or a name bound to one), `v` a number, an
        element-wise expression reading tensors only through `[m]`, or a module's tensor that
        every selected row takes (`x.clone()` then `[mask == 1] = self.mask_encoding`, one
        `torch.where(m[..., None], self.mask_encoding, x)`: fusionrt 4 -> 1 kernels, eager 6 -> 5);
        a fresh buffer (`torch.zeros`, `torch.empty`, `new_zeros`, ...), then at least two
        writes of basic slices from tensors not reading it, differing at one index position
        only, full (`:`, `...`) elsewhere, and tiling that dimension: `:n` and `n:`, or every
        integer below the size the buffer's shape states there.
        Not flagged: a single slice update of a copy, a copy's slices set from values reading
        its other slices (a flip: `y[:, 0] = w - y[:, 2]`), pieces of a copy along two dimensions, a
        buffer written only in part (the rest is its fill: a `cat` with a filled piece pays
        nowhere), an index that may hold integers (a scatter), a masked value read whole or
        reduced over the selected elements (`norm(v[m], dim=-1)`), a buffer asked to require
        gradients, a constructor's buffers (built once), a tensor read between its writes.
    """
    use_instead = """
        Compute each slice from a view of the original and join them once (`torch.cat`,
        `torch.stack`), or, where each slice is scaled by a number of its own, scale the whole
        tensor by a broadcast vector: `coords_input / torch.tensor([w, h])`. Writes through
        masks become one `torch.where(m, v, rest)` (nested for several masks, the later one
        outside) or `masked_fill(m, number)`.
    """
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the out-of-place form depends on how the slices tile the tensor (a strided
        slice per channel becomes a view with a channel axis; a piece that broadcasts needs
        `expand` before `stack`), which the rule does not know. `torch.where` evaluates the
        masked value on every element: where it is undefined outside the mask (`rss / tss`
        with `tss == 0`) the result is the same, but a gradient through it is NaN, so mask the
        operand too (`tss.masked_fill(~m, 1)`) where the value is differentiated.
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
        Example(  # a filled buffer written through a mask and its complement
            bad="""\
import torch


def hinge_margin(preds: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    target = labels > 0
    margin = torch.zeros_like(preds)
    margin[target] = preds[target]
    margin[~target] = -preds[~target]
    return margin
""",
            at=((6, 5),),
            fixed=None,
            good="""\
import torch


def hinge_margin(preds: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    target = labels > 0
    return torch.where(target, preds, -preds)
""",
            call="hinge_margin(randn(64, 10), randn(64, 10))",
        ),
        Example(  # a copy with its NaNs set through a mask
            bad="""\
import torch


def zero_nans(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[torch.isnan(y)] = 0.0
    return y
""",
            at=((5, 5),),
            fixed=None,
            good="""\
import torch


def zero_nans(x: torch.Tensor) -> torch.Tensor:
    return x.masked_fill(torch.isnan(x), 0.0)
""",
            call="zero_nans(randn(64, 128))",
        ),
        Example(  # a fresh buffer whose last dimension is written element by element
            bad="""\
import torch


def polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    y = torch.zeros(magnitude.shape + (2,), dtype=magnitude.dtype)
    y[..., 0] = magnitude * torch.cos(angle)
    y[..., 1] = magnitude * torch.sin(angle)
    return y
""",
            at=((5, 5),),
            fixed=None,
            good="""\
import torch


def polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    return torch.stack((magnitude * torch.cos(angle), magnitude * torch.sin(angle)), -1)
""",
            call="polar(randn(4, 64, 128), randn(4, 64, 128))",
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
        # a buffer written in part (the rest is its zeros); a piece reading the buffer's earlier
        # values; a masked value reduced over the selected elements; an index that may hold
        # integers; a leaf asked to require gradients
        """\
import torch


def f(r: torch.Tensor, c: torch.Tensor, s: torch.Tensor, v: torch.Tensor, idx: torch.Tensor):
    pe = torch.zeros(r.shape[0], c.shape[0], 3)
    pe[:, :, 1] = r.unsqueeze(1)
    pe[:, :, 2] = c.unsqueeze(0)
    u = torch.zeros((s.shape[0], 2))
    u[:, 0] = s // 4
    u[:, 1] = s - u[:, 0] * 4
    keep = r > 0
    w = torch.zeros(v.size(0))
    w[keep] = torch.norm(v[keep], dim=-1)
    g = torch.zeros_like(r)
    g[idx] = r[idx]
    h = torch.zeros(r.shape + (2,), requires_grad=True)
    h[..., 0] = r
    h[..., 1] = c
    return pe, u, w, g, h
""",
        # a constructor's buffer is built once
        """\
import torch


class Table(torch.nn.Module):
    def __init__(self, pos: torch.Tensor, freq: torch.Tensor) -> None:
        super().__init__()
        pe = torch.zeros(pos.shape + (2,))
        pe[..., 0] = torch.sin(pos * freq)
        pe[..., 1] = torch.cos(pos * freq)
        self.register_buffer("pe", pe)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _MADE_CALL

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        made = _MADE_TEXT.match(block[index])
        if made is None:
            return False
        name = made.group(1)
        for later in range(index + 1, min(index + 1 + _WINDOW, len(block))):
            line = block[later].lstrip()
            if line.startswith(name) and line[len(name):].lstrip().startswith("[") or _IF.match(line):
                return True  # an update, or an `if` holding some
        return False

    def check(self, scope: Scope) -> Iterator[Violation]:
        constructor = scope.class_name is not None and isinstance(scope.node, cst.FunctionDef) \
            and scope.node.name.value == "__init__"
        for ref in scope_statements(scope):
            made = _made(scope, ref)
            if made is None or constructor and made.kind != _COPY:
                continue  # a constructor's buffer is built once
            updates = _updates_before_read(scope, ref, made)
            kinds = [kind for kind, _ in updates]
            if made.kind == _COPY and _MASK in kinds:
                yield Violation(ref.simple, message=_MASKED_COPY)
            elif made.kind == _COPY and len(kinds) >= _MIN_UPDATES and _PIECE not in kinds:
                yield Violation(ref.simple)
            elif made.kind == _COPY and len(kinds) >= _MIN_UPDATES and _along([at for _, at in updates]) is not None:
                yield Violation(ref.simple, message=_COPY_PIECES)
            elif made.kind == _FILL and kinds and set(kinds) == {_MASK}:
                yield Violation(ref.simple, message=_MASKED_FILL)
            elif len(kinds) >= _MIN_UPDATES and set(kinds) == {_PIECE} and _covers([at for _, at in updates], made):
                yield Violation(ref.simple, message=_PIECES)


@dataclass(frozen=True)
class _Made:
    """A tensor made fresh: a copy of another, or a buffer filled with one value (or uninitialised),
    with the sizes its shape is known to end with (the whole shape where ``whole``)."""

    name: str
    kind: str
    tail: tuple[cst.BaseExpression, ...] = ()
    whole: bool = False


def _made(scope: Scope, ref: StatementRef) -> _Made | None:
    """``y`` of ``y = x.clone()`` / ``torch.clone(x)`` (``x`` a tensor), or of a fresh buffer
    (``torch.zeros(...)``, ``torch.full_like(x, v)``, ``x.new_zeros(...)``, ...) not asked to
    require gradients (in-place writes into such a leaf are an error or mean to build a parameter)."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
        return None
    name, value = small.targets[0].target.value, small.value
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    called = func.attr if isinstance(func, cst.Attribute) else func
    if not (isinstance(called, cst.Name) and called.value in _MAKERS):
        return None
    if isinstance(func, cst.Attribute) and func.attr.value == "clone" and not value.args:
        return _Made(name, _COPY) if scope.is_tensor(func.value) else None
    torch_name = scope.torch_name(func)
    if torch_name == "torch.clone" and len(value.args) == 1 and value.args[0].keyword is None:
        return _Made(name, _COPY) if scope.is_tensor(value.args[0].value) else None
    if any(arg.keyword is not None and arg.keyword.value == "requires_grad" and not _false(arg.value)
           for arg in value.args):
        return None
    positional = [arg for arg in value.args if arg.keyword is None]
    if isinstance(func, cst.Attribute) and func.attr.value.startswith("new_") and scope.is_tensor(func.value):
        kind = _FILLS.get(func.attr.value[4:])
        sized = positional[:1] if func.attr.value == "new_full" else positional
    elif torch_name is not None and torch_name.endswith("_like"):
        return _Made(name, _FILLS.get(torch_name[6:-5], "")) if torch_name[6:-5] in _FILLS else None
    elif torch_name in ("torch.zeros", "torch.ones", "torch.full", "torch.empty"):
        kind = _FILLS[torch_name[6:]]
        sized = positional[:1] if torch_name == "torch.full" else positional
    else:
        return None
    if kind is None:
        return None
    tail, whole = _shape(sized)
    return _Made(name, kind, tail, whole)


def _false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _shape(args: Sequence[cst.Arg]) -> tuple[tuple[cst.BaseExpression, ...], bool]:
    """The sizes a factory's shape arguments are known to end with, and whether they are all of
    them: ``(a, b, 2)``, ``a, b, 2``, ``[a, b, 2]`` are whole; ``x.shape + (2,)`` and ``*x.shape, 2``
    end with ``2``."""
    values: list[cst.BaseExpression | cst.BaseElement] = [arg for arg in args]
    whole = True
    if len(args) == 1 and args[0].star == "":
        only = args[0].value
        if isinstance(only, (cst.Tuple, cst.List)):
            values = list(only.elements)
        elif isinstance(only, cst.BinaryOperation) and isinstance(only.operator, cst.Add) \
                and isinstance(only.right, cst.Tuple):
            values, whole = list(only.right.elements), False
        elif not isinstance(only, cst.Integer):
            return (), False
    sizes: list[cst.BaseExpression] = []
    for value in values:
        if isinstance(value, cst.StarredElement) or isinstance(value, cst.Arg) and value.star:
            sizes, whole = [], False
        else:
            sizes.append(value.value)
    return tuple(sizes), whole


def _updates_before_read(scope: Scope, ref: StatementRef, made: _Made) -> list[tuple[str, Sequence[cst.SubscriptElement]]]:
    """The in-place writes into ``made`` that follow ``ref`` in the next statements of its block
    (directly, or as the whole body of an ``if`` without ``else``) before another statement reads
    it: each one's kind and index."""
    name = made.name
    updates: list[tuple[str, Sequence[cst.SubscriptElement]]] = []
    for later in ref.later():
        if later.index > ref.index + _WINDOW:
            break
        node = later.node
        if not isinstance(node, (cst.SimpleStatementLine, cst.If)):
            break  # a loop or a `with` may read it: nothing to tell without walking its body
        if not mentions(node, name):
            continue
        if isinstance(node, cst.If) and node.orelse is None and not any(mentions(part, name) for part in own_parts(node)):
            body = [_update(scope, later, statement, made) for suite in inner_blocks(node) for statement in _statements(suite)]
            if body and all(update is not None and update[0] != _PIECE for update in body):
                updates += body  # type: ignore[arg-type]
                continue
        update = _update(scope, later, node, made)
        if update is None:
            break
        updates.append(update)
    return updates


def _statements(suite: cst.CSTNode) -> list[cst.CSTNode]:
    return list(suite.body) if isinstance(suite, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [suite]


def _update(
    scope: Scope, ref: StatementRef, statement: cst.CSTNode, made: _Made
) -> tuple[str, Sequence[cst.SubscriptElement]] | None:
    """What kind of in-place write into ``made`` a statement is, with its index, if one op can
    take its place: ``y[s] = f(y[s])`` or ``y[s] op= v`` into a copy (``s`` a basic slice,
    `_SLICE`), ``y[m] = v`` or ``y[m] op= v`` through a boolean mask ``m`` into a copy or a filled
    buffer, ``v`` a number or reading tensors only through ``[m]`` (`_MASK`: a ``torch.where``),
    or ``y[s] = v`` into a fresh buffer, ``v`` a tensor not reading it (`_PIECE`, a piece of a
    ``cat``)."""
    if isinstance(statement, cst.SimpleStatementLine):
        if len(statement.body) != 1:
            return None
        statement = statement.body[0]
    if isinstance(statement, cst.Expr) and made.kind == _COPY:
        target = _updated_in_place(scope, statement.value, made.name)  # `y[:, 0].clamp_(0, w)`
        return (_SLICE, target.slice) if target is not None and all(_basic(e.slice) for e in target.slice) else None
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target, value, augmented = statement.targets[0].target, statement.value, False
    elif isinstance(statement, cst.AugAssign):
        target, value, augmented = statement.target, statement.value, True
    else:
        return None
    name = made.name
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name):
        return None
    index = target.slice
    if made.kind != _EMPTY and len(index) == 1 and isinstance(index[0].slice, cst.Index) \
            and _is_mask(scope, ref, index[0].slice.value, 3):
        return (_MASK, index) if _masked_value(scope, value, code_of(index[0].slice.value), name) else None
    if not all(_basic(element.slice) for element in index):
        return None
    if made.kind != _COPY:
        piece = not augmented and scope.is_tensor(value) and not mentions(value, name)
        return (_PIECE, index) if piece else None  # numbers would be a `torch.tensor` of host values
    if augmented:
        return (_SLICE, index) if not mentions(value, name) else None
    reads = _reads_of(value, name)
    if not reads and scope.is_tensor(value):
        return _PIECE, index  # from other values: a piece of a `cat` with the source's other slices
    if reads and all(isinstance(read, cst.Subscript) and code_of(read) == code_of(target) for read in reads):
        return _SLICE, index
    return None


def _updated_in_place(scope: Scope, call: cst.BaseExpression, name: str) -> cst.Subscript | None:
    """``y[s]`` of ``y[s].clamp_(0, w)`` or ``y[s].add_(0.5).mul_(2)``: in-place element-wise ops
    chained on a slice of ``y``, their arguments not reading it; else None."""
    while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        method = call.func.attr.value
        if not method.endswith("_") or scope.ops.op_class(method[:-1]) != ELEMENTWISE \
                or any(mentions(arg, name) for arg in call.args):
            return None
        call = call.func.value
        if isinstance(call, cst.Subscript):
            held = call.value
            return call if isinstance(held, cst.Name) and held.value == name else None
    return None


def _is_mask(scope: Scope, ref: StatementRef, expr: cst.BaseExpression, depth: int) -> bool:
    """Is ``expr`` surely a boolean tensor: a comparison, ``~``/``&``/``|`` of one, a predicate
    (``torch.isnan``, ``.bool()``), or a name last bound to one of these?"""
    if isinstance(expr, cst.Comparison):
        return not any(isinstance(target.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                       for target in expr.comparisons)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _is_mask(scope, ref, expr.expression, depth)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return _is_mask(scope, ref, expr.left, depth) or _is_mask(scope, ref, expr.right, depth)
    if isinstance(expr, cst.Call):
        func = expr.func
        if scope.torch_name(func) in _MASK_CALLS:
            return True
        return isinstance(func, cst.Attribute) and func.attr.value in _MASK_METHODS and scope.is_tensor(func.value)
    if isinstance(expr, cst.Name) and depth > 0:
        found = reaching_assignment(ref, expr.value, out_of_ifs=True)
        return found is not None and _is_mask(scope, found[0], found[1], depth - 1)
    return False


def _masked_value(scope: Scope, value: cst.BaseExpression, mask: str, name: str) -> bool:
    """A number, a module's tensor (``self.mask_token``: a learned vector every selected row
    takes, which ``torch.where(m[..., None], self.mask_token, x)`` broadcasts), or an expression
    reading tensors only through ``[mask]``, at least once: its value at every element is that
    expression without the indexing, as ``torch.where`` takes it."""
    return _number(value) or _module_tensor(scope, value) or bool(_masked_reads(scope, value, mask, name))


def _module_tensor(scope: Scope, value: cst.BaseExpression) -> bool:
    return scope.class_name is not None and isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) \
        and value.value.value == "self" and value.attr.value in scope.facts.tensor_attrs(scope.class_name)


def _masked_reads(scope: Scope, node: cst.CSTNode, mask: str, name: str) -> int | None:
    """How many reads through ``[mask]`` ``node`` holds; None where it reads a tensor otherwise or
    reduces over the selected elements (``norm(v[m], dim=-1)`` is not per element)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
            and code_of(node.slice[0].slice.value) == mask:
        return 1
    if isinstance(node, cst.Name):
        return None if node.value == name or node.value in scope.tensors else 0
    if isinstance(node, cst.Lambda) or isinstance(node, cst.Call) and (op := scope.op(node)) is not None \
            and op[1] != ELEMENTWISE:
        return None
    total = 0
    for child in children(node):
        reads = _masked_reads(scope, child, mask, name)
        if reads is None:
            return None
        total += reads
    return total


def _number(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float)) or isinstance(value, cst.Name) and value.value in ("True", "False")


def _covers(indices: list[Sequence[cst.SubscriptElement]], made: _Made) -> bool:
    """Do the pieces' indices tile the buffer: the same full slices (``:``, ``...``) everywhere but
    at one position, where they are ``:n`` and ``n:``, or every integer below a size the buffer's
    shape states there?"""
    at = _along(indices)
    if at is None:
        return False
    elements = indices[0]
    parts = [index[at].slice for index in indices]
    if len(parts) == 2 and all(isinstance(part, cst.Slice) and part.step is None for part in parts):
        first, second = parts  # type: ignore[misc]
        return (first.lower is None and second.upper is None and first.upper is not None and second.lower is not None
                and code_of(first.upper) == code_of(second.lower))
    values = [int(part.value.value) if isinstance(part, cst.Index) and isinstance(part.value, cst.Integer) else -1
              for part in parts]
    size = _size_at(elements, at, made)
    return size is not None and sorted(values) == list(range(size))


def _along(indices: list[Sequence[cst.SubscriptElement]]) -> int | None:
    """The one index position at which the writes' indices differ, all full (``:``, ``...``)
    elsewhere: the writes set slices along one dimension, which ``torch.cat`` joins; else None."""
    if len({len(index) for index in indices}) != 1:
        return None
    codes = [[_EMPTY_MODULE.code_for_node(element.slice) for element in index] for index in indices]
    differing = [at for at in range(len(codes[0])) if len({code[at] for code in codes}) > 1]
    if len(differing) != 1:
        return None
    at = differing[0]
    full = all(_full(element.slice) for position, element in enumerate(indices[0]) if position != at)
    return at if full else None


def _full(index: cst.BaseSlice) -> bool:
    if isinstance(index, cst.Slice):
        return index.lower is None and index.upper is None and index.step is None
    return isinstance(index.value, cst.Ellipsis)


def _size_at(elements: Sequence[cst.SubscriptElement], at: int, made: _Made) -> int | None:
    """The literal size of the dimension the index's position ``at`` selects, where the buffer's
    shape states it."""
    ellipsis = [position for position, element in enumerate(elements)
                if isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Ellipsis)]
    if ellipsis and ellipsis[0] < at:
        from_end = len(elements) - 1 - at
        size = made.tail[-1 - from_end] if from_end < len(made.tail) else None
    else:
        size = made.tail[at] if made.whole and at < len(made.tail) else None
    return int(size.value) if isinstance(size, cst.Integer) else None


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
