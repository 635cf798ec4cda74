"""FL020: a layer norm written out, ``(x - mean) * rsqrt(var + eps)`` with both statistics taken
over one dim of ``x``: ``F.layer_norm`` computes it in one kernel."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, names_of, own_parts, root_name, scope_statements
from fusionlint.analysis.nodes import code_of, operations, same_expression
from fusionlint.analysis.torch_calls import keepdim_reduction, unary_operand
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# The normalising statement takes a square root (``rsqrt``, ``sqrt``, ``** 0.5``) of the variance;
# it or a statement before it in its block subtracts the mean (a binary minus, not ``** -0.5``'s
# sign) and takes it.
_ROOT_TEXT = re.compile(r"sqrt|\*\*\s*-?0?\.5")
_MINUS_TEXT = re.compile(r"[\w)\]]\s*-(?!=)")

Statistics = tuple[cst.BaseExpression, str, cst.BaseExpression]  # x, its dim's code, the node to report


class LayerNormByHand(Rule):
    code = "FL020"
    name = "layer-norm-by-hand"
    message = "a layer norm written out: `F.layer_norm` computes it in one kernel"
    rationale = """
        A layer norm written with tensor ops runs one eager kernel per op, each writing a
        whole tensor: Cohere's `mean = x.mean(-1, keepdim=True)`, `variance = (x -
        mean).pow(2).mean(-1, keepdim=True)`, `(x - mean) * torch.rsqrt(variance + eps)` is
        eight kernels before the weight; `F.layer_norm(x, x.shape[-1:], weight, bias, eps)`
        is one (fusionrt's eager count for a (4, 64, 128) input: 9 -> 1 kernels, 644 -> 130
        KiB written). Over channels (`x.mean(1, keepdim=True)`, ConvNeXt's and timm's
        channels-first norm) the call takes the channels-last view, `F.layer_norm(x.movedim(1,
        -1), ...).movedim(-1, 1)`: eager's layer norm copies that view to a contiguous one
        first, one pass more, still two kernels against ten. A fusing backend (fusionrt,
        torch.compile) fuses the written-out form into one kernel anyway: the rewrite pays in
        eager. With autograd on, fusionrt writes less for the last-dim call (the first example:
        13 -> 9 writes) and more for the moved view (the second: 10 -> 12).

        Flagged: `(x - mean) * rsqrt(var + eps)`, `(x - mean) / sqrt(var + eps)` (`torch.`
        functions or methods, `** 0.5` and `** -0.5` too), where `mean` is `x.mean(d,
        keepdim=True)` and `var` is `(x - mean).pow(2).mean(d, keepdim=True)` (or `** 2`,
        `.square()`), `x.var(d, unbiased=False, keepdim=True)` (or `correction=0`), or both come
        from `torch.var_mean(x, d, unbiased=False, keepdim=True)`; each inline or a name
        assigned in the same block, `x` unchanged between, `d` one dim. The finding points at
        the first statistic. Not flagged: an RMS norm (no mean subtracted: `F.rms_norm` is a
        composite of the same ops in eager and pays nowhere), the unbiased variance (`x.var(d,
        keepdim=True)`: a standardisation, not a layer norm), `eps` outside the root (`(x -
        mean) / (std + eps)`), statistics over several dims (a group norm).
    """
    use_instead = (
        "`F.layer_norm(x, x.shape[-1:], weight, bias, eps)` (the affine that follows goes into the call); "
        "over dim `d`: `F.layer_norm(x.movedim(d, -1), (x.shape[d],), weight, bias, eps).movedim(-1, d)`."
    )
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: `F.layer_norm` rounds differently (it computes the variance in one pass, in
        higher precision on reduced-precision inputs), the weight and bias that follow are
        often cast or reshaped first, and a norm over another dim than the last needs the
        moved view. Write the call by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def cohere_layer_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    x = (x - mean) * torch.rsqrt(variance + eps)
    return weight * x
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def cohere_layer_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, None, eps)
""",
            call="cohere_layer_norm(randn(4, 64, 128), randn(128))",
        ),
        Example(
            bad="""\
import torch


def layer_norm_channels_first(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    s, u = torch.var_mean(x, dim=1, unbiased=False, keepdim=True)
    x = (x - u) / torch.sqrt(s + 1e-6)
    return x * weight[:, None, None] + bias[:, None, None]
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def layer_norm_channels_first(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x.movedim(1, -1), x.shape[1:2], weight, bias, 1e-6).movedim(-1, 1)
""",
            call="layer_norm_channels_first(randn(2, 32, 8, 8), randn(32), randn(32))",
        ),
    )
    valid = (
        # an RMS norm; a standardisation with the unbiased variance; eps outside the root;
        # statistics over two dims; x changed between the mean and its use
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, eps: float):
    rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    mean = y.mean(-1, keepdim=True)
    var = y.var(-1, keepdim=True)
    target = (y - mean) / (var + 1e-6) ** 0.5
    std = ((y - mean) ** 2).mean(-1, keepdim=True).sqrt()
    scaled = (y - mean) / (std + eps)
    g_mean = x.mean((2, 3), keepdim=True)
    g_var = x.var((2, 3), unbiased=False, keepdim=True)
    grouped = (x - g_mean) * torch.rsqrt(g_var + eps)
    return rms, target, scaled, grouped


def g(x: torch.Tensor, eps: float):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    x = x * 2
    return (x - mean) * torch.rsqrt(var + eps)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _ROOT_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        if _ROOT_TEXT.search(block[index]) is None:
            return False
        earlier = [block[i] for i in range(index, -1, -1)]
        return any("mean(" in text for text in earlier) and any(_MINUS_TEXT.search(text) for text in earlier)

    def check(self, scope: Scope) -> Iterator[Violation]:
        if not (scope.sites.get("mean") or scope.sites.get("var_mean")):
            return  # no statistics to normalise by
        reported: set[int] = set()  # statistics normalised twice are one finding
        for ref in scope_statements(scope):
            for part in own_parts(ref.node):
                for operation in operations(part, (cst.Multiply, cst.Divide), skip=(cst.Lambda,)):
                    found = _layer_norm(scope, ref, operation)
                    if found is not None and id(found[2]) not in reported:
                        x, dim, first = found
                        reported.add(id(first))
                        yield Violation(first, message=_message(code_of(x), dim))


def _message(x: str, dim: str) -> str:
    if dim == "-1":
        call = f"F.layer_norm({x}, {x}.shape[-1:], weight, bias, eps)"
    else:
        call = f"F.layer_norm({x}.movedim({dim}, -1), ({x}.shape[{dim}],), weight, bias, eps).movedim(-1, {dim})"
    return f"a layer norm of `{x}` over dim {dim} written out: `{call}` computes it in one kernel"


def _layer_norm(scope: Scope, ref: StatementRef, operation: cst.BinaryOperation) -> Statistics | None:
    """(x, dim, the first statistic's node) of ``(x - mean) * rsqrt(var + eps)`` or its
    division form, its statistics over one dim of ``x``."""
    if isinstance(operation.operator, cst.Multiply):
        pairs = ((operation.left, operation.right), (operation.right, operation.left))
        roots = [(centred, _root(scope, factor, inverse=True)) for centred, factor in pairs]
    else:
        roots = [(operation.left, _root(scope, operation.right, inverse=False))]
    for centred_expr, radicand in roots:
        centred = _centred(ref, centred_expr)
        if radicand is None or centred is None:
            continue
        x, mean = centred
        for variance in _summands(radicand):
            found = _statistics(scope, ref, x, mean, variance)
            if found is not None:
                return found
    return None


def _root(scope: Scope, expr: cst.BaseExpression, *, inverse: bool) -> cst.BaseExpression | None:
    """``r`` of ``rsqrt(r)`` / ``r ** -0.5`` (``inverse``) or ``sqrt(r)`` / ``r ** 0.5``."""
    op = "rsqrt" if inverse else "sqrt"
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        exponent = code_of(expr.right).replace(" ", "")
        return expr.left if exponent in (("-0.5", "-.5") if inverse else ("0.5", ".5")) else None
    return unary_operand(scope, expr, op)


def _summands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Each side of ``a + b`` or ``a.add(b)``: the variance, the other the epsilon."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return [expr.left, expr.right]
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "add" \
            and len(expr.args) == 1:
        return [expr.func.value]
    return []


def _centred(ref: StatementRef, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(x, mean) of ``x - mean``, written here or as the value of a name assigned before."""
    if isinstance(expr, cst.Name):
        found = _definition(ref, expr.value)
        if found is None or found[2] is not None:
            return None
        ref, expr = found[0], found[1]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract):
        return expr.left, expr.right
    return None


def _statistics(scope: Scope, ref: StatementRef, x: cst.BaseExpression, mean: cst.BaseExpression,
                variance: cst.BaseExpression) -> Statistics | None:
    """(x, dim, first node) where ``mean`` is the mean of ``x`` and ``variance`` its biased variance
    over the same single dim, with ``x`` unchanged since they were taken."""
    mean_at = _resolve(ref, mean)
    variance_at = _resolve(ref, variance)
    if mean_at is None or variance_at is None:
        return None
    (mean_ref, mean_value, mean_index), (variance_ref, variance_value, variance_index) = mean_at, variance_at
    if mean_index is not None or variance_index is not None:  # ``var, mean = torch.var_mean(x, ...)``
        if mean_value is not variance_value or (mean_index, variance_index) != (1, 0):
            return None
        taken = _reduced(scope, mean_value, "var_mean")
        if taken is None or not _biased(mean_value):
            return None
    else:
        taken = _reduced(scope, mean_value, "mean")
        if taken is None or _spread(scope, variance_ref, variance_value, x, mean) != taken[1]:
            return None
    # both statistics are taken in ``ref``'s block, at or before it
    first_ref, first = (variance_ref, variance_value) if variance_ref.index < mean_ref.index else (mean_ref, mean_value)
    if not same_expression(taken[0], x) or not _unchanged(ref, first_ref, x):
        return None
    return x, taken[1], first


def _spread(scope: Scope, ref: StatementRef, value: cst.BaseExpression, x: cst.BaseExpression,
            mean: cst.BaseExpression) -> str | None:
    """The dim of a biased variance of ``x`` about ``mean``: ``(x - mean).pow(2).mean(d,
    keepdim=True)`` (``** 2``, ``.square()``) or ``x.var(d, unbiased=False, keepdim=True)``."""
    taken = _reduced(scope, value, "var")
    if taken is not None:
        return taken[1] if _biased(value) and same_expression(taken[0], x) else None
    taken = _reduced(scope, value, "mean")
    if taken is None:
        return None
    squared = taken[0]
    base = None
    if isinstance(squared, cst.BinaryOperation) and isinstance(squared.operator, cst.Power) \
            and code_of(squared.right) in ("2", "2.0"):
        base = squared.left
    elif isinstance(squared, cst.Call) and isinstance(squared.func, cst.Attribute):
        method, args = squared.func.attr.value, squared.args
        if (method == "pow" and len(args) == 1 and code_of(args[0].value) in ("2", "2.0")) or (method == "square" and not args):
            base = squared.func.value
    centred = _centred(ref, base) if base is not None else None
    if centred is None or not (same_expression(centred[0], x) and same_expression(centred[1], mean)):
        return None
    return taken[1]


def _reduced(scope: Scope, call: cst.BaseExpression, op: str) -> tuple[cst.BaseExpression, str] | None:
    """(x, dim's code) of a ``keepdim=True`` reduction over one dim."""
    reduction = keepdim_reduction(scope, call, op)
    if reduction is None or not _one_dim(reduction.dim):
        return None
    return reduction.operand, code_of(reduction.dim).replace(" ", "")


def _one_dim(dim: cst.BaseExpression) -> bool:
    if isinstance(dim, cst.UnaryOperation) and isinstance(dim.operator, cst.Minus):
        dim = dim.expression
    return isinstance(dim, cst.Integer)


def _biased(call: cst.BaseExpression) -> bool:
    """``unbiased=False`` or ``correction=0`` among a variance call's keywords."""
    assert isinstance(call, cst.Call)
    keywords = {arg.keyword.value: code_of(arg.value) for arg in call.args if arg.keyword is not None}
    return keywords.get("unbiased") == "False" or keywords.get("correction") == "0"


def _resolve(ref: StatementRef, expr: cst.BaseExpression) -> tuple[StatementRef, cst.BaseExpression, int | None] | None:
    """(statement, value, tuple position) where ``expr`` is computed: the statement ``ref`` itself
    for an expression written there, the assignment that reaches it for a name."""
    if isinstance(expr, cst.Name):
        return _definition(ref, expr.value)
    return ref, expr, None


def _definition(ref: StatementRef, name: str) -> tuple[StatementRef, cst.BaseExpression, int | None] | None:
    """The nearest assignment of ``name`` before ``ref`` in its block, only simple statements
    between: (statement, value, None) for ``name = value``; (statement, value, i) where ``name``
    is the i-th of a tuple of names (``s, u = torch.var_mean(...)``)."""
    for earlier in ref.earlier():
        if not isinstance(earlier.node, cst.SimpleStatementLine):
            return None
        if name not in names_of(earlier.node)[1]:
            continue
        small = earlier.simple
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            return None
        target = small.targets[0].target
        if isinstance(target, cst.Name):
            return earlier, small.value, None
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
            return (earlier, small.value, names.index(name)) if names.count(name) == 1 else None
        return None
    return None


def _unchanged(ref: StatementRef, since: StatementRef, x: cst.BaseExpression) -> bool:
    """No statement from ``since`` (excluded) up to ``ref`` (excluded) assigns ``x``'s root name."""
    name = root_name(x)
    if name is None:
        return False
    if since is ref:
        return True
    for earlier in ref.earlier():
        if earlier.index == since.index:
            return True
        if name in names_of(earlier.node)[1]:
            return False
    return False
