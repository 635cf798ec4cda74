"""FL021: a softmax written out, ``exp(x - logsumexp(x, d, keepdim=True))`` or ``exp(x) /
exp(x).sum(d, keepdim=True)``, and a log-softmax, ``x - logsumexp(x, d, keepdim=True)``:
``torch.softmax`` and ``F.log_softmax`` compute them in one kernel."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, reaching_assignment, scope_statements
from fusionlint.analysis.nodes import Walker, code_of, same_expression
from fusionlint.analysis.torch_calls import Reduction, keepdim_reduction, unary_operand
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# Every pattern calls ``logsumexp`` or divides by a ``.sum(``.
_TEXT = re.compile(r"logsumexp|/\s*[\w.()]*\.sum\(|/\s*torch\.sum\(")

Match = tuple[str, str]  # what the formula computes, the call that computes it


class SoftmaxByHand(Rule):
    code = "FL021"
    name = "softmax-by-hand"
    message = "a softmax written out: `torch.softmax` (or `F.log_softmax`) computes it in one kernel"
    rationale = """
        A softmax normalised by hand runs the reduction and the element-wise work around it as
        separate eager kernels: `torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))`
        (Reformer's attention probabilities, a router's top-k weights) is three kernels, each
        writing a tensor; `torch.softmax(x, dim=-1)` is one (fusionrt's eager count for a (64,
        64, 128) input: 3 -> 1 kernels). The same holds for the log-softmax, `x -
        torch.logsumexp(x, dim, keepdim=True)` (2 -> 1), and for `torch.exp(x) /
        torch.exp(x).sum(dim, keepdim=True)` (3 -> 1), which also overflows where `x` is large
        and `torch.softmax` does not. Under fusionrt the rewrite pays where the result stands
        alone (2 -> 1 kernels: `logsumexp` runs outside its fused kernels) but not before a
        matmul, whose prologue takes the written-out exponential (the first example: 2 -> 3
        writes): it is claimed in eager only.

        Flagged, over the last dim (`-1`): `exp(x - L)` and `x - L` where `L` is
        `logsumexp(x, -1, keepdim=True)` of the same `x`, inline or a name assigned just for it
        (read nowhere else); `E / E.sum(-1, keepdim=True)` where `E` is `exp(y)` (inline, twice,
        or a name assigned `exp(y)`); the `torch.` functions or the methods. Not flagged: another
        dim (a softmax over an inner dim is a strided kernel that can be slower on a GPU than
        the written-out passes, which is why LoFTR's matcher writes its column softmax out), a
        log-sum-exp of something else (Sinkhorn's `log_mu - logsumexp(scores + log_v, dim)`),
        one without `keepdim=True`, one read elsewhere (returned, say: it is needed anyway), a
        sum that is not of the same exponential.
    """
    use_instead = "`torch.softmax(x, dim=d)`, `F.log_softmax(x, dim=d)`."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the fused ops round differently (they subtract the maximum, where `exp(x) /
        sum` does not), and a `dtype` or a cast in the written-out form needs reading. Write the
        call by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def local_attention_probs(query_key_dots: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    logits = torch.logsumexp(query_key_dots, dim=-1, keepdim=True)
    attention_probs = torch.exp(query_key_dots - logits)
    return attention_probs @ values
""",
            at=((6, 23),),
            fixed=None,
            good="""\
import torch


def local_attention_probs(query_key_dots: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    attention_probs = torch.softmax(query_key_dots, dim=-1)
    return attention_probs @ values
""",
            call="local_attention_probs(randn(8, 64, 128), randn(8, 128, 32))",
        ),
        Example(
            bad="""\
import torch


def log_probs_and_weights(logits: torch.Tensor, scores: torch.Tensor):
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    e = scores.exp()
    return log_probs, e / e.sum(dim=-1, keepdim=True)
""",
            at=((5, 17), (7, 23)),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def log_probs_and_weights(logits: torch.Tensor, scores: torch.Tensor):
    return F.log_softmax(logits, dim=-1), torch.softmax(scores, dim=-1)
""",
            call="log_probs_and_weights(randn(64, 1000), randn(64, 64, 16))",
        ),
    )
    valid = (
        # Sinkhorn's scaling (another tensor's log-sum-exp); no keepdim; the log-sum-exp read
        # again; a sum of something else; a sum over a dim without keepdim; an inner dim
        """\
import torch


def f(log_mu: torch.Tensor, scores: torch.Tensor, log_v: torch.Tensor, x: torch.Tensor):
    log_u = log_mu - torch.logsumexp(scores + log_v.unsqueeze(1), dim=2)
    z = x - x.logsumexp(-1)
    lse = torch.logsumexp(x, dim=-1, keepdim=True)
    probs = torch.exp(x - lse)
    e = torch.exp(x)
    normalised = x / x.sum(-1, keepdim=True)
    other = e / e.sum(-1)
    columns = e / e.sum(1, keepdim=True)
    return log_u, z, probs, lse, normalised, other, columns
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _TEXT.search(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if not (scope.sites.get("logsumexp") or scope.sites.get("exp")):
            return  # every formula calls one of them
        for ref in scope_statements(scope):
            finder = _Formulas(scope, ref)
            for part in own_parts(ref.node):
                finder.walk(part)
            for node, (formula, call) in finder.found:
                yield Violation(node, message=f"{formula} written out: `{call}` computes it in one kernel")


class _Formulas(Walker):
    """(node, (what it computes, the call)) of each written-out softmax, outermost only."""

    def __init__(self, scope: Scope, ref: StatementRef) -> None:
        self.scope = scope
        self.ref = ref
        self.found: list[tuple[cst.BaseExpression, Match]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        argument = unary_operand(self.scope, node, "exp")
        centred = _log_softmax(self.scope, self.ref, argument) if argument is not None else None
        if centred is None:
            return True
        x, dim = centred
        self.found.append((node, ("softmax", f"torch.softmax({x}, dim={dim})")))
        return False

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        if isinstance(node.operator, cst.Subtract):
            found = _log_softmax(self.scope, self.ref, node)
            match = ("log-softmax", f"F.log_softmax({found[0]}, dim={found[1]})") if found else None
        elif isinstance(node.operator, cst.Divide):
            found = _normalised_exp(self.scope, self.ref, node)
            match = ("softmax", f"torch.softmax({found[0]}, dim={found[1]})") if found else None
        else:
            return True
        if match is None:
            return True
        self.found.append((node, match))
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _log_softmax(scope: Scope, ref: StatementRef, expr: cst.BaseExpression) -> tuple[str, str] | None:
    """(x, dim) of ``x - logsumexp(x, dim, keepdim=True)``, the log-sum-exp inline or a name
    assigned it and read nowhere else."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)):
        return None
    x, lse = expr.left, expr.right
    if isinstance(lse, cst.Name):
        found = reaching_assignment(ref, lse.value, unread=True)
        if found is None or scope.read_after(ref, lse.value):
            return None
        lse = found[1]
    reduced = _plain(keepdim_reduction(scope, lse, "logsumexp"))
    if reduced is None or not same_expression(reduced.operand, x):
        return None
    return code_of(x), code_of(reduced.dim)


def _normalised_exp(scope: Scope, ref: StatementRef, division: cst.BinaryOperation) -> tuple[str, str] | None:
    """(y, dim) of ``E / E.sum(dim, keepdim=True)`` where ``E`` is ``exp(y)``, written out or a name."""
    reduced = _plain(keepdim_reduction(scope, division.right, "sum"))
    if reduced is None or not same_expression(reduced.operand, division.left):
        return None
    numerator = division.left
    if isinstance(numerator, cst.Name):
        found = reaching_assignment(ref, numerator.value)
        numerator = found[1] if found is not None else numerator
    y = unary_operand(scope, numerator, "exp")
    return (code_of(y), code_of(reduced.dim)) if y is not None else None


def _plain(reduction: Reduction | None) -> Reduction | None:
    """The reduction, if it is over the last dim and takes no other keyword (a ``dtype`` changes
    what it computes)."""
    if reduction is None or reduction.keywords or code_of(reduction.dim).replace(" ", "") != "-1":
        return None
    return reduction
