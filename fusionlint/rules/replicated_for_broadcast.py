"""FL049: a tensor materialized by replication whose readers would broadcast it instead: keys and
values ``repeat_interleave``d per query group only for ``F.scaled_dot_product_attention``, which
pairs each key/value head with its group of query heads itself (``enable_gqa=True``), and an
expand flattened (a copy) or a repeat/tile only to be read element-wise."""
from __future__ import annotations

import ast
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, children, names_of, root_name
from fusionlint.analysis.nodes import code_of, expand_sizes, parent_map
from fusionlint.analysis.numbers import int_literal
from fusionlint.analysis.views import ast_view, dotted_path
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

_NEEDLE = re.compile(r"repeat_interleave\s*\(|expand\s*\(|tile\s*\(|repeat\s*\(")
_REPEATS = re.compile(r"repeat_interleave\s*\(|tile\s*\(|repeat\s*\(")
# an expand flattened in the same expression
_EXPAND_MERGED = re.compile(r"expand\s*\(.*\)\s*\.\s*flatten\s*\(")
_SDPA = "torch.nn.functional.scaled_dot_product_attention"
# Binary operators that broadcast their operands element by element.
_ELEMENTWISE = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
_MERGED = ("an expanded tensor flattened (which copies every repeat) only to be read element-wise: view the other "
           "operand with the repeated dimension split out, let the unexpanded tensor broadcast, and flatten the result")
_TILED = ("a tensor tiled (`repeat`/`tile` writes every copy) only to be read element-wise: let it broadcast, "
          "viewing the other operand with each tiled dimension split out where it is not of size 1")
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
_GROUPED = ("keys and values repeated per query group only for `scaled_dot_product_attention`: pass "
            "`enable_gqa=True` (torch >= 2.5) and the grouped heads as they are")


class ReplicatedForBroadcast(Rule):
    code = "FL049"
    name = "replicated-for-broadcast"
    message = "a tensor replicated only to be read where broadcasting would do: drop the copies"
    rationale = """
        A tensor materialized by replication writes every copy to memory, and its readers read
        them back, where the readers could take the one tensor. Grouped-query attention's keys
        and values are the common case: `k.repeat_interleave(n_rep, dim=1)` writes each
        key/value head once per query head of its group, only for
        `F.scaled_dot_product_attention` to read them; with `enable_gqa=True` (torch >= 2.5)
        the attention pairs query head `i` with key/value head `i // n_rep` itself, the pairing
        `repeat_interleave` makes, and reads the grouped heads as they are (fusionrt 2 -> 1
        kernels, eager 3 -> 1, on a (2, 8, 16, 16) query with two key/value heads).

        Flagged: the key and the value of one `F.scaled_dot_product_attention` call (positional
        or `key=`/`value=`) each bound to a name by a `repeat_interleave` by the same count
        (not a tensor of counts) over the heads dimension (`dim=1` or `-3`; `dim=2` or `-2` read
        through `.transpose(1, 2)`), possibly in an `if` before the call, and read nowhere else
        afterwards; also where the call is of a method of the class or a function of the file
        whose parameter is the attention's key or value (litgpt's
        `self.scaled_dot_product_attention(q, k, v, mask)`). Reported at the key's repeat.
        And an expand merged with another dimension by a `flatten` (a copy, as the
        expanded dimension has no stride of its own: `f.unsqueeze(2).expand(-1, -1, r,
        -1).flatten(1, 2)`), bound to a name whose every later read is an operand of an
        element-wise arithmetic operator (`+ - * / // % **`) or a comparison whose other operand
        is a tensor: viewing that operand with the repeated dimension split out lets the
        unexpanded tensor broadcast (sam2's `apply_rotary_enc` with `repeat_freqs_k`: fusionrt
        and eager 2 -> 1 kernels and writes). Not a `reshape`, whose merged dimensions are not
        written out: a batch expand reshaped (swin's window mask) is added to an operand of
        batch 1, where the expand gives the result its size.

        And a `.repeat(...)` or `.tile(...)` of a tensor read so, or the operand of such an
        operator itself: a dimension of size 1 broadcasts as it is (`d1_sq.repeat(1, n) +
        d2_sq.repeat(1, m).t()`, a squeeze-excite's `x * avg.repeat(1, t, 1)`), another one
        where the other operand is viewed with the tiled dimension split out (`(x.view(b, 4, c)
        * g).view(b, 4 * c)` for `x * g.repeat(4)`; sam2's window embedding tiled over the
        position embedding): fusionrt and eager 2 -> 1 kernels and writes. A repeat of
        dimensions known to be of size 1 that any reader could take expanded is FL007's, which
        this rule yields to.

        Not flagged: a repeat read again after the attention, returned or stored; a `.repeat()`
        (a tile, whose pairing `enable_gqa` does not make); a key repeated where the value is
        not, or by another count; an attention call that already passes `enable_gqa`; a key
        whose head the function joins from other tensors (`k = torch.cat((k_pass, k_rope),
        dim=-1)`, multi-head latent attention's decoupled rotary) where the value's is not: the
        head sizes differ, and no kernel groups such heads (litgpt measures 10 -> 10 kernels).
    """
    use_instead = """
        `F.scaled_dot_product_attention(q, k, v, ..., enable_gqa=True)` with the key/value
        heads as they are; where a callee also computes the attention by hand (a softcapping
        path), keep the repeat on that path only. `(x.view(b, n, r, c) * f.unsqueeze(2)).view(b,
        n * r, c)` for `x * f.unsqueeze(2).expand(-1, -1, r, -1).flatten(1, 2)`, and
        `(x.view(b, 4, c) * g).view(b, 4 * c)` for `x * g.repeat(4)`.
    """
    pays_in = (FUSIONRT, EAGER)
    yields_to = frozenset({"FL007"})
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: `enable_gqa` needs torch 2.5, and a callee may read the repeated heads on
        another path (attention by hand), which would need the repeat there; splitting the
        other operand of an expanded tensor's reader needs its sizes, which the code does not
        spell out.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2)
""",
            at=((6, 9),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return y.transpose(1, 2)
""",
            call="attend(randn(2, 8, 16, 16), randn(2, 2, 16, 16), randn(2, 2, 16, 16))",
        ),
        Example(
            bad="""\
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if k.size(1) != q.size(1):
            q_per_kv = q.size(1) // k.size(1)
            k = torch.repeat_interleave(k, q_per_kv, dim=1)
            v = torch.repeat_interleave(v, q_per_kv, dim=1)
        return self.attend(q, k, v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, scale=0.25)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return Attention()(q, k, v)
""",
            at=((9, 17),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attend(q, k, v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, scale=0.25, enable_gqa=True)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return Attention()(q, k, v)
""",
            call="run(randn(2, 8, 16, 16), randn(2, 2, 16, 16), randn(2, 2, 16, 16))",
        ),
        Example(
            bad="""\
import torch


def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    f = freqs.unsqueeze(2).expand(-1, -1, 4, -1).flatten(1, 2)
    return x * f
""",
            at=((5, 9),),
            fixed=None,
            good="""\
import torch


def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    b, n, c = freqs.shape
    return (x.view(b, n, 4, c) * freqs.unsqueeze(2)).view(b, n * 4, c)
""",
            call="rotate(randn(2, 64, 32), randn(2, 16, 32))",
        ),
        Example(
            bad="""\
import torch


def scaled(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return x * g.repeat(4)
""",
            at=((5, 16),),
            fixed=None,
            good="""\
import torch


def scaled(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    b, n = x.shape
    return (x.view(b, 4, -1) * g).view(b, n)
""",
            call="scaled(randn(8, 256), randn(64))",
        ),
    )
    valid = (
        # the repeated key is read again after the attention; only the value is repeated; the
        # repeat is over the sequence; a tile (`.repeat`); the call already groups the heads
        """\
import torch
import torch.nn.functional as F


def read_again(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    y = F.scaled_dot_product_attention(q, k, v)
    return y + k.sum()


def value_only(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    v = v.repeat_interleave(4, dim=1)
    return F.scaled_dot_product_attention(q, k, v)


def over_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=2)
    v = v.repeat_interleave(4, dim=2)
    return F.scaled_dot_product_attention(q, k, v)


def tiled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat(1, 4, 1, 1)
    v = v.repeat(1, 4, 1, 1)
    return F.scaled_dot_product_attention(q, k, v)


def counts_differ(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(2, dim=1)
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
""",
        # an expanded tensor flattened where the flatten keeps the expanded dimension apart (a
        # view), read by a matmul, or returned
        """\
import torch


def kept_apart(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1, -1).flatten(2, 3)
    return x * g


def matmul(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1).flatten(0, 1)
    return x @ g


def returned(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = f.unsqueeze(1).expand(-1, 4, -1).flatten(0, 1)
    return g, x * g


def gathered(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    index = idx.repeat(1, 4)
    return torch.gather(x, 1, index) * 2
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _REPEATS.search(text) is not None or _EXPAND_MERGED.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.dynamic or scope.is_module:
            return
        grouped: dict[int, dict[str, tuple[cst.Call, str, bool]]] = {}
        for site in scope.sites.get("repeat_interleave", ()):
            repeat = None if site.conditional else _repeat_interleave(scope, site.node)  # type: ignore[arg-type]
            name = site.statement.name_bound_to(site.node)
            if repeat is None or name is None or name in scope.escaped:
                continue
            read = _attention_read(scope, site.statement, name, repeat[1])
            if read is not None:
                grouped.setdefault(id(read[0]), {})[read[1]] = (repeat[0], repeat[2], _joined_head(scope, repeat[3]))
        for site in (*scope.sites.get("flatten", ()), *scope.sites.get("tile", ()), *scope.sites.get("repeat", ())):
            if site.conditional or not (_merges_expanded(scope, site.node) or _tiled(scope, site.node)):  # type: ignore[arg-type]
                continue
            name = site.statement.name_bound_to(site.node)
            if name is None:
                read = _broadcast_operand(scope, site.node, parent_map(site.statement.node))
            else:
                read = name not in scope.escaped and _only_elementwise(scope, site.statement, name)
            if read:
                yield Violation(site.node, message=_MERGED if site.node.func.attr.value == "flatten" else _TILED)
        for roles in grouped.values():
            key, value = roles.get("key"), roles.get("value")
            # a key whose head is joined from other tensors (decoupled rotary, MLA) where the
            # value's is not: their head sizes differ, and no kernel groups such heads
            if key is not None and value is not None and key[1] == value[1] and key[2] <= value[2]:
                yield Violation(key[0], message=_GROUPED)


def _merges_expanded(scope: Scope, call: cst.Call) -> bool:
    """Is ``call`` a ``flatten`` of ``x.expand(...)`` (a tensor ``x``, its sizes written out) that
    merges an expanded dimension (one given a size other than -1) with another, which only a copy
    can do? Not a reshape: which dimensions it merges is not written out, and a batch expand
    reshaped (swin's window mask) is read with operands of batch 1, whose result the expand sizes."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "flatten":
        return False
    expand = func.value
    if not (isinstance(expand, cst.Call) and isinstance(expand.func, cst.Attribute) and expand.func.attr.value == "expand"
            and scope.is_tensor(expand.func.value)):
        return False
    sizes = expand_sizes(expand.args)
    if sizes is None:
        return False
    expanded = [i for i, size in enumerate(sizes) if int_literal(size) != -1]
    if not expanded:
        return False
    if any(a.keyword is not None and a.keyword.value not in ("start_dim", "end_dim") or a.star for a in call.args):
        return False
    given = {("start_dim", "end_dim")[i] if a.keyword is None else a.keyword.value: a.value
             for i, a in enumerate(call.args)}
    start = int_literal(given["start_dim"]) if "start_dim" in given else 0
    end = int_literal(given["end_dim"]) if "end_dim" in given else -1
    if start is None or end is None:
        return False
    start, end = start % len(sizes), end % len(sizes)
    return end > start and any(start <= i <= end for i in expanded)


def _tiled(scope: Scope, call: cst.Call) -> bool:
    """``x.tile(...)`` or ``x.repeat(...)`` of a tensor ``x``."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("tile", "repeat") and bool(call.args) \
        and scope.is_tensor(func.value)


def _broadcast_operand(scope: Scope, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """Is ``node`` an operand of an element-wise arithmetic operator, or of a comparison of two,
    whose other operand is a tensor?"""
    parent = parents.get(id(node))
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _ELEMENTWISE):
        other = parent.right if parent.left is node else parent.left if parent.right is node else None
        return other is not None and scope.is_tensor(other)
    if isinstance(parent, cst.ComparisonTarget) and parent.comparator is node:
        comparison = parents.get(id(parent))
        return isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1 \
            and scope.is_tensor(comparison.left)
    if isinstance(parent, cst.Comparison) and parent.left is node and len(parent.comparisons) == 1:
        return scope.is_tensor(parent.comparisons[0].comparator)
    return False


def _only_elementwise(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is every later read of ``name`` (bound at ``ref``) an operand of an element-wise operator
    with another tensor, and is there one? A read in a compound statement, or a loop coming back
    to the binding, makes it False."""
    reads = 0
    for later in _later_in_scope(scope, ref):
        if later.node is ref.node:
            return False
        used, bound = names_of(later.node)
        if name in used:
            if not isinstance(later.node, cst.SimpleStatementLine):
                return False
            parents = parent_map(later.node)
            for node in _walk(later.node):
                if not (isinstance(node, cst.Name) and node.value == name) or id(node) not in parents \
                        or isinstance(parents[id(node)], cst.AssignTarget):
                    continue
                if not _broadcast_operand(scope, node, parents):
                    return False
                reads += 1
        if name in bound:
            return reads > 0
    return reads > 0


def _joined_head(scope: Scope, source: str | None) -> bool:
    """Does the scope bind ``source`` to a concatenation along the last dimension of tensors none
    of which is a piece of ``source`` itself (``k = torch.cat((k_pass, k_rope), dim=-1)``, not
    the partial rotary's ``k = torch.cat((k_roped, k[..., n:]), dim=-1)``)?"""
    for target, value in scope.assignments:
        if not (isinstance(target, cst.Name) and target.value == source and isinstance(value, cst.Call)) \
                or scope.torch_name(value.func) not in _JOINS or not value.args:
            continue
        dims = [a.value for a in value.args[1:] if a.keyword is None or a.keyword.value in ("dim", "axis")]
        parts = value.args[0].value
        if dims and int_literal(dims[0]) == -1 and isinstance(parts, (cst.Tuple, cst.List)) \
                and all(root_name(e.value) != source for e in parts.elements):
            return True
    return False


def _attention_read(scope: Scope, ref: StatementRef, name: str, dim: int) -> tuple[cst.Call, str] | None:
    """(the call, "key" or "value") where the only read of ``name`` (bound at ``ref`` to a repeat
    over ``dim``) is the key or value of an ``F.scaled_dot_product_attention`` call without
    ``enable_gqa``, or of a same-file function or method that hands that parameter to one; the
    heads dimension must be ``dim``: 1 for the name itself, 2 for its ``.transpose(1, 2)``."""
    reader = _sole_reader(scope, ref, name)
    if reader is None:
        return None
    node, parents = reader
    heads = (1, -3)
    parent = parents.get(id(node))
    if isinstance(parent, cst.Attribute) and parent.attr.value == "transpose":
        call = parents.get(id(parent))
        if not (isinstance(call, cst.Call) and call.func is parent and len(call.args) == 2
                and {int_literal(a.value) for a in call.args} == {1, 2}):
            return None
        node, parent, heads = call, parents.get(id(call)), (2, -2)
    if dim not in heads or not isinstance(parent, cst.Arg) or parent.star:
        return None
    call = parents.get(id(parent))
    if not isinstance(call, cst.Call):
        return None
    position = call.args.index(parent) if parent.keyword is None else None
    keyword = parent.keyword.value if parent.keyword is not None else None
    if any(a.star or a.keyword is not None and a.keyword.value == "enable_gqa" for a in call.args):
        return None
    if scope.torch_name(call.func) == _SDPA:
        role = {1: "key", 2: "value"}.get(position) if keyword is None else keyword
        return (call, role) if role in ("key", "value") else None
    if heads != (1, -3):
        return None
    role = _callee_role(scope, call, position, keyword)
    return (call, role) if role is not None else None


def _sole_reader(scope: Scope, ref: StatementRef, name: str
                 ) -> tuple[cst.Name, dict[int, cst.CSTNode]] | None:
    """The one read of ``name`` after ``ref`` (its node and the parents in its statement): the
    first statement that reads it, a simple one reading it once, after which it is dead."""
    for later in _later_in_scope(scope, ref):
        if later.node is ref.node:
            return None  # in a loop: the next iteration comes back to the binding
        used, bound = names_of(later.node)
        if name in used:
            if not isinstance(later.node, cst.SimpleStatementLine) or scope.read_after(later, name):
                return None
            uses = [node for node in _walk(later.node) if isinstance(node, cst.Name) and node.value == name]
            if len(uses) != 1:
                return None
            return uses[0], parent_map(later.node)
        if name in bound:
            return None
    return None


def _callee_role(scope: Scope, call: cst.Call, position: int | None, keyword: str | None) -> str | None:
    """"key" or "value" where ``call`` is ``self.<method>(...)`` or ``<function>(...)`` of this
    file and the parameter its argument binds is the key or value of an
    ``F.scaled_dot_product_attention`` call in the callee's body without ``enable_gqa``."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
            and scope.class_name is not None:
        callees, skip = scope.facts.methods(scope.class_name, func.attr.value), 1
    elif isinstance(func, cst.Name):
        callees, skip = scope.facts.functions.get(func.value, []), 0
    else:
        return None
    if len(callees) != 1:
        return None
    params = [*callees[0].args.posonlyargs, *callees[0].args.args][skip:]
    if keyword is not None:
        param = keyword if keyword in {p.arg for p in params} else None
    else:
        param = params[position].arg if position is not None and position < len(params) else None
    if param is None:
        return None
    roles = set()
    for node in ast.walk(callees[0]):
        if not isinstance(node, ast.Call) or scope.facts.canonical(dotted_path(ast_view, node.func) or "") != _SDPA \
                or any(k.arg is None or k.arg == "enable_gqa" for k in node.keywords):
            continue
        for index, role in ((1, "key"), (2, "value")):
            given = next((k.value for k in node.keywords if k.arg == role), None)
            if given is None and len(node.args) > index:
                given = node.args[index]
            if isinstance(given, ast.Name) and given.id == param:
                roles.add(role)
    return roles.pop() if len(roles) == 1 else None


def _later_in_scope(scope: Scope, ref: StatementRef) -> Iterator[StatementRef]:
    """The statements of the scope that may run after ``ref``, nearest first, as
    ``statements_after`` gives them, but never past the end of the function."""
    while True:
        yield from ref.later()
        parent = ref.block.parent
        if parent is None or parent.node is scope.node:
            return
        if isinstance(parent.node, (cst.For, cst.While)) and ref.block.node is parent.node.body:
            for i in range(ref.index + 1):  # the next iteration
                yield StatementRef(ref.block.statements[i], ref.block, i)
        ref = parent


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in children(node):
        yield from _walk(child)


def _repeat_interleave(scope: Scope, value: cst.Call) -> tuple[cst.Call, int, str, str | None] | None:
    """(the call, its dim, the code of its count, the repeated name) of ``x.repeat_interleave(n, dim=d)`` or
    ``torch.repeat_interleave(x, n, dim=d)`` of a tensor ``x`` by a count that is no tensor."""
    if any(a.star for a in value.args):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "repeat_interleave" and scope.is_tensor(func.value):
        positional = [a.value for a in value.args if a.keyword is None]
    elif scope.torch_name(func) == "torch.repeat_interleave":
        positional = [a.value for a in value.args if a.keyword is None][1:]
        if not value.args or value.args[0].keyword is not None or not scope.is_tensor(value.args[0].value):
            return None
    else:
        return None
    keywords = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
    count = positional[0] if positional else keywords.get("repeats")
    dim_node = positional[1] if len(positional) > 1 else keywords.get("dim")
    dim = int_literal(dim_node) if dim_node is not None else None
    if count is None or dim is None or scope.is_tensor(count) or set(keywords) - {"repeats", "dim", "output_size"}:
        return None
    source = func.value if isinstance(func, cst.Attribute) else value.args[0].value
    return value, dim, code_of(count), source.value if isinstance(source, cst.Name) else None
