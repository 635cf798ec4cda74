"""FL001: view ops inline in compute-bound expressions, or scattered between element-wise code."""
from __future__ import annotations

import functools
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, children, StatementRef, count_name, has_op_class, is_elementwise_expr, names_of
from fusionlint.model import FixSafety
from fusionlint.ops import COMPUTE, VIEW_ATTRIBUTES, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, assign, fresh_name, replace_nodes


class InlineViewInCompute(Rule):
    code = "FL001"
    name = "inline-view-in-compute"
    message = "view op inside a compute-bound expression or between element-wise statements: group views first"
    rationale = """
        In a lazy fusing backend, view ops (`reshape`, `transpose`, `unsqueeze`, `.T`, ...) can
        join a fused block only to a limited extent: a view of a tensor that is not yet written
        either closes the open block or is read through remapped indices, which costs
        vectorization. A compute-bound op (matmul, reduction) fuses the element-wise code
        around it on read and on write; a view applied inline to one of its operands, or to an
        operand of its element-wise epilogue (`t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)`),
        lands in the middle of that block. The same holds for a view statement placed between
        element-wise statements. Burn's fusion guide: group view ops before the block, so they
        run as metadata updates and the block stays whole.

        Flagged: a view chain on a tensor variable used as a sub-expression of a statement that
        also holds a compute-bound op; and a `y = x.<view>(...)` statement between two
        element-wise statements when it could run before them. Not flagged: views of
        `self.<param>` attributes and of results computed in the same expression
        (`(q @ k).transpose(1, 2)`), views of values not known to be tensors (NumPy, pandas,
        `memoryview`, a web framework's `.view`).
    """
    use_instead = "Give each view its own statement before the fused expression or block."
    fix_safety = FixSafety.SAFE
    fix_notes = """
        The fix moves the view to its own statement right before the expression, or moves a
        scattered view statement up before the element-wise statements it sits between. The
        view is bound to the variable it views (`t1 = t1.unsqueeze(0)`) only when that
        variable is not read again afterwards (including by a later loop iteration, an
        exception handler or a closure) and the statement names it once; otherwise it gets a
        fresh name (`key_view`), so no later code sees a different shape. The fix is offered
        only when the view's arguments are names, constants and attribute reads, the viewed
        tensor is never written in place in the function, and the view is evaluated
        unconditionally (not inside `x if c else y`, `and`/`or`, a comprehension or a lambda).
        Views have no side effects, so moving them earlier keeps the results identical; this
        rests on the static guess that the variable holds a tensor.
    """
    examples = (
        Example(
            bad="""\
import torch


def burn(t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor) -> torch.Tensor:
    t4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)
    return t4
""",
            at=((5, 10), (5, 39)),
            fixed="""\
import torch


def burn(t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor) -> torch.Tensor:
    t1 = t1.unsqueeze(0)
    t3 = t3.unsqueeze(0)
    t4 = t1.matmul(t2) + t3
    return t4
""",
        ),
        Example(  # `key` is read again later: the view gets a fresh name
            bad="""\
import torch


class Attention(torch.nn.Module):
    def forward(self, query, key, scale: float = 1.0):
        scores = torch.matmul(query, key.transpose(-1, -2)) * scale  # attention logits
        return scores.softmax(-1) + key.mean()
""",
            at=((6, 38),),
            fixed="""\
import torch


class Attention(torch.nn.Module):
    def forward(self, query, key, scale: float = 1.0):
        key_view = key.transpose(-1, -2)
        scores = torch.matmul(query, key_view) * scale  # attention logits
        return scores.softmax(-1) + key.mean()
""",
        ),
        Example(  # a view statement scattered between element-wise statements
            bad="""\
import torch


def gate(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = x * 2
    g = torch.sigmoid(h)
    b = bias.unsqueeze(0)
    y = g * b + h
    return y
""",
            at=((7, 9),),
            fixed="""\
import torch


def gate(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b = bias.unsqueeze(0)
    h = x * 2
    g = torch.sigmoid(h)
    y = g * b + h
    return y
""",
        ),
        Example(  # evaluated only on one branch: reported without a fix
            bad="""\
import torch


def maybe(x: torch.Tensor, w: torch.Tensor, flag: bool) -> torch.Tensor:
    return x.t() @ w if flag else w
""",
            at=((5, 12),),
            fixed=None,
        ),
    )
    valid = (
        # NumPy arrays in a torch file
        """\
import numpy as np
import torch


def f(a: np.ndarray, b):
    return np.matmul(a.reshape(2, -1), b.T) + a.T @ b
""",
        # views already grouped before the compute-bound expression
        """\
import torch


def f(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    kt = k.transpose(-1, -2)
    return torch.softmax(q @ kt, dim=-1)
""",
        # a view of a computed result, a view of a parameter attribute
        """\
import torch


class Proj(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4, 4))

    def forward(self, q, k):
        return (q @ k).transpose(1, 2) + q @ self.weight.t()
""",
        # non-tensor `.view`s: memoryview, a web framework's view, pandas
        """\
import pandas as pd
import torch


def handler(self, request, buf: bytes):
    mv = memoryview(buf)
    data = mv.cast("B").tolist()
    response = self.view(request).render()
    frame = pd.DataFrame(data)
    return frame.T.dot(frame).sum() + response.view(1).sum()
""",
        # a view statement that depends on the element-wise statement before it
        """\
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    h2 = h.reshape(-1)
    return h2 + 1
""",
        # a file that never imports torch
        """\
def burn(t1, t2, t3):
    return t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)
""",
    )

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        view, compute, view_statement = _triggers(ops)
        text = block[index]
        if view.search(text) is None:
            return False
        if 0 < index < len(block) - 1 and view_statement.match(text):
            if _elementwise_text(block[index - 1], ops) and _elementwise_text(block[index + 1], ops):
                return True
        return compute.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        statements: dict[int, StatementRef] = {}
        for name in (*scope.ops.view, *VIEW_ATTRIBUTES):
            for site in scope.sites.get(name, ()):
                statements.setdefault(id(site.statement.node), site.statement)
        for ref in statements.values():
            if ref.simple is not None and _view_statement(scope, ref.simple) is not None:
                violation = _scattered(scope, ref)
                if violation is not None:
                    yield violation
            elif has_op_class(scope, ref.node, COMPUTE):
                yield from _inline(scope, ref)


@functools.lru_cache(maxsize=8)
def _triggers(ops: OpTables) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(a view op, a compute-bound op, a `y = x.<view>` statement) as text patterns."""
    views = "|".join(sorted(map(re.escape, ops.view)))
    attrs = "|".join(sorted(VIEW_ATTRIBUTES))
    view = re.compile(rf"\.\s*(?:(?:{views})\s*\(|(?:{attrs})\b)|\b(?:{views})\s*\(")
    compute = re.compile(r"@|\b(?:%s)\s*\(" % "|".join(sorted(map(re.escape, ops.compute))))
    view_statement = re.compile(rf"\s*\w+\s*=\s*\w+\s*\.\s*(?:(?:{views})\s*\(|(?:{attrs})\b)")
    return view, compute, view_statement


_ASSIGNMENT = re.compile(r"\s*\w+\s*=(?!=)")
_CALLEE = re.compile(r"(\w+)\s*\(")


def _elementwise_text(text: str, ops: OpTables) -> bool:
    """Can this statement be ``name = <element-wise expression>``? (every call an element-wise op)"""
    return _ASSIGNMENT.match(text) is not None and all(name in ops.elementwise for name in _CALLEE.findall(text))


# --------------------------------------------------------------------------- inline views


def _inline(scope: Scope, ref: StatementRef) -> Iterator[Violation]:
    """View chains on tensor variables inside a statement that holds a compute-bound op."""
    taken: list[str] = []
    for chain, root, conditional in _chains(scope, ref.node):
        fix = None
        if not conditional and ref.simple is not None and _movable(scope, chain, root.value, ref.node):
            target = root.value
            if scope.is_module or count_name(ref.node, target) != 1 or scope.read_after(ref, target):
                target = fresh_name(scope, f"{root.value}_view", taken)
                taken.append(target)
            fix = (StatementEdit(ref.node, (assign(target, chain), replace_nodes(ref.node, {chain: cst.Name(target)}))),)
        yield Violation(chain, fix=fix, message=f"view of `{root.value}` inside a compute-bound expression: "
                        "move it to its own statement before the expression")


def _chains(scope: Scope, statement: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.Name, bool]]:
    """Maximal view chains on tensor names, outermost first, with "evaluated conditionally"."""
    found = []

    def walk(node: cst.CSTNode, conditional: bool) -> None:
        if isinstance(node, cst.Lambda):
            return
        if isinstance(node, cst.BaseExpression):
            chain = scope.view_chain(node)
            if chain is not None:
                found.append((node, chain[0], conditional))
                return
        if isinstance(node, (cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.SetComp, cst.DictComp,
                             cst.GeneratorExp)):
            conditional = True
        for child in children(node):
            walk(child, conditional)

    walk(statement, False)
    return found


def _movable(scope: Scope, chain: cst.BaseExpression, root: str, statement: cst.CSTNode) -> bool:
    """Can the chain run before the rest of its statement with the same result?"""
    if root in scope.inplace or _has_walrus(statement):
        return False
    node = chain
    while not isinstance(node, cst.Name):
        if isinstance(node, cst.Call) and not all(_simple(arg.value) for arg in node.args):
            return False
        node = scope.op(node)[2]
    return True


def _simple(expr: cst.BaseExpression) -> bool:
    """Names, constants, attribute reads, subscripts and `.size()`: cheap, side-effect free."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _simple(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(_simple(el.value) for el in expr.elements)
    if isinstance(expr, cst.Attribute):
        return _simple(expr.value)
    if isinstance(expr, cst.Subscript):
        return _simple(expr.value) and all(
            isinstance(el.slice, cst.Index) and _simple(el.slice.value) for el in expr.slice
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value in ("size", "dim") and _simple(expr.func.value) and all(
            _simple(arg.value) for arg in expr.args
        )
    return False


def _has_walrus(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.NamedExpr):
        return True
    return any(_has_walrus(child) for child in children(node))


# --------------------------------------------------------------------------- scattered views


def _view_statement(scope: Scope, statement: cst.BaseSmallStatement):
    """(target, chain, root) of ``y = x.<view>(...)``, else None."""
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    chain = scope.view_chain(statement.value)
    if not isinstance(target, cst.Name) or chain is None:
        return None
    return target.value, statement.value, chain[0].value


def _elementwise_statement(scope: Scope, statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, (cst.BinaryOperation, cst.UnaryOperation, cst.Call))
        and scope.is_tensor(small.value)
        and is_elementwise_expr(scope, small.value)
    )


def _scattered(scope: Scope, ref: StatementRef) -> Violation | None:
    """A view statement between element-wise statements that could run before them."""
    statements = ref.block.statements
    index = ref.index
    if not (0 < index < len(statements) - 1):
        return None
    if not (_elementwise_statement(scope, statements[index - 1]) and _elementwise_statement(scope, statements[index + 1])):
        return None
    target, chain, root = _view_statement(scope, ref.simple)
    if root in scope.inplace or not _movable(scope, chain, root, ref.node):
        return None
    needs = names_of(ref.node)[0] | {target}
    start = index
    while start > 0 and _elementwise_statement(scope, statements[start - 1]):
        reads, assigned = names_of(statements[start - 1])
        if assigned & needs or target in reads:
            break
        start -= 1
    if start == index:
        return None  # it depends on the statement right before it: nothing to group
    first = statements[start]
    fix = (StatementEdit(first, (ref.node.with_changes(leading_lines=()), first)), StatementEdit(ref.node, ()))
    return Violation(chain, fix=fix, message=f"view of `{root}` between element-wise statements: "
                     "move it before them, with the other views")
