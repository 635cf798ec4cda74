"""FL004: a host sync (``.item()``, ``if t.any():``, ...) between tensor work, or inside a loop."""
from __future__ import annotations

import functools
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope,
    StatementRef,
    children,
    inner_blocks,
    own_parts,
    scope_statements,
    statements_after,
    statements_before,
)
from fusionlint.ops import VIEW, OpTables
from fusionlint.rule import Example, Rule, Violation

# Tensor methods that hand data to the host. ``.to("cpu")`` is matched separately.
_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
# Builtins that read a tensor's value on the host (``bool`` also via ``if``/``while``/``and``/``not``).
_SYNC_BUILTINS = frozenset({"bool", "float", "int", "print"})
_ADVICE = {
    "item": "keep the value on the device (accumulate into a tensor) and read it once after the work, "
    "or before the work starts if it decides a shape",
    "tolist": "keep the value on the device and convert it once after the work, or before the work starts if it "
    "decides a shape",
    "cpu": "move the result to the host once, after the work",
    "numpy": "convert to NumPy once, after the work",
    "bool": "use `torch.where` (or an unconditional op) instead of branching on a tensor's value",
    "branch": "use `torch.where` (or an unconditional op) instead of branching on a tensor's value",
    "float": "keep the value on the device as a 0-d tensor and read it once after the work",
    "int": "keep the value on the device as a 0-d tensor and read it once after the work, or before the work "
    "starts if it decides a shape",
    "print": "print after the work",
}
_METHOD_SYNC = re.compile(r"\.\s*(?:item|tolist|cpu|numpy)\s*\(|\.\s*to\s*\([^)]*['\"]cpu")
_VALUE_SYNC = re.compile(r"\b(?:if|elif|while|assert|not|and|or|bool|float|int|print)\b")


class HostSyncInTensorWork(Rule):
    code = "FL004"
    name = "host-sync-in-tensor-work"
    message = "host sync in the middle of tensor work: the lazy stream is flushed and every live intermediate written"
    rationale = """
        A lazy fusing backend records tensor ops and runs them only when it must. Reading a
        tensor's value on the host (`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `bool(t)`,
        `if t.any():`, `while ...:` on a tensor, `float(t)`, `int(t)`, `print(t)`) is such a
        moment: the pending ops are planned and run at once, and every intermediate that
        Python still holds (each local variable of the function) must be written to global
        memory, because the code after the sync may read it. The work after the sync starts a
        new kernel instead of fusing with the work before. Inside a loop this happens once per
        iteration: fusionrt measures a four-iteration `total += h.sum().item()` loop at 8 writes
        in 4 kernels, against 2 writes in 1 kernel when the sum is accumulated on the device.

        Flagged: a sync whose operand is a tensor, when tensor work (a torch op or tensor
        arithmetic) runs both before and after it in the same function, or when it sits in a
        loop whose body does tensor work (a `while` test on a tensor included). For `bool`,
        `float`, `int`, `print` and conditions, the operand must itself compute with a torch op
        (`x.sum()`, `(a > 0).any()`, `torch.isnan(x).any()`), so a bare argument of unknown type is
        never taken for a tensor. Not flagged: a sync after all the work (`return out.item()`),
        NumPy arrays and Python numbers, `print(x.shape)`, identity tests (`if mask is None:`).
    """
    use_instead = """
        Keep values on the device until the work is done: accumulate into a tensor
        (`total = total + h.sum()`) and call `.item()` once at the end; replace a branch on a
        tensor's value by `torch.where(cond, a, b)` or by an op that needs no branch
        (`a.clamp(max=3)` instead of `if (a > 3).any(): a = a.clamp(max=3)`); print or log after
        the computation, or every N steps outside the hot loop.
    """
    fix_notes = """
        No fix: moving a sync changes when Python sees the value, and a branch on it changes
        which ops run; only the author can say whether the value is needed earlier.
    """
    examples = (
        Example(
            bad="""\
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = 0.0
    for i in range(4):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total
""",
            at=((8, 18),),
            fixed=None,
            call="energy(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = torch.zeros(())
    for i in range(4):
        h = torch.tanh(x * i + y)
        total = total + h.sum()
    return total.item()
""",
        ),
        Example(
            bad="""\
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    if (a > 3).any():
        a = a.clamp(max=3)
    return torch.relu(a) * y
""",
            at=((6, 8),),
            fixed=None,
            call="saturate(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    a = torch.where(a > 3, 3.0, a)
    return torch.relu(a) * y
""",
        ),
        Example(
            bad="""\
import torch


def peaks(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1).tolist())
    return found
""",
            at=((8, 22),),
            fixed=None,
            call="peaks(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def peaks(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1))
    return [p.tolist() for p in found]
""",
        ),
        Example(  # a chain of syncs with a cast between them is one sync, reported at the first
            bad="""\
import torch


def to_host(x: torch.Tensor, y: torch.Tensor):
    h = torch.tanh(x * 2)
    arr = h.detach().cpu().to(torch.double).numpy()
    return y * 3, arr
""",
            at=((6, 11),),
            fixed=None,
        ),
        Example(  # debugging output in a loop: reported, not runnable as a contract pair (it prints)
            bad="""\
import torch


def run(x: torch.Tensor, layers: list) -> torch.Tensor:
    for w in layers:
        x = torch.tanh(x @ w)
        print("norm", x.norm())
        while float(x.abs().amax()) > 1e3:
            x = x * 0.5
    return x
""",
            at=((7, 9), (8, 15)),
            fixed=None,
        ),
    )
    valid = (
        # the sync comes after all the work
        """\
import torch


def loss(x: torch.Tensor, y: torch.Tensor) -> float:
    d = torch.tanh(x) - y
    value = (d * d).mean()
    return value.item()
""",
        """\
import torch


def stats(x: torch.Tensor) -> dict:
    h = torch.relu(x * 2)
    out = h.sum(-1)
    print("done", out.mean())
    return {"mean": float(out.mean()), "peaks": out.tolist()}
""",
        # NumPy arrays and Python numbers
        """\
import numpy as np
import torch


def f(arr: np.ndarray, x: torch.Tensor, n: int, scale):
    y = x * 2
    total = arr.sum().item()
    bins = arr.tolist()
    k = int(n * 0.5)
    s = float(scale)
    if n > 3:
        y = y + 1
    return y * total + k + s + len(bins)
""",
        # metadata and identity tests are not syncs
        """\
import torch


def forward(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    h = torch.relu(x)
    print(h.shape, h.dtype)
    if mask is not None and x.dim() == 3:
        h = h * mask
    n = int(h.size(0))
    return h[:n] + 1
""",
        # logging outside the hot loop
        """\
import torch


def train(x: torch.Tensor, steps: int) -> torch.Tensor:
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 0.9 + 0.1)
    print("final", h.mean().item())
    return h
""",
        # an exception's message is built on the way out: no tensor work follows
        """\
import torch


def check(x: torch.Tensor, limit: float) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if h.shape[0] > 8:
        raise ValueError(f"too many rows: {h.amax(-1).tolist()} above {limit}")
    assert h.dim() == 2, f"expected a matrix, got one summing to {h.sum().item()}"
    return h + 1
""",
        # a loop that does no tensor work (it only reads results)
        """\
import torch


def report(x: torch.Tensor) -> list:
    probs = torch.softmax(x, -1)
    rows = []
    for row in probs:
        rows.append(row.max().item())
    return rows
""",
    )

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _METHOD_SYNC.search(text):
            return True
        return _VALUE_SYNC.search(text) is not None and _op_call_text(ops).search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            statement = ref.node
            for part in own_parts(statement):
                test = isinstance(statement, (cst.If, cst.While)) and part is statement.test
                for node, kind in _syncs(scope, part, test):
                    where = _where(scope, ref, loop_test=test and isinstance(statement, cst.While))
                    if where is None:
                        continue
                    yield Violation(
                        node,
                        message=f"{_describe(kind)} {where}: it flushes the lazy stream and writes every live "
                        f"intermediate; {_ADVICE[kind]}",
                    )


@functools.lru_cache(maxsize=32)
def _op_call_text(ops: OpTables) -> re.Pattern[str]:
    names = sorted(ops.compute | ops.elementwise)
    return re.compile(r"\.\s*(?:" + "|".join(map(re.escape, names)) + r")\s*\(")


# --------------------------------------------------------------------------- finding syncs


def _syncs(scope: Scope, part: cst.CSTNode, test: bool) -> Iterator[tuple[cst.CSTNode, str]]:
    """(node, kind) of each host sync evaluated by ``part`` (not inside lambdas or definitions);
    ``test``: ``part`` is the test of an ``if``/``elif``/``while``, whose truth value Python takes."""
    if test:
        yield from _branch_syncs(scope, part)  # type: ignore[arg-type]
    yield from _syncs_in(scope, part)


def _syncs_in(scope: Scope, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, str]]:
    # An exception's message (`raise E(f"{t.tolist()}")`, `assert c, t.item()`) is built only on the
    # way out: no tensor work follows it.
    if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Raise)):
        return
    tests: list[cst.BaseExpression] = []
    if isinstance(node, (cst.IfExp, cst.Assert)):
        tests.append(node.test)
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        tests.append(node.expression)
    elif isinstance(node, cst.BooleanOperation):
        tests += [node.left, node.right]
    elif isinstance(node, cst.Call):
        kind = _call_sync(scope, node)
        if kind is not None and not _after_sync(scope, node):
            yield node, kind  # in `x.cpu().to(torch.double).numpy()` only the first sync is reported
    for test in tests:
        yield from _branch_syncs(scope, test)
    for child in children(node):
        if not (isinstance(node, cst.Assert) and child is node.msg):
            yield from _syncs_in(scope, child)


def _after_sync(scope: Scope, call: cst.Call) -> bool:
    """Has the receiver chain of ``call`` synced already (``x.cpu()`` in ``x.cpu().to(d).numpy()``)?"""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    while isinstance(receiver, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(receiver, cst.Call):
            if _call_sync(scope, receiver):
                return True
            receiver = receiver.func
        else:
            receiver = receiver.value
    return False


def _branch_syncs(scope: Scope, test: cst.BaseExpression) -> Iterator[tuple[cst.CSTNode, str]]:
    """``test`` itself, when Python takes the truth value of a computed tensor there. The operands
    of ``and``/``or``/``not`` are tested when those nodes are visited."""
    if isinstance(test, cst.BooleanOperation):
        return
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return
    if _computes_tensor(scope, test):
        yield test, "branch"


def _describe(kind: str) -> str:
    if kind == "branch":
        return "a branch on a tensor's value"
    return f"`.{kind}()`" if kind in _SYNC_METHODS else f"`{kind}(...)`"


def _call_sync(scope: Scope, call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        if not scope.is_tensor(func.value):
            return None
        if name in _SYNC_METHODS:
            return name
        if name == "to" and any(_is_cpu(arg) for arg in call.args):
            return "cpu"
        return None
    if isinstance(func, cst.Name) and func.value in _SYNC_BUILTINS and func.value not in scope.facts.aliases:
        values = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if func.value != "print":
            values = values[:1]
        for value in values:
            if _computes_tensor(scope, value) or any(_computes_tensor(scope, e) for e in _formatted(value)):
                return func.value
    return None


def _is_cpu(arg: cst.Arg) -> bool:
    if arg.keyword is not None and arg.keyword.value != "device":
        return False
    value = arg.value
    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("cpu", b"cpu")


def _formatted(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.FormattedString):
        return [p.expression for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
    return []


def _computes_tensor(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A tensor-valued expression that itself calls a tensor op of the tables (``x.sum()``,
    ``(a > 0).any()``): strong evidence of a tensor, unlike a bare name of unknown type."""
    if isinstance(expr, cst.Comparison) and any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons
    ):
        return False
    return scope.is_tensor(expr) and _has_table_op_call(scope, expr)


def _has_table_op_call(scope: Scope, node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Lambda, cst.FunctionDef)):
        return False
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if scope.ops.op_class(node.func.attr.value) is not None and scope.is_tensor(node):
            return True
    return any(_has_table_op_call(scope, child) for child in children(node))


# --------------------------------------------------------------------------- tensor work around a sync


def _where(scope: Scope, ref: StatementRef, loop_test: bool) -> str | None:
    """Where the sync interrupts fusable work ("inside a loop ...", "between tensor work"), or None."""
    if loop_test:
        body = ref.node.body  # type: ignore[attr-defined]
        return "in the condition of a loop that does tensor work" if _does_work(scope, body) else None
    if _in_working_loop(scope, ref):
        return "inside a loop that does tensor work"
    after = any(_does_work(scope, block) for block in inner_blocks(ref.node)) or any(
        _does_work(scope, later.node) for later in statements_after(ref)
    )
    if not after:
        return None
    before = any(_does_work(scope, earlier.node) for earlier in statements_before(ref))
    return "between tensor work" if before else None


def _in_working_loop(scope: Scope, ref: StatementRef) -> bool:
    while ref.block.parent is not None:
        owner = ref.block.parent.node
        if isinstance(owner, (cst.For, cst.While)) and ref.block.node is owner.body:
            return _does_work(scope, owner.body)
        ref = ref.block.parent
    return False


def _does_work(scope: Scope, node: cst.CSTNode) -> bool:
    """Does ``node`` run a tensor op that a lazy backend records and keeps on the device (not a
    view; not the operand of a sync, which only reads a result: ``float(out.mean())``)?"""
    if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        return False
    if isinstance(node, cst.Call) and _call_sync(scope, node) is not None:
        return False
    if isinstance(node, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) and scope.is_tensor(node):
        op = scope.op(node)
        if op is None or (op[0] not in _SYNC_METHODS and op[1] != VIEW):
            return True
    return any(_does_work(scope, child) for child in children(node))
