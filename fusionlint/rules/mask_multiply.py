"""FL028: a tensor multiplied by a boolean mask turned into numbers (``x * (d < c).float()``,
``x * (~m)``, ``x * torch.logical_not(m).unsqueeze(-1).float()``): ``torch.where`` selects in one
kernel, without writing the cast or negated mask."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts, reaching_value
from fusionlint.analysis.chains import Chain, chain_statements
from fusionlint.analysis.nodes import Walker, code_of, factor_orders
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# A cast of a parenthesized (or called) value, a negation or a logical_not, in a statement with a product.
_BINDS_NAME = re.compile(r"\s*(\w+)\s*=[^=]")
_MASK_TEXT = re.compile(
    r"\)\s*\.(?:float|half|double|bfloat16|to|type_as|type)\s*\(|~|logical_not\s*\("
)
# Casts that turn a boolean into numbers: ``.float()``, ``.to(x.dtype)``, ``.type_as(x)``.
_CASTS = frozenset({"float", "half", "double", "bfloat16", "to", "type_as", "type"})
# Views and broadcasts that keep a value boolean.
_VIEWS = frozenset({"unsqueeze", "view", "reshape", "expand", "expand_as", "flatten", "squeeze", "transpose",
                    "permute", "contiguous", "detach"})
_BOOLEAN_CALLS = frozenset({"logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf", "isfinite",
                            "isneginf", "isposinf", "bool", "eq", "ne", "lt", "gt", "le", "ge", "isclose"})
# The calls a product by a mask makes (``Scope.sites`` files them under these names).
_SITE_NAMES = ("float", "half", "double", "bfloat16", "to", "type_as", "type", "logical_not", "unsqueeze")
_DTYPES = frozenset({"float", "float32", "float16", "half", "bfloat16", "double", "float64", "long", "int", "int32",
                     "int64", "int16", "int8", "uint8"})
_COMPARISONS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


class MaskMultiply(Rule):
    code = "FL028"
    name = "mask-multiply"
    message = "a tensor multiplied by a boolean mask turned into numbers: `torch.where` selects in one kernel"
    rationale = """
        Multiplying by a boolean mask made into numbers runs the cast (or the negation) as a
        kernel that writes the whole mask before the product reads it:
        `cutoffs * (distances < cutoff).float()` (a cutoff envelope, a thresholded map) is
        three eager kernels, `torch.where(distances < cutoff, cutoffs, 0.0)` two (the
        comparison and the select: fusionrt's eager count for (4096, 512) operands 3 -> 2
        kernels, 18 -> 10 MiB written); `out * (~mask).unsqueeze(-1)` is three,
        `torch.where(mask.unsqueeze(-1), 0.0, out)` two; HyperMixing's `out *
        torch.logical_not(mask).unsqueeze(-1).float()` four -> two (fusionrt 2 -> 1). fusionrt
        fuses a cast into the product where it can: the rewrite pays in eager, and under
        fusionrt only where the cast mask was written out (`torch.where`, unlike
        `masked_fill` on a negated mask, never costs fusionrt a kernel).

        Flagged: a product (`*`, `.mul`) one of whose factors is a boolean cast to numbers
        (`.float()`, `.half()`, `.to(dtype)`, `.type_as(x)`) or negated (`~m`,
        `torch.logical_not(m)`), through views (`.unsqueeze`, `.view`, `[:, None]`...) on
        either side of the cast, inline or a name bound just before and read there only
        (`analysis.chains`). A value is boolean where the code shows it: a comparison of
        tensors (`<`, `==`, ...), `~`, `&`, `|` of booleans, `logical_*`, `isnan`/`isinf`/
        `isfinite`, `.bool()`, or a name bound to one of these. Not flagged: a boolean
        multiplied as it is (`x * m` is one kernel already), a mask that may hold numbers
        (`x * (1 - mask)`), the cast of a bare name (`x * m.float()`: casts of names are
        everywhere, and the rule's text test leaves them out), a product of two masks (their
        `&`), an in-place product by a mask not negated (`masked_fill_` would need the `~`),
        arrays of other libraries.
    """
    use_instead = "`torch.where(mask, x, 0)` for `x * mask.float()`; `torch.where(mask, 0, x)` for `x * (~mask)`."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: `torch.where` takes the dtype of `x` (and promotes a Python number with it),
        where the product promotes `x` with the cast mask's dtype (`x.half() * m.float()` is
        float32); and a mask read elsewhere still needs its cast. Write the call by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def cutoff_envelope(distances: torch.Tensor, cutoffs: torch.Tensor, cutoff: float) -> torch.Tensor:
    return cutoffs * (distances < cutoff).float()
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def cutoff_envelope(distances: torch.Tensor, cutoffs: torch.Tensor, cutoff: float) -> torch.Tensor:
    return torch.where(distances < cutoff, cutoffs, 0.0)
""",
            call="cutoff_envelope(randn(4096, 512), randn(4096, 512), 0.5)",
        ),
        Example(  # HyperMixing's key padding: the negated, cast mask bound to a name first
            bad="""\
import torch


def mask_padding(out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    keep = torch.logical_not(padding).unsqueeze(-1).float()
    return out * keep
""",
            at=((7, 12),),
            fixed=None,
            good="""\
import torch


def mask_padding(out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    return torch.where(padding.unsqueeze(-1), 0.0, out)
""",
            call="mask_padding(randn(64, 256, 128), (randn(64).abs() * 128).long())",
        ),
    )
    valid = (
        # a boolean multiplied as it is; masks that may hold numbers; a mask read again; numpy
        """\
import numpy as np
import torch


def f(x: torch.Tensor, mask: torch.Tensor, weights, n: int):
    m = x > 0
    a = x * m
    b = x * (1 - mask)
    c = x * mask.float()
    keep = (~m).float()
    d = x * keep
    e = np.sum(weights * ~np.isnan(weights))
    g = (n > 1) * 2
    return a, b, c, d, keep, e, g
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _MASK_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _MASK_TEXT.search(text) is None:
            return False
        if "*" in text or "mul(" in text:
            return True
        # ``keep = (~m).float()``, multiplied by one of the next three statements
        bound = _BINDS_NAME.match(text)
        if bound is None:
            return False
        if not any(bound.group(1) in block[i] and "*" in block[i] for i in range(index + 1, min(index + 4, len(block)))):
            return False  # (a substring test first: a pattern per name would be compiled per name)
        name = re.compile(r"\b%s\b" % bound.group(1))
        return any(name.search(block[i]) is not None and "*" in block[i] for i in range(index + 1, min(index + 4, len(block))))

    def check(self, scope: Scope) -> Iterator[Violation]:
        # the statements that cast, negate with ``logical_not`` or unsqueeze a mask, and those after
        # that may multiply by it
        sites = (site for key in _SITE_NAMES for site in scope.sites.get(key, ()) if _may_be_mask(site.node, key))
        for ref in chain_statements(sites):
            finder = _Products(Chain(scope, ref))
            for part in own_parts(ref.node):
                finder.walk(part)
            yield from finder.found


def _may_be_mask(call: cst.CSTNode, key: str) -> bool:
    """Can this call make a mask into numbers, by its shape alone: a cast of something that is
    not a bare name (``(d < c).float()``, ``m.view(n, 1).to(x.dtype)``), an unsqueezed negation,
    any ``logical_not``?"""
    if key == "logical_not" or not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return True
    receiver = call.func.value
    if key == "to" and not _to_dtype(call):
        return False
    if key == "unsqueeze":
        return isinstance(_strip(receiver)[0], cst.UnaryOperation)
    stripped, _ = _strip(receiver)
    return stripped is not receiver or not isinstance(receiver, (cst.Name, cst.Attribute)) or bool(receiver.lpar)


def _to_dtype(call: cst.Call) -> bool:
    """``.to(x.dtype)``, ``.to(torch.float32)``, ``.to(dtype=...)``: a cast, not a move."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if arg.keyword is not None:
        return arg.keyword.value == "dtype"
    value = arg.value
    return isinstance(value, cst.Attribute) and (value.attr.value == "dtype" or value.attr.value in _DTYPES)


class _Products(Walker):
    """The products by a boolean mask turned into numbers, in one statement."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.found: list[Violation] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        return self._product(node)

    def visit_Call(self, node: cst.Call) -> bool:
        return self._product(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        """``x *= (~m).float()``: ``x.masked_fill_(m, 0)`` (a cast mask not negated would need a ``~``)."""
        if isinstance(node.operator, cst.MultiplyAssign) and _numeric_mask(self.chain, self.chain.value(node.value)):
            self.found.append(Violation(node, message=(
                "a tensor multiplied in place by a negated boolean mask: "
                f"`{code_of(node.target)}.masked_fill_(mask, 0)` zeroes it in one kernel")))
            return False
        return True

    def _product(self, node: cst.BaseExpression) -> bool:
        for x, factor in factor_orders(node):
            negated = _numeric_mask(self.chain, self.chain.value(factor))
            if negated is None or _numeric_mask(self.chain, x) is not None or _boolean(self.chain, x, 5):
                continue  # a product of two masks is their `&`
            call = f"torch.where(mask, 0, {code_of(x)})" if negated else f"torch.where(mask, {code_of(x)}, 0)"
            self.found.append(Violation(node, message=(
                f"a tensor multiplied by a boolean mask turned into numbers: `{call}` selects in one kernel, "
                "`mask` the boolean with its views")))
            return False
        return True


def _numeric_mask(chain: Chain, expr: cst.BaseExpression) -> bool | None:
    """Whether ``expr`` is a boolean negated (True) or cast to numbers (False), through views on
    either side (``(~m).unsqueeze(-1)``, ``logical_not(m).float()``, ``(d < c).float()``); None
    for anything else."""
    if _casts_a_name(expr):
        return None  # ``m.float()``: the text test does not look for it (a name's cast is everywhere)
    expr, cast = _strip(expr)
    negated = _negated(chain.scope, expr)
    if negated is not None:
        return True if _boolean(chain, negated, 5) else None
    if cast and _boolean(chain, expr, 5):
        return False
    return None


def _casts_a_name(expr: cst.BaseExpression) -> bool:
    """``m.float()``, ``m.to(x.dtype)[:, None]``: a cast whose receiver is a bare name or attribute."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEWS:
            expr = expr.func.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CASTS:
            receiver = expr.func.value
            return isinstance(receiver, (cst.Name, cst.Attribute)) and not receiver.lpar
        else:
            return False


def _strip(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """``e`` of ``e`` under views and casts, and whether a cast was among them."""
    cast = False
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in _CASTS and len(expr.args) <= 1:
                cast = True
                expr = expr.func.value
                continue
            if method in _VIEWS:
                expr = expr.func.value
                continue
            return expr, cast
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            continue
        return expr, cast


def _negated(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``m`` of ``~m``, ``torch.logical_not(m)`` or ``m.logical_not()``."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return expr.expression
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "logical_not" and not expr.args \
                and scope.torch_name(expr.func) is None:
            return expr.func.value
        if scope.torch_name(expr.func) == "torch.logical_not" and len(expr.args) == 1:
            return expr.args[0].value
    return None


def _boolean(chain: Chain, expr: cst.BaseExpression, depth: int) -> bool:
    """Does the code show ``expr`` is a boolean tensor?"""
    scope = chain.scope
    expr, cast = _strip(expr)
    if cast or depth == 0:
        return False
    if isinstance(expr, cst.Comparison):
        return all(isinstance(c.operator, _COMPARISONS) for c in expr.comparisons) and (
            scope.is_tensor(expr.left) or any(scope.is_tensor(c.comparator) for c in expr.comparisons))
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _boolean(chain, expr.expression, depth - 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
        return _boolean(chain, expr.left, depth - 1) and _boolean(chain, expr.right, depth - 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _BOOLEAN_CALLS and scope.torch_name(func) is None:
            return scope.is_tensor(func.value)
        name = scope.torch_name(func)
        return name is not None and name.rpartition(".")[2] in _BOOLEAN_CALLS
    if isinstance(expr, cst.Name):
        value = reaching_value(chain.ref, expr.value)
        return value is not None and _boolean(chain, value, depth - 1)
    return False
