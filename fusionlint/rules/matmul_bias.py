"""FL011: a matmul followed by a bias add (``x @ w.t() + b``, ``c - 2 * torch.mm(a, b)``), two
or three eager kernels where ``F.linear``/``torch.addmm`` run one with the bias (and the scale) in
the GEMM epilogue."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, ancestors, count_name, names_of
from fusionlint.analysis.nodes import code_of
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, assign, fused_call, replace_nodes

_MATMUL_TEXT = re.compile(r"[\w)\]]\s*@(?!=)|\b(?:matmul|mm|linear)\s*\(")
_STRING_STATEMENT = re.compile(r"\s*[rRbBuUfF]{0,2}['\"]")  # a docstring keeps a module whole


class MatmulBias(Rule):
    code = "FL011"
    name = "matmul-bias"
    message = "a matmul and then a bias add: one fused op (`F.linear`, `torch.addmm`) does both"
    rationale = """
        `x @ w.t() + b` runs two kernels in eager PyTorch: the GEMM writes its whole result,
        and the addition reads it back to write it again. `F.linear(x, w, b)` (and
        `torch.addmm(b, a, c)` for two matrices) adds the bias in the GEMM's epilogue: one
        kernel and one write. fusionrt's eager count for a 64 x 32 by 32 x 48 product goes
        from 2 kernels and 24 KiB written to 1 and 12 KiB; fusionrt itself fuses the addition
        into its matmul for 2-D operands either way (for a 3-D `x` it writes the product too,
        2 -> 1 writes).

        Flagged: `+` of a tensor and a product whose weight is transposed by `.t()` or `.T`
        (`x @ w.t()`, `torch.matmul(x, w.T)`, `x.mm(w.t())`) -> `F.linear`; `+` of a tensor
        and `torch.mm(a, c)`/`a.mm(c)` (2-D by definition) -> `torch.addmm`; a tensor plus or
        minus a number times `torch.mm(a, c)` -> `torch.addmm(c, a, b, alpha=...)` (the squared
        distances of a vector quantizer, `x2 + e2 - 2 * torch.mm(x, e.t())`: eager 8 -> 6
        kernels with the squares, 3 -> 1 for the sum itself); `F.linear(x, w) + b`, the linear
        called without its bias and the bias added after (ESM's and LitGPT's adapters) ->
        `F.linear(x, w, b)` (eager 2 -> 1); a matmul scaled by a number, on
        an operand or on the product (`x2 - 2 * x @ e + e2`, as the vector quantizers of
        EnCodec, AudioCraft and DAC write it with `@`; `2 * torch.matmul(L, t) - t0`), that is a
        term of a sum of tensors, anywhere in it -> `torch.addmm`/`torch.baddbmm` with `alpha`
        (and `beta=-1` where the other terms are subtracted), reported without a fix: the
        operands' dims are unknown (eager 9 -> 7 kernels, 69 -> 51 MiB written for a 4096 x 128
        by 128 x 1024 distance matrix; fusionrt 4 -> 4). Also across
        statements (`h = x @ w.t()` then `h = h + b` or `h += b`), when the product is read
        by that addition only and nothing between reassigns its operands. Not flagged: `a @ c`
        without a transposed weight (its operands may be 1-D or batched, which `addmm` does
        not take), a product that is read again, an addend not known to be a tensor
        (`F.linear` takes no number as bias).
    """
    use_instead = (
        "`F.linear(x, w, b)` for `x @ w.t() + b`; `torch.addmm(b, a, c)` for `b + torch.mm(a, c)`; "
        "`torch.addmm(b, a, c, alpha=-2)` for `b - 2 * torch.mm(a, c)`."
    )
    fix_safety = FixSafety.UNSAFE
    pays_in = (EAGER,)
    fix_notes = """
        The fix writes the fused op in place of the sum (and drops the product's own statement
        when it was split over two). It is **unsafe**: the fused op rounds differently (the
        bias is added to the accumulator), and it is stricter than `+`: the bias must have the
        operands' dtype (`+` promotes), and `torch.addmm` and `F.linear` on a 2-D input want a
        bias that broadcasts to the product's shape from the right. `fusionlint check --fix
        --verify` runs both versions on random inputs and applies the fix only if they agree.
    """
    examples = (
        Example(
            bad="""\
import torch


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w.t() + b)
""",
            at=((5, 23),),
            fixed="""\
import torch


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.nn.functional.linear(x, w, b))
""",
            call="project(randn(4, 64, 32), randn(48, 32), randn(48))",
        ),
        Example(  # split over two statements; `torch.mm` is 2-D
            bad="""\
import torch


def update(a: torch.Tensor, c: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = torch.mm(a, c)
    h = h + bias
    return h.tanh()
""",
            at=((5, 9),),
            fixed="""\
import torch


def update(a: torch.Tensor, c: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = torch.addmm(bias, a, c)
    return h.tanh()
""",
            call="update(randn(64, 32), randn(32, 48), randn(64, 48))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def head(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    logits = torch.matmul(x, w.T)
    logits += b
    return F.log_softmax(logits, -1)
""",
            at=((6, 14),),
            fixed="""\
import torch
import torch.nn.functional as F


def head(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    logits = F.linear(x, w, b)
    return F.log_softmax(logits, -1)
""",
            call="head(randn(64, 32), randn(10, 32), randn(10))",
        ),
        Example(  # a vector quantizer's squared distances: the scale goes into addmm's alpha
            bad="""\
import torch


def codebook_distances(flat: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    squares = (flat**2).sum(dim=1, keepdim=True) + (codebook**2).sum(dim=1)
    return squares - 2 * torch.mm(flat, codebook.t())
""",
            at=((6, 12),),
            fixed="""\
import torch


def codebook_distances(flat: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    squares = (flat**2).sum(dim=1, keepdim=True) + (codebook**2).sum(dim=1)
    return torch.addmm(squares, flat, codebook.t(), alpha=-2)
""",
            call="codebook_distances(randn(256, 64), randn(512, 64))",
        ),
    )
    valid = (
        # the product is read again; a number added; a product without a transposed weight
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = x @ w.t()
    y = h + b
    return y, h


def g(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor):
    return x @ w.t() + 1.0, x @ v + v
""",
        # batched weights (`mT`), 1-D/3-D operands addmm does not take; the operand changes between
        """\
import torch


def f(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    scores = q @ k.mT + mask
    h = torch.matmul(a, b)
    return scores, h + mask


def g(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = x @ w.t()
    x = x * 2
    return h + b + x
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # a matmul
        return re.compile(r"@|\b(?:matmul|mm|linear)\s*\(")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return (
            _MATMUL_TEXT.search(text) is not None and _STRING_STATEMENT.match(text) is None
            and (any("+" in block[i] for i in range(index, len(block))) or ("-" in text and "*" in text))
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.dynamic:
            return
        sums: set[int] = set()  # ``x @ w.t() + y @ v.t()`` is one finding, for its first product
        for key in ("@", "matmul", "mm", "linear"):
            for site in scope.sites.get(key, ()):
                if site.conditional:
                    continue
                operands = _operands(scope, site.node) if key != "linear" else _linear_without_bias(scope, site.node)
                if key == "linear" and operands is None:
                    continue
                found, alpha = None, None
                if operands is not None:
                    found = _bias_sum(scope, site.statement, site.node) or _bias_later(scope, site.statement, site.node)
                if found is None and operands is not None and _is_mm(scope, site.node):  # 2-D: addmm takes the scale
                    scaled = _scaled_bias_sum(scope, site.statement, site.node)
                    if scaled is not None:
                        found, alpha = scaled[:4], scaled[4]
                        operands = ("addmm", *_mm_operands(site.node))
                if found is None:
                    scaled_sum = _scaled_product_sum(scope, site.statement, site.node)
                    if scaled_sum is not None and id(scaled_sum[0]) not in sums:
                        sums.add(id(scaled_sum[0]))
                        yield Violation(scaled_sum[0], message=scaled_sum[1])
                    continue
                node, total, bias, edits = found
                if id(total) in sums:
                    continue
                sums.add(id(total))
                fused = _fused_call(scope, operands, bias, alpha)
                fix = None if fused is None else edits(fused)
                yield Violation(node, fix=fix, spans=tuple(edit.statement for edit in fix or ()))


def _linear_without_bias(scope: Scope, call: cst.CSTNode) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
    """("linear", x, w) for ``F.linear(x, w)``: a linear layer called without its bias."""
    if not isinstance(call, cst.Call) or scope.torch_name(call.func) != "torch.nn.functional.linear" \
            or len(call.args) != 2 or any(arg.keyword is not None or arg.star for arg in call.args):
        return None
    return "linear", call.args[0].value, call.args[1].value


def _operands(scope: Scope, product: cst.CSTNode) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
    """("linear", x, w) for ``x @ w.t()``-like products; ("addmm", a, c) for ``torch.mm(a, c)``."""
    if isinstance(product, cst.BinaryOperation):
        if scope.op(product) is None:
            return None
        left, right, is_mm = product.left, product.right, False
    else:
        op = scope.op(product)
        if op is None or op[0] not in ("matmul", "mm") or not isinstance(product, cst.Call):
            return None
        args = product.args
        if any(a.keyword is not None or a.star for a in args):
            return None
        if isinstance(product.func, cst.Attribute) and scope.is_tensor(product.func.value) and len(args) == 1:
            left, right = product.func.value, args[0].value
        elif len(args) == 2 and op[2] is args[0].value:
            left, right = args[0].value, args[1].value
        else:
            return None
        is_mm = op[0] == "mm"
    weight = _transposed_weight(right)  # a torch matmul's operands are tensors, known or not
    if weight is not None:
        return "linear", left, weight
    return ("addmm", left, right) if is_mm else None


def _transposed_weight(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``w`` of ``w.t()`` or ``w.T`` (a matrix transposed: what ``F.linear`` transposes itself)."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "T" and not expr.lpar:
        return expr.value
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "t":
        return expr.func.value
    return None


def _added(scope: Scope, statement: cst.CSTNode, value: cst.CSTNode) -> tuple[cst.BinaryOperation, cst.BaseExpression] | None:
    """The ``value + bias`` (or ``bias + value``) holding ``value`` directly, bias a tensor."""
    path = ancestors(statement, value)
    if not path or not isinstance(path[0], cst.BinaryOperation) or not isinstance(path[0].operator, cst.Add):
        return None
    total = path[0]
    bias = total.right if total.left is value else total.left
    return (total, bias) if scope.is_tensor(bias) else None


def _bias_sum(scope: Scope, ref: StatementRef, product: cst.CSTNode):
    """``x @ w.t() + b`` in one statement: (where to report, the sum, the bias, how to fix it)."""
    found = _added(scope, ref.node, product)
    if found is None:
        return None
    total, bias = found
    statement = ref.node

    def edits(fused: cst.BaseExpression) -> tuple[StatementEdit, ...] | None:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        return (StatementEdit(statement, (replace_nodes(statement, {total: fused.with_changes(lpar=total.lpar, rpar=total.rpar)}),)),)

    return total, total, bias, edits


def _scaled_bias_sum(scope: Scope, ref: StatementRef, product: cst.CSTNode):
    """``b + k * torch.mm(a, c)`` or ``b - k * ...`` (``k`` a number, either side of the product)
    in one statement: (where to report, the sum, the bias, how to fix it, addmm's alpha)."""
    path = ancestors(ref.node, product)
    if not path or len(path) < 2 or not isinstance(path[0], cst.BinaryOperation) or not isinstance(path[0].operator, cst.Multiply):
        return None
    scaled, total = path[0], path[1]
    factor = scaled.left if scaled.right is product else scaled.right
    if not isinstance(factor, (cst.Integer, cst.Float)) or not isinstance(total, cst.BinaryOperation):
        return None
    if isinstance(total.operator, cst.Subtract) and total.right is scaled:
        alpha: cst.BaseExpression = cst.UnaryOperation(cst.Minus(), factor.with_changes(lpar=[], rpar=[]))
    elif isinstance(total.operator, cst.Add):
        alpha = factor.with_changes(lpar=[], rpar=[])
    else:
        return None
    bias = total.right if total.left is scaled else total.left
    if not scope.is_tensor(bias):
        return None
    statement = ref.node

    def edits(fused: cst.BaseExpression) -> tuple[StatementEdit, ...] | None:
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        return (StatementEdit(statement, (replace_nodes(statement, {total: fused.with_changes(lpar=total.lpar, rpar=total.rpar)}),)),)

    return total, total, bias, edits, alpha


def _scaled_product_sum(scope: Scope, ref: StatementRef, product: cst.CSTNode) -> tuple[cst.BinaryOperation, str] | None:
    """A product scaled by a number (``k * a @ b``, which scales ``a``; ``k * (a @ b)``; ``(a @ b) * k``)
    that is a term of a sum of tensors (``a2 - 2 * a @ b + b2``, the squared distances of a vector
    quantizer, written with ``@`` or ``torch.matmul``): (the whole sum, the message). ``addmm`` (2-D)
    and ``baddbmm`` (3-D) take the scale as ``alpha`` and the other terms as their input; no fix,
    since the operands' dims are unknown."""
    path = ancestors(ref.node, product)
    if not path:
        return None
    term: cst.CSTNode = product
    if isinstance(product, cst.BinaryOperation) and _number_times(product.left) is not None:
        factor = _number_times(product.left)
    elif isinstance(path[0], cst.BinaryOperation) and isinstance(path[0].operator, cst.Multiply):
        term, path = path[0], path[1:]
        factor = term.left if term.right is product else term.right  # type: ignore[attr-defined]
        if not isinstance(factor, (cst.Integer, cst.Float)):
            return None
    else:
        return None
    negative, top, others = False, None, []
    for parent in path:
        if not (isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Add, cst.Subtract))):
            break
        if parent.right is term:
            negative ^= isinstance(parent.operator, cst.Subtract)
            others.append(parent.left)
        else:
            others.append(parent.right)
        top = term = parent
    if top is None or not all(scope.is_tensor(other) for other in others):
        return None
    alpha = ("-" if negative else "") + code_of(factor)  # type: ignore[arg-type]
    return top, (
        f"a matmul scaled by a number and summed with tensors: `torch.addmm` (`torch.baddbmm` for batches) "
        f"takes the scale as `alpha={alpha}` and the other terms as its input (`beta=-1` if subtracted), "
        "adding them in the GEMM's epilogue"
    )


def _number_times(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``k`` of ``k * a`` (``a * k``), ``k`` a number literal."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)) or expr.lpar:
        return None
    for factor in (expr.left, expr.right):
        if isinstance(factor, (cst.Integer, cst.Float)):
            return factor
    return None


def _is_mm(scope: Scope, product: cst.CSTNode) -> bool:
    op = scope.op(product)
    return op is not None and op[0] == "mm"


def _mm_operands(product: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression]:
    """(a, c) of ``torch.mm(a, c)`` or ``a.mm(c)``, as written (``_operands`` has checked the call)."""
    assert isinstance(product, cst.Call)
    if len(product.args) == 1:
        return product.func.value, product.args[0].value  # type: ignore[attr-defined]
    return product.args[0].value, product.args[1].value


def _bias_later(scope: Scope, ref: StatementRef, product: cst.CSTNode):
    """``h = x @ w.t()`` and, in a later statement of the block, ``h + b`` or ``h += b``, the
    product read there only: (the product, the sum, the bias, how to fix it)."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and small.value is product and len(small.targets) == 1):
        return None
    target = small.targets[0].target
    if not isinstance(target, cst.Name) or target.value in scope.escaped:
        return None
    name = target.value
    operands = names_of(product)[0]
    if any(root in scope.inplace for root in operands):
        return None
    for later in ref.later():
        if not isinstance(later.node, cst.SimpleStatementLine):
            return None
        reads, defs = names_of(later.node)
        if name in reads:
            return _consumer(scope, ref, later, name, product)
        if name in defs or operands & defs:
            return None
    return None


def _consumer(scope: Scope, ref: StatementRef, use: StatementRef, name: str, product: cst.CSTNode):
    small = use.simple
    if small is None:
        return None
    redefined = name in names_of(use.node)[1]
    if not redefined and scope.read_after(use, name):
        return None
    if isinstance(small, cst.AugAssign):
        if not (isinstance(small.operator, cst.AddAssign) and isinstance(small.target, cst.Name)
                and small.target.value == name and scope.is_tensor(small.value) and count_name(small.value, name) == 0):
            return None
        bias = small.value

        def edits(fused: cst.BaseExpression) -> tuple[StatementEdit, ...]:
            return StatementEdit(ref.node, ()), StatementEdit(use.node, (assign(name, fused),))

        return product, small, bias, edits

    read = _read_of(small.value if isinstance(small, cst.Assign) else small, name)
    found = _added(scope, use.node, read) if read is not None else None
    if found is None:
        return None
    total, bias = found

    def edits(fused: cst.BaseExpression) -> tuple[StatementEdit, ...]:
        replaced = replace_nodes(use.node, {total: fused.with_changes(lpar=total.lpar, rpar=total.rpar)})
        return StatementEdit(ref.node, ()), StatementEdit(use.node, (replaced,))

    return product, total, bias, edits


def _read_of(statement: cst.CSTNode, name: str) -> cst.Name | None:
    reads = _NameReads(name)
    statement.visit(reads)
    return reads.found[0] if len(reads.found) == 1 else None


class _NameReads(cst.CSTVisitor):
    """The nodes of one variable in what it visits (not attribute names)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False


def _fused_call(scope: Scope, operands: tuple[str, cst.BaseExpression, cst.BaseExpression], bias: cst.BaseExpression,
                alpha: cst.BaseExpression | None = None) -> cst.Call | None:
    kind, first, second = operands
    if kind == "linear":
        func, args = scope.facts.spelling("torch.nn.functional.linear"), (first, second, bias)
    else:
        func, args = scope.facts.spelling("torch.addmm"), (bias, first, second)
    return None if func is None else fused_call(func, args, (("alpha", alpha),))
