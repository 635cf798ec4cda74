"""FL050: an element-wise op applied to an expanded view (``expand``, ``expand_as``,
``broadcast_to``) whose result the expansion alone sizes: the op writes the expanded size where,
applied before the expand, it would write the small one."""
from __future__ import annotations

import functools
import re
from itertools import repeat
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, children, root_name
from fusionlint.analysis.flow import statements_after
from fusionlint.analysis.nodes import code_of, expand_sizes, parent_map
from fusionlint.analysis.numbers import NumberNames, int_literal
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, DATA_SHAPED, ELEMENTWISE, FUSED_REDUCTIONS, OpTables
from fusionlint.rule import Example, Rule, Violation

_NEEDLE = re.compile(r"expand(?:_as)?\s*\(|broadcast_to\s*\(")
# The text tests: an operator or an element-wise call (``-1`` sizes removed first), a binding, and
# an element-wise read of the bound name.
_MINUS_ONE = re.compile(r"-\s*1\b|(?<=[(,])\s*\*")  # -1 sizes and star arguments: no ops
_OPERATOR = re.compile(r"[-+*/%&|^<>~]|[=!]=|\)\s*\.\s*(?:eq|ne|gt|ge|lt|le|logical_\w+|clamp\w*|to(?=\s*\([^)]*(?:dtype|torch\.)))\s*\("
                       r"|\b(?:logical_\w+|where|eq|ne|gt|ge|lt|le|maximum|minimum)\s*\(")
# An expand's arguments (sizes: `expand(b, n * h, -1)`), which hold no op on the expanded view.
_EXPAND_ARGS = re.compile(r"(expand(?:_as)?|broadcast_to)\s*\((?:[^()]|\([^()]*\))*\)")
_REBOUND = re.compile(r"\s*(\w+)\s*=\s*\1\b")  # a name bound to a view of itself
_LEAVES = re.compile(r"\s*(?:return|raise)\b")
_BINDING = re.compile(r"\s*(\w+)\s*=(?!=)")
_READ = (r"(?:[-+*/%&|^<>~]|[=!]=)\s*\(?\s*{name}\b"
         r"|\b{name}\s*(?:[-+*/%&|^<>]|[=!]=|\.\s*(?:eq|ne|gt|ge|lt|le|logical_\w+|clamp\w*|to(?=\s*\([^)]*(?:dtype|torch\.)))\s*\()"
         r"|\b(?:logical_\w+|where|eq|ne|gt|ge|lt|le|maximum|minimum)\s*\([^()]*\b{name}\b")


@functools.lru_cache(maxsize=1024)
def _reads_of(name: str) -> re.Pattern[str]:
    return re.compile(_READ.format(name=re.escape(name)))


_BINARY = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
           cst.BitAnd, cst.BitOr, cst.BitXor)
_COMPARE = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
_UNARY = (cst.BitInvert, cst.Minus)
# Casts: no operands. A cast to the dtype a tensor has already returns it, so only ``.to(<dtype>)``
# of a mask (a comparison, or a name saying so: attention masks are held as ints or bools) counts
# as an op; ``.to(device)``, ``.float()``, a parameter's ``.to(dtype)`` may copy nothing.
_CASTS = frozenset({"to", "type_as", "float", "double", "half", "bfloat16", "int", "long", "bool"})
_DTYPE = re.compile(r"dtype|\btorch\.(?:float|half|bfloat16|double|u?int|long|bool|complex)\w*$")
_MASKED = frozenset({"masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select"})
_NOT_OPERANDS = frozenset({"dtype", "device", "memory_format", "non_blocking", "copy"})
_WHOLE_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "std", "var"})
_DEPTH = 3  # names followed from an op's result to its readers
_NEAR = 12  # statements after a binding searched for its reads
_MESSAGE = ("an element-wise op on an expanded view writes the expanded size: apply it to the unexpanded "
            "tensor(s) and expand after (or let broadcasting do it)")


class ElementwiseOnExpanded(Rule):
    code = "FL050"
    name = "elementwise-on-expanded"
    message = "an element-wise op applied to an expanded view: apply it before the expand"
    rationale = """
        `x.expand(...)`, `x.expand_as(y)` and `torch.broadcast_to(x, shape)` are free views: the
        repeats are not written. An element-wise op applied to such a view (a comparison, a cast,
        a logical op, arithmetic with a number) writes its result at the expanded size, every
        repeat computed and written again; applied to `x` itself it writes `x`'s size, and the
        expand after it (a view again), or the broadcasting of the op that reads it, gives the
        same values. speechbrain's CTC scorer compares a padding mask expanded over the
        vocabulary (`mask.unsqueeze(-1).expand(-1, -1, V).eq(1)`) where `mask.eq(1).unsqueeze(-1)`
        gives `masked_fill_` the same mask; its attention unions two masks expanded to `(B,
        heads, K, K)` where `logical_or` of the unexpanded `(B, 1, 1, K)` and `(1, 1, K, K)`
        masks writes `(B, 1, K, K)`.

        Flagged: a tensor expanded (also bound to a name first, every binding of which is an
        expand) and read by an element-wise operator (`+ - * / // % ** & | ^`, a comparison,
        `~`, unary `-`), an element-wise tensor method (`.eq(1)`, `.logical_not()`,
        `.clamp(...)`), a mask's cast to a dtype (`.to(dtype)` of a comparison or of a tensor
        named a mask: attention masks are held as ints or bools) or an element-wise torch
        function (`torch.logical_or`, `torch.where`), where every other operand is known to be
        no bigger than what the expansion alone sizes: a number, a 0-d tensor
        (`torch.tensor(number)`, `x.max()`), or a tensor with a dimension of size 1 (`[...,
        None]`, `unsqueeze`, a `view` with a literal 1, itself expanded) at a dimension the
        expand enlarges (one it gives a size other than -1 or 1, or any, for `expand_as` and
        `broadcast_to`). Then the result of the op on the unexpanded tensors is strictly
        smaller. The reads of a name are searched in the 12 statements after its binding.

        Where it pays: eager writes every element-wise op's output, so it pays there always.
        fusionrt fuses the op with its readers and reads the view as it is, so it pays only
        where the result (or the element-wise chain of small operands it starts) is written:
        returned, stored, a mask of `masked_fill`, an input of a compute-bound op that is not a
        fused reduction (`scaled_dot_product_attention`, a matmul), an index; a finding says
        so. Read by an element-wise op with a full-size operand (`x + e.expand_as(x) * 2`, sam2's
        `maskmem_features += (1 - is_obj[..., None, None]) * embed[..., None, None].expand(*shape)`),
        the result is fused and the finding pays in eager only.

        Not flagged: an expanded tensor read with a full-size operand (`x * scale.expand_as(x)`:
        the result is full-size anyway), two tensors expanded along different dimensions (an
        outer product: `a[:, None].expand(n, m) < b[None, :].expand(n, m)`), an expand whose
        source dimensions are not known where the other operand is a tensor, a cast that may
        copy nothing (`.to(device)`, `.float()`, a parameter's `.to(dtype)`: a tensor of that
        dtype already is returned as it is), copies of an expand (`.contiguous()`, `.clone()`:
        FL007), repeats and expands flattened (FL049).
    """
    use_instead = """
        `mask.eq(1).unsqueeze(-1)` for `mask.unsqueeze(-1).expand(-1, -1, v).eq(1)` (expand the
        result only where a reader needs the shape spelled out: `.expand(...)` of the result is
        free); `torch.logical_or(a.view(1, 1, k, k), b.view(n, 1, 1, k))` for the same masks
        expanded to `(n, h, k, k)` first; `(1 - g[..., None, None]) * e[..., None, None]` for
        `(1 - g[..., None, None]) * e[..., None, None].expand(*x.shape)` added to `x`.
    """
    pays_in = (FUSIONRT, EAGER)
    training_note = """
        With autograd on, the smaller mask of `masked_fill` costs fusionrt a kernel in the
        backward (the first example: 2 -> 3 kernels, though 73,732 -> 65,668 bytes written);
        the rewrites whose result is kept or read by an attention still pay (11 -> 9 writes).
    """
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: moving the op before the expand changes the shape its readers see where they
        do not broadcast (a `masked_fill_` of the expanded shape in place, an index), which the
        code does not say.
    """
    examples = (
        Example(
            bad="""\
import torch


def fill(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = lengths.unsqueeze(-1).expand(-1, -1, x.size(-1)).gt(0)
    return x.masked_fill(mask, -1e4)
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def fill(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = lengths.gt(0).unsqueeze(-1)
    return x.masked_fill(mask, -1e4)
""",
            call="fill(randn(4, 32, 64), randn(4, 32))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, padding: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    b, h, k, _ = q.shape
    key_padding_mask = (padding > 0).view(b, 1, 1, k).expand(b, h, k, k)
    attn_mask = (causal > 0).view(1, 1, k, k).expand(b, h, k, k)
    final_mask = torch.logical_or(attn_mask, key_padding_mask)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=final_mask)
""",
            at=((9, 18),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, padding: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    b, h, k, _ = q.shape
    final_mask = torch.logical_or((causal > 0).view(1, 1, k, k), (padding > 0).view(b, 1, 1, k))
    return F.scaled_dot_product_attention(q, q, q, attn_mask=final_mask)
""",
            call="attend(randn(2, 4, 16, 8), randn(2, 16), randn(16, 16))",
        ),
        Example(
            bad="""\
import torch


def offsets(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.tanh(bias).unsqueeze(0).expand_as(x) * 0.5
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def offsets(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (torch.tanh(bias) * 0.5).unsqueeze(0).expand_as(x)
""",
            call="offsets(randn(64, 128), randn(128))",
        ),
    )
    valid = (
        # the other operand is full-size; an outer product of two expands; a copy of an expand;
        # an expand read by a gather; an expand of unknown source dims compared with a tensor
        """\
import torch


def scaled(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale.expand_as(x)


def where(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask[:, None].expand(-1, x.size(1)), x, 0.0)


def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    n, m = a.size(0), b.size(0)
    return a[:, None].expand(n, m) < b[None, :].expand(n, m)


def copied(a: torch.Tensor, n: int) -> torch.Tensor:
    return a.unsqueeze(0).expand(n, -1).contiguous() * 2


def gathered(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.size(-1)))


def unknown(a: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
    return a.expand(n, -1, -1) > b
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """An expand in a statement that applies an element-wise op (a sign, a comparison, a
        method call after a closing parenthesis), or binds it to a name that one of the next
        statements of its block reads so, or rebinds a name to its own expanded view near the block's
        end (the reads may follow the block)."""
        text = block[index]
        if _NEEDLE.search(text) is None:
            return False
        if _OPERATOR.search(_MINUS_ONE.sub("", _EXPAND_ARGS.sub(r"\1()", text))):
            return True
        bound = _BINDING.match(text)
        if bound is None:
            return False
        later = range(index + 1, min(len(block), index + 1 + _NEAR))
        if index >= len(block) - 3 and _REBOUND.match(text) and not any(_LEAVES.match(block[i]) for i in later):
            return True  # `m = m.view(...).expand(...)` near a block's end: the reads may follow the block
        name = bound.group(1)
        if not any(name in block[i] for i in later):
            return False
        read = _reads_of(name)
        return any(read.search(block[i]) for i in later)

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.dynamic or scope.is_module:
            return
        shapes = _Shapes(scope)
        seen: set[int] = set()
        for key in ("expand", "expand_as", "broadcast_to"):
            for site in scope.sites.get(key, ()):
                if site.conditional or shapes.expanded(site.node) is None:  # type: ignore[arg-type]
                    continue
                for op, pays in shapes.ops_on(site.node, site.statement):  # type: ignore[arg-type]
                    if id(op) not in seen:
                        seen.add(id(op))
                        yield Violation(op, message=_MESSAGE, pays_in=() if pays else (EAGER,))


# A shape as far as the code tells: (rank or None, the dims known to be of size 1, counted from
# the right: -1 is the last). A number is of rank 0: every dim broadcasts.
_Shape = tuple[int | None, frozenset[int]]
_UNKNOWN: _Shape = (None, frozenset())
_NUMBER: _Shape = (0, frozenset())
# What an expand enlarges: the dims (from the right), or None for "some, not known which" (a shape
# given by another tensor, or sizes of a source whose shape is not known).
_Expanded = frozenset[int] | None


def _unit(shape: _Shape, dim: int) -> bool:
    """Is ``dim`` (from the right) of size 1 in ``shape``, or absent (it broadcasts)?"""
    rank, ones = shape
    return dim in ones or (rank is not None and dim < -rank)


class _Shapes:
    """The shapes of a scope's expressions as far as the code spells them out, and the
    element-wise ops on its expands."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.numbers = NumberNames(scope)
        self.named: dict[str, list[cst.BaseExpression] | None] = {}
        self.expands: dict[int, tuple[_Expanded] | None] = {}  # by node id: the nodes live as long as this

    # --- expands ---------------------------------------------------------------------------

    def expanded(self, node: cst.BaseExpression) -> tuple[_Expanded] | None:
        """(what it enlarges,) for an expand of a tensor, else None."""
        key = id(node)
        if key not in self.expands:
            self.expands[key] = self._expanded(node)
        return self.expands[key]

    def _expanded(self, node: cst.BaseExpression) -> tuple[_Expanded] | None:
        call = node
        if not isinstance(call, cst.Call) or any(a.keyword is not None for a in call.args) or not call.args:
            return None
        func = call.func
        if self.scope.torch_name(func) == "torch.broadcast_to" and len(call.args) == 2:
            source, args, name = call.args[0].value, call.args[1:], "broadcast_to"
        elif isinstance(func, cst.Attribute) and func.attr.value in ("expand", "expand_as", "broadcast_to"):
            source, args, name = func.value, call.args, func.attr.value
        else:
            return None
        # a member of the module (``self.embed[..., None]``: the class may inherit it from another file)
        if not self.scope.is_tensor(source) and not (name != "broadcast_to" and root_name(source) == "self"):
            return None
        sizes = expand_sizes(args) if name == "expand" else None
        if sizes is None:  # a shape given by another tensor: it enlarges the source's unit dims
            rank, ones = self.shape(source, None)
            if rank is None:
                return (ones or None,)
            return (ones | frozenset(range(-rank - 4, -rank)),)
        n = len(sizes)
        rank, ones = self.shape(source, n)
        given = [size for size in sizes if int_literal(size) not in (-1, 1)]
        if not given:
            return None
        dims = frozenset(d for d in range(-n, 0) if int_literal(sizes[n + d]) not in (-1, 1) and _unit((rank, ones), d))
        if dims:
            return (dims,)
        return (None,) if rank is None else None

    def value_expanded(self, expr: cst.BaseExpression, ref: StatementRef) -> tuple[_Expanded] | None:
        """What ``expr`` enlarges: an expand, or a name every binding of which is one."""
        found = self.expanded(expr)
        if found is not None:
            return found
        if isinstance(expr, cst.Name):
            values = self._bindings(expr.value)
            if not values:
                return None
            results = [self.expanded(v) for v in values]
            if any(r is None for r in results):
                return None
            dims = [r[0] for r in results]  # type: ignore[index]
            if any(d is None for d in dims):
                return (None,)
            return (frozenset.intersection(*dims),)  # type: ignore[arg-type]
        return None

    def _mask(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` (an expand, or a name bound to them) an expand of a mask: a comparison, or a
        tensor whose name says it is one?"""
        values = self._bindings(expr.value) if isinstance(expr, cst.Name) else [expr]
        if not values:
            return False
        for value in values:
            source = value.func.value if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) else None
            while isinstance(source, (cst.Call, cst.Subscript)):
                if isinstance(source, cst.Subscript):
                    source = source.value
                elif isinstance(source.func, cst.Attribute):
                    source = source.func.value
                else:
                    break
            if isinstance(source, cst.Comparison):
                continue
            name = root_name(source) if source is not None else None
            if name is None or name == "self" or "mask" not in name.lower():
                return False
        return True

    def _bindings(self, name: str) -> list[cst.BaseExpression] | None:
        if name not in self.named:
            scope = self.scope
            values = [v for t, v in scope.assignments if isinstance(t, cst.Name) and t.value == name]
            loops = any(isinstance(t, cst.Name) and t.value == name for t, _ in (*scope.loops, *scope.comprehensions))
            self.named[name] = None if loops or name in scope.escaped else values
        return self.named[name]

    # --- shapes ------------------------------------------------------------------------------

    def shape(self, expr: cst.BaseExpression, rank: int | None, depth: int = 0) -> _Shape:
        """What the code tells of ``expr``'s shape; ``rank``: its rank where the reader knows it
        (the number of sizes an expand gives), to count dims given from the left."""
        if self.is_number(expr):
            return _NUMBER
        if depth > 4:
            return _UNKNOWN
        scope = self.scope
        if isinstance(expr, cst.Name):
            values = self._bindings(expr.value)
            if not values or expr.value in scope.params or len(values) > 1:
                return _UNKNOWN
            return self.shape(values[0], rank, depth + 1)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, _UNARY):
            return self.shape(expr.expression, rank, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _BINARY):
            return _common(self.shape(expr.left, rank, depth + 1), self.shape(expr.right, rank, depth + 1))
        if isinstance(expr, cst.IfExp):
            return _common(self.shape(expr.body, rank, depth + 1), self.shape(expr.orelse, rank, depth + 1))
        if isinstance(expr, cst.Subscript):
            return self._indexed(expr, rank, depth)
        if not isinstance(expr, cst.Call):
            return _UNKNOWN
        func = expr.func
        canonical = scope.torch_name(func)
        if canonical == "torch.tensor":
            return _NUMBER if expr.args and self.is_number(expr.args[0].value) else _UNKNOWN
        if canonical == "torch.arange":
            return (1, frozenset())
        if not isinstance(func, cst.Attribute) or not scope.is_tensor(func.value):
            return _UNKNOWN
        method = func.attr.value
        if not expr.args and method in _WHOLE_REDUCTIONS:
            return _NUMBER  # a 0-d tensor
        if method in ("view", "reshape"):
            sizes = expand_sizes(expr.args)
            if sizes is None or any(isinstance(s, (cst.Tuple, cst.List)) for s in sizes):
                return _UNKNOWN
            n = len(sizes)
            return n, frozenset(i - n for i, s in enumerate(sizes) if int_literal(s) == 1)
        if method == "unsqueeze" and len(expr.args) == 1:
            dim = int_literal(expr.args[0].value)
            if dim is None:
                return _UNKNOWN
            if dim >= 0:
                if rank is None:
                    return _UNKNOWN
                dim -= rank
            base_rank, ones = self.shape(func.value, None if rank is None else rank - 1, depth + 1)
            return (None if base_rank is None else base_rank + 1,
                    frozenset({dim} | {d if d > dim else d - 1 for d in ones}))
        if scope.ops.op_class(method) == ELEMENTWISE and (method in _CASTS or all(
                self.is_number(a.value) for a in expr.args if a.keyword is None)):
            return self.shape(func.value, rank, depth + 1)
        return _UNKNOWN

    def _indexed(self, expr: cst.Subscript, rank: int | None, depth: int) -> _Shape:
        """``x[..., None, None]``, ``x[:, None]``: new unit dims (only ``None``, ``:`` and ``...``)."""
        items = []
        for element in expr.slice:
            index = element.slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Name) and index.value.value == "None":
                items.append("new")
            elif isinstance(index, cst.Index) and isinstance(index.value, cst.Ellipsis):
                items.append("...")
            elif isinstance(index, cst.Slice) and index.lower is None and index.upper is None and index.step is None:
                items.append(":")
            else:
                return _UNKNOWN
        base_rank, _ = self.shape(expr.value, None, depth + 1)
        new = items.count("new")
        out_rank = base_rank + new if base_rank is not None else rank
        if "..." in items:
            tail = items[items.index("...") + 1:]
            ones = {i - len(tail) for i, item in enumerate(tail) if item == "new"}
            head = items[:items.index("...")]
            if out_rank is not None:
                ones |= {i - out_rank for i, item in enumerate(head) if item == "new"}
            return out_rank, frozenset(ones)
        if out_rank is None:
            return _UNKNOWN
        return out_rank, frozenset(i - out_rank for i, item in enumerate(items) if item == "new")

    def is_number(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return True
        return self.numbers.is_number(expr)

    # --- the element-wise ops on an expand ---------------------------------------------------

    def ops_on(self, expand: cst.Call, ref: StatementRef) -> Iterator[tuple[cst.CSTNode, bool]]:
        """(op, pays under fusionrt) for each element-wise op reading ``expand`` (in its
        statement, or through the one name its statement binds it to) whose result the
        expansion alone sizes."""
        name = ref.name_bound_to(expand)
        if name is None:
            parents = parent_map(ref.node)
            found = self._op_of(expand, parents, ref)
            if found is not None:
                yield found[0], self._written(found[0], found[1], parents, ref, 0)
            return
        if self.value_expanded(cst.Name(name), ref) is None:
            return
        for node, parents, later in _reads(self.scope, ref, name):
            found = self._op_of(node, parents, later)
            if found is not None:
                yield found[0], self._written(found[0], found[1], parents, later, 0)

    def _op_of(self, node: cst.BaseExpression, parents: dict[int, cst.CSTNode], ref: StatementRef
               ) -> tuple[cst.CSTNode, _Expanded] | None:
        """(the element-wise op reading ``node``, the dims of its result that the unexpanded
        operands leave of size 1) where every other operand is small enough, else None."""
        found = self.value_expanded(node, ref)
        if found is None:
            return None
        dims = found[0]
        op, others = _elementwise_reader(self.scope, node, parents)
        if op is None or isinstance(op, cst.Call) and isinstance(op.func, cst.Attribute) \
                and op.func.attr.value == "to" and not self._mask(node):
            return None
        tensors = [o for o in others if not self.is_number(o)]
        if not tensors:
            return op, dims
        if not dims:
            return None
        for other in tensors:
            expanded = self.value_expanded(other, ref)
            if expanded is not None:
                if expanded[0] is None:
                    return None
                dims = dims & expanded[0]
            else:
                shape = self.shape(other, None)
                dims = frozenset(d for d in dims if _unit(shape, d))
        return (op, dims) if dims else None

    def _written(self, node: cst.CSTNode, dims: _Expanded, parents: dict[int, cst.CSTNode], ref: StatementRef,
                 depth: int) -> bool:
        """Is the result of ``node`` (of unit ``dims`` unexpanded), or of the chain of element-wise
        ops with small operands it starts, written under fusionrt (returned, kept, a mask, an
        input of a compute-bound op that is no fused reduction, an index)?"""
        while True:
            op, others = _elementwise_reader(self.scope, node, parents)
            if op is None:
                break
            for other in others:
                if self.is_number(other):
                    continue
                if dims is None:
                    return False
                shape = self.shape(other, None)
                dims = frozenset(d for d in dims if _unit(shape, d))
                if not dims:
                    return False  # a full-size operand: the chain fuses into its op
            node = op
        parent = parents.get(id(node))
        if isinstance(parent, cst.Tuple):
            parent = parents.get(id(parent))
        if isinstance(parent, cst.Return):
            return True
        if isinstance(parent, cst.SubscriptElement) or isinstance(parent, cst.Index):
            return True
        if isinstance(parent, cst.Arg):
            call = parents.get(id(parent))
            if not isinstance(call, cst.Call):
                return False
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _MASKED:
                return call.args.index(parent) == 0 or (parent.keyword is not None and parent.keyword.value == "mask")
            op = self.scope.op(call)
            return op is not None and op[1] == COMPUTE and op[0] not in FUSED_REDUCTIONS
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = parents.get(id(parent))
            method = parent.attr.value
            return isinstance(call, cst.Call) and (method in DATA_SHAPED or (
                self.scope.ops.op_class(method) == COMPUTE and method not in FUSED_REDUCTIONS))
        if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
            target = parent.targets[0].target
            if not isinstance(target, cst.Name):
                return True  # stored on an object or in a container: kept
            if depth >= _DEPTH:
                return False
            return any(self._written(read, dims, read_parents, later, depth + 1)
                       for read, read_parents, later in _reads(self.scope, ref, target.value))
        return False


def _common(a: _Shape, b: _Shape) -> _Shape:
    """The shape broadcasting gives two operands: a dim is of size 1 where it is in both."""
    (ra, oa), (rb, ob) = a, b
    rank = None if ra is None or rb is None else max(ra, rb)
    dims = {d for d in oa | ob if _unit(a, d) and _unit(b, d)}
    return rank, frozenset(dims)


def _elementwise_reader(scope: Scope, node: cst.CSTNode, parents: dict[int, cst.CSTNode]
                        ) -> tuple[cst.CSTNode | None, list[cst.BaseExpression]]:
    """(the element-wise op with ``node`` as an operand, its other operands), or (None, [])."""
    parent = parents.get(id(node))
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, _UNARY):
        return parent, []
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _BINARY):
        return parent, [parent.right if parent.left is node else parent.left]
    if isinstance(parent, cst.ComparisonTarget):
        comparison = parents.get(id(parent))
        if isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1 \
                and isinstance(parent.operator, _COMPARE):
            return comparison, [comparison.left]
        return None, []
    if isinstance(parent, cst.Comparison) and parent.left is node and len(parent.comparisons) == 1 \
            and isinstance(parent.comparisons[0].operator, _COMPARE):
        return parent, [parent.comparisons[0].comparator]
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = parents.get(id(parent))
        method = parent.attr.value
        if not isinstance(call, cst.Call) or call.func is not parent or scope.ops.op_class(method) != ELEMENTWISE \
                or method.endswith("_") or any(a.star for a in call.args):
            return None, []
        if method in _CASTS:
            dtype = any(a.keyword is not None and a.keyword.value == "dtype"
                        or a.keyword is None and _DTYPE.search(code_of(a.value)) for a in call.args)
            return (call, []) if method == "to" and dtype else (None, [])
        return call, [a.value for a in call.args if a.keyword is None or a.keyword.value not in _NOT_OPERANDS]
    if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
        call = parents.get(id(parent))
        if not isinstance(call, cst.Call):
            return None, []
        canonical = scope.torch_name(call.func)
        module, _, name = (canonical or "").rpartition(".")
        if module not in ("torch", "torch.nn.functional") or scope.ops.op_class(name) != ELEMENTWISE \
                or name.endswith("_") or name in _MASKED or any(a.star or a.keyword is not None and a.keyword.value == "out"
                                                                 for a in call.args):
            return None, []
        return call, [a.value for a in call.args if a is not parent
                      and (a.keyword is None or a.keyword.value not in _NOT_OPERANDS)]
    return None, []


def _reads(scope: Scope, ref: StatementRef, name: str
           ) -> Iterator[tuple[cst.Name, dict[int, cst.CSTNode], StatementRef]]:
    """Each read of ``name`` in the ``_NEAR`` statements after ``ref`` binds it, up to the next
    simple statement that binds it again: (the node, the parents in its statement, the statement)."""
    for count, later in enumerate(statements_after(ref)):
        if later.node is ref.node or count >= _NEAR:
            return  # a loop comes back to the binding
        found = list(_named(later.node, name))
        if not found:
            continue
        parents = parent_map(later.node)
        rebound = False
        for node, parent in found:
            if isinstance(parent, (cst.AssignTarget, cst.AugAssign)):
                rebound = True
            else:
                yield node, parents, later
        if rebound and isinstance(later.node, cst.SimpleStatementLine):
            return


def _named(root: cst.CSTNode, name: str) -> Iterator[tuple[cst.Name, cst.CSTNode | None]]:
    """The variables ``name`` in ``root`` (not in nested definitions), each with its parent."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        if type(node) is cst.Name:
            if node.value == name and not (type(parent) is cst.Attribute and parent.attr is node):  # type: ignore[union-attr]
                yield node, parent
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(zip(reversed(children(node)), repeat(node)))

