"""FL023: a host number made into a tensor only for a math function, whose result then scales a
tensor (``corr / torch.sqrt(torch.tensor(c))``): ``math`` computes it on the host for free."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, own_parts, scope_statements
from fusionlint.analysis.nodes import children, code_of, operations
from fusionlint.analysis.numbers import NumberNames
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

_TEXT = re.compile(r"tensor\s*\(")
_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})
_FUNCTION_TEXT = re.compile(r"\b(?:r?sqrt|exp|expm1|log\w*|sin|cos|tanh|ceil|floor|trunc|round)\s*\(")
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
# torch's element-wise math of one number and the host function that gives the same value
_HOST_MATH = {name: f"math.{name}" for name in ("sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tanh")}
# rounding, whose result is a count or a size: only worth a finding where the host reads it back
_HOST_ROUNDING = {"ceil": "math.ceil", "floor": "math.floor", "trunc": "math.trunc", "round": "round"}  # half to even, both
# reads of a value on the host, and casts a value passes through on its way to one
_READ_BUILTINS = frozenset({"int", "float"})
_READ_METHODS = frozenset({"item", "tolist", "long", "int"})
_CASTS = frozenset({"long", "int", "float", "double", "to"})
_HOST_POWER = {"sqrt": 0.5, "rsqrt": -0.5}  # written without ``math``
_FACTORY_KEYWORDS = frozenset({"dtype", "device"})


class HostScalarTensor(Rule):
    code = "FL023"
    name = "host-scalar-tensor"
    message = "a host number made into a tensor for a math function: compute it with `math` on the host"
    rationale = """
        `torch.sqrt(torch.tensor(num_channels))` builds a tensor of one number from a host value
        (a shape, a dimension, a constant) only to run an element-wise function on it and scale a
        real tensor by the result (`corr / torch.sqrt(torch.tensor(c))`, `-torch.log(torch.tensor(
        10000.0)) / half`). Each function of the 0-d tensor is a kernel launch in eager PyTorch
        (on a GPU the number is copied to the device first, when `device=` is given);
        `math.sqrt(c)` is computed on the host and passed to the kernel that scales as a scalar
        argument: fusionrt's eager count for a correlation volume divided this way is 3 -> 2
        kernels. A lazy fusing backend folds the constant either way: the rewrite pays in
        eager.

        Flagged: an element-wise function (`sqrt`, `rsqrt`, `exp`, `log`, ...; as `torch.f(t)`
        or `t.f()`) of `torch.tensor(n)` (or `torch.as_tensor`, `torch.scalar_tensor`;
        `dtype=`/`device=` allowed), `n` surely a host number
        (a literal, a number-annotated parameter or a local made of those, an entry of a
        `.shape`, a name unpacked from one, `len(...)`), that is an operand of `+ - * /` in an
        arithmetic expression with a tensor. Also flagged wherever it is: such a function
        (rounding included: `ceil`, `floor`, `trunc`, `round`) whose result the host reads back
        (`int(torch.ceil(torch.tensor(length * rate)))`, `.item()`, or made an integer with
        `.long()`, a count the host will need): kernels on one number only to bring it home,
        where `math.ceil(length * rate)` launches nothing (a frame count sized this way: 3 -> 2
        eager kernels, and 2 -> 1 under fusionrt, where the read runs the rounding as a kernel
        of its own). Not flagged: a bare `torch.tensor(n)` operand
        (passed as a 0-d tensor, it costs no kernel), one kept as a value of its own
        (`scale = torch.sqrt(torch.tensor(d))`: it may be read as a tensor later), a tensor of
        several numbers, a constructor's code (`__init__` runs once).
    """
    use_instead = "`corr / math.sqrt(num_channels)` (or `num_channels ** 0.5`)."
    pays_in = (EAGER,)
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix writes the function with `math` (where the file imports `math`; `sqrt` and
        `rsqrt` as a power `n ** 0.5`, `n ** -0.5` otherwise). It is **unsafe**: the host
        computes in double precision, so `exp`, `log` and the like may differ from the float32
        kernel in the last place (a square root is correctly rounded either way), and `math`
        raises on a value out of its domain (`math.sqrt(-1)`, `math.log(0)`) where torch gives
        `nan` or `-inf`. A value read back is not fixed (the rewrite gives a host number where
        the code had a tensor, and float32 rounding may differ from the host's float64 at a
        boundary).
    """
    examples = (
        Example(
            bad="""\
import torch


def correlation(fmap1: torch.Tensor, fmap2: torch.Tensor) -> torch.Tensor:
    batch, channels, n = fmap1.shape
    corr = fmap1.transpose(1, 2) @ fmap2
    return corr / torch.sqrt(torch.tensor(channels))
""",
            at=((7, 19),),
            fixed="""\
import torch


def correlation(fmap1: torch.Tensor, fmap2: torch.Tensor) -> torch.Tensor:
    batch, channels, n = fmap1.shape
    corr = fmap1.transpose(1, 2) @ fmap2
    return corr / channels ** 0.5
""",
            call="correlation(randn(2, 16, 64), randn(2, 16, 64))",
        ),
        Example(  # sinusoidal frequencies: `math` imported, the method form
            bad="""\
import math

import torch


def timestep_embedding(t: torch.Tensor, half: int) -> torch.Tensor:
    exponent = -torch.tensor(10000.0).log() * torch.arange(half, dtype=torch.float32)
    return t[:, None] * torch.exp(exponent / half)[None, :]
""",
            at=((7, 17),),
            fixed="""\
import math

import torch


def timestep_embedding(t: torch.Tensor, half: int) -> torch.Tensor:
    exponent = -math.log(10000.0) * torch.arange(half, dtype=torch.float32)
    return t[:, None] * torch.exp(exponent / half)[None, :]
""",
            call="timestep_embedding(randn(256), 64)",
        ),
        Example(  # a frame count computed in a tensor of one number, then read back as a size
            bad="""\
import torch


def frames(x: torch.Tensor, length: int, rate: float) -> torch.Tensor:
    n = int(torch.ceil(torch.tensor(length * rate)))
    return torch.tanh(x[:, :n]) * 2
""",
            at=((5, 13),),
            fixed=None,
            call="frames(randn(8, 64), 100, 0.25)",
            good="""\
import math

import torch


def frames(x: torch.Tensor, length: int, rate: float) -> torch.Tensor:
    n = math.ceil(length * rate)
    return torch.tanh(x[:, :n]) * 2
""",
        ),
    )
    valid = (
        # a bare 0-d operand; a value kept on its own; several numbers; a tensor's value
        """\
import torch


def f(x: torch.Tensor, d: int, sizes: list, t: torch.Tensor):
    a = x / torch.tensor(d)
    scale = torch.sqrt(torch.tensor(d))
    b = x * torch.sqrt(torch.tensor(sizes))
    c = x * torch.exp(torch.tensor(t))
    d = x * torch.as_tensor(sizes).sqrt()
    n = int(torch.ceil(t * d))
    return a, scale, b, c, d, n
""",
        # a constructor runs once
        """\
import torch
from torch import nn


class Contrastive(nn.Module):
    def __init__(self):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.ones([]) * torch.tensor(1 / 0.07).log())
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _TEXT

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _TEXT.search(text) is not None and _FUNCTION_TEXT.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if isinstance(scope.node, cst.FunctionDef) and scope.node.name.value == "__init__":
            return  # a constructor runs once
        numbers = NumberNames(scope)
        for ref in scope_statements(scope):
            statement = ref.node
            read_back: set[int] = set()
            for part in own_parts(statement):
                for leaf, (function, _) in _read_back(scope, numbers, part):
                    read_back.add(id(leaf))
                    yield Violation(leaf, message=f"`{code_of(leaf)}` makes a tensor of a host number for `{function}` "
                                    f"and reads the result back: `{_host_name(function)}` computes it on the host")
            inner: set[int] = set()
            for operation in (op for part in own_parts(statement) for op in operations(part, _ARITHMETIC)):
                if id(operation) in inner:
                    continue
                leaves = _leaves(operation, inner)
                host = [
                    (leaf, found) for leaf in leaves
                    if id(leaf) not in read_back and (found := _host_function(scope, numbers, leaf)) and found[0] not in _HOST_ROUNDING
                ]
                made_on_host = {id(leaf) for leaf, _ in host}
                if not host or not any(scope.is_tensor(leaf) for leaf in leaves if id(leaf) not in made_on_host):
                    continue
                for leaf, (function, number) in host:
                    replacement = _on_host(scope, function, number)
                    fix = None
                    if replacement is not None and isinstance(statement, cst.SimpleStatementLine):
                        fix = (StatementEdit(statement, (replace_nodes(statement, {leaf: replacement}),)),)
                    message = f"`{code_of(leaf)}` makes a tensor of a host number for `{function}`: compute it on the host"
                    yield Violation(leaf, fix=fix, message=message)


def _leaves(operation: cst.BinaryOperation, inner: set[int]) -> list[cst.BaseExpression]:
    """The operands of a tree of ``+ - * /`` (through unary minus), noting its inner operations."""
    leaves: list[cst.BaseExpression] = []
    todo: list[cst.BaseExpression] = [operation]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            todo.append(node.expression)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
            inner.add(id(node))
            todo += [node.right, node.left]
        else:
            leaves.append(node)
    return leaves


def _host_function(scope: Scope, numbers: NumberNames, expr: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """(function, n) of ``torch.f(torch.tensor(n))`` or ``torch.tensor(n).f()``, ``n`` a host number."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and not expr.args:
        function, made = func.attr.value, func.value
    elif scope.torch_name(func) is not None and len(expr.args) == 1 and expr.args[0].keyword is None:
        function, made = scope.torch_name(func).rpartition(".")[2], expr.args[0].value
    else:
        return None
    if function not in _HOST_MATH and function not in _HOST_POWER and function not in _HOST_ROUNDING:
        return None
    if not isinstance(made, cst.Call) or scope.torch_name(made.func) not in _FACTORIES or not made.args:
        return None
    first, *rest = made.args
    if first.keyword is not None or first.star or any(arg.keyword is None or arg.keyword.value not in _FACTORY_KEYWORDS for arg in rest):
        return None
    return (function, first.value) if _host_number(scope, numbers, first.value) else None


def _read_back(scope: Scope, numbers: NumberNames, node: cst.CSTNode) -> Iterator[tuple[cst.Call, tuple[str, cst.BaseExpression]]]:
    """The host functions under ``node`` whose result the host reads (``int(torch.ceil(torch.tensor(n)))``,
    ``torch.ceil(torch.as_tensor(n)).long()``, through casts): a kernel on a tensor of one number, whose
    value goes straight back to the host (or becomes an integer, a count the host will need)."""
    if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        return
    value = _read_operand(node)
    if value is not None:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CASTS:
            value = value.func.value
        found = _host_function(scope, numbers, value)
        if found is not None:
            yield value, found  # type: ignore[misc]
            return
    for child in children(node):
        yield from _read_back(scope, numbers, child)


def _read_operand(node: cst.CSTNode) -> cst.BaseExpression | None:
    """``v`` of ``int(v)``, ``float(v)``, ``v.item()``, ``v.tolist()``, ``v.long()``, ``v.int()``."""
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Name) and func.value in _READ_BUILTINS and len(node.args) == 1 and node.args[0].keyword is None:
        return node.args[0].value
    if isinstance(func, cst.Attribute) and func.attr.value in _READ_METHODS and not node.args:
        return func.value
    return None


def _host_name(function: str) -> str:
    return _HOST_MATH.get(function) or _HOST_ROUNDING.get(function) or f"n ** {_HOST_POWER[function]}"


def _host_number(scope: Scope, numbers: NumberNames, expr: cst.BaseExpression) -> bool:
    """A literal, a number name, ``x.shape[i]``, ``x.size(i)``, ``len(...)``, a name unpacked from a shape,
    or arithmetic of those (``length * rate``)."""
    if numbers.is_number(expr):
        return True
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        return _host_number(scope, numbers, expr.left) and _host_number(scope, numbers, expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _host_number(scope, numbers, expr.expression)
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape" and len(expr.slice) == 1 \
            and isinstance(expr.slice[0].slice, cst.Index)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name):
            return func.value == "len"
        return isinstance(func, cst.Attribute) and func.attr.value == "size" and len(expr.args) == 1 and scope.is_tensor(func.value)
    if isinstance(expr, cst.Name):
        return any(_unpacks_shape(target, value, expr.value) for target, value in scope.assignments)
    return False


def _unpacks_shape(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> bool:
    """``b, name, n = x.shape`` (or ``x.size()``, ``x.shape[:3]``)."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return False
    if not any(isinstance(e.value, cst.Name) and e.value.value == name for e in target.elements):
        return False
    shape = value.value if isinstance(value, cst.Subscript) else value
    if isinstance(shape, cst.Call) and not shape.args:
        shape = shape.func
        return isinstance(shape, cst.Attribute) and shape.attr.value == "size"
    return isinstance(shape, cst.Attribute) and shape.attr.value == "shape"


def _on_host(scope: Scope, function: str, number: cst.BaseExpression) -> cst.BaseExpression | None:
    """``math.f(n)``, or ``n ** 0.5`` for a square root where the file does not import ``math``."""
    bare = number.with_changes(lpar=[], rpar=[])
    if function in _HOST_MATH and "math" in scope.facts.imported:
        return cst.Call(func=cst.parse_expression(_HOST_MATH[function]), args=[cst.Arg(bare)])
    if function not in _HOST_POWER:
        return None
    atomic = isinstance(bare, (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float))
    base = bare if atomic else bare.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    exponent = _HOST_POWER[function]
    power = cst.Float(str(abs(exponent)))
    return cst.BinaryOperation(
        left=base, operator=cst.Power(),
        right=power if exponent > 0 else cst.UnaryOperation(operator=cst.Minus(), expression=power),
        lpar=[cst.LeftParen()] if exponent < 0 else [], rpar=[cst.RightParen()] if exponent < 0 else [],
    )
