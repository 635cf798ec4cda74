"""FL009: a similarity matrix (``q @ k.transpose(-2, -1)``, ``einsum('i d, j d -> i j', q, k)``)
scaled by a number after the matmul instead of scaling the smaller operand before it."""
from __future__ import annotations

import ast
import re
from typing import Iterator, NamedTuple, Sequence

import libcst as cst

from fusionlint.analysis import Scope
from fusionlint.analysis.nodes import children
from fusionlint.analysis.numbers import int_literal
from fusionlint.analysis.rescale import (
    PLAIN_RESCALE_TEXT, RESCALE_TEXT, exp_of_parameter, rescaled_later, rescaled_below, scalar_like,
)
from fusionlint.analysis.strings import string_values
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import VIEW_ATTRIBUTES, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

_MATMUL_TEXT = re.compile(r"@|\b(?:matmul|bmm|einsum)\s*\(")
_TRANSPOSES = frozenset({"transpose", "swapaxes", "swapdims", "t", "mT", "T"})
_ASSIGNED = re.compile(r"\s*(\w+)\s*=[^=]")
_SCALE_TEXT = re.compile(r"[*/]|\.(?:mul|div)\s*\(")
_SCALING_METHODS = {"mul": cst.Multiply, "div": cst.Divide}


class ScaleAfterMatmul(Rule):
    code = "FL009"
    name = "scale-after-matmul"
    message = "a similarity matrix scaled after its matmul: scale the smaller operand before it"
    rationale = """
        `q @ k.transpose(-2, -1)` compares every row of `q` with every row of `k`: its result
        (rows of `q` by rows of `k`, the attention scores) is usually larger than `q` itself,
        whose rows are as long as the head dimension. Eager PyTorch runs `scores * scale` as a
        kernel that reads and writes the whole score matrix; `(q * scale) @ k.transpose(-2,
        -1)` gives the same scores (up to rounding) for a kernel over `q`: fusionrt's eager
        count for four 64 x 32 heads is 128 -> 96 KiB written. A lazy fusing backend runs the
        scale as the matmul's epilogue either way, so the rewrite pays in eager only.

        Flagged: `*` or `/` by a value not known to be a tensor (a number, a float attribute
        such as `self.scale`, `math.sqrt(d)`), or by a 0-d tensor (`torch.sqrt(torch.tensor(d))`),
        on either side of `*`, or as `.mul(s)`/`.div(s)`, applied directly to a matmul (`@`,
        `matmul`, `bmm`) whose second operand is a transposed view (`k.transpose(-2, -1)`,
        `k.mT`, a `permute` that moves `k`'s last dim next to last), or to a two-operand
        `einsum` whose output keeps one index of each operand and sums over a shared one (keys
        shared by the heads too, `b h i d, b j d -> b h i j`; an equation an f-string builds
        from known strings must be one in every form it may take); also where the matmul's
        result is assigned to a name that the next statement reading it rescales (`sim =
        einsum(...)`, then `sim = sim * scale`), past views that rebind it (`sim = sim.view(b,
        h, n, n)`), or rescales in place (`sim /= scale`, `sim.mul_(scale)`). Reported
        without a fix: the rescale after the `if` whose arm made the scores (the other arms'
        values are scaled too), the rescale first in the arm of the next `if` that reads them
        (`if scale is not None: sim = sim * scale`), a factor computed between the matmul and
        the rescale (`head_dim = q.shape[-1]`: it must move above the matmul), the scaled
        scores bound to another name or returned (`weights = scores / s`, `return corr / s`)
        where the unscaled ones are never read again. The scale may be a tensor that broadcasts
        like a number: 0-d, or a module's member made as one or as a per-head scale of shape (...,
        1, 1) (`nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))`, Swin V2's cosine
        attention; `torch.sqrt(torch.tensor(d).float())`), or element-wise ops of those
        (`torch.clamp(self.logit_scale, max=m).exp()`); the exp of (a clamp of) a tensor the
        function is given (a log-parametrized temperature of unknown shape) is reported without a
        fix. Also a sequence of keys, a module's output (`keys = self.key_linear(enc)`, or a member
        a method sets to one), against one query column (`query.unsqueeze(2)`, `q[..., None]`):
        the scores are as long as the sequence, the query as long as the features, so the scale
        goes on the query (`torch.matmul(keys, query / s)`). Not flagged: a tensor scale of
        contrastive logits (`text @ image.t() * self.logit_scale.exp()`: the batch is often
        smaller than the embedding), a matrix made by arithmetic against a column (`H @ c[...,
        None]`, a point's projection), other matmuls (`x @ w`, whose output may be smaller than `x`), a first operand flattened
        (`x.flatten(1)`: summed over every pixel of a mask, as a dice loss does, the scores are
        smaller than it), a scale known to be a tensor of some other shape (it may not
        broadcast against `q`), scores read unscaled too.

        It yields to the rules whose rewrite fuses the scale into one kernel and pays under
        fusionrt too: FL010 (the whole attention as `F.scaled_dot_product_attention`), FL012
        (`torch.bmm(q, k) * s + mask` as `torch.baddbmm`) and FL013 (`q @ k.mT * s + mask` as
        `torch.add(mask, q @ k.mT, alpha=s)`: one kernel fewer in eager, none more under
        fusionrt). What is left pays in eager only, and only when there are more keys than the
        head dimension (eight heads of 16 keys by 128: 216 -> 272 KiB written in eager); under
        fusionrt it can cost a kernel, since a matmul that runs as cuBLAS cannot compute the
        scaled `q` on read (twelve heads of 512 tokens by 64, fp32: 1 -> 2 writes; with the
        projections in front, 6 -> 7). `--fix --verify` applies the fix only where it
        measured fusionrt no worse and eager cheaper.
    """
    use_instead = "Scale the first operand: `(q * scale) @ k.transpose(-2, -1)`."
    fix_safety = FixSafety.UNSAFE
    pays_in = (EAGER,)
    yields_to = frozenset({"FL010", "FL012", "FL013"})
    fix_notes = """
        The fix moves the scale onto the matmul's first operand (and drops the statement that
        rescaled the scores, where it was a later one). It is **unsafe**: the result
        differs by floating-point rounding (the product is scaled before the sum, not after),
        and the rule guesses, without shapes, that the first operand is the smaller one.
    """
    examples = (
        Example(
            bad="""\
import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-1, -2)) * 0.125
""",
            at=((5, 12),),
            fixed="""\
import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (q * 0.125) @ k.transpose(-1, -2)
""",
            call="scores(randn(4, 64, 32), randn(4, 64, 32))",
        ),
        Example(
            bad="""\
import math

import torch


def scores(q: torch.Tensor, k: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.einsum("b i d, b j d -> b i j", q, k) / math.sqrt(dim)
""",
            at=((7, 12),),
            fixed="""\
import math

import torch


def scores(q: torch.Tensor, k: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.einsum("b i d, b j d -> b i j", q / math.sqrt(dim), k)
""",
            call="scores(randn(4, 64, 32), randn(4, 64, 32), 32)",
        ),
        Example(  # the scale in a later statement that rebinds the scores
            bad="""\
import torch


def attend(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    sim = torch.einsum("b h i d, b h j d -> b h i j", q, k)
    sim = sim * scale
    return sim.softmax(-1)
""",
            at=((6, 11),),
            fixed="""\
import torch


def attend(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    sim = torch.einsum("b h i d, b h j d -> b h i j", q * scale, k)
    return sim.softmax(-1)
""",
            call="attend(randn(2, 4, 64, 16), randn(2, 4, 64, 16), 0.25)",
        ),
        Example(  # the factor computed between the matmul and the rescale: reported only
            bad="""\
import math

import torch


def attend(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2))
    head_dim = q.shape[-1]
    scores = scores / math.sqrt(head_dim)
    return scores.softmax(-1)
""",
            at=((9, 14),),
            fixed=None,
            good="""\
import math

import torch


def attend(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    head_dim = q.shape[-1]
    scores = torch.matmul(q / math.sqrt(head_dim), k.transpose(-1, -2))
    return scores.softmax(-1)
""",
            call="attend(randn(2, 4, 64, 16), randn(2, 4, 64, 16))",
        ),
        Example(  # scaled into another name after a view, by a 0-d tensor: reported only
            bad="""\
import torch


def correlation(f1: torch.Tensor, f2: torch.Tensor, h: int, w: int) -> torch.Tensor:
    corr = f1 @ f2.transpose(1, 2)
    corr = corr.view(-1, h, w, h, w)
    volume = corr / torch.sqrt(torch.tensor(f1.shape[-1]))
    return volume.flatten(3)
""",
            at=((7, 14),),
            fixed=None,
            good="""\
import torch


def correlation(f1: torch.Tensor, f2: torch.Tensor, h: int, w: int) -> torch.Tensor:
    corr = (f1 / torch.sqrt(torch.tensor(f1.shape[-1]))) @ f2.transpose(1, 2)
    volume = corr.view(-1, h, w, h, w)
    return volume.flatten(3)
""",
            call="correlation(randn(2, 64, 16), randn(2, 64, 16), 8, 8)",
        ),
        Example(  # rescaled in place, by the square root of a shape
            bad="""\
import math

import torch


def attend(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    dots = torch.einsum("b h i d, b h j d -> b h i j", q, k)
    dots /= math.sqrt(k.shape[-1])
    return dots.softmax(-1)
""",
            at=((8, 5),),
            fixed="""\
import math

import torch


def attend(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    dots = torch.einsum("b h i d, b h j d -> b h i j", q / math.sqrt(k.shape[-1]), k)
    return dots.softmax(-1)
""",
            call="attend(randn(2, 4, 64, 16), randn(2, 4, 64, 16))",
        ),
        Example(  # the module's number on the left
            bad="""\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim_head: int):
        super().__init__()
        self.scale = dim_head**-0.5

    def forward(self, q, k):
        return (self.scale * (q @ k.transpose(-2, -1))).softmax(-1)
""",
            at=((11, 17),),
            fixed="""\
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim_head: int):
        super().__init__()
        self.scale = dim_head**-0.5

    def forward(self, q, k):
        return ((q * self.scale) @ k.transpose(-2, -1)).softmax(-1)
""",
            call="Attention(16).forward(randn(2, 4, 64, 16), randn(2, 4, 64, 16))",
        ),
        Example(  # a sequence of keys against one query column, scaled by a 0-d member
            bad="""\
import torch
from torch import nn


class DotAttention(nn.Module):
    def __init__(self, wk: torch.Tensor, wq: torch.Tensor):
        super().__init__()
        self.key_linear = nn.Linear(wk.shape[1], wk.shape[0], bias=False)
        self.query_linear = nn.Linear(wq.shape[1], wq.shape[0], bias=False)
        self.key_linear.weight = nn.Parameter(wk)
        self.query_linear.weight = nn.Parameter(wq)
        self.scaling = torch.sqrt(torch.tensor(wk.shape[0]).float())

    def forward(self, enc, dec):
        keys = self.key_linear(enc)
        query = self.query_linear(dec).unsqueeze(2)
        scores = torch.matmul(keys, query) / self.scaling
        return scores.softmax(1)
""",
            at=((17, 18),),
            fixed="""\
import torch
from torch import nn


class DotAttention(nn.Module):
    def __init__(self, wk: torch.Tensor, wq: torch.Tensor):
        super().__init__()
        self.key_linear = nn.Linear(wk.shape[1], wk.shape[0], bias=False)
        self.query_linear = nn.Linear(wq.shape[1], wq.shape[0], bias=False)
        self.key_linear.weight = nn.Parameter(wk)
        self.query_linear.weight = nn.Parameter(wq)
        self.scaling = torch.sqrt(torch.tensor(wk.shape[0]).float())

    def forward(self, enc, dec):
        keys = self.key_linear(enc)
        query = self.query_linear(dec).unsqueeze(2)
        scores = torch.matmul(keys, query / self.scaling)
        return scores.softmax(1)
""",
            call="DotAttention(randn(16, 16), randn(16, 16)).forward(randn(4, 40, 16), randn(4, 16))",
        ),
        Example(  # cosine attention scaled by a learned per-head scale (Swin V2)
            bad="""\
import math

import torch
import torch.nn.functional as F
from torch import nn


class CosineAttention(nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))

    def forward(self, q, k):
        logit_scale = torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * logit_scale
        return attn.softmax(-1)
""",
            at=((16, 16),),
            fixed="""\
import math

import torch
import torch.nn.functional as F
from torch import nn


class CosineAttention(nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))

    def forward(self, q, k):
        logit_scale = torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        attn = (F.normalize(q, dim=-1) * logit_scale) @ F.normalize(k, dim=-1).transpose(-2, -1)
        return attn.softmax(-1)
""",
            call="CosineAttention(4).forward(randn(2, 4, 64, 16), randn(2, 4, 64, 16))",
        ),
        Example(  # a temperature given in log space, of unknown shape: reported only
            bad="""\
import math

import torch


def window_attention(q: torch.Tensor, k: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    attn = q @ k.transpose(-2, -1)
    logit_scale = torch.clamp(logit_scale, max=math.log(100.0)).exp()
    attn = attn * logit_scale
    return attn.softmax(-1)
""",
            at=((9, 12),),
            fixed=None,
            good="""\
import math

import torch


def window_attention(q: torch.Tensor, k: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    logit_scale = torch.clamp(logit_scale, max=math.log(100.0)).exp()
    attn = (q * logit_scale) @ k.transpose(-2, -1)
    return attn.softmax(-1)
""",
            call="window_attention(randn(2, 4, 64, 16), randn(2, 4, 64, 16), randn(4, 1, 1))",
        ),
    )
    valid = (
        # a projection, whose output may be smaller than its input; a scale that is a tensor
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor):
    h = (x @ w) * 0.5
    s = (q @ k.transpose(-1, -2)) * bias
    return h, s
""",
        # an einsum that is not a similarity (a batched projection)
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    return torch.einsum("b n d, d e -> b n e", x, w) * 0.5
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # a matmul, or the product or quotient that rescales its result
        return re.compile(r"[*/@]|\b(?:matmul|bmm|einsum)\s*\(")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _SCALE_TEXT.search(text) is not None and _MATMUL_TEXT.search(text) is not None:
            return True
        assigned = _ASSIGNED.match(text)
        if assigned is not None and _MATMUL_TEXT.search(text) is not None:  # scaled a few lines below
            if rescaled_below(assigned.group(1), block, index):
                return True
        if index == 0 and PLAIN_RESCALE_TEXT.match(text) is not None:  # first in an `if` arm
            return True
        return RESCALE_TEXT.match(text) is not None and any(  # scaled after the `if` whose arm made it
            block[earlier].lstrip().startswith("if ") for earlier in range(max(0, index - 3), index)
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        for site in (*scope.sites.get("@", ()), *scope.sites.get("matmul", ()), *scope.sites.get("bmm", ()),
                     *scope.sites.get("einsum", ())):
            if site.conditional:
                continue
            scaled = _scaled(scope, site.statement.node, site.node)
            if scaled is not None:
                side = _similarity(scope, site.node)
                if side is not None and not _batch_against_batch(scope, site.node, scaled.factor):
                    fix = None
                    if _moves(scope, scaled.factor):
                        fix = _fix(scope, site.statement.node, scaled.operator, scaled.factor, site.node, scaled.node, side)
                    yield Violation(scaled.node, fix=fix)
                continue
            later = rescaled_later(scope, site.statement, site.node)
            side = _similarity(scope, site.node) if later is not None else None
            if later is not None and side is not None and not _batch_against_batch(scope, site.node, later.factor):
                fix = None
                if later.movable and isinstance(later.statement.node, cst.SimpleStatementLine) and _moves(scope, later.factor):
                    fix = _fix(scope, site.statement.node, later.operator, later.factor, site.node, site.node, side)
                    fix = fix and (*fix, StatementEdit(later.statement.node, ()))
                yield Violation(later.node, fix=fix)


class _Scale(NamedTuple):
    node: cst.CSTNode  # the scaled matmul: ``matmul * s``, ``s * matmul``, ``matmul.div(s)``
    operator: cst.BaseBinaryOp
    factor: cst.BaseExpression


def _scaled(scope: Scope, statement: cst.CSTNode, matmul: cst.CSTNode) -> _Scale | None:
    """The ``matmul * s``, ``s * matmul``, ``matmul / s`` or ``matmul.mul(s)`` (``div``) in
    ``statement``, ``s`` not known to be a tensor (or known to be a 0-d one)."""
    todo = [statement]
    while todo:
        node = todo.pop()
        todo.extend(children(node))
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Multiply, cst.Divide)):
            if node.left is matmul:
                factor = node.right
            elif node.right is matmul and isinstance(node.operator, cst.Multiply):
                factor = node.left
            else:
                continue
            operator = node.operator
        elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.value is matmul
              and node.func.attr.value in _SCALING_METHODS and len(node.args) == 1
              and node.args[0].keyword is None and not node.args[0].star):
            factor, operator = node.args[0].value, _SCALING_METHODS[node.func.attr.value]()
        else:
            continue
        if not scope.is_tensor(factor) or scalar_like(scope, factor) or exp_of_parameter(scope, factor):
            return _Scale(node, operator, factor)
    return None


def _batch_against_batch(scope: Scope, matmul: cst.CSTNode, factor: cst.BaseExpression) -> bool:
    """``text @ image.t()`` scaled by a learned tensor (``self.logit_scale.exp()``): contrastive
    logits of one batch of embeddings against another, where the batch is often smaller than
    the embedding (256 rows of 512 features): the scale costs less on the logits. A ``.t()``
    (two dims, no heads) scaled by a tensor; a number keeps the rule's guess."""
    if not scope.is_tensor(factor):
        return False
    second = matmul.right if isinstance(matmul, cst.BinaryOperation) else matmul.args[-1].value  # type: ignore[attr-defined]
    if isinstance(second, cst.Attribute):
        return second.attr.value == "T"
    op = scope.op(second)
    return op is not None and op[0] == "t"


def _moves(scope: Scope, factor: cst.BaseExpression) -> bool:
    """Can the fix move ``factor`` onto an operand: a number, or a tensor known to broadcast like
    one; not a learned temperature of unknown shape (reported only)."""
    return not scope.is_tensor(factor) or scalar_like(scope, factor)


def _similarity(scope: Scope, matmul: cst.CSTNode) -> int | None:
    """Which operand of a similarity to scale: 0 (the first) for ``q @ k.transpose(-2, -1)`` (or
    ``matmul``/``bmm``) and ``einsum('i d, j d -> i j', q, k)``, not where ``q`` is a flattened
    map (``x.flatten(1)``: summed over every pixel, the scores are smaller than ``q``, a dice
    loss's numerator); 1 (the query) for ``keys @ query.unsqueeze(-1)``, a sequence of keys
    against one query column (dot attention: the scores are a column as long as the sequence,
    the query one as long as the features); None for anything else."""
    if isinstance(matmul, cst.BinaryOperation):
        first, second = matmul.left, matmul.right
    elif isinstance(matmul, cst.Call) and not any(a.keyword is not None or a.star for a in matmul.args):
        op = scope.op(matmul)
        if op is None:
            return None
        if op[0] == "einsum" and len(matmul.args) == 3:
            equations = string_values(scope, matmul.args[0].value)  # an f-string may be one of a few
            return 0 if equations and all(_gram(equation) for equation in equations) else None
        if op[0] not in ("matmul", "bmm") or len(matmul.args) != 2:
            return None
        first, second = matmul.args[0].value, matmul.args[1].value
    else:
        return None
    if _transposed(scope, second):
        return None if _flattened(scope, first, set()) else 0
    return 1 if _column(scope, second, set()) and _projected(scope, first) else None


def _column(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """``q.unsqueeze(-1)`` (``unsqueeze(2)`` of a batch of vectors), ``q[..., None]``, ``q[:, :,
    None]``, or a local every assignment of which is one: a column, one vector per batch."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze":
        args = [arg.value for arg in expr.args]
        return len(args) == 1 and int_literal(args[0]) in (-1, 2) and scope.is_tensor(expr.func.value)
    if isinstance(expr, cst.Subscript) and scope.is_tensor(expr.value):
        *leading, last = [element.slice for element in expr.slice]
        return (isinstance(last, cst.Index) and isinstance(last.value, cst.Name) and last.value.value == "None"
                and all(_whole(part) for part in leading))
    if isinstance(expr, cst.Name) and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_column(scope, value, seen | {expr.value}) for value in values)
    return False


def _whole(part: cst.BaseSlice) -> bool:
    """``:`` or ``...`` in a subscript."""
    if isinstance(part, cst.Slice):
        return part.lower is None and part.upper is None and part.step is None
    return isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis)


def _projected(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A module's output, the keys of an attention (``keys = self.key_linear(enc)``), or a member
    a method sets to one (``self.keys``, a cache): a learned projection of a sequence. Not a
    matrix made by arithmetic (a rotation, a homography: ``H @ c[..., None]`` is a projection
    of a point, no smaller than its output) nor a weight."""
    if isinstance(expr, cst.Name):
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(isinstance(value, cst.Call) and scope.typing.is_module(value.func) for value in values)
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"
            and scope.class_name is not None):
        return False
    values = [assign.value for assign in scope.facts.member_values(scope.class_name, expr.attr.value)]
    calls = [value for value in values if not (isinstance(value, ast.Constant) and value.value is None)]
    return bool(calls) and all(_module_call(scope, value) for value in calls)


def _module_call(scope: Scope, node: ast.expr) -> bool:
    """``self.key_linear(enc)``: a call of a member module."""
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
            and scope.class_name is not None and (scope.facts.nn_class(scope.class_name, func.attr) is not None
                                                  or scope.facts.module_attr(scope.class_name, func.attr) is not None))


def _flattened(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """``x.flatten(1)`` (``start_dim=1``), or a local every assignment of which is one."""
    if isinstance(expr, cst.Call):
        op = scope.op(expr)
        args = [arg for arg in expr.args if arg.keyword is None or arg.keyword.value == "start_dim"]
        return op is not None and op[0] == "flatten" and len(args) == 1 and int_literal(args[-1].value) == 1
    if isinstance(expr, cst.Name) and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_flattened(scope, value, seen | {expr.value}) for value in values)
    return False


def _transposed(scope: Scope, expr: cst.BaseExpression) -> bool:
    """``k.transpose(-2, -1)``, ``k.mT``, or a ``permute`` that puts ``k``'s last dim next to last
    (``k.permute(0, 1, 3, 2)``, ``k.permute(0, 2, 3, 1)``): the matmul sums over the features."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in VIEW_ATTRIBUTES and scope.is_tensor(expr.value)
    op = scope.op(expr)
    if op is not None and op[0] == "permute" and isinstance(expr, cst.Call):
        return _features_next_to_last(expr, op[2])
    return op is not None and op[0] in _TRANSPOSES


def _features_next_to_last(permute: cst.Call, tensor: cst.BaseExpression | None) -> bool:
    """Do the literal dims of ``x.permute(...)`` (or ``torch.permute(x, ...)``) move the last dim
    of ``x`` to the next-to-last place?"""
    args = [arg.value for arg in permute.args if arg.keyword is None and not arg.star]
    if len(args) != len(permute.args):
        return False
    if args and args[0] is tensor:
        args = args[1:]
    if len(args) == 1 and isinstance(args[0], (cst.Tuple, cst.List)):
        args = [element.value for element in args[0].elements]
    dims = [int_literal(arg) for arg in args]
    rank = len(dims)
    return rank >= 2 and None not in dims and dims[-2] % rank == rank - 1  # type: ignore[operator]


def _gram(equation: str | bytes) -> bool:
    """Is ``a, b -> out`` rows of ``a`` against rows of ``b``: summed over their shared last index,
    each keeping its own next-to-last one (``b i d, b j d -> b i j``; ``b h i d, b j d -> b h i j``)?"""
    if not isinstance(equation, str) or "->" not in equation:
        return False
    inputs, out = equation.replace(" ", "").split("->")
    parts = [p.replace("...", "") for p in inputs.split(",")]
    if len(parts) != 2 or not all(parts) or min(map(len, parts)) < 2:
        return False
    kept = set(out.replace("...", ""))
    (row_a, last), (row_b, last_b) = parts[0][-2:], parts[1][-2:]
    summed = last == last_b and last not in kept
    return summed and row_a in kept and row_b in kept and row_a not in parts[1] and row_b not in parts[0]


def _fix(
    scope: Scope, statement: cst.CSTNode, operator: cst.BaseBinaryOp, factor: cst.BaseExpression,
    matmul: cst.CSTNode, replaced: cst.CSTNode, side: int,
) -> tuple[StatementEdit, ...] | None:
    """``statement`` with ``replaced`` (the scaled matmul, or the matmul itself where a later
    statement scales it) turned into the matmul of its operand ``side`` (0, the first; 1, the
    second) scaled by ``factor``."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    if isinstance(matmul, cst.BinaryOperation):
        operand = cst.BinaryOperation(
            left=matmul.right if side else matmul.left, operator=operator, right=factor,
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()],
        )
        changes = {"right": operand} if side else {"left": operand}
        moved = matmul.with_changes(**changes, lpar=replaced.lpar, rpar=replaced.rpar)
    else:
        index = side + 1 if scope.op(matmul)[0] == "einsum" else side  # type: ignore[index]
        operand = matmul.args[index].value  # type: ignore[attr-defined]
        product = cst.BinaryOperation(left=operand, operator=operator, right=factor)
        args = list(matmul.args)  # type: ignore[attr-defined]
        args[index] = args[index].with_changes(value=product)
        moved = matmul.with_changes(args=args, lpar=replaced.lpar, rpar=replaced.rpar)
    return (StatementEdit(statement, (replace_nodes(statement, {replaced: moved}),)),)
