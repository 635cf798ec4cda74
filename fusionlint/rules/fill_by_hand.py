"""FL015: a constant tensor made from ``torch.ones``/``torch.zeros`` by arithmetic
(``torch.ones(n, 1) * pad``, ``-torch.ones(n, n)``, ``torch.zeros(n) + c``, ``c * x.new_ones(n)``,
``torch.ones_like(x) * c``) or by ``fill_``: ``torch.full`` (``full_like``, ``new_full``) makes it;
ones only summed cumulatively (``grid = torch.ones(h, w)``, ``grid.cumsum(0)``): ``torch.arange``."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, names_of, own_parts, scope_statements
from fusionlint.analysis.nodes import Walker
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, fused_call, replace_nodes

_FACTORY_TEXT = re.compile(r"\b(?:ones|zeros|ones_like|zeros_like|new_ones|new_zeros)\s*\(")
# Functions that build a model's parameters once: a constant made there costs nothing per step.
_RUNS_ONCE = re.compile(r"^(?:__init__|_?reset_parameters|_?init\w*|_?reset\w*)$")
# The factory and the operator that turns what it makes into a constant: ``ones * c``, ``zeros + c``.
_FILLS = {"torch.ones": cst.Multiply, "torch.zeros": cst.Add}
# The factories whose size and dtype follow a tensor (``torch.ones_like(x)``, ``x.new_ones(n)``), by
# the operator that fills them and the op that makes the constant at once (reported without a fix).
_LIKE_FILLS = {
    "torch.ones_like": (cst.Multiply, "torch.full_like"), "torch.zeros_like": (cst.Add, "torch.full_like"),
    "new_ones": (cst.Multiply, "new_full"), "new_zeros": (cst.Add, "new_full"),
}
_FACTORY_NAMES = ("ones", "zeros", "ones_like", "zeros_like", "new_ones", "new_zeros")
_FRESH_FILLED = frozenset({"torch.ones", "torch.zeros", "torch.ones_like", "torch.zeros_like", "new_ones", "new_zeros"})


class FillByHand(Rule):
    code = "FL015"
    name = "fill-by-hand"
    message = "a constant tensor made from `ones`/`zeros` by arithmetic: `torch.full` makes it in one kernel"
    rationale = """
        `torch.ones(n, 1) * pad` writes a tensor of ones, then reads it and writes it again
        scaled: two kernels and two writes in eager PyTorch for what `torch.full((n, 1), pad)`
        writes once. The same holds for `-torch.ones(...)` and `torch.zeros(...) + c`. fusionrt
        fuses the arithmetic into the factory's kernel where it is used at once, but not where
        the constant goes into a data-movement op: CoCa's generation step makes its padding column
        with `ones * pad_token_id` and concatenates it (fusionrt 2 -> 1 writes and kernels; eager
        too). The rewrite pays in eager, and under fusionrt where the constant is written.

        A grid of positions made as `grid = torch.ones(h, w)` and `grid.cumsum(dim=0)` (Segment
        Anything's and SAM 2's random position embedding) writes the ones and then each
        cumulative sum at full size: `torch.arange(1, h + 1)` along the summed dim, broadcast
        with `[:, None].expand(h, w)`, writes a row (the third example, with the matmul that
        follows: fusionrt 6 -> 4 kernels, eager 8 -> 6).

        Flagged: `torch.ones(...) * c` (either order), `-torch.ones(...)` and `torch.zeros(...) +
        c` (either order), `c` not known to be a tensor; a name a function's body assigns
        `torch.ones(...)` and reads only as `.cumsum(...)` (or `torch.cumsum(name, ...)`), at
        the `torch.ones` (no fix: the arange needs the sizes per dim). Without a fix: the same
        with a factory whose size and dtype follow a tensor (`10.0 * x.new_ones(n, 1)` ->
        `x.new_full((n, 1), 10.0)`, SAM 2's object score; `torch.ones_like(g) * c` ->
        `torch.full_like(g, c)`; fusionrt 1 -> 0 kernels, eager 2 -> 1), and a fresh `ones`/`zeros`
        filled in place (`x.new_zeros(n).fill_(bos)` -> `x.new_full((n,), bos)`), the value a
        number as far as the code shows (not a call's result or an element, which may be 0-d
        tensors); the rule cannot see the tensor's dtype, so the message says to pass `dtype=`
        where the value's type would change the result's (`ones_like(int_x) * 0.5` is float).
        Not flagged: a factor that is a tensor, code that builds a model's parameters once
        (`__init__`, `reset_parameters`, `init_*`).
    """
    use_instead = "`torch.full(size, value, dtype=..., device=...)`; for cumulative sums of ones, `torch.arange(1, n + 1)` broadcast."
    pays_in = (EAGER,)
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix writes `torch.full(size, value, ...)` with the factory's keywords. It is offered
        only where the dtype stays the same: the factory names its `dtype`, or the value is a
        float literal (`torch.full` takes an integer value's dtype, `torch.ones(...) * 3` keeps
        the default float). It is **unsafe**: with a value of unknown type (a 0-d tensor, a
        NumPy number) `torch.full` may give another dtype or read the value on the host.
    """
    examples = (
        Example(
            bad="""\
import torch


def pad_column(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    column = torch.ones((tokens.shape[0], 1), dtype=torch.long) * pad_id
    return torch.cat([tokens, column], dim=1)
""",
            at=((5, 14),),
            fixed="""\
import torch


def pad_column(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    column = torch.full((tokens.shape[0], 1), pad_id, dtype=torch.long)
    return torch.cat([tokens, column], dim=1)
""",
            call="pad_column(randn(64, 16), 3)",
        ),
        Example(
            bad="""\
import torch


def signs(x: torch.Tensor) -> torch.Tensor:
    labels = -torch.ones(x.shape[0], x.shape[0])
    return x * labels
""",
            at=((5, 14),),
            fixed="""\
import torch


def signs(x: torch.Tensor) -> torch.Tensor:
    labels = torch.full((x.shape[0], x.shape[0]), -1.0)
    return x * labels
""",
            call="signs(randn(64, 64))",
        ),
        Example(  # Segment Anything's grid of pixel centres: no fix, the arange needs the sizes
            bad="""\
import torch


def position_encoding(gaussian: torch.Tensor, h: int, w: int) -> torch.Tensor:
    grid = torch.ones((h, w), dtype=torch.float32)
    y_embed = grid.cumsum(dim=0) - 0.5
    x_embed = grid.cumsum(dim=1) - 0.5
    coords = torch.stack([x_embed / w, y_embed / h], dim=-1)
    return coords @ gaussian
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def position_encoding(gaussian: torch.Tensor, h: int, w: int) -> torch.Tensor:
    y_embed = (torch.arange(1, h + 1, dtype=torch.float32) - 0.5)[:, None].expand(h, w)
    x_embed = (torch.arange(1, w + 1, dtype=torch.float32) - 0.5).expand(h, w)
    coords = torch.stack([x_embed / w, y_embed / h], dim=-1)
    return coords @ gaussian
""",
            call="position_encoding(randn(2, 64), 32, 32)",
        ),
        Example(  # a factory that follows a tensor: reported without a fix
            bad="""\
import torch


def object_scores(iou_pred: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    scores = 10.0 * iou_pred.new_ones(iou_pred.shape[0], 1)
    return torch.cat([scores, logits], dim=1)
""",
            at=((5, 14),),
            fixed=None,
            good="""\
import torch


def object_scores(iou_pred: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    scores = iou_pred.new_full((iou_pred.shape[0], 1), 10.0)
    return torch.cat([scores, logits], dim=1)
""",
            call="object_scores(randn(4096, 4), randn(4096, 4))",
        ),
    )
    valid = (
        # a tensor factor; ones used as they are
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    a = torch.ones_like(x) * w
    b = torch.ones(4, 4) * w
    c = torch.ones(4, 4) + 1
    return a, b, c
""",
        # a parameter's initial value, made once
        """\
import torch
from torch import nn


class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _FACTORY_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _FACTORY_TEXT.search(text) is not None and (
            any(op in text for op in "*+-") or "fill_(" in text
            or any("cumsum(" in block[i] for i in range(index + 1, len(block))))

    def check(self, scope: Scope) -> Iterator[Violation]:
        if isinstance(scope.node, cst.FunctionDef) and _RUNS_ONCE.match(scope.node.name.value):
            return
        cumsums = bool(scope.sites.get("cumsum"))  # ones summed cumulatively need one
        for ref in _factory_statements(scope):
            found = _Fills(scope)
            for part in own_parts(ref.node):
                found.walk(part)
            for node, factory, value in found.fills:
                fix = None
                if isinstance(ref.node, cst.SimpleStatementLine):
                    full = _full(scope, factory, value)
                    if full is not None:
                        full = full.with_changes(lpar=node.lpar, rpar=node.rpar)
                        fix = (StatementEdit(ref.node, (replace_nodes(ref.node, {node: full}),)),)
                yield Violation(node, fix=fix)
            for node, op in found.likes:
                yield Violation(node, message=(
                    f"a constant tensor made by filling a fresh `ones`/`zeros` by hand: `{op}` makes it in one kernel "
                    "(with `dtype=` where the fill value's type would change the result's)"))
            summed = _ones_summed(scope, ref) if cumsums else None
            if summed is not None:
                name, ones = summed
                yield Violation(ones, message=(
                    f"`{name}` is ones only summed cumulatively: `torch.arange(1, n + 1)` along each summed dim, "
                    "broadcast with `expand`, makes it without writing the ones"))


def _factory_statements(scope: Scope) -> list[StatementRef]:
    """The statements that call a factory (``Scope.sites`` files ``torch.ones(...)`` under ``ones``,
    ``x.new_zeros(...)`` under ``new_zeros``), in flow order."""
    calling = {id(site.statement.node) for key in _FACTORY_NAMES for site in scope.sites.get(key, ())}
    return [ref for ref in scope_statements(scope) if id(ref.node) in calling] if calling else []


def _ones_summed(scope: Scope, ref: StatementRef) -> tuple[str, cst.Call] | None:
    """(name, ``torch.ones(...)``) of ``name = torch.ones(...)`` in the function's own body
    whose every later read is the operand of a cumulative sum."""
    small = ref.simple
    if ref.block.parent is not None or not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    target, ones = small.targets[0].target, small.value
    if not isinstance(target, cst.Name) or _factory(scope, ones) != "torch.ones":
        return None
    name = target.value
    if name in scope.escaped or name in scope.inplace or scope.dynamic:
        return None
    reads = _Cumsums(scope, name)
    for later in ref.later():
        reads.walk(later.node)
        if name in names_of(later.node)[1]:
            break
    return (name, ones) if reads.summed and reads.summed == reads.reads else None  # type: ignore[return-value]


class _Cumsums(Walker):
    """How often a name is read, and how often as the operand of ``.cumsum``/``torch.cumsum``."""

    def __init__(self, scope: Scope, name: str) -> None:
        self.scope = scope
        self.name = name
        self.reads = 0
        self.summed = 0

    def visit_Name(self, node: cst.Name) -> None:
        self.reads += node.value == self.name

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if self.scope.torch_name(func) == "torch.cumsum" and node.args:
            operand = node.args[0].value
        elif isinstance(func, cst.Attribute) and func.attr.value == "cumsum":
            operand = func.value
        else:
            return
        self.summed += isinstance(operand, cst.Name) and operand.value == self.name

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # an attribute's name is no variable
        return False


class _Fills(Walker):
    """(node, factory call, fill value) of each constant made by hand."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.fills: list[tuple[cst.BaseExpression, cst.Call, cst.BaseExpression]] = []
        self.likes: list[tuple[cst.BaseExpression, str]] = []  # (node, the op that makes it): no fix

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> bool:
        if isinstance(node.operator, cst.Minus) and _factory(self.scope, node.expression) == "torch.ones":
            minus_one = cst.UnaryOperation(operator=cst.Minus(), expression=cst.Float("1.0"))
            self.fills.append((node, node.expression, minus_one))  # type: ignore[arg-type]
            return False
        return True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        for factory, value in ((node.left, node.right), (node.right, node.left)):
            name = _factory(self.scope, factory)
            if name is not None and isinstance(node.operator, _FILLS[name]) and _scalar(self.scope, value):
                self.fills.append((node, factory, value))  # type: ignore[arg-type]
                return False
            like = _like_factory(self.scope, factory)
            if like is not None and isinstance(node.operator, _LIKE_FILLS[like][0]) and _number(self.scope, value):
                self.likes.append((node, _LIKE_FILLS[like][1]))
                return False
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        """``torch.zeros(n).fill_(c)``, ``x.new_zeros(n).fill_(c)``: the factory's write is wasted."""
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "fill_" and len(node.args) == 1:
            made = _factory(self.scope, func.value) or _like_factory(self.scope, func.value)
            if made in _FRESH_FILLED and _number(self.scope, node.args[0].value):
                self.likes.append((node, "new_full" if made.startswith("new_") else "torch.full"))  # type: ignore[union-attr]
                return False
        return True

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _factory(scope: Scope, expr: cst.BaseExpression) -> str | None:
    """``torch.ones``/``torch.zeros`` for a call of one, else None."""
    if not isinstance(expr, cst.Call) or expr.lpar:
        return None
    name = scope.torch_name(expr.func)
    return name if name in _FILLS else None


def _like_factory(scope: Scope, expr: cst.BaseExpression) -> str | None:
    """``torch.ones_like``/``torch.zeros_like`` or the method ``new_ones``/``new_zeros`` of a tensor."""
    if not isinstance(expr, cst.Call) or expr.lpar:
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("new_ones", "new_zeros") and scope.is_tensor(func.value):
        return func.attr.value
    name = scope.torch_name(func)
    return name if name in ("torch.ones_like", "torch.zeros_like") else None


def _number(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A fill value that is a number, as far as the code shows: not a tensor, a call's result or an
    element (``self.sigma(t)``, ``scale[i]`` may be 0-d tensors: the fill would read them on the host)."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return not isinstance(expr, (cst.Call, cst.Subscript)) and _scalar(scope, expr)


def _scalar(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A value not known to be a tensor that can fill one: not a string or a container."""
    if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.List, cst.Tuple,
                         cst.Dict, cst.Set, cst.ListComp, cst.Lambda)):
        return False
    return not scope.is_tensor(expr)


def _full(scope: Scope, factory: cst.Call, value: cst.BaseExpression) -> cst.Call | None:
    """``torch.full(size, value, **factory's keywords)``, where the dtype stays the same."""
    spelled = scope.facts.spelling("torch.full")
    positional = [arg.value for arg in factory.args if arg.keyword is None and not arg.star]
    keywords = [(arg.keyword.value, arg.value) for arg in factory.args if arg.keyword is not None]
    if spelled is None or any(arg.star for arg in factory.args):
        return None
    size = dict(keywords).pop("size", None)
    keywords = [(key, arg) for key, arg in keywords if key != "size"]
    if size is None:
        if not positional:
            return None
        size = positional[0] if len(positional) == 1 else cst.Tuple([cst.Element(p) for p in positional])
    elif positional:
        return None
    literal = value.expression if isinstance(value, cst.UnaryOperation) else value
    if "dtype" not in dict(keywords) and not isinstance(literal, cst.Float):
        return None  # `torch.full` would take an integer value's dtype
    return fused_call(spelled, [size, value], keywords)
