"""FL051: a reduction of a reduction of the same kind (``x.sum(-1).sum(-1)``,
``torch.amax(x.amax(1), 1)``): one reduction over both dims reads the tensor once and writes no
intermediate."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope
from fusionlint.analysis.nodes import code_of
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

# Reductions over a set of dims whose result over the union is the reduction of the reduction:
# exactly for max and min, in exact arithmetic for sums and means (every group a mean averages
# has the same size). Not ``prod`` (one dim only), nor ``nanmean`` (its groups differ in size).
_REDUCTIONS = frozenset({"sum", "nansum", "mean", "amax", "amin"})
# What the file search looks for: a reduction called on a call's result, or the function form.
_NEEDLE = re.compile(r"\)\s*\.\s*(?:(?:nan)?sum|mean|am(?:ax|in))\s*\(|torch\.(?:(?:nan)?sum|mean|am(?:ax|in))\s*\(")
# The same reduction called on its own result (``.sum(-1).sum(-1)``, arguments one level of
# parentheses deep), or given it as the first argument (``torch.sum(x.sum(1), 1)``).
_ARGS = r"\((?:[^()]|\([^()]*\))*\)"
_TWICE = re.compile(
    rf"\b((?:nan)?sum|mean|am(?:ax|in))\s*{_ARGS}\s*\.\s*\1\s*\("
    rf"|\b((?:nan)?sum|mean|am(?:ax|in))\s*\((?:[^(),]|{_ARGS})*\.\s*\2\s*\("
)


class SplitReduction(Rule):
    code = "FL051"
    name = "split-reduction"
    message = "a reduction of a reduction of the same kind: one reduction over both dims writes no intermediate"
    rationale = """
        `x.sum(-1).sum(-1)` runs two reductions: the first writes a tensor of partial sums that
        the second reads back. `x.sum((-2, -1))` reads `x` once and writes the result alone. In
        eager that is a kernel and the intermediate's write fewer; under fusionrt a reduction
        ends its kernel, so the reduction of a reduction is a second kernel that one reduction
        over both dims does not need (a (64, 128, 256) input: 2 -> 1 kernels and writes, fusionrt
        and eager). A sum of sums over disjoint dims is the sum over their union; so are a max
        of maxima and a min of minima; a mean of means is the mean over the union because every
        group the first mean averages has the same size.

        Flagged: `sum`, `nansum`, `mean`, `amax` and `amin` of the same op's result (method or
        `torch.` function, either way round: `torch.sum(x.sum(1), 1)`), each over dims written
        as integers (a literal, a negative literal or a tuple of them), both with the same
        `keepdim` (with `keepdim=True` the dims keep their numbers; without, the outer
        reduction's dims are renumbered as the input's: `x.sum(1).sum(1)` is `x.sum((1, 2))`),
        or the outer one over everything (`x.mean(-1).mean()` is `x.mean()`), and a `dtype=`
        given to the outer one or to neither (one reduction accumulates in the outer one's:
        SAM's stability score counts a mask's pixels as `int16` per row, then `int32`). Not flagged: dims held in names (their
        values are unknown, so the union may not be disjoint), dims of mixed signs when
        `keepdim` is off (renumbering needs the rank), `prod` (one dim at a time), `nanmean`,
        `max`/`min` over a dim (two outputs: FL025), two different reductions
        (`x.sum(-1).mean()`).
    """
    use_instead = "One reduction over the union of the dims: `x.sum((-2, -1))`, `x.amax((1, 2), keepdim=True)`."
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix replaces the two calls by one over the union of the dims, keeping the outer
        call's form, `keepdim` and `dtype`. It is **unsafe** for sums and means: floating-point
        addition is not associative, so one reduction may round differently from two (`amax`
        and `amin` are exact); and an integer sum whose inner `dtype` was narrower than the
        outer one's now accumulates in the outer one's, which cannot overflow where the inner
        one could.
    """
    examples = (
        Example(
            bad="""\
import torch


def energy(spec: torch.Tensor) -> torch.Tensor:
    return spec.square().sum(-1).sum(-1)
""",
            at=((5, 12),),
            fixed="""\
import torch


def energy(spec: torch.Tensor) -> torch.Tensor:
    return spec.square().sum((-2, -1))
""",
            call="energy(randn(64, 128, 256))",
        ),
        Example(
            bad="""\
import torch


def pooled(x: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x.amax(2, keepdim=True), 3, keepdim=True)
    return x - peak
""",
            at=((5, 12),),
            fixed="""\
import torch


def pooled(x: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, (2, 3), keepdim=True)
    return x - peak
""",
            call="pooled(randn(8, 16, 32, 32))",
        ),
    )
    valid = (
        # dims in names; mixed signs without keepdim; different reductions; prod; max over a dim;
        # keepdim on one side only; an inner dtype alone
        """\
import torch


def f(x: torch.Tensor, d: int):
    a = x.sum(d).sum(d)
    b = x.sum(1).sum(-1)
    c = x.sum(-1).mean()
    e = x.prod(1).prod(1)
    g = x.max(1)[0].max(1)[0]
    h = x.sum(1, keepdim=True).sum(1)
    k = x.sum(1, dtype=torch.int32).sum(1)
    return a, b, c, e, g, h, k
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _TWICE.search(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for key in sorted(_REDUCTIONS):
            for site in scope.sites.get(key, ()):
                if not _of_a_call(site.node):
                    continue
                outer = _reduction(scope, site.node)
                if outer is None:
                    continue
                inner = _reduction(scope, outer.operand)
                if inner is None or inner.op != outer.op:
                    continue
                combined = _combined(inner, outer)
                if combined is None:
                    continue
                yield _violation(site.statement.node, outer, inner, combined)


@dataclass(frozen=True)
class _Reduction:
    """``x.op(dims, keepdim=..., dtype=...)`` or ``torch.op(x, dims, ...)``: dims None for all."""

    call: cst.Call
    op: str
    operand: cst.BaseExpression
    dims: tuple[int, ...] | None
    keepdim: bool
    dtype: cst.BaseExpression | None
    function: bool


def _of_a_call(node: cst.CSTNode) -> bool:
    """Is ``node`` a method called on a call's result, or a function whose first argument is a
    call? (A reduction of a reduction is one of the two; most reductions are neither.)"""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        return True
    return bool(node.args) and isinstance(node.args[0].value, cst.Call)


def _reduction(scope: Scope, node: cst.CSTNode) -> _Reduction | None:
    """The reduction ``node`` is, with its dims known as integers; None for anything else."""
    found = scope.op(node)
    if found is None or found[0] not in _REDUCTIONS or found[2] is None:
        return None
    assert isinstance(node, cst.Call)
    op, _, operand = found
    function = not (isinstance(node.func, cst.Attribute) and node.func.value is operand)
    args = list(node.args[1:] if function else node.args)
    if any(arg.star for arg in args):
        return None
    positional = [arg.value for arg in args if arg.keyword is None]
    keywords = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
    if not keywords.keys() <= {"dim", "axis", "keepdim", "dtype"} or len(positional) > 2:
        return None
    if "axis" in keywords:
        keywords["dim"] = keywords.pop("axis")
    if positional and "dim" in keywords or len(positional) == 2 and "keepdim" in keywords:
        return None
    dim = positional[0] if positional else keywords.get("dim")
    keep = positional[1] if len(positional) == 2 else keywords.get("keepdim")
    dims = _dims(dim) if dim is not None else None
    keepdim = _bool(keep) if keep is not None else False
    if dim is not None and dims is None or keepdim is None:
        return None
    return _Reduction(node, op, operand, dims, keepdim, keywords.get("dtype"), function)


def _dims(expr: cst.BaseExpression) -> tuple[int, ...] | None:
    """The dims an integer, a negative integer or a tuple or list of them names; None otherwise."""
    items = [e.value for e in expr.elements] if isinstance(expr, (cst.Tuple, cst.List)) else [expr]
    dims = []
    for item in items:
        sign = 1
        if isinstance(item, cst.UnaryOperation) and isinstance(item.operator, cst.Minus):
            sign, item = -1, item.expression
        if not isinstance(item, cst.Integer):
            return None
        dims.append(sign * int(item.value, 0))
    return tuple(dims) if dims and len(set(dims)) == len(dims) else None


def _bool(expr: cst.BaseExpression) -> bool | None:
    return {"True": True, "False": False}.get(expr.value) if isinstance(expr, cst.Name) else None


def _combined(inner: _Reduction, outer: _Reduction) -> tuple[int, ...] | None:
    """The input's dims one reduction over both covers (empty: every dim); None where the
    dims cannot be known to be disjoint, or the two differ in ``keepdim``, or only the inner one has a ``dtype``."""
    if inner.dims is None or inner.keepdim != outer.keepdim and outer.dims is not None:
        return None
    if inner.dtype is not None and outer.dtype is None:
        return None
    if outer.dims is None:
        return ()
    if inner.keepdim:
        dims = (*inner.dims, *outer.dims)
        same_sign = all(d >= 0 for d in dims) or all(d < 0 for d in dims)
        return tuple(sorted(dims)) if same_sign and len(set(dims)) == len(dims) else None
    if all(d >= 0 for d in (*inner.dims, *outer.dims)):
        removed = sorted(inner.dims)
        renumbered = [_skip_up(d, removed) for d in outer.dims]
    elif all(d < 0 for d in (*inner.dims, *outer.dims)):
        removed = sorted(inner.dims, reverse=True)
        renumbered = [-_skip_up(-d - 1, [-r - 1 for r in removed]) - 1 for d in outer.dims]
    else:
        return None
    return tuple(sorted((*inner.dims, *renumbered)))


def _skip_up(dim: int, removed: list[int]) -> int:
    """The input's number of dim ``dim`` of the tensor left once the sorted ``removed`` dims of
    the input are reduced away (counting from the start)."""
    for gone in removed:
        if gone <= dim:
            dim += 1
    return dim


def _violation(statement: cst.CSTNode, outer: _Reduction, inner: _Reduction, dims: tuple[int, ...]) -> Violation:
    new = _one_reduction(outer, inner, dims)
    fix = None
    if isinstance(statement, cst.SimpleStatementLine):
        fix = (StatementEdit(statement, (replace_nodes(statement, {outer.call: new}),)),)
    over = "every dim" if not dims else f"dims {dims}" if len(dims) > 1 else f"dim {dims[0]}"
    message = (f"`{outer.op}` of the result of `{inner.op}`: one `{outer.op}` of `{code_of(inner.operand)}` over {over} "
               "reads it once and writes no intermediate")
    return Violation(outer.call, fix=fix, message=message)


def _one_reduction(outer: _Reduction, inner: _Reduction, dims: tuple[int, ...]) -> cst.Call:
    """The outer call, made of the inner one's operand over ``dims``."""
    args: list[cst.Arg] = []
    if dims:
        elements = [cst.Element(_integer(d)) for d in dims]
        args.append(cst.Arg(cst.Tuple(elements) if len(dims) > 1 else _integer(dims[0])))
    if outer.keepdim and dims:
        args.append(cst.Arg(cst.Name("True"), keyword=cst.Name("keepdim"), equal=_EQUAL))
    if outer.dtype is not None:
        args.append(cst.Arg(outer.dtype, keyword=cst.Name("dtype"), equal=_EQUAL))
    func = outer.call.func
    assert isinstance(func, (cst.Attribute, cst.Name))
    if outer.function:
        return outer.call.with_changes(args=[cst.Arg(inner.operand), *args])
    assert isinstance(func, cst.Attribute)
    receiver = inner.operand
    if not isinstance(receiver, _ATOMIC) and not receiver.lpar:
        receiver = receiver.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return outer.call.with_changes(func=func.with_changes(value=receiver), args=args)


_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _integer(value: int) -> cst.BaseExpression:
    if value < 0:
        return cst.UnaryOperation(cst.Minus(), cst.Integer(str(-value)))
    return cst.Integer(str(value))
