"""FL048: a running sum started from a tensor of zeros (``acc = torch.zeros_like(x)``, then ``acc +=
term`` in every iteration of a loop): the first add only copies its term into a fresh tensor."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, children, count_name
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# The identity element each running reduction may start from: zeros for ``+`` and ``|``, ones for
# ``*`` and ``&``.
_STARTS = {
    "zeros": (cst.Add, cst.BitOr), "zeros_like": (cst.Add, cst.BitOr), "new_zeros": (cst.Add, cst.BitOr),
    "ones": (cst.Multiply, cst.BitAnd), "ones_like": (cst.Multiply, cst.BitAnd), "new_ones": (cst.Multiply, cst.BitAnd),
}
_AUGMENTED = {cst.AddAssign: cst.Add, cst.BitOrAssign: cst.BitOr, cst.MultiplyAssign: cst.Multiply,
              cst.BitAndAssign: cst.BitAnd}
_SYMBOLS = {cst.Add: "+", cst.BitOr: "|", cst.Multiply: "*", cst.BitAnd: "&"}
_START_TEXT = re.compile(r"zeros|ones")
_STARTED_TEXT = re.compile(r"^\s*\w+\s*=\s*[\w.]*\b(?:new_)?(?:zeros|ones)(?:_like)?\s*\(")
_LOOP_TEXT = re.compile(r"^\s*(?:async\s+)?(?:for|while)\b")
_EXITS = (cst.Continue, cst.Break, cst.Return, cst.Raise)


class SumStartedFromZeros(Rule):
    code = "FL048"
    name = "sum-started-from-zeros"
    message = "a running sum started from a tensor of zeros: the first add only copies its term; start from the first term"
    rationale = """
        `acc = torch.zeros_like(x)` followed by a loop adding a term to `acc` in every
        iteration spends a kernel and a full-size write on the first add, `0 + term`, which
        only copies the term into a fresh tensor (and the zero fill itself is a write of its
        own wherever it is not folded away). Starting the sum from the first term (`acc =
        term if acc is None else acc + term`, or the first term computed before the loop)
        drops that add: eager PyTorch measures eight terms at 24 -> 23 kernels; in the
        in-place spelling, `acc += term`, fusionrt saves too (15 -> 8 kernels on the same
        loop: an in-place add into the zeros is a fusion boundary). Residual and hierarchical
        vector quantizers sum their layers' codes so (vector-quantize-pytorch's `ResidualVQ`,
        `HierarchicalVQ`), as do losses summed over discriminators or scales.

        Flagged: `acc = torch.zeros(...)` / `torch.zeros_like(x)` / `x.new_zeros(...)` (a dtype,
        if given, the same as a tensor's, `dtype=x.dtype`, or `torch.bool`), the statements up
        to a `for` or `while` loop not reading `acc`, and the loop's first statement that reads
        it, at the top of its body, adding a tensor to it: `acc += term`, `acc = acc + term`
        or `acc = term + acc`; likewise `|` on zeros and `*` or `&` on ones. Not flagged: a
        loop reading `acc` in its header or before the add (the zeros are used), an add under
        a branch or after a `continue` (not every iteration adds), terms that are no tensors
        (`acc += x.numel()`), a start of another dtype than the terms' (`torch.zeros(n,
        dtype=torch.float64)`: an accumulation in a wider type), Python numbers (`acc = 0.`).
    """
    use_instead = (
        "Start from the first term: `acc = None` before the loop and `acc = term if acc is None else "
        "acc + term` in it (the loop must run at least once), or the first term computed before the loop."
    )
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the rewrite needs the loop to run at least once (else the sum is no longer a
        tensor of zeros), and the zeros' shape and dtype must be the terms' (`torch.zeros(1)`
        summing 0-d losses gives a 1-element tensor, the first term a 0-d one). Rewrite by hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def summed(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(xs[0])
    for x in xs:
        acc = acc + torch.tanh(x @ w)
    return acc
""",
            at=((5, 5),),
            fixed=None,
            call="summed(randn(8, 256, 64), randn(64, 64))",
            good="""\
import torch


def summed(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    acc = None
    for x in xs:
        term = torch.tanh(x @ w)
        acc = term if acc is None else acc + term
    return acc
""",
        ),
        Example(  # in place, other statements between the start and the loop, a read after the add
            bad="""\
import torch


def residual_codes(x: torch.Tensor, codebooks: torch.Tensor) -> torch.Tensor:
    residual = x
    out = x.new_zeros(x.shape)
    partial = []
    for cb in codebooks:
        quantized = cb[(residual @ cb.t()).argmax(dim=-1)]
        residual = residual - quantized
        out += quantized
        partial.append(out.sum())
    return out, torch.stack(partial)
""",
            at=((6, 5),),
            fixed=None,
            call="residual_codes(randn(512, 32), randn(4, 64, 32))",
            good="""\
import torch


def residual_codes(x: torch.Tensor, codebooks: torch.Tensor) -> torch.Tensor:
    residual = x
    out = None
    partial = []
    for cb in codebooks:
        quantized = cb[(residual @ cb.t()).argmax(dim=-1)]
        residual = residual - quantized
        out = quantized if out is None else out.add_(quantized)
        partial.append(out.sum())
    return out, torch.stack(partial)
""",
        ),
    )
    valid = (
        # read before the add; the add under a branch; after a continue; a host number added
        """\
import torch


def f(xs: list, w: torch.Tensor, keep: list):
    h = torch.zeros_like(w)
    for x in xs:
        h = torch.tanh(h @ w + x)
        h = h + x
    acc = torch.zeros_like(w)
    for x, k in zip(xs, keep):
        if k:
            acc = acc + x
    tot = torch.zeros_like(w)
    for x in xs:
        if x is None:
            continue
        tot += x
    n = torch.zeros((), dtype=torch.int64)
    for x in xs:
        n += x.numel()
    return h, acc, tot, n
""",
        # a wider accumulator; numpy; a Python number; a while test reading it; read between start and loop
        """\
import numpy as np
import torch


def g(xs: list, a: np.ndarray):
    wide = torch.zeros(4, dtype=torch.float64)
    for x in xs:
        wide += x
    s = np.zeros(3)
    for x in xs:
        s += x
    p = 0.0
    for x in xs:
        p = p + x
    m = torch.zeros(4)
    while m.sum() < 10:
        m = m + xs[0]
    q = torch.zeros(4)
    q[0] = 1.0
    for x in xs:
        q = q * 2 + x
        q += x
    return wide, s, p, m, q
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _START_TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        return _STARTED_TEXT.match(block[index]) is not None and any(
            _LOOP_TEXT.match(block[later]) for later in range(index + 1, len(block))
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        for key, operators in _STARTS.items():
            for site in scope.sites.get(key, ()):
                call: cst.Call = site.node  # type: ignore[assignment]
                if site.conditional or not _is_start(scope, call, key):
                    continue
                name = site.statement.name_bound_to(call)
                if name is None:
                    continue
                loop = _next_reader(site.statement, name)
                step = None if loop is None else _first_step(scope, loop, name, operators)
                if step is None:
                    continue
                start = "zeros" if "zeros" in key else "ones"
                kind = _AUGMENTED[type(step.operator)] if isinstance(step, cst.AugAssign) else type(step.value.operator)  # type: ignore[attr-defined]
                in_place = ", in place (also a fusion boundary under fusionrt)" if isinstance(step, cst.AugAssign) else ""
                yield Violation(
                    site.statement.node,
                    message=f"`{name}` starts as a tensor of {start} that every iteration of the loop combines "
                    f"with a term by `{_SYMBOLS[kind]}`{in_place}: the first step only copies its term into a fresh "
                    "tensor; start from the first term instead",
                )


def _is_start(scope: Scope, call: cst.Call, key: str) -> bool:
    """``torch.zeros(...)``, ``torch.zeros_like(x)`` or ``x.new_zeros(...)`` (ones alike), with no
    dtype but a tensor's own (``dtype=x.dtype``) or ``torch.bool``."""
    func = call.func
    if key.startswith("new_"):
        if not (isinstance(func, cst.Attribute) and scope.is_tensor(func.value)):
            return False
    elif scope.torch_name(func) != f"torch.{key}":
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            value = arg.value
            if not (isinstance(value, cst.Attribute) and value.attr.value == "dtype"
                    and not (isinstance(value.value, cst.Name) and value.value.value == "torch")
                    or scope.torch_name(value) == "torch.bool"):
                return False
    return True


def _next_reader(ref: StatementRef, name: str) -> cst.For | cst.While | None:
    """The first later statement of the block that mentions ``name``, if it is a loop."""
    for later in ref.later():
        if count_name(later.node, name):
            node = later.node
            return node if isinstance(node, (cst.For, cst.While)) else None
    return None


def _first_step(
    scope: Scope, loop: cst.For | cst.While, name: str, operators: tuple[type, ...]
) -> cst.BaseSmallStatement | None:
    """The first statement of the loop's body reading ``name``, if every iteration reaches it, the
    header leaves ``name`` alone and it combines ``name`` with a tensor by one of ``operators``."""
    header = (loop.target, loop.iter) if isinstance(loop, cst.For) else (loop.test,)
    if any(count_name(part, name) for part in header) or not isinstance(loop.body, cst.IndentedBlock):
        return None
    for statement in loop.body.body:
        if not count_name(statement, name):
            if _exits(statement):
                return None
            continue
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            return None
        small = statement.body[0]
        term = _term(small, name, operators)
        if term is None or not scope.is_tensor(term):
            return None
        # a buffer the scope rewrites in place (``index_select(..., out=mask)``): starting from it
        # would alias it, and the copy that avoids that costs what the first step did
        return None if isinstance(term, cst.Name) and term.value in scope.inplace else small
    return None


def _term(small: cst.BaseSmallStatement, name: str, operators: tuple[type, ...]) -> cst.BaseExpression | None:
    """``term`` of ``name += term``, ``name = name + term`` or ``name = term + name`` (``+`` or
    another of ``operators``), where the term does not read ``name``."""
    if isinstance(small, cst.AugAssign):
        if not (isinstance(small.target, cst.Name) and small.target.value == name):
            return None
        if _AUGMENTED.get(type(small.operator)) not in operators:
            return None
        term = small.value
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        target, value = small.targets[0].target, small.value
        if not (isinstance(target, cst.Name) and target.value == name and isinstance(value, cst.BinaryOperation)):
            return None
        if type(value.operator) not in operators:
            return None
        if isinstance(value.left, cst.Name) and value.left.value == name:
            term = value.right
        elif isinstance(value.right, cst.Name) and value.right.value == name:
            term = value.left
        else:
            return None
    else:
        return None
    return None if count_name(term, name) else term


def _exits(node: cst.CSTNode) -> bool:
    """Can ``node`` leave the iteration early (a ``continue``, ``break``, ``return`` or ``raise``
    outside a nested loop or function)?"""
    if isinstance(node, _EXITS):
        return True
    if isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    return any(_exits(child) for child in children(node))
