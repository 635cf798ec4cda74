"""FL025: a ``max``/``min`` over a dim, one of its two outputs dropped (``x.max(d)[0]``,
``torch.min(x, d).indices``, ``v, _ = x.max(d)``), and the arg-extremum of a negation
(``(-x).argmax(d)``): ``amax``/``amin`` and ``argmax``/``argmin`` compute only what is used."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts
from fusionlint.analysis.nodes import Walker, code_of
from fusionlint.analysis.numbers import NumberNames
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

# Every pattern calls one of the four; ``max(`` alone is mostly Python's builtin, so the text
# must also show an output picked (``)[0]``, ``).values``), a pair unpacked or a negation.
# (It finds ``argmax(`` too: a leading optional ``(?:arg)?`` would make the file search try every position.)
_CALL_TEXT = re.compile(r"(?:max|min)\s*\(")
_USE_TEXT = re.compile(r"\)\s*\[\s*[01]\s*\]|\)\s*\.\s*(?:values|indices)\b|^\s*[\w.]+\s*,\s*[\w.]+\s*=[^=]|\(\s*-")
_PAIRS = ("max", "min")
_OTHER = {"max": "min", "min": "max"}
_VALUES, _INDICES = 0, 1
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class MinMaxOneOutput(Rule):
    code = "FL025"
    name = "min-max-one-output"
    message = "a `max`/`min` over a dim with one output dropped: `amax`/`argmax` (`amin`/`argmin`) computes only the one used"
    rationale = """
        `x.max(dim)` (and `torch.max(x, dim)`, `min`) returns two tensors, the values and the
        int64 indices, from one kernel that writes both. Code that keeps one of them
        (`x.max(-1)[0]`, `.values`, `v, _ = x.max(-1)`, `x.max(-1)[1]`, `.indices`) pays for
        the other: `x.amax(-1)` writes the values alone, `x.argmax(-1)` the indices alone
        (fusionrt's eager count for a (64, 256, 128) input: 192 -> 64 KiB written for the
        values, 192 -> 128 KiB for the indices). Under fusionrt the difference is larger: a
        reduction with two outputs is a kernel of its own, where `amax` fuses with the
        element-wise work around it (`x - x.max(-1, keepdim=True)[0]`: 2 kernels and 3 writes ->
        1 and 1). The index of the extremum of a negation (`(-dist).max(1)[1]`,
        `torch.argmax(-x, 1)`), as vector quantizers pick the nearest code, is the index of the
        opposite extremum of the tensor itself: `dist.argmin(1)` needs no negated copy (2
        kernels -> 1, the copy's write saved).

        Flagged: `R[0]`, `R.values`, `R[1]`, `R.indices` and `a, b = R` with one of the names
        read nowhere after, where `R` is `x.max(d)`/`x.min(d)` (`dim=`, `keepdim` kept) of a
        tensor `x` or `torch.max(x, d)`/`torch.min(x, d)`, `d` an integer, a number the code
        shows or a name of a dim (`dim`, `axis`); `argmax`/`argmin` of `-x`. Not flagged:
        `torch.max(a, b)` of two tensors (the element-wise maximum), a `max` over all
        elements (one output already), a result kept whole (`r = x.max(1)`, then both used).
    """
    use_instead = "`x.amax(dim)`, `x.amin(dim)`, `x.argmax(dim)`, `x.argmin(dim)`."
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix renames the call (`max` -> `amax`, `argmax` -> `argmin` of the negated
        tensor, ...) and keeps its arguments. It is **unsafe**: `amax`'s gradient splits evenly
        between tied maxima, where `max`'s goes to one index; and the negation of an unsigned
        integer tensor wraps around, so `(-x).argmax()` and `x.argmin()` differ on `uint8`. The
        values and indices themselves are the same (the first extremum's index, NaN
        propagated).
    """
    examples = (
        Example(
            bad="""\
import torch


def normalise_peak(x: torch.Tensor) -> torch.Tensor:
    return x / x.abs().max(dim=-1, keepdim=True)[0]
""",
            at=((5, 16),),
            fixed="""\
import torch


def normalise_peak(x: torch.Tensor) -> torch.Tensor:
    return x / x.abs().amax(dim=-1, keepdim=True)
""",
            call="normalise_peak(randn(64, 256, 128))",
        ),
        Example(
            bad="""\
import torch


def nearest_code(x: torch.Tensor, codebook: torch.Tensor):
    dist = torch.cdist(x, codebook)
    indices = torch.max(-dist, dim=1)[1]
    best, _ = dist.min(dim=1)
    return indices, best
""",
            at=((6, 15), (7, 5)),
            fixed="""\
import torch


def nearest_code(x: torch.Tensor, codebook: torch.Tensor):
    dist = torch.cdist(x, codebook)
    indices = torch.argmin(dist, dim=1)
    best = dist.amin(dim=1)
    return indices, best
""",
            call="nearest_code(randn(4096, 64), randn(512, 64))",
        ),
    )
    valid = (
        # the element-wise maximum of two tensors; a max over everything; both outputs used;
        # a dropped name read later; a list's max; Python's max
        """\
import torch


def f(x: torch.Tensor, other: torch.Tensor, items: list):
    a = torch.max(x, other)[0]
    b = x.max()
    values, indices = x.max(dim=1)
    top, _ = x.min(dim=0)
    c = items.max(1)[0]
    return a, b, values, indices, top, _, c, max(items[0], items[1])
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _CALL_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _CALL_TEXT.search(text) is not None and _USE_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        statements: dict[int, StatementRef] = {}
        for key in ("max", "min", "argmax", "argmin"):
            for site in scope.sites.get(key, ()):
                statements.setdefault(id(site.statement.node), site.statement)
        if not statements:
            return
        numbers = NumberNames(scope)
        for ref in statements.values():
            finder = _Picks(scope, numbers, ref)
            for part in own_parts(ref.node):
                finder.walk(part)
            for pick in finder.found:
                yield _violation(scope, ref, pick)


@dataclass(frozen=True)
class _Pick:
    """One finding: the node it points at, the node the fix replaces and its replacement."""

    node: cst.CSTNode
    old: cst.CSTNode
    new: cst.CSTNode | None
    message: str


def _violation(scope: Scope, ref: StatementRef, pick: _Pick) -> Violation:
    fix = None
    if pick.new is not None and isinstance(ref.node, cst.SimpleStatementLine):
        fix = (StatementEdit(ref.node, (replace_nodes(ref.node, {pick.old: pick.new}),)),)
    return Violation(pick.node, fix=fix, message=pick.message)


class _Picks(Walker):
    """The reductions with one output dropped, and the arg-extrema of negations, in a statement."""

    def __init__(self, scope: Scope, numbers: NumberNames, ref: StatementRef) -> None:
        self.scope = scope
        self.numbers = numbers
        self.ref = ref
        self.found: list[_Pick] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return True
        index = node.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and index.value in ("0", "1")):
            return True
        return self._pick(node, node.value, _VALUES if index.value == "0" else _INDICES)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value not in ("values", "indices"):
            return True
        return self._pick(node, node.value, _VALUES if node.attr.value == "values" else _INDICES)

    def visit_Assign(self, node: cst.Assign) -> bool:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, (cst.Tuple, cst.List)):
            return True
        elements = node.targets[0].target.elements
        names = [e.value.value for e in elements if isinstance(e, cst.Element) and isinstance(e.value, cst.Name)]
        reduction = _reduction(self.scope, self.numbers, node.value) if len(names) == len(elements) == 2 else None
        if reduction is None or names[0] == names[1]:
            return True
        read = [self.scope.read_after(self.ref, name) for name in names]
        if read.count(True) != 1:
            return True
        kept = read.index(True)
        new = _replacement(reduction, kept)
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(names[kept]))], value=new) if new is not None else None
        self.found.append(_Pick(node, node, assign, _message(reduction, kept)))
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        negated = _argmax_of_negation(self.scope, node)
        if negated is None:
            return True
        op, operand, function = negated
        new = _renamed(node, f"arg{_OTHER[op]}", operand, function)
        self.found.append(_Pick(node, node, new, (
            f"`arg{op}` of a negation: `arg{_OTHER[op]}` of `{code_of(operand)}` finds the same index "
            "without the negated copy"
        )))
        return False

    def _pick(self, node: cst.BaseExpression, call: cst.BaseExpression, output: int) -> bool:
        reduction = _reduction(self.scope, self.numbers, call)
        if reduction is None:
            return True
        self.found.append(_Pick(node, node, _replacement(reduction, output), _message(reduction, output)))
        return False


@dataclass(frozen=True)
class _Reduction:
    """``x.max(d, ...)`` or ``torch.max(x, d, ...)`` (``min`` too); ``negated``: ``x`` is ``-y``."""

    call: cst.Call
    op: str
    operand: cst.BaseExpression
    negated: cst.BaseExpression | None  # ``y`` of an operand ``-y``
    function: bool  # ``torch.max(x, d)``, not ``x.max(d)``


def _reduction(scope: Scope, numbers: NumberNames, expr: cst.BaseExpression) -> _Reduction | None:
    if not isinstance(expr, cst.Call) or any(arg.star for arg in expr.args):
        return None
    func, args = expr.func, list(expr.args)
    if not isinstance(func, cst.Attribute) or func.attr.value not in _PAIRS:
        return None
    op = func.attr.value
    function = scope.torch_name(func) == f"torch.{op}"
    if function:
        if not args or args[0].keyword is not None:
            return None
        operand, args = args[0].value, args[1:]
    elif scope.torch_name(func) is None and scope.is_tensor(func.value):
        operand = func.value
    else:
        return None
    positional = [arg.value for arg in args if arg.keyword is None]
    keywords = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
    if not keywords.keys() <= {"dim", "keepdim"} or len(positional) + len(keywords) not in (1, 2):
        return None
    if positional and "dim" in keywords or len(positional) == 2 and "keepdim" in keywords:
        return None
    if positional and not _is_dim(scope, numbers, positional[0]):
        return None  # ``torch.max(a, b)``: the element-wise maximum
    if not positional and "dim" not in keywords:
        return None
    return _Reduction(expr, op, operand, _negated(scope, operand), function)


def _is_dim(scope: Scope, numbers: NumberNames, expr: cst.BaseExpression) -> bool:
    """An integer, a number the code shows, or a name of a dim (``dim``, ``self.axis``)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    if isinstance(expr, cst.Integer) or numbers.is_number(expr):
        return True
    name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
    return name is not None and ("dim" in name.lower() or "axis" in name.lower()) and not scope.is_tensor(expr)


def _negated(scope: Scope, operand: cst.BaseExpression) -> cst.BaseExpression | None:
    """``y`` of ``-y``, ``y`` a tensor."""
    if isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Minus) \
            and scope.is_tensor(operand.expression):
        return operand.expression
    return None


def _argmax_of_negation(scope: Scope, call: cst.Call) -> tuple[str, cst.BaseExpression, bool] | None:
    """(``max``/``min``, ``y``, whether a function) of ``(-y).argmax(...)`` or ``torch.argmax(-y, ...)``."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("argmax", "argmin") \
            or any(arg.star for arg in call.args):
        return None
    function = scope.torch_name(func) == f"torch.{func.attr.value}"
    if function:
        operand = call.args[0].value if call.args and call.args[0].keyword is None else None
    else:
        operand = func.value if scope.torch_name(func) is None else None
    negated = _negated(scope, operand) if operand is not None else None
    return (func.attr.value[3:], negated, function) if negated is not None else None


def _replacement(reduction: _Reduction, output: int) -> cst.BaseExpression:
    """The call that computes the output kept: ``amax`` of the values, ``argmax`` of the
    indices; of a negation ``-y``, ``-(y.amin(...))`` and ``y.argmin(...)``."""
    op, negated = reduction.op, reduction.negated
    if negated is None:
        name = f"a{op}" if output == _VALUES else f"arg{op}"
        return _renamed(reduction.call, name, reduction.operand, reduction.function)
    if output == _INDICES:
        return _renamed(reduction.call, f"arg{_OTHER[op]}", negated, reduction.function)
    extremum = _renamed(reduction.call, f"a{_OTHER[op]}", negated, reduction.function)
    return cst.UnaryOperation(cst.Minus(), extremum, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _renamed(call: cst.Call, name: str, operand: cst.BaseExpression, function: bool) -> cst.Call:
    """``call`` as ``name`` of ``operand``, its other arguments kept: ``torch.max(-y, 1)`` ->
    ``torch.argmin(y, 1)`` (``function``), ``x.max(1)`` -> ``x.amax(1)``."""
    func = call.func
    assert isinstance(func, cst.Attribute)
    if function:
        args = [call.args[0].with_changes(value=operand), *call.args[1:]]
        return call.with_changes(func=func.with_changes(attr=cst.Name(name)), args=args)
    receiver = operand if isinstance(operand, _ATOMIC) or operand.lpar else operand.with_changes(
        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return call.with_changes(func=func.with_changes(value=receiver, attr=cst.Name(name)))


def _message(reduction: _Reduction, output: int) -> str:
    op = reduction.op
    if reduction.negated is not None:
        kept = f"`arg{_OTHER[op]}`" if output == _INDICES else f"`-a{_OTHER[op]}`"
        return (f"`{op}` of a negation over a dim, one output dropped: {kept} of "
                f"`{code_of(reduction.negated)}` computes the one used without the negated copy")
    if output == _VALUES:
        return f"the values of `{op}` over a dim, its indices dropped: `a{op}` computes the values alone"
    return f"the indices of `{op}` over a dim, its values dropped: `arg{op}` computes the indices alone"
