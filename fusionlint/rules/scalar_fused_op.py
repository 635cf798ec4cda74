"""FL013: element-wise arithmetic that one fused PyTorch op does in one eager kernel:
``x + alpha * y`` (``torch.add(..., alpha=)``), ``a * b + c`` (``torch.addcmul``),
``a / b * v + c`` (``torch.addcdiv``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, scope_statements
from fusionlint.analysis.numbers import NumberNames
from fusionlint.analysis.nodes import Walker, bound_names, code_of, factors_of, operations, reaching_assignment
from fusionlint.analysis.rescale import zero_dim
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, fused_call, replace_nodes

# A product next to a sum: ``* b +``, ``/ b -``, ``+ a *`` (an operand between, with calls,
# subscripts and parentheses nested two deep; a factor nested deeper is not seen).
_NESTED = r"(?:\((?:[^()]|\([^()]*\))*\)|\[(?:[^\[\]]|\[[^\[\]]*\])*\])"
_OPERAND = rf"(?:[\w.]+|{_NESTED})(?:{_NESTED}[\w.]*)*"
_FUSABLE_TEXT = re.compile(rf"[*/]\s*-?{_OPERAND}\s*[+-](?!=)|[\w)\]]\s*[+-]\s*{_OPERAND}\s*[*/](?![*=])")
_STRING_STATEMENT = re.compile(r"\s*[rRbBuUfF]{0,2}['\"]")  # a docstring keeps a module whole
# A one-line string literal that is not an f-string holds no code: "org/model-0.3B" is no product.
_STRING = re.compile(r"""(?<!\w)([rRbBuUfF]{0,2})('[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")""")


def _code_of(text: str) -> str:
    return _STRING.sub(lambda m: m.group(0) if "f" in m.group(1).lower() else '""', text)


class ScalarFusedOp(Rule):
    code = "FL013"
    name = "scalar-fused-op"
    message = "element-wise arithmetic that one fused op does in one kernel (`torch.add(alpha=)`, `addcmul`, `addcdiv`)"
    rationale = """
        Eager PyTorch runs each operator as a kernel that writes its whole result: `x + 0.5 *
        y` is two kernels (the scaled `y`, then the sum), `a * b * 0.5 + c` three. PyTorch has
        fused ops for these: `torch.add(x, y, alpha=0.5)` (and `torch.sub`), `torch.addcmul(c,
        a, b, value=0.5)` and `torch.addcdiv(c, a, b, value=0.5)`, one kernel each. fusionrt's
        eager count for 256 x 256 operands goes from 2 kernels and 512 KiB written to 1 and
        256 KiB for `x + 0.5 * y`, from 3 kernels and 768 KiB to 1 and 256 KiB for `a * b *
        0.5 + c`. A fusing backend (fusionrt, torch.compile) fuses the written-out form
        anyway: the rewrite pays in eager only.

        Flagged, every operand known to be a tensor and every scale a number the code shows
        (a literal, `math.sqrt(...)`, a parameter annotated `float`/`int`, a local assigned
        only such values, a member the class assigns only such values: `self.eps = eps` of
        `eps: float`): `x + alpha * y` and `x - alpha * y`; `a * b + c` and `a * b * v +
        c`; `a / b + c` and `a / b * v + c`; `a * b * c + d` (`torch.addcmul(d, a * b, c)`,
        one product kept); a sum of two products, `a * b + c * d` (`torch.addcmul(c * d, a,
        b)`: 3 kernels -> 2). The out-of-place fused ops broadcast all their operands together
        and promote dtypes as the written-out arithmetic does.

        Flagged without a fix: `x + s * y` where the code does not tell whether `s` is a Python
        number or a tensor (`self.gamma` set from a constructor argument, an untyped parameter,
        `scale[i]`): a number takes `torch.add(x, y, alpha=s)`, a tensor `torch.addcmul(x, s,
        y)` (which refuses a number), and either saves the scaled `y`'s kernel and write
        (fusionrt's eager count for (8, 64, 32, 32) operands: 2 kernels, 4 MiB -> 1, 2 MiB, for
        a number, a per-channel, a 0-d or a full tensor alike).

        Not flagged: in-place updates (`x += ...`); an addend that may be a number (`start +
        (end - start) * t`: no fused op adds a tensor to a number); a product of a batched matmul
        (FL012 reports `torch.baddbmm`); a sum inside attention that FL010 rewrites to
        `F.scaled_dot_product_attention`; a sum of one-number tensors (`loss + w * aux_loss`
        of full reductions, losses, or names and members that name a loss: the kernel it saves
        writes one number); index arithmetic on integer tensors (`winners // k * size + index`,
        `batch * num_nodes + row`: every tensor operand shows integer work, through the names
        it is bound to: `.long()`, `//`, `rounding_mode=`, `torch.arange`, the indices of
        `topk`/`sort`/`max` unpacked, a `torch.LongTensor` parameter), where the kernel saved
        writes a small index tensor and the fused ops refuse some forms (`addcdiv`, a float
        `alpha=`).
    """
    use_instead = "`torch.add(x, y, alpha=alpha)`, `torch.addcmul(c, a, b, value=v)`, `torch.addcdiv(c, a, b, value=v)`."
    fix_safety = FixSafety.UNSAFE
    pays_in = (EAGER,)
    yields_to = frozenset({"FL010", "FL012", "FL016", "FL017"})
    fix_notes = """
        The fix writes the fused op in place of the sum. It is **unsafe**: the fused ops round
        differently (no rounding of the product to the operands' dtype before the sum), and
        they are stricter than the operators on dtypes: integer tensors take no float `alpha`,
        and `addcdiv` refuses integer tensors (`/` divides them as floats). `fusionlint check
        --fix --verify` runs both versions on random inputs and applies the fix only if they
        agree.
    """
    examples = (
        Example(
            bad="""\
import torch


def momentum_step(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float) -> torch.Tensor:
    buf = buf * 0.9 + grad
    return p - lr * buf
""",
            at=((5, 11), (6, 12)),
            fixed="""\
import torch


def momentum_step(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float) -> torch.Tensor:
    buf = torch.add(grad, buf, alpha=0.9)
    return torch.sub(p, buf, alpha=lr)
""",
            call="momentum_step(randn(256, 256), randn(256, 256), randn(256, 256), 0.01)",
        ),
        Example(
            bad="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return x * scale * 0.5 + shift
""",
            at=((5, 12),),
            fixed="""\
import torch


def modulate(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift, x, scale, value=0.5)
""",
            call="modulate(randn(8, 64, 32), randn(8, 1, 32), randn(8, 1, 32))",
        ),
        Example(
            bad="""\
import torch


def adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    denom = v.abs().sqrt() + 1e-8
    return m / denom * -0.001 + p
""",
            at=((6, 12),),
            fixed="""\
import torch


def adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    denom = v.abs().sqrt() + 1e-8
    return torch.addcdiv(p, m, denom, value=-0.001)
""",
            call="adam_like(randn(256, 256), randn(256, 256), randn(256, 256))",
        ),
        Example(
            bad="""\
import torch


def mix(x: torch.Tensor, y: torch.Tensor, w_x: torch.Tensor, w_y: torch.Tensor) -> torch.Tensor:
    return x * w_x + y * w_y
""",
            at=((5, 12),),
            fixed="""\
import torch


def mix(x: torch.Tensor, y: torch.Tensor, w_x: torch.Tensor, w_y: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(y * w_y, x, w_x)
""",
            call="mix(randn(8, 64, 32, 32), randn(8, 64, 32, 32), randn(64, 1, 1), randn(64, 1, 1))",
        ),
        # `shift` and `scale` are tensors (unsqueezed); `x` may be a number or a tensor: no fix
        Example(
            bad="""\
import torch


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def modulate(x, shift, scale):
    return torch.addcmul(shift.unsqueeze(1), x, 1 + scale.unsqueeze(1))
""",
            call="modulate(randn(8, 256, 384), randn(8, 384), randn(8, 384))",
        ),
    )
    valid = (
        # an in-place update; a number added; an addend that may be a number
        """\
import torch


def mix(x: torch.Tensor, y: torch.Tensor, start, end):
    x += 0.5 * y
    return x * y + 1.0, start + (end - start) * x
""",
        # a sum of one-number tensors: a loss and a full reduction
        """\
import torch
import torch.nn.functional as F


def total_loss(logits: torch.Tensor, target: torch.Tensor, z: torch.Tensor, weight):
    loss = F.cross_entropy(logits, target)
    aux = z.pow(2).mean()
    return loss + weight * aux
""",
        # a batched matmul scaled and added (FL012's); a subtraction of a product of tensors
        """\
import torch


def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    return torch.bmm(a, b) * 0.5 + c, c - a * b
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # a fusable pair holds a product or a quotient
        return re.compile(r"[*/]")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _STRING_STATEMENT.match(text) is None and _FUSABLE_TEXT.search(_code_of(text)) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        numbers = NumberNames(scope)
        for ref in scope_statements(scope):
            statement = ref.node
            sums = [op for part in own_parts(statement)
                    for op in operations(part, (cst.Add, cst.Subtract), skip=(cst.AugAssign,))]
            rewrites = {id(total): _rewrite(scope, numbers, ref, total) for total in sums}
            rewritten: set[int] = set()  # sums inside a reported one: one finding a sum (its fix leaves the next)
            reported: set[int] = set()
            for total in sums:  # a sum whose fused op is known first: a fix beats a sum around it without one
                rewrite = rewrites[id(total)]
                if rewrite is None or rewrite.unknown is not None or id(total) in rewritten:
                    continue
                rewritten.update(id(inner) for inner in operations(total, (cst.Add, cst.Subtract)))
                reported.add(id(total))
                yield self._fixed(scope, statement, total, rewrite.fused)
            for total in sums:
                rewrite = rewrites[id(total)]
                if rewrite is None or rewrite.unknown is None or id(total) in rewritten:
                    continue
                inner = {id(op) for op in operations(total, (cst.Add, cst.Subtract))}
                if inner.isdisjoint(reported):
                    rewritten |= inner
                    yield Violation(total, message=_either_message(rewrite))

    def _fixed(self, scope: Scope, statement: cst.BaseStatement, total: cst.BinaryOperation, fused: _Fused) -> Violation:
        call = _call(scope, fused)
        fix = None
        if call is not None and isinstance(statement, cst.SimpleStatementLine):
            call = call.with_changes(lpar=total.lpar, rpar=total.rpar)
            fix = (StatementEdit(statement, (replace_nodes(statement, {total: call}),)),)
        return Violation(total, fix=fix, message=f"written-out arithmetic that `{fused.func}` does in one kernel")


@dataclass(frozen=True)
class _Fused:
    """One fused op: its name, its tensor arguments, its scale (``alpha=``/``value=``; None: 1)."""

    func: str
    args: tuple[cst.BaseExpression, ...]
    value: cst.BaseExpression | None = None


@dataclass(frozen=True)
class _Rewrite:
    """The fused op for a sum; where it depends on an operand the code does not tell a number or
    a tensor (``unknown``), ``fused`` is the op for a number (``addcmul`` is the one for a tensor)."""

    fused: _Fused
    unknown: cst.BaseExpression | None = None


def _call(scope: Scope, fused: _Fused) -> cst.Call | None:
    """The fused op as this file spells it (None: torch is not imported so that a fix can name it)."""
    spelled = scope.facts.spelling(fused.func)
    if spelled is None:
        return None
    keyword = "value" if fused.func.endswith(("addcmul", "addcdiv")) else "alpha"
    return fused_call(spelled, fused.args, [(keyword, fused.value)])


def _either_message(rewrite: _Rewrite) -> str:
    unknown = code_of(rewrite.unknown)  # type: ignore[arg-type]
    return (
        f"written-out arithmetic that one op does in one kernel: `{rewrite.fused.func}(..., alpha={unknown})` if "
        f"`{unknown}` is a number, `torch.addcmul` if it is a tensor (the code does not tell which: no fix)"
    )


def _rewrite(scope: Scope, numbers: NumberNames, ref: StatementRef, total: cst.BinaryOperation) -> _Rewrite | None:
    """The fused op that computes ``total``, or None; one that depends on an operand of unknown
    kind only when no side of the sum has one of its own. None for a sum of one-number tensors
    (``loss + w * aux_loss``): the kernel it saves writes one number; and for index arithmetic
    on integer tensors."""
    add = isinstance(total.operator, cst.Add)
    sides = ((total.left, total.right), (total.right, total.left)) if add else ((total.right, total.left),)
    found = None
    for term, other in sides:
        if not _is_product(term) or not scope.is_tensor(other) or _is_batched_product(scope, term):
            continue
        if _one_number(scope, numbers, ref, other) and _one_number(scope, numbers, ref, term):
            return None
        fused = _known(scope, numbers, term, other, add)
        if fused is not None:
            found = None if _refused_on_integers(scope, numbers, ref, fused) else _Rewrite(fused)
            break
        if found is None and add:
            found = _of_unknown_kind(scope, numbers, term, other)
    return None if found is None or _integer_value(scope, numbers, ref, total) else found


def _known(scope: Scope, numbers: NumberNames, term: cst.BinaryOperation, other: cst.BaseExpression,
           add: bool) -> _Fused | None:
    """The fused op for ``other + term`` (``other - term``) where every factor of ``term`` is known
    a tensor or a number, one number at most."""
    factors = factors_of(term)
    tensors = [f for f in factors if scope.is_tensor(f)]
    scales = [f for f in factors if not scope.is_tensor(f)]
    if len(scales) > 1 or not all(numbers.is_number(s) for s in scales):
        return None
    value = scales[0] if scales else None
    if add and len(tensors) == 2:
        return _Fused("torch.addcmul", (other, *tensors), value)
    if add and len(tensors) > 2 and value is None and isinstance(term.operator, cst.Multiply):
        return _Fused("torch.addcmul", (other, term.left, term.right))  # ``a * b * c``: one product kept
    if add and len(tensors) == 1 and _is_quotient(scope, tensors[0]):
        quotient = tensors[0]
        return _Fused("torch.addcdiv", (other, quotient.left, quotient.right), value)  # type: ignore[attr-defined]
    if len(tensors) == 1 and value is not None:
        return _Fused("torch.add" if add else "torch.sub", (other, tensors[0]), value)
    return None


def _of_unknown_kind(scope: Scope, numbers: NumberNames, term: cst.BinaryOperation,
                     other: cst.BaseExpression) -> _Rewrite | None:
    """``other + s * t`` with ``t`` a tensor and ``s`` a value the code does not tell a number or a
    tensor (``self.gamma``, ``scale[i]``, an untyped parameter): ``torch.add(other, t, alpha=s)``
    for a number, ``torch.addcmul(other, s, t)`` for a tensor."""
    if not isinstance(term.operator, cst.Multiply):
        return None
    for tensor, unknown in ((term.right, term.left), (term.left, term.right)):
        if scope.is_tensor(tensor) and not _is_quotient(scope, tensor) and _may_be_number(scope, numbers, unknown) \
                and not numbers.is_number(unknown):
            return _Rewrite(_Fused("torch.add", (other, tensor), unknown), unknown)
    return None


def _may_be_number(scope: Scope, numbers: NumberNames, expr: cst.BaseExpression) -> bool:
    """Could ``expr`` hold a Python number: a name, attribute, item or call that is no tensor nor
    module the code shows, or arithmetic of those and numbers (``self.gamma + 1.0``)."""
    if numbers.is_number(expr):
        return True
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return not scope.is_tensor(expr) and not scope.typing.is_module(expr)
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        return _may_be_number(scope, numbers, expr.left) and _may_be_number(scope, numbers, expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _may_be_number(scope, numbers, expr.expression)
    return False


_LOSS_NAME = re.compile(r"(?:^|_)loss(?:$|_)", re.IGNORECASE)


def _names_a_loss(expr: cst.BaseExpression) -> bool:
    name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else None
    return name is not None and _LOSS_NAME.search(name) is not None


_FULL_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "amax", "amin", "norm", "prod", "std", "var"})
_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"})


def _one_number(scope: Scope, numbers: NumberNames, ref: StatementRef, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr``, at ``ref``, a tensor of one number (a loss, a full reduction, ``torch.tensor(v)``)
    or arithmetic of those and values the code shows no tensor? A name counts by the value that
    surely reaches ``ref``, else by every value the scope assigns it; a name or member that names
    a loss (``aux_loss``, ``cache.attn_z_loss``; not ``losses``) holds one, as losses do once
    reduced, whatever the code shows of its value."""
    if numbers.is_number(expr) or zero_dim(scope, expr) or _names_a_loss(expr):
        return True
    if isinstance(expr, cst.BinaryOperation):  # a side the code shows no tensor scales the number
        sides = (expr.left, expr.right)
        return all(not scope.is_tensor(side) or _one_number(scope, numbers, ref, side, depth) for side in sides)
    if isinstance(expr, cst.UnaryOperation):
        return _one_number(scope, numbers, ref, expr.expression, depth)
    if isinstance(expr, cst.Name) and depth < 4:
        reaching = reaching_assignment(ref, expr.value)
        if reaching is not None:
            return _one_number(scope, numbers, reaching[0], reaching[1], depth + 1)
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_one_number(scope, numbers, ref, value, depth + 1) for value in values)
    if not isinstance(expr, cst.Call):
        return False
    op = scope.op(expr) or scope.module_op(expr)
    if op is None:
        return False
    positional = [arg for arg in expr.args if arg.keyword is None]
    keywords = {arg.keyword.value: arg.value for arg in expr.args if arg.keyword is not None}
    if op[0] in _FULL_REDUCTIONS:
        operands = 0 if isinstance(expr.func, cst.Attribute) and scope.is_tensor(expr.func.value) else 1
        return len(positional) == operands and not keywords.keys() & {"dim", "axis"}
    reduction = keywords.get("reduction")
    reduces = reduction is None or isinstance(reduction, cst.SimpleString) and reduction.evaluated_value != "none"
    return (op[0] in _LOSSES or op[0].endswith("_loss")) and reduces


_INTEGER_METHODS = frozenset({"long", "int", "short", "argsort", "argmax", "argmin", "nonzero"})
_INTEGER_FUNCTIONS = frozenset({
    "torch.arange", "torch.randint", "torch.argsort", "torch.argmax", "torch.argmin", "torch.nonzero",
    "torch.searchsorted", "torch.bucketize", "torch.randperm",
})
_INTEGER_DTYPES = frozenset({"torch.long", "torch.int", "torch.int64", "torch.int32", "torch.int16", "torch.int8", "torch.uint8"})
_INTEGER_ANNOTATIONS = frozenset({"torch.LongTensor", "torch.IntTensor", "torch.BoolTensor"})
# Calls whose second output is indices: ``values, index = x.topk(k)``.
_WITH_INDICES = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median", "cummax", "cummin"})
_FLOAT_CASTS = frozenset({"float", "half", "double", "bfloat16", "type_as"})


def _is_dtype(scope: Scope, arg: cst.Arg) -> bool:
    """A dtype argument of ``.to()``: ``dtype=``, a ``torch.<dtype>``, ``x.dtype``, a name ending in ``dtype``."""
    if arg.keyword is not None:
        return arg.keyword.value == "dtype"
    name = scope.torch_name(arg.value)
    if name is not None:
        return not name.endswith("device")
    return code_of(arg.value).endswith("dtype")


def _refused_on_integers(scope: Scope, numbers: NumberNames, ref: StatementRef, fused: _Fused) -> bool:
    """Would the fused op refuse the integer tensors it is given: ``addcdiv`` (``/`` divides
    integers as floats), a float ``alpha=``/``value=``?"""
    if fused.func == "torch.addcdiv":
        return any(_integer_value(scope, numbers, ref, arg) for arg in fused.args[1:])
    return isinstance(fused.value, cst.Float) and any(_integer_value(scope, numbers, ref, arg) for arg in fused.args)


def _integer_value(scope: Scope, numbers: NumberNames, ref: StatementRef, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` an integer tensor: every tensor among its operands (of its sums and products)
    shows integer work (``_integer``), one at least, and no operand is a float literal or a true
    division? One float operand makes the result a float."""
    shown = False
    for operand in _operands(expr):
        if isinstance(operand, cst.Float) or isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, cst.Divide):
            return False
        if numbers.is_number(operand):
            continue
        if _integer(scope, ref, operand):
            shown = True
        elif scope.is_tensor(operand):
            return False
    return shown


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        return [*_operands(expr.left), *_operands(expr.right)]
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _operands(expr.expression)
    return [expr]


def _integer(scope: Scope, ref: StatementRef, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Does ``expr`` show integer tensor work: a floor division (``//``, ``rounding_mode=``),
    ``.long()``, an index-making call (``torch.arange``, ``argsort``, ``nonzero``), a cast to an
    integer dtype, or a name that holds such a value: the value reaching ``ref`` shows it (else
    every value the scope assigns the name does), the indices of ``topk``/``sort``/``max`` unpacked
    (``values, index = x.topk(k)``), a parameter annotated ``torch.LongTensor``? A true division
    or a cast to a float dtype ends the search below it: its result is a float."""
    found = _IntegerWork(scope)
    found.walk(expr)
    if found.integer:
        return True
    for name in found.names if depth < 3 else ():
        if _integer_name(scope, ref, name, depth):
            return True
    return False


def _integer_name(scope: Scope, ref: StatementRef, name: str, depth: int) -> bool:
    reaching = reaching_assignment(ref, name)
    if reaching is not None:
        return _integer(scope, reaching[0], reaching[1], depth + 1)
    values = []
    for target, value in scope.assignments:
        if isinstance(target, cst.Name) and target.value == name:
            values.append(value)
        elif isinstance(target, (cst.Tuple, cst.List)) and name in bound_names(target):
            if not _indices_of(scope, target, value, name):
                return False
    if values:
        return all(_integer(scope, ref, value, depth + 1) for value in values)
    return _integer_parameter(scope, name) or any(
        isinstance(target, (cst.Tuple, cst.List)) and name in bound_names(target) for target, _ in scope.assignments)


def _indices_of(scope: Scope, target: cst.Tuple | cst.List, value: cst.BaseExpression, name: str) -> bool:
    """Is ``name`` the second of two names unpacked from a call that returns values and indices?"""
    elements = target.elements
    if len(elements) != 2 or not isinstance(elements[1].value, cst.Name) or elements[1].value.value != name:
        return False
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    return value.func.attr.value in _WITH_INDICES and (scope.torch_name(value.func) is None
                                                       or scope.torch_name(value.func) == f"torch.{value.func.attr.value}")


def _integer_parameter(scope: Scope, name: str) -> bool:
    node = scope.node
    if not isinstance(node, cst.FunctionDef):
        return False
    for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
        if param.name.value == name and param.annotation is not None:
            return scope.torch_name(param.annotation.annotation) in _INTEGER_ANNOTATIONS
    return False


class _IntegerWork(Walker):
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.integer = False
        self.names: set[str] = set()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        self.integer |= isinstance(node.operator, cst.FloorDivide)
        return not isinstance(node.operator, cst.Divide)  # ``/`` gives floats

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        self.walk(node.value)  # what indexes a value tells nothing of its dtype
        return False

    def visit_Comparison(self, node: cst.Comparison) -> bool:
        return False  # a mask: what it compares tells nothing of the dtype it is used as

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Call(self, node: cst.Call) -> bool:
        scope = self.scope
        func = node.func
        torch_name = scope.torch_name(func)
        method = func.attr.value if isinstance(func, cst.Attribute) and torch_name is None else None
        if method in _FLOAT_CASTS:
            return False
        if any(scope.torch_name(arg.value) in _INTEGER_DTYPES for arg in node.args):
            self.integer = True
            return False
        if method in ("to", "type") and any(_is_dtype(scope, arg) for arg in node.args):
            return False  # a cast to a dtype that is not an integer one the code names
        if method in _INTEGER_METHODS:
            self.integer = True
        elif torch_name in _INTEGER_FUNCTIONS:
            self.integer |= not any(arg.keyword is not None and arg.keyword.value == "dtype" for arg in node.args)
        self.integer |= any(arg.keyword is not None and arg.keyword.value == "rounding_mode" for arg in node.args)
        # the result's dtype follows the receiver or a torch function's first operand, not an index
        # (``x.gather(1, i)``); ``torch.where(c, a, b)``'s follows ``a`` and ``b``
        if method is not None:
            self.walk(func.value)  # type: ignore[union-attr]
        elif torch_name == "torch.where":
            for arg in node.args[1:3]:
                self.walk(arg.value)
        elif torch_name is not None and node.args:  # a function of another file or this one tells nothing
            self.walk(node.args[0].value)
        return False


def _is_product(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide))


def _is_quotient(scope: Scope, expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide)
        and scope.is_tensor(expr.left) and scope.is_tensor(expr.right)
    )


def _is_batched_product(scope: Scope, term: cst.BaseExpression) -> bool:
    """A factor that is ``bmm``/``mm``: FL012 fuses the whole sum into the GEMM."""
    for factor in factors_of(term):
        op = scope.op(factor)
        if op is not None and op[0] in ("bmm", "mm"):
            return True
    return False
