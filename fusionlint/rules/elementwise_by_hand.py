"""FL018: an element-wise function written out that one torch op computes: ``x * sigmoid(x)``
(``F.silu``), ``0.5 * x * (1 + erf(x / sqrt(2)))`` and its tanh form (``F.gelu``),
``x * tanh(softplus(x))`` (``F.mish``), ``relu6(x + 3) / 6`` (``F.hardsigmoid``) and ``x`` times
it (``F.hardswish``), ``1 / (1 + exp(-x))`` (``torch.sigmoid``), ``log(1 + exp(x))``
(``F.softplus``), ``log(x + 1)`` (``torch.log1p``), ``exp(x) - 1`` (``torch.expm1``), ``1 / sqrt(x)``
(``torch.rsqrt``); whole or split over statements (``g = torch.sigmoid(x)``, then ``x * g``)."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts
from fusionlint.analysis.chains import Chain, chain_statements
from fusionlint.analysis.nodes import Walker, code_of, factor_orders, factors_of, is_method_call, same_expression
from fusionlint.analysis.numbers import is_one, one_plus
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# Every pattern calls one of these, as a function or a method (top-level alternatives, each
# with a literal prefix: the engine's search of a file is one fast scan per alternative).
_CALL_TEXT = re.compile(
    r"sigmoid\s*\(|tanh\s*\(|erf\s*\(|erfinv\s*\(|log\s*\(|exp\s*\(|relu6\s*\(|clamp\(.*6|clip\(.*6"
    r"|1(?:\.0*)?\s*/\s*[\w.\[\]()]*sqrt\s*\("  # _RECIPROCAL_ROOT_TEXT
)
_SMOOTH_TEXT = re.compile(r"sigmoid\s*\(|tanh\s*\(|erf\s*\(|erfinv\s*\(|log\s*\(|exp\s*\(")
_RECIPROCAL_ROOT_TEXT = re.compile(r"1(?:\.0*)?\s*/\s*[\w.\[\]()]*sqrt\s*\(")
# ``name = ...``: a link a later statement's formula may read through the name (analysis.chains)
_BINDS_NAME = re.compile(r"\s*(\w+)\s*=[^=]")
# The divisor or factor that makes ``x / sqrt(2)``: ``math.sqrt(2.0)``, ``1.4142...``, ``0.7071...``.
_SQRT_TWO = re.compile(r"^(?:(?:math\.|torch\.|np\.)?sqrt\(\s*2(?:\.0*)?\s*\)|1\.4142\d*|2(?:\.0*)?\s*\*\*\s*0?\.5)$")
_SQRT_TWO_NAME = re.compile(r"^(?:self\.)?_*(?:SQRT_?2|sqrt_?2|SQRT_?TWO|sqrt_?two)$")  # a constant named so
_INVERSE_SQRT_TWO = re.compile(r"^0\.7071\d*$")
_GELU_TANH_CONSTANT = "0.044715"
Match = tuple[str, str]  # what the formula computes, the op that computes it
SOFTPLUS: Match = ("softplus", "F.softplus")
_FUNCTIONS = {  # the torch functions a pattern may call, by the op they compute
    "sigmoid": ("torch.sigmoid", "torch.nn.functional.sigmoid"),
    "tanh": ("torch.tanh", "torch.nn.functional.tanh"),
    "erf": ("torch.erf", "torch.special.erf"),
    "exp": ("torch.exp",),
    "log": ("torch.log",),
    "log1p": ("torch.log1p", "torch.special.log1p"),
    "softplus": ("torch.nn.functional.softplus",),
    "relu6": ("torch.nn.functional.relu6",),
    "sqrt": ("torch.sqrt",),
    "erfinv": ("torch.erfinv", "torch.special.erfinv"),
}
# The functions and methods a formula calls, by the name ``Scope.sites`` files their calls under.
_SITE_NAMES = (
    "sigmoid", "tanh", "erf", "exp", "log", "log1p", "softplus", "relu6", "clamp", "clip", "hardtanh", "sqrt", "erfinv",
)
_CLAMPS = ("torch.clamp", "torch.clip", "torch.nn.functional.hardtanh")


class ElementwiseByHand(Rule):
    code = "FL018"
    name = "elementwise-by-hand"
    message = "an element-wise function written out that one torch op computes in one kernel"
    rationale = """
        Eager PyTorch runs each operator of a written-out formula as a kernel that writes a
        whole tensor: GELU's tanh approximation as `x * 0.5 * (1.0 + torch.tanh(0.79788456 * x
        * (1 + 0.044715 * x * x)))` (BLOOM) is nine kernels, `F.gelu(x, approximate="tanh")`
        one (fusionrt's eager count for a (4, 64, 128) input: 1,152 -> 128 KiB written). The
        same holds for SiLU (`x * torch.sigmoid(x)`, 2 kernels), exact GELU (`0.5 * x * (1 +
        torch.erf(x / math.sqrt(2)))`, 5), Mish (`x * torch.tanh(F.softplus(x))`, 3), hard
        sigmoid (`F.relu6(x + 3) / 6`, 3) and hard swish (`x * F.relu6(x + 3) / 6`, 4, as
        MobileNetV3 and YOLOv5 write them), the logistic function (`1 / (1 + torch.exp(-x))`,
        5), softplus (`torch.log(1 + torch.exp(x))`, 3),
        `torch.log(x + 1)` (2) and `torch.exp(x) - 1` (2); `torch.log1p`, `torch.expm1` and
        `F.softplus` are also accurate where the written-out form loses digits (`x` near 0;
        `exp` overflowing). A fusing backend (fusionrt, torch.compile) fuses the written-out
        form into one kernel anyway: the rewrite pays in eager. With autograd on it pays
        under fusionrt too where the fused op's backward keeps fewer values (the second example:
        17 -> 12 writes); Mish and hard swish around a matmul (the third) write as much either
        way.

        Flagged: `x * sigmoid(x)` (either order; `torch.sigmoid`, `F.sigmoid` or
        `.sigmoid()`); a product of `0.5`, `x` and `1 + erf(x / sqrt(2))` (or `x *
        0.7071...`), or of `0.5`, `x` and `1 + tanh(...)` with `0.044715` in the tanh's
        argument; `x * tanh(softplus(x))` (either order, `.mul` too); `h / 6` (or `.div(6)`)
        where `h` is `relu6(x + 3)`, `hardtanh(x + 3, 0, 6)` or `(x + 3).clamp(0, 6)`, and
        `x` times it (`x * h / 6` too); `1 / (1 + exp(-x))`; `log(1 + exp(x))` and
        `log1p(exp(x))`; `log(1 + x)`, `log(x + 1)`; `exp(x) - 1`; `1 / sqrt(x)` (`torch.rsqrt`:
        eager 4 -> 2 kernels with the input's `abs`); `(1 + tanh(y)) / 2` and `0.5 * (1 +
        tanh(y))` (`torch.sigmoid(2 * y)`: 3 -> 2 kernels; also the tanh approximation of the
        normal CDF); `erfinv(2 * p - 1) * sqrt(2)` (`torch.special.ndtri(p)`, the normal
        quantile: eager 5 -> 2 kernels, fusionrt 3 -> 2 measured on a finite scalar
        quantizer's activation; `sqrt(2)` spelled as a literal, `2 ** 0.5` or a name like
        `_SQRT2`); `1.0` for `1` everywhere. Each formula
        also split over statements (`gate = torch.sigmoid(x)`, then `x * gate`; `cdf = 0.5 * (1
        + erf(x / sqrt(2)))`, then `x * cdf`): a name bound just before in the same block and
        read once there and never again is read as its value (`analysis.chains`). Not flagged: `x * sigmoid(1.702 * x)` (QuickGELU: no
        op computes it), a product with more factors, `sigmoid(x).log()` (`F.logsigmoid` is
        one eager kernel but fusionrt does not fuse it, so it costs more there), Hard Mish
        (`0.5 * x * (x + 2).clamp(0, 2)`: no op computes it), an in-place chain
        (`x.add_(3).clamp_(0, 6).div_(6)` writes its input).
    """
    use_instead = (
        "`F.silu(x)`, `F.gelu(x)`, `F.gelu(x, approximate=\"tanh\")`, `F.mish(x)`, `F.hardsigmoid(x)`, "
        "`F.hardswish(x)`, `torch.sigmoid(x)`, `F.softplus(x)`, `torch.log1p(x)`, `torch.expm1(x)`, `torch.rsqrt(x)`, "
        "`torch.special.ndtri(p)`."
    )
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the fused ops do not round like the written-out formulas (that is part of
        their point: `log1p` and `expm1` are exact near 0, `softplus` returns `x` above a
        threshold), and the rule reads constants by their spelling, not their value. Write
        the op by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")
""",
            call="bloom_gelu(randn(4, 64, 128))",
        ),
        Example(
            bad="""\
import math

import torch


def swish_mlp(h: torch.Tensor, distance: torch.Tensor):
    h = h * torch.sigmoid(h)
    exact = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
    return exact, torch.log(1 + torch.exp(h)), torch.log(distance.abs() + 1), torch.exp(h) - 1
""",
            at=((7, 9), (8, 13), (9, 19), (9, 48), (9, 79)),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def swish_mlp(h: torch.Tensor, distance: torch.Tensor):
    h = F.silu(h)
    exact = F.gelu(h)
    return exact, F.softplus(h), torch.log1p(distance.abs()), torch.expm1(h)
""",
            call="swish_mlp(randn(64, 256), randn(64, 256))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def mish_then_hardswish(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x * F.softplus(x).tanh()
    h = h @ w
    return h * F.hardtanh(h + 3, 0.0, 6.0) / 6.0
""",
            at=((6, 9), (8, 12)),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def mish_then_hardswish(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.hardswish(F.mish(x) @ w)
""",
            call="mish_then_hardswish(randn(64, 256), randn(256, 256) / 16)",
        ),
        Example(  # split over statements, and a reciprocal root
            bad="""\
import torch


def gated_scale(x: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    gate = torch.sigmoid(x)
    h = x * gate
    return h * (1 / torch.sqrt(var))
""",
            at=((6, 9), (7, 17)),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def gated_scale(x: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    return F.silu(x) * torch.rsqrt(var)
""",
            call="gated_scale(randn(64, 256), randn(64, 256).abs() + 1)",
        ),
    )
    valid = (
        # QuickGELU; another tensor's sigmoid; more factors; a log-sigmoid; an offset that is not 1
        """\
import torch


def f(x: torch.Tensor, gate: torch.Tensor, eps: float):
    a = x * torch.sigmoid(1.702 * x)
    b = x * torch.sigmoid(gate)
    c = 2 * x * torch.sigmoid(x) * x
    d = x.sigmoid().log()
    return a, b, c, d, torch.log(x + eps), torch.exp(x) - 2
""",
        # GELU-like products whose constants are not GELU's
        """\
import torch


def g(x: torch.Tensor):
    return 0.5 * x * (1 + torch.tanh(x)), 0.5 * x * (1 + torch.erf(x / 2))
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _CALL_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _RECIPROCAL_ROOT_TEXT.search(text) is not None:
            return True
        if _SMOOTH_TEXT.search(text) is not None:
            # every formula has an operator but ``log1p(exp(x))`` and ``x.mul(...)``
            return "*" in text or "+" in text or "-" in text or "/" in text or "log1p" in text or "mul(" in text \
                or _feeds_arithmetic(block, index)
        # hard sigmoid and swish without those calls: ``x + 3`` clamped to [0, 6], divided by 6
        return _CALL_TEXT.search(text) is not None and "3" in text and "6" in text and ("/" in text or "div(" in text)

    def check(self, scope: Scope) -> Iterator[Violation]:
        # the statements that call a formula's function, and those after that may end it (``x * gate``)
        for ref in chain_statements(site for key in _SITE_NAMES for site in scope.sites.get(key, ())):
            finder = _Formulas(Chain(scope, ref))
            for part in own_parts(ref.node):
                finder.walk(part)
            for node, (formula, op) in finder.found:
                yield Violation(node, message=f"{formula} written out: `{op}` computes it in one kernel")


def _feeds_arithmetic(block: Sequence[str], index: int) -> bool:
    """``name = ...`` read with arithmetic by one of the next three statements: a formula's link."""
    bound = _BINDS_NAME.match(block[index])
    if bound is None:
        return False
    if not any(bound.group(1) in block[later] for later in range(index + 1, min(index + 4, len(block)))):
        return False  # (a substring test first: most bound names are not read so soon)
    name = re.compile(r"\b%s\b" % bound.group(1))
    for later in range(index + 1, min(index + 4, len(block))):
        text = block[later]
        if name.search(text) is not None:
            return "*" in text or "+" in text or "-" in text or "/" in text or "log" in text
    return False


class _Formulas(Walker):
    """(node, (what it computes, the op)) of each written-out formula, outermost only."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.found: list[tuple[cst.BaseExpression, Match]] = []

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        chain = self.chain
        return self._match(node, _silu(chain, node) or _mish(chain, node) or _gelu(chain, node) or _hard(chain, node)
                           or _logistic(chain, node) or _expm1(chain, node) or _reciprocal_root(chain, node)
                           or _tanh_logistic(chain, node) or _ndtri(chain, node))

    def visit_Call(self, node: cst.Call) -> bool:
        chain = self.chain
        return self._match(node, _silu(chain, node) or _mish(chain, node) or _hard(chain, node)
                           or _softplus_or_log1p(chain, node))

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _match(self, node: cst.BaseExpression, match: Match | None) -> bool:
        if match is None:
            return True
        self.found.append((node, match))
        return False


def _silu(chain: Chain, node: cst.BaseExpression) -> Match | None:
    """``x * sigmoid(x)`` (either order, ``.mul`` too)."""
    for x, gate in factor_orders(node):
        operand = _applied(chain, gate, "sigmoid")
        if operand is not None and same_expression(operand, x):
            return "SiLU", "F.silu"
    return None


def _mish(chain: Chain, node: cst.BaseExpression) -> Match | None:
    """``x * tanh(softplus(x))`` (either order, ``.mul`` too)."""
    for x, gate in factor_orders(node):
        tanh = _applied(chain, gate, "tanh")
        operand = _applied(chain, tanh, "softplus") if tanh is not None else None
        if operand is not None and same_expression(operand, x):
            return "Mish", "F.mish"
    return None


def _hard(chain: Chain, node: cst.BaseExpression) -> Match | None:
    """``h / 6`` where ``h`` clamps ``x + 3`` to [0, 6]: hard sigmoid; ``x * h / 6`` or ``x * (h
    / 6)``: hard swish."""
    divided = _over_six(node)
    if divided is not None:
        if _clamped_shift(chain, divided) is not None:
            return "hard sigmoid", "F.hardsigmoid"
        pairs, over_six = factor_orders(divided), False
    else:
        pairs, over_six = factor_orders(node), True
    for x, factor in pairs:
        clamped = _over_six(factor) if over_six else factor
        shifted = _clamped_shift(chain, clamped) if clamped is not None else None
        if shifted is not None and same_expression(shifted, x):
            return "hard swish", "F.hardswish"
    return None


def _logistic(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """``1 / (1 + exp(-x))``."""
    if not (isinstance(node.operator, cst.Divide) and is_one(node.left)):
        return None
    inner = one_plus(chain.value(node.right))
    exponent = _applied(chain, inner, "exp") if inner is not None else None
    if isinstance(exponent, cst.UnaryOperation) and isinstance(exponent.operator, cst.Minus):
        return "the logistic function", "torch.sigmoid"
    return None


def _gelu(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """A product of ``0.5``, ``x`` and ``1 + erf(x / sqrt(2))`` or ``1 + tanh(...0.044715...)``."""
    if not isinstance(node.operator, cst.Multiply):
        return None
    factors = [f for factor in factors_of(node) for f in factors_of(chain.value(factor))]
    if len(factors) != 3:
        return None
    halves = [f for f in factors if isinstance(f, cst.Float) and f.evaluated_value == 0.5]
    for offset in factors:
        inner = one_plus(chain.value(offset))
        if not halves or inner is None:
            continue
        rest = [f for f in factors if f is not offset and f is not halves[0]]
        if len(rest) != 1:
            continue
        x = rest[0]
        erf = _applied(chain, inner, "erf")
        if erf is not None and _is_over_sqrt_two(erf, x):
            return "GELU", "F.gelu"
        tanh = _applied(chain, inner, "tanh")
        if tanh is not None and _GELU_TANH_CONSTANT in code_of(tanh) and code_of(x) in code_of(tanh):
            return "GELU's tanh approximation", 'F.gelu(..., approximate="tanh")'
    return None


def _tanh_logistic(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """``(1 + tanh(y)) / 2``, ``(1 + tanh(y)) * 0.5`` (either order): ``sigmoid(2 * y)``."""
    if isinstance(node.operator, cst.Divide) and _is_value(node.right, 2):
        pairs = [(node.left, node.right)]
    elif isinstance(node.operator, cst.Multiply):
        pairs = [(a, b) for a, b in ((node.left, node.right), (node.right, node.left)) if _is_half(b)]
    else:
        return None
    for offset, _ in pairs:
        inner = one_plus(chain.value(offset))
        if inner is not None and _applied(chain, inner, "tanh") is not None:
            return "the logistic function through `tanh`", "torch.sigmoid(2 * y)"
    return None


def _ndtri(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """``erfinv(2 * p - 1) * sqrt(2)`` (either order): the normal quantile, ``torch.special.ndtri(p)``."""
    for inverse, factor in factor_orders(node):
        argument = _applied(chain, inverse, "erfinv")
        if argument is None or not _SQRT_TWO.match(code_of(factor)) and not _SQRT_TWO_NAME.match(code_of(factor)):
            continue
        if isinstance(argument, cst.BinaryOperation) and isinstance(argument.operator, cst.Subtract) \
                and is_one(argument.right) and any(_is_value(f, 2) for f in factors_of(argument.left)):
            return "the normal quantile", "torch.special.ndtri"
    return None


def _is_half(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Float) and expr.evaluated_value == 0.5


def _reciprocal_root(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """``1 / sqrt(x)``."""
    if isinstance(node.operator, cst.Divide) and is_one(node.left) and _applied(chain, node.right, "sqrt") is not None:
        return "`1 / sqrt(x)`", "torch.rsqrt"
    return None


def _expm1(chain: Chain, node: cst.BinaryOperation) -> Match | None:
    """``exp(x) - 1``."""
    if isinstance(node.operator, cst.Subtract) and is_one(node.right) and _applied(chain, node.left, "exp") is not None:
        return "`exp(x) - 1`", "torch.expm1"
    return None


def _softplus_or_log1p(chain: Chain, node: cst.Call) -> Match | None:
    """``log(1 + exp(x))`` / ``log1p(exp(x))``: ``F.softplus``; ``log(1 + x)``: ``torch.log1p``."""
    argument = _applied(chain, node, "log")
    inner = one_plus(chain.value(argument)) if argument is not None else None
    if inner is None:
        inner = _applied(chain, node, "log1p")
        if inner is None:
            return None
        return SOFTPLUS if _applied(chain, inner, "exp") is not None else None
    return SOFTPLUS if _applied(chain, inner, "exp") is not None else ("`log(1 + x)`", "torch.log1p")


def _over_six(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``h`` of ``h / 6`` or ``h.div(6)``."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide) and _is_value(expr.right, 6):
        return expr.left
    if is_method_call(expr, "div") and len(expr.args) == 1 and _is_value(expr.args[0].value, 6):  # type: ignore[attr-defined]
        return expr.func.value  # type: ignore[attr-defined]
    return None


def _clamped_shift(chain: Chain, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``relu6(x + 3)``, ``hardtanh(x + 3, 0, 6)``, ``clamp(x + 3, 0, 6)`` or ``(x +
    3).clamp(min=0, max=6)`` (``3 + x`` too)."""
    shifted = _applied(chain, expr, "relu6")
    if shifted is None:
        shifted = _clamped_to_six(chain, expr)
    if not (isinstance(shifted, cst.BinaryOperation) and isinstance(shifted.operator, cst.Add)):
        return None
    if _is_value(shifted.right, 3):
        return shifted.left
    return shifted.right if _is_value(shifted.left, 3) else None


def _clamped_to_six(chain: Chain, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``v`` of ``v.clamp(0, 6)``, ``torch.clamp(v, 0, 6)`` or ``F.hardtanh(v, 0, 6)`` (bounds
    positional or by keyword)."""
    if not isinstance(expr, cst.Call) or any(arg.star for arg in expr.args):
        return None
    args = list(expr.args)
    scope = chain.scope
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("clamp", "clip") \
            and scope.torch_name(expr.func) is None:
        value = expr.func.value
    elif scope.torch_name(expr.func) in _CLAMPS and args and args[0].keyword is None:
        value, args = args[0].value, args[1:]
    else:
        return None
    positional = [arg.value for arg in args if arg.keyword is None]
    keywords = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
    low = positional[0] if positional else keywords.get("min", keywords.get("min_val"))
    high = positional[1] if len(positional) > 1 else keywords.get("max", keywords.get("max_val"))
    if len(positional) + len(keywords) != 2 or low is None or high is None:
        return None
    return value if _is_value(low, 0) and _is_value(high, 6) else None


def _is_value(expr: cst.BaseExpression, value: int) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float)) and expr.evaluated_value == value


def _applied(chain: Chain, expr: cst.BaseExpression, op: str) -> cst.BaseExpression | None:
    """``x`` of ``torch.<op>(x)`` (or another spelling of the function) or ``x.<op>()``, also
    through a name the chain was fed (``g = torch.sigmoid(x)``, then ``x * g``)."""
    expr = chain.value(expr)
    if not isinstance(expr, cst.Call):
        return None
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == op and not expr.args:
        return expr.func.value
    if len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
        if chain.scope.torch_name(expr.func) in _FUNCTIONS[op]:
            return expr.args[0].value
    return None



def _is_over_sqrt_two(argument: cst.BaseExpression, x: cst.BaseExpression) -> bool:
    """``x / sqrt(2)``, ``x / 1.4142...``, ``x * 0.7071...`` (either order)."""
    if not isinstance(argument, cst.BinaryOperation):
        return False
    if isinstance(argument.operator, cst.Divide):
        return same_expression(argument.left, x) and _SQRT_TWO.match(code_of(argument.right)) is not None
    if isinstance(argument.operator, cst.Multiply):
        return any(same_expression(a, x) and _INVERSE_SQRT_TWO.match(code_of(b)) is not None
                   for a, b in ((argument.left, argument.right), (argument.right, argument.left)))
    return False

