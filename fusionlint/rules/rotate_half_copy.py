"""FL017: a rotary embedding through a rotated copy, ``x * cos + rotate_half(x) * sin`` where
``rotate_half`` concatenates ``(-x2, x1)``: fusionrt writes the copy; rotating the halves
element-wise and concatenating once does not."""
from __future__ import annotations

import ast
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import ModuleFacts, Scope, own_parts, scope_statements
from fusionlint.analysis.nodes import code_of, factors_of, operations
from fusionlint.analysis.views import ast_view, dotted_path
from fusionlint.model import FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# A call of a function whose name says it rotates (``rotate_half``, ``RotateHalf``, ``ROT90``):
# one case-sensitive alternative per spelling, as a search of a literal skips from one to the
# next where an IGNORECASE search tries every character.
_ROTATE_CALL = re.compile(r"rot\w*\s*\(|Rot\w*\s*\(|ROT\w*\s*\(")
_ROTATE_NAME = re.compile(r"rot|Rot|ROT")
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"})


class RotateHalfCopy(Rule):
    code = "FL017"
    name = "rotate-half-copy"
    message = "rotary embedding through a rotated copy: rotate the halves element-wise and concatenate once"
    rationale = """
        The usual rotary embedding, `x * cos + rotate_half(x) * sin` with `rotate_half(x) =
        torch.cat((-x2, x1), dim=-1)`, builds a rotated copy of `x` and reads it back.
        Concatenation is data movement: fusionrt writes the negated half and the copy to
        global memory before the products and the sum run. Computing each half of the result
        element-wise, `x1 * cos1 - x2 * sin1` and `x2 * cos2 + x1 * sin2`, and concatenating
        the two results once writes the halves of the result and the result: on a (2, 4, 16,
        32) query, 4 -> 3 writes, 4 -> 2 kernels and 56 -> 32 KiB written (Llama's, Mixtral's
        and Gemma 3n's `apply_rotary_pos_emb`; the interleaved form, `stack((-x2, x1),
        dim=-1)` then a flatten, likewise). In eager
        PyTorch the rewrite launches more kernels (5 -> 7: the halves' products): it pays
        under fusionrt.

        Flagged: a sum of two products, one with a factor `x`, the other with a factor `f(x)`
        where `f` is a function of the same file whose name says it rotates (`rot...`) and
        whose body concatenates or stacks a negated operand first (`torch.cat((-x2, x1),
        ...)`, `torch.stack((-x2, x1), ...)`). Not flagged: a rotation by another function of
        `x`, a rotation function that does not negate.
    """
    use_instead = """
        `torch.cat((x1 * cos1 - x2 * sin1, x2 * cos2 + x1 * sin2), dim=-1)` with `x1, x2 =
        x.chunk(2, dim=-1)` and `cos`/`sin` split the same way (pairs of the last dimension
        for the interleaved form, then `torch.stack(..., dim=-1).flatten(-2)`).
    """
    pays_in = (FUSIONRT,)
    training_note = """
        With autograd on, backward keeps the halves and their cosines and sines: the first
        example writes fewer bytes (152 -> 104 KiB) in fewer kernels (9 -> 8) under fusionrt,
        but more tensors (12 -> 15 writes), so it is no longer cheaper on every count.
    """
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the rewrite depends on how the rotation splits the last dimension (halves or
        interleaved pairs), which is in another function's body, and it costs more kernels in
        eager PyTorch. Write it by hand where the code runs under a fusing backend.
    """
    examples = (
        Example(
            bad="""\
import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return (q * cos) + (rotate_half(q) * sin)
""",
            at=((10, 12),),
            fixed=None,
            good="""\
import torch


def apply_rotary(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    q1, q2 = q.chunk(2, dim=-1)
    cos1, cos2 = cos.chunk(2, dim=-1)
    sin1, sin2 = sin.chunk(2, dim=-1)
    return torch.cat((q1 * cos1 - q2 * sin1, q2 * cos2 + q1 * sin2), dim=-1)
""",
            call="apply_rotary(randn(2, 4, 16, 32), randn(2, 1, 16, 32), randn(2, 1, 16, 32))",
        ),
        Example(
            bad="""\
import torch


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(dim=-1)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary(t: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    return t * freqs.cos() + rotate_every_two(t) * freqs.sin()
""",
            at=((10, 12),),
            fixed=None,
            good="""\
import torch


def apply_rotary(t: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    t1, t2 = t.unflatten(-1, (-1, 2)).unbind(dim=-1)
    cos1, cos2 = freqs.cos().unflatten(-1, (-1, 2)).unbind(dim=-1)
    sin1, sin2 = freqs.sin().unflatten(-1, (-1, 2)).unbind(dim=-1)
    return torch.stack((t1 * cos1 - t2 * sin1, t2 * cos2 + t1 * sin2), dim=-1).flatten(-2)
""",
            call="apply_rotary(randn(2, 4, 16, 64), randn(16, 64))",
        ),
    )
    valid = (
        # the rotated tensor is another one; the rotation does not negate
        """\
import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_swap(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, x1), dim=-1)


def f(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    return q * cos + rotate_half(k) * sin, q * cos + rotate_swap(q) * sin
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _ROTATE_CALL

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return "*" in text and "+" in text and _ROTATE_CALL.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            sums = [op for part in own_parts(ref.node) for op in operations(part, (cst.Add,))]
            for total in sums:
                rotated = _rotated_term(scope.facts, total)
                if rotated is not None:
                    yield Violation(total, message=f"rotary embedding through a rotated copy (`{rotated}` concatenates): "
                                                   "rotate the halves element-wise and concatenate once")



def _rotated_term(facts: ModuleFacts, total: cst.BinaryOperation) -> str | None:
    """The name of the rotation in ``x * cos + rotate(x) * sin`` (either order), else None."""
    for plain, rotated in ((total.left, total.right), (total.right, total.left)):
        plain_factors = [code_of(f) for f in factors_of(plain)]
        for factor in factors_of(rotated):
            if not (isinstance(factor, cst.Call) and isinstance(factor.func, cst.Name) and len(factor.args) == 1):
                continue
            name = factor.func.value
            if code_of(factor.args[0].value) in plain_factors and _is_rotation(facts, name):
                return name
    return None



def _is_rotation(facts: ModuleFacts, name: str) -> bool:
    """A same-file function named ``rot...`` whose body joins a negated operand first."""
    if _ROTATE_NAME.search(name) is None:
        return False
    return any(_joins_negated(facts, node) for function in facts.functions.get(name, ()) for node in ast.walk(function))


def _joins_negated(facts: ModuleFacts, node: ast.AST) -> bool:
    """``torch.cat((-x2, x1), ...)`` / ``torch.stack([-x2, x1], ...)``."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], (ast.Tuple, ast.List))):
        return False
    dotted = dotted_path(ast_view, node.func)
    parts = node.args[0].elts
    return (
        dotted is not None and facts.canonical(dotted) in _JOINS and len(parts) == 2
        and isinstance(parts[0], ast.UnaryOp) and isinstance(parts[0].op, ast.USub)
    )
