"""FL042: a tensor grown by ``torch.cat`` in every iteration of a loop (``out = torch.cat((out, h))``)
that the loop reads nowhere else: each iteration copies all it gathered so far."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, children, count_name
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.vstack"})
_JOIN_TEXT = re.compile(r"\b(?:cat|concat|concatenate|hstack|vstack)\s*\(")
# ``acc = torch.cat((acc, ...`` or ``acc = cat([..., acc], ...``: the name assigned is joined with more.
_GROWN_TEXT = re.compile(
    r"^\s*(\w+)\s*=\s*[\w.]*\b(?:cat|concat|concatenate|hstack|vstack)\s*\(\s*[(\[]\s*(?:\1\s*,|[^=]*,\s*\1\s*,?\s*[)\]])"
)


class CatGrownInLoop(Rule):
    code = "FL042"
    name = "cat-grown-in-loop"
    message = "a tensor grown by `torch.cat` in every iteration of a loop: collect the pieces in a list and join them once"
    rationale = """
        `out = torch.cat((out, piece))` in a loop writes a new tensor holding everything gathered
        so far on every iteration: the copies add up to a quadratic number of writes in the
        number of iterations, and each is a kernel of its own, in eager PyTorch and in a fusing
        backend alike (a concatenation is a copy into a fresh buffer). Appending the pieces to
        a list and joining them once after the loop writes each piece once: fusionrt measures
        five column sums grown by `cat` at 16 -> 12 kernels and 46 -> 29 KiB written, eager
        22 -> 18 kernels (vector-quantize-pytorch's residual VQ, which grows its residuals and
        indices per quantizer layer: 40 -> 33 kernels on its labels).

        Flagged: in a `for` or `while` loop, `acc = torch.cat((acc, piece), dim)` (or with the
        accumulator last, `torch.cat([piece, acc])`; `torch.concat`, `concatenate`, `hstack`,
        `vstack`), where `acc` is a plain name the loop reads nowhere else, its header included
        (an assignment that starts it anew, `if first: acc = piece`, is no read: the list starts
        anew too; Tacotron 2's decoder grows its gate outputs and alignments so, once per
        decoded frame). Not flagged: an accumulator the loop reads (an autoregressive decoder
        feeding the whole sequence back to the model each step needs it joined every step; a
        stop test on its length), a `while` whose test reads it, a join inside a comprehension,
        pieces moved to the host one by one (`torch.cat((acc, x.cpu()))`: code that bounds the
        device's memory so, and the joins are no device work).
    """
    use_instead = (
        "`pieces.append(piece)` in the loop (the initial value as the first piece) and "
        "`acc = torch.cat(pieces, dim)` once after it."
    )
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the list needs a name and a statement after the loop, and the accumulator's
        initial value (often an empty tensor with a shape of its own) belongs in it as the
        first piece. Rewrite by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def column_sums(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x
    out = torch.tanh(h @ w)
    for _ in range(5):
        h = torch.tanh(h @ w)
        out = torch.cat((out, h.sum(-1, keepdim=True)), dim=-1)
    return out
""",
            at=((9, 9),),
            fixed=None,
            call="column_sums(randn(16, 64), randn(64, 64))",
            good="""\
import torch


def column_sums(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x
    outs = [torch.tanh(h @ w)]
    for _ in range(5):
        h = torch.tanh(h @ w)
        outs.append(h.sum(-1, keepdim=True))
    return torch.cat(outs, dim=-1)
""",
        ),
        Example(  # the accumulator last, the join under a branch of the loop
            bad="""\
import torch


def stack_rows(x: torch.Tensor, w: torch.Tensor, keep: list) -> torch.Tensor:
    rows = x[:0]
    for flag in keep:
        x = torch.tanh(x @ w)
        if flag:
            rows = torch.cat([x, rows], dim=0)
    return rows
""",
            at=((9, 13),),
            fixed=None,
            call="stack_rows(randn(16, 64), randn(64, 64), [True, False, True, True])",
            good="""\
import torch


def stack_rows(x: torch.Tensor, w: torch.Tensor, keep: list) -> torch.Tensor:
    rows = [x[:0]]
    for flag in keep:
        x = torch.tanh(x @ w)
        if flag:
            rows.append(x)
    return torch.cat(rows[::-1], dim=0)
""",
        ),
    )
    valid = (
        # an autoregressive decoder reads the whole sequence each step; a while test reads it
        """\
import torch


def decode(net, seq: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        logits = net(seq)
        seq = torch.cat((seq, logits[:, -1:].argmax(-1)), dim=-1)
    out = seq[:, :0]
    while out.shape[-1] < steps:
        out = torch.cat((out, seq[:, :1]), dim=-1)
    return seq, out
""",
        # read in the loop; joined with itself; a join in a comprehension; not a torch join; pieces to the host
        """\
import numpy as np
import torch


def f(xs: list, a: np.ndarray) -> torch.Tensor:
    acc = xs[0]
    for x in xs:
        if acc.shape[0] > 4:
            break
        acc = torch.cat((acc, x))
    host = xs[0].cpu()
    for x in xs:
        host = torch.cat((host, x.cpu()))
    both = xs[0]
    for x in xs:
        both = torch.cat((both, both))
    for x in xs:
        a = np.concatenate((a, x.numpy()))
    return acc, host, both, [torch.cat((x, x)) for x in xs], a
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _JOIN_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _GROWN_TEXT.match(block[index]) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for key in ("cat", "concat", "concatenate", "hstack", "vstack"):
            for site in scope.sites.get(key, ()):
                if site.conditional or scope.torch_name(site.node.func) not in _JOINS:  # type: ignore[attr-defined]
                    continue
                name = site.statement.name_bound_to(site.node)
                if name is None or not _grows(site.node, name):  # type: ignore[arg-type]
                    continue
                loop = _innermost_loop(site.statement)
                if loop is not None and _reads(loop, name) == 1:
                    yield Violation(
                        site.statement.node,
                        message=f"`{name}` grows by a `{key}` in every iteration of the loop, which reads it "
                        "nowhere else: each iteration copies all it gathered so far (writes quadratic in the "
                        "iterations); append the pieces to a list and join them once after the loop",
                    )


def _grows(call: cst.Call, name: str) -> bool:
    """Is ``call`` a join of a literal tuple or list holding ``name`` once, first or last, and
    pieces that do not read it?"""
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return False
    pieces = call.args[0].value
    if not isinstance(pieces, (cst.Tuple, cst.List)) or len(pieces.elements) < 2:
        return False
    values = [element.value for element in pieces.elements]
    if any(isinstance(element, cst.StarredElement) for element in pieces.elements):
        return False
    ends = [i for i in (0, len(values) - 1) if isinstance(values[i], cst.Name) and values[i].value == name]
    if len(ends) != 1 or sum(count_name(value, name) for value in values) != 1:
        return False
    return not any(_to_host(value) for value in values)


def _to_host(expr: cst.BaseExpression) -> bool:
    """``x.cpu()``, ``x.to("cpu")``: a piece gathered on the host, where the joins are no device work
    (code that moves pieces off the device one by one does it to bound the device's memory)."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    method = expr.func.attr.value
    return method == "cpu" or method == "to" and any(
        isinstance(arg.value, cst.SimpleString) and "cpu" in arg.value.value for arg in expr.args
    )


def _reads(loop: cst.CSTNode, name: str) -> int:
    """How often the loop reads ``name``: its occurrences less the plain assignments to it (a name
    an augmented assignment, a ``for`` or a ``with`` binds counts as read: the join is not alone)."""
    stores = 0
    todo: list[cst.CSTNode] = [loop]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
            stores += 1
        todo.extend(children(node))
    return count_name(loop, name) - stores


def _innermost_loop(ref: StatementRef) -> cst.For | cst.While | None:
    """The ``for``/``while`` whose body (at any depth of ``if``/``with``/``try``) holds the statement."""
    while ref.block.parent is not None:
        owner = ref.block.parent.node
        if isinstance(owner, (cst.For, cst.While)) and ref.block.node is owner.body:
            return owner
        if isinstance(owner, (cst.FunctionDef, cst.ClassDef)):
            return None
        ref = ref.block.parent
    return None

