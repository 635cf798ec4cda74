"""A value made by one statement and rescaled by a number at the next statement that reads it
(``sim = q @ k.mT``, then ``sim = sim * scale``): the scale could have been applied earlier,
to a smaller operand."""
from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Sequence

import libcst as cst

from fusionlint.analysis.flow import inner_blocks
from fusionlint.analysis.nodes import children, names_of
from fusionlint.analysis.scope import Block, Scope, StatementRef, per_scope


# ``name = name * s``, ``name = name / s``, ``name = s * name``, ``name *= s``, ``name.div_(s)`` in a
# statement's text (``Rule.may_match``)
RESCALE_TEXT = re.compile(
    r"\s*(\w+)\s*(?:[*/]=(?!=)|\.(?:mul|div)_\s*\(|=\s*(?:\1\s*[*/]|[\w.]+\s*\*\s*\1\s*(?:#.*)?$))"
)
# ``name = name / s``, ``name *= s`` by a plain factor (a name, an attribute chain, a number)
PLAIN_RESCALE_TEXT = re.compile(r"\s*(\w+)\s*(?:[*/]=|=\s*\1\s*[*/])\s*[\w.]+\s*(?:#.*)?$")
# The same as RESCALE_TEXT, binding the scaled value to any name or returning it; the rescaled name is
# one of the groups.
_SCALED_TEXT = re.compile(
    r"\s*(?:(?:\w+\s*=|return\b)\s*(?:(\w+)\s*[*/](?![*/=])|[\w.]+\s*\*\s*(\w+)\s*(?:#.*)?$)"
    r"|(\w+)\s*[*/]=(?!=)|(\w+)\.(?:mul|div)_\s*\()"
)
_IN_PLACE_SCALES = {"mul_": cst.Multiply, "div_": cst.Divide}
_ZERO_DIM_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})  # of one number
_ZERO_DIM_KEEPING = frozenset({"sqrt", "rsqrt", "exp", "log", "reciprocal", "abs", "clamp", "float", "to"})


def rescaled_below(name: str, block: Sequence[str], index: int) -> bool:
    """Can the first of the five statements after ``index`` that reads ``name`` (past views that
    rebind it) rescale it, in their texts (``Rule.may_match``)?"""
    for later in range(index + 1, min(index + 6, len(block))):
        text = block[later]
        if name not in text or not re.search(r"\b%s\b" % name, text):
            continue
        if re.match(r"\s*{0}\s*=\s*{0}\s*\.".format(name), text):
            continue  # `name = name.view(...)`
        rescale = _SCALED_TEXT.match(text)
        return rescale is not None and name in rescale.groups()
    return False


@dataclass(frozen=True)
class Rescale:
    statement: StatementRef  # ``name = name * factor`` (or ``other = ...``, ``return ...``)
    node: cst.CSTNode  # its ``name * factor`` (``factor * name``, ``name / factor``; ``name *= factor``)
    operator: cst.BaseBinaryOp  # Multiply or Divide
    factor: cst.BaseExpression
    # The fix may drop the statement and scale the operand instead: it rebinds ``name`` in the
    # same block, and the factor holds the same value where the value is made. Otherwise (after
    # the ``if`` whose arm made the value, other arms' values are scaled too; a factor computed
    # in between; the scaled value bound to another name or returned) it is reported only.
    movable: bool


def rescaled_later(scope: Scope, ref: StatementRef, value: cst.CSTNode) -> Rescale | None:
    """Where ``ref`` is ``name = value``: the next statement that reads ``name``, past views
    that rebind it (``name = name.view(...)``), if it is ``name = name * factor`` (or ``factor *
    name``, ``name / factor``; or binds or returns that product and never reads ``name`` again)
    with ``factor`` a number or a 0-d tensor, not made from ``name``; in ``ref``'s block, or
    after the ``if`` whose arm ``ref`` is; or first in the arm of the ``if`` that reads ``name``
    next (reported only)."""
    name = ref.name_bound_to(value)
    if name is None:
        return None
    same_block, passed = True, []
    while True:
        block = ref.block
        readers = _readers(scope, block).get(name, ())
        k = bisect.bisect_right(readers, ref.index)
        while k < len(readers) and _views_itself(scope, block.statements[readers[k]], name):
            k += 1
        if k < len(readers):
            i = readers[k]
            passed.extend(block.statements[ref.index + 1:i])
            reader = StatementRef(block.statements[i], block, i)
            found = _rescale(scope, reader, name) or _rescaled_in_arm(scope, reader, name)
            if found is None or not (same_block or found.movable):
                return None  # after the `if`, only `name = name * factor` is read as a rescale
            factor_ready = not names_of(found.factor)[0] & set().union(*map(_stores, passed))
            movable = found.movable and same_block and factor_ready
            return Rescale(found.statement, found.node, found.operator, found.factor, movable)
        passed.extend(block.statements[ref.index + 1:])
        parent = block.parent
        if parent is None or not isinstance(parent.node, cst.If):
            return None
        ref, same_block = parent, False


def _rescaled_in_arm(scope: Scope, ref: StatementRef, name: str) -> Rescale | None:
    """Where ``ref`` is an ``if`` whose test does not read ``name``: the rescale of ``name`` by
    the first statement of its arm that reads it (``if softcap is not None: logits = logits /
    softcap``), reported only (the scale holds in that arm only)."""
    node = ref.node
    if not (isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock)) or mentions(node.test, name):
        return None
    arm = Block(node.body.body, ref, node.body)
    for i, statement in enumerate(arm.statements):
        if mentions(statement, name):
            found = _rescale(scope, StatementRef(statement, arm, i), name)
            return found and Rescale(found.statement, found.node, found.operator, found.factor, False)
    return None


def _views_itself(scope: Scope, statement: cst.BaseStatement, name: str) -> bool:
    """``name = name.view(...)`` (any chain of views of ``name``): the value, rearranged."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    small = statement.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    chain = scope.view_chain(small.value)
    return isinstance(target, cst.Name) and target.value == name and chain is not None and chain[0].value == name


def _rescale(scope: Scope, ref: StatementRef, name: str) -> Rescale | None:
    small = ref.simple
    in_place = _scaled_in_place(small, name)
    if in_place is not None:
        operator, factor = in_place
        if not _scale_factor(scope, factor, name):
            return None
        return Rescale(ref, small, operator, factor, True)  # type: ignore[arg-type]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        target: str | None = small.targets[0].target.value
        value = small.value
    elif isinstance(small, cst.Return):
        target, value = None, small.value
    else:
        return None
    if not isinstance(value, cst.BinaryOperation):
        return None
    operator = value.operator
    if isinstance(value.left, cst.Name) and value.left.value == name and isinstance(operator, (cst.Multiply, cst.Divide)):
        factor = value.right
    elif isinstance(value.right, cst.Name) and value.right.value == name and isinstance(operator, cst.Multiply):
        factor = value.left
    else:
        return None
    if not _scale_factor(scope, factor, name):
        return None
    if target != name and target is not None and scope.read_after(ref, name):
        return None  # the unscaled value is read again: both are kept
    return Rescale(ref, value, operator, factor, target == name)


def _scale_factor(scope: Scope, factor: cst.BaseExpression, name: str) -> bool:
    """A number or a tensor that broadcasts like one (``scalar_like``), or a learned temperature
    (``exp_of_parameter``), not made from ``name``; not a literal zero (``x * 0.0`` clears
    ``x``: no scale to move)."""
    if isinstance(factor, (cst.Integer, cst.Float)) and factor.evaluated_value == 0:
        return False
    return not mentions(factor, name) and (
        not scope.is_tensor(factor) or scalar_like(scope, factor) or exp_of_parameter(scope, factor))


def _scaled_in_place(small: cst.BaseSmallStatement | None, name: str) -> tuple[cst.BaseBinaryOp, cst.BaseExpression] | None:
    """(operator, factor) of ``name *= factor``, ``name /= factor``, ``name.mul_(factor)`` or
    ``name.div_(factor)``."""
    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value == name:
        if isinstance(small.operator, cst.MultiplyAssign):
            return cst.Multiply(), small.value
        if isinstance(small.operator, cst.DivideAssign):
            return cst.Divide(), small.value
        return None
    call = small.value if isinstance(small, cst.Expr) else None
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
            and call.func.value.value == name and call.func.attr.value in _IN_PLACE_SCALES):
        return None
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    return _IN_PLACE_SCALES[call.func.attr.value](), call.args[0].value


def zero_dim(scope: Scope, expr: cst.BaseExpression) -> bool:
    """A tensor of one number, which broadcasts against anything: ``torch.tensor(d)``, and what
    element-wise ops make of it (``torch.sqrt(torch.tensor(d))``, ``t.exp()``)."""
    if not isinstance(expr, cst.Call) or not expr.args:
        return False
    canonical = scope.torch_name(expr.func)
    if canonical in _ZERO_DIM_FACTORIES:
        return not isinstance(expr.args[0].value, (cst.List, cst.Tuple, cst.ListComp))
    op = scope.op(expr)
    return op is not None and op[0] in _ZERO_DIM_KEEPING and op[2] is not None and zero_dim(scope, op[2])


_ONE_ELEMENT_FACTORIES = frozenset({"ones", "zeros", "full", "empty", "rand", "randn"})


def scalar_like(scope: Scope, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> bool:
    """A tensor that broadcasts like a number against the last two dims of what it scales: a 0-d
    one (``zero_dim``), a module's member every assignment of which makes one or a per-head scale
    of shape (..., 1, 1) (``nn.Parameter(torch.tensor(0.07))``, ``torch.sqrt(torch.tensor(d))``,
    ``nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))``), what element-wise ops make of
    one (``self.logit_scale.exp()``), or a local every assignment of which is one."""
    if zero_dim(scope, expr):
        return True
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        values = scope.facts.member_values(scope.class_name, expr.attr.value) if scope.class_name else []
        return bool(values) and all(_scalar_like_ast(assign.value) for assign in values)
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        tensors = [side for side in (expr.left, expr.right) if scope.is_tensor(side)]
        return len(tensors) == 1 and scalar_like(scope, tensors[0], seen)
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(scalar_like(scope, value, seen | {expr.value}) for value in values)
    op = scope.op(expr) if isinstance(expr, cst.Call) else None
    return op is not None and op[0] in _ZERO_DIM_KEEPING and op[2] is not None and scalar_like(scope, op[2], seen)


def exp_of_parameter(scope: Scope, expr: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> bool:
    """A learned temperature kept in log space, the exp of (a clamp of) a tensor the function is
    given or the module holds (``torch.clamp(logit_scale, max=math.log(100.0)).exp()``, where
    ``logit_scale`` is a parameter), or a local every assignment of which is one: of unknown shape,
    but a scale (one per head, in Swin V2's cosine attention)."""
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(exp_of_parameter(scope, value, seen | {expr.value}) for value in values)
    op = scope.op(expr) if isinstance(expr, cst.Call) else None
    return op is not None and op[0] == "exp" and op[2] is not None and _clamped_parameter(scope, op[2], seen)


def _clamped_parameter(scope: Scope, expr: cst.BaseExpression, seen: frozenset[str]) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in scope.params
    if isinstance(expr, cst.Attribute):
        return isinstance(expr.value, cst.Name) and expr.value.value == "self" and scope.is_tensor(expr)
    op = scope.op(expr) if isinstance(expr, cst.Call) else None
    return op is not None and op[0] in ("clamp", "clamp_max", "clamp_min", "clip") and op[2] is not None \
        and _clamped_parameter(scope, op[2], seen)


def _scalar_like_ast(node: ast.expr) -> bool:
    """``_scalar_like`` for the value a module assigns to a member (an ``ast`` node)."""
    if isinstance(node, ast.BinOp):
        tensors = [side for side in (node.left, node.right) if isinstance(side, ast.Call)]
        return len(tensors) == 1 and _scalar_like_ast(tensors[0])
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    first = node.args[0] if node.args else None
    if name in ("tensor", "as_tensor", "scalar_tensor"):
        return first is not None and not isinstance(first, (ast.List, ast.Tuple, ast.ListComp))
    if name in _ONE_ELEMENT_FACTORIES:  # torch.ones([]), torch.ones(1), torch.ones(heads, 1, 1)
        dims = first.elts if len(node.args) == 1 and isinstance(first, (ast.List, ast.Tuple)) else node.args
        literal = [isinstance(d, ast.Constant) and d.value == 1 for d in dims]
        return not dims or literal == [True] or (len(literal) >= 3 and literal[-2:] == [True, True])
    if name == "Parameter" or name in _ZERO_DIM_KEEPING:
        if isinstance(func, ast.Attribute) and not isinstance(func.value, ast.Name):  # t.sqrt(), t.float()
            return _scalar_like_ast(func.value)
        return first is not None and _scalar_like_ast(first)
    return False


@per_scope
def _readers_by_block(scope: Scope) -> dict[int, tuple[Block, dict[str, list[int]]]]:
    """Filled by ``_readers``: the search for a value's next reader starts at every assignment,
    and walking the later statements from each made a long straight-line block quadratic. Each
    block is kept with its entry: a block dropped by the walk that made it could hand its id to
    another."""
    return {}


def _readers(scope: Scope, block: Block) -> dict[str, list[int]]:
    """For each name, the indices of the statements of ``block`` that hold it (what
    ``mentions`` finds), in order; computed once per block."""
    known = _readers_by_block(scope)
    if id(block) not in known:
        found: dict[str, list[int]] = {}
        for i, statement in enumerate(block.statements):
            for name in _names(statement):
                found.setdefault(name, []).append(i)
        known[id(block)] = (block, found)
    return known[id(block)][1]


def _names(statement: cst.CSTNode) -> set[str]:
    found, todo = set(), [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        else:
            todo.extend(children(node))
    return found


def mentions(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` hold the name anywhere (read or written)?"""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(mentions(child, name) for child in children(node))


def _stores(statement: cst.CSTNode) -> set[str]:
    """Every name a statement may assign, in nested blocks too."""
    found = set(names_of(statement)[1])
    for suite in inner_blocks(statement):
        for inner in suite.body if isinstance(suite, cst.IndentedBlock) else [suite]:
            found |= _stores(inner)
    return found
