"""FL022: every token normalized, then a few of them picked (``x = self.norm(x)``, then ``x[:, 0]``):
a per-token norm commutes with picking tokens, so pick first and normalize only those."""
from __future__ import annotations

import ast
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, is_elementwise_expr, names_of, reaching_value, scope_statements
from fusionlint.analysis.nodes import children
from fusionlint.analysis.numbers import int_literal
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import OpTables
from fusionlint.rule import Example, Rule, Violation

# A norm's call assigned to a name (``x = self.ln_final(x)``, ``h = F.layer_norm(h, ...)``).
_NORMED_TEXT = re.compile(r"\s*(\w+)\s*(?::[^=]*)?=\s*[\w.]*(?:[Nn]orm|ln|LN)\w*\s*\(")
# Norms over the last dim (the module's own normalized shape is read as the last dim).
_PER_TOKEN = frozenset({"layer_norm", "rms_norm", "normalize"})
# Module attributes named as norms: ``norm``, ``ln_final``, ``final_layer_norm``, ``norm2``.
_NORM_NAME = re.compile(r"(?:^|_)(?:ln|norm|layernorm|layer_norm|rmsnorm|rms_norm)(?:_|\d|$)")
_REPEATING = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Lambda)
_METADATA = frozenset({"shape", "size", "device", "dtype", "ndim"})


class NormBeforeSelect(Rule):
    code = "FL022"
    name = "norm-before-select"
    message = "every token normalized, then a few picked: pick them first and normalize only those"
    rationale = """
        A layer norm (or RMS norm) works on each token alone, over its last dim, so picking
        tokens commutes with it: `self.norm(x)[:, 0]` is `self.norm(x[:, 0])`. Normalizing the
        whole sequence and then keeping one token per sample (a class token, the last token,
        the end-of-text token `x[arange(b), text.argmax(-1)]`) reads and writes every token
        for nothing, in eager PyTorch and in a fusing backend alike: open_clip's text pooling,
        measured on its labels, writes 80 -> 3 KiB under fusionrt and in eager.

        Flagged, at the norm: `y = norm(x)` (a `torch.nn.LayerNorm`/`RMSNorm` module of the
        class, or one named as a norm whose class the file does not tell, `self.ln_final =
        norm_layer(width)`; `F.layer_norm`, `F.rms_norm`, `F.normalize(x, dim=-1)`) whose next
        reader picks tokens of `y` by index (`y[:, 0]`, `y[:, -1, :]`, `y[0]`, `y[idx]`,
        `y[arange(b), idx]`, the index not made from `y`) or hands `y` to a function of the
        file that only does that or returns it unchanged (open_clip's `text_global_pool`), and
        nothing reads `y` after that. Not flagged: a slice of tokens (`y[:, 1:]`: most of them
        stay), picks repeated for each item of a comprehension (they may cover every token), a
        mean or another reduction over tokens (the
        mean of normalized tokens is not the normalized mean), `y` read again (returned as
        the last hidden state too: every token is needed normalized).
    """
    use_instead = "Pick the tokens first: `pooled = self.norm(x[:, 0])`."
    pays_in = (FUSIONRT, EAGER)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the rule reads the norm's dims from its call, not from the module's
        constructor (a norm built over two dims, `nn.LayerNorm([n, d])`, does not commute with
        picking tokens), and `y[:, 0]` picks a token only where `y` has a batch dim. Move the
        index by hand.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def class_token(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = F.layer_norm(x, x.shape[-1:], weight, bias)
    return x[:, 0]
""",
            at=((6, 9),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def class_token(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x[:, 0], x.shape[-1:], weight, bias)
""",
            call="class_token(randn(8, 197, 64), randn(64), randn(64))",
        ),
        Example(  # the end-of-text token of each sample, by a gather of rows
            bad="""\
import torch
import torch.nn.functional as F


def text_pool(x: torch.Tensor, proj: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x @ proj
    x = F.layer_norm(x, (x.shape[-1],), w, b)
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return pooled
""",
            at=((7, 9),),
            fixed=None,
            good="""\
import torch
import torch.nn.functional as F


def text_pool(x: torch.Tensor, proj: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x @ proj
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return F.layer_norm(pooled, (x.shape[-1],), w, b)
""",
            call="text_pool(randn(8, 77, 64), randn(64, 64), randn(8, 77), randn(64), randn(64))",
        ),
    )
    valid = (
        # the normalized tokens are returned too; a slice keeps most tokens; a mean over tokens
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    pooled = h[:, 0]
    s = F.layer_norm(x, x.shape[-1:], w, b)
    tail = s[:, 1:]
    m = F.layer_norm(x, x.shape[-1:], w, b)
    return h, pooled, tail, m.mean(1)
""",
        # the norm's input is element-wise work a fusing backend computes inside the norm: picked
        # first, the whole input would be written for the pick (fusionrt: 3 -> 4 kernels)
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    x = x * 2.0
    x = F.layer_norm(x, x.shape[-1:], w, b)
    return x[:, 0]
""",
        # the index is made from the normalized tokens; a norm over the batch dim (dim=0)
        """\
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    h = F.layer_norm(x, x.shape[-1:], w, b)
    best = h[:, h.norm(dim=-1).argmax()]
    g = F.normalize(x, dim=0)
    return best, g[0]
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # the norm's call, as alternatives with a literal start (the engine searches each alone)
        return re.compile(r"orm\w*\s*\(|ln\w*\s*\(|LN\w*\s*\(")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        normed = _NORMED_TEXT.match(block[index])
        if normed is None:
            return False
        if not any(normed.group(1) in block[later] for later in range(index + 1, min(index + 4, len(block)))):
            return False  # (a substring test first: a pattern per name would be compiled per name)
        picked = re.compile(r"\b{0}\s*\[|(?<![\w.])\w+\s*\(\s*{0}\s*[,)]".format(normed.group(1)))  # y[...], pool(y, ...)
        return any(picked.search(block[later]) for later in range(index + 1, min(index + 4, len(block))))

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            normed = _normed(scope, ref)
            if normed is None:
                continue
            name, norm = normed
            reader = _next_reader(ref, name)
            if reader is not None and _picks(scope, reader.node, name) and not _read_after(scope, reader, name):
                yield Violation(norm)


def _normed(scope: Scope, ref: StatementRef) -> tuple[str, cst.Call] | None:
    """(``y``, the norm's call) where ``ref`` is ``y = norm(x)``, a norm over the last dim."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)):
        return None
    target, call = small.targets[0].target, small.value
    if not isinstance(target, cst.Name):
        return None
    op = scope.module_op(call) or scope.op(call) or _norm_module_by_name(scope, call)
    if op is None or op[0] not in _PER_TOKEN or op[2] is None:
        return None
    if op[0] == "normalize" and not _over_last_dim(call):
        return None
    return None if _pending_elementwise(scope, ref, op[2]) else (target.value, call)


def _norm_module_by_name(scope: Scope, call: cst.Call) -> tuple[str, str | None, cst.BaseExpression] | None:
    """``self.ln_final(x)``, ``self.norm(x)``: a module of the class named as a norm whose class
    the file does not tell (``norm_layer(width)``, a subclass of ``nn.LayerNorm``), read as a
    layer norm; a module known to be of another torch.nn class (a batch or group norm) is not."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    if scope.class_name is None or scope.facts.nn_class(scope.class_name, func.attr.value) not in (None, "Identity"):
        return None  # `nn.Identity()` where a pruned model drops its norm picks the same tokens
    if not _NORM_NAME.search(func.attr.value) or len(call.args) != 1 or call.args[0].keyword is not None:
        return None
    return "layer_norm", None, call.args[0].value


def _pending_elementwise(scope: Scope, ref: StatementRef, expr: cst.BaseExpression) -> bool:
    """Is the norm's input element-wise work of this block (``x = x * 2`` above)? A fusing backend
    computes it inside the norm's kernel; picked first, the whole input is written for the pick
    instead (fusionrt: a kernel more, as many bytes)."""
    if isinstance(expr, cst.Name):
        value = reaching_value(ref, expr.value)
        return value is not None and not isinstance(value, cst.Name) and is_elementwise_expr(scope, value)
    return is_elementwise_expr(scope, expr)


def _over_last_dim(call: cst.Call) -> bool:
    """``F.normalize(x, dim=-1)`` (its default dim is 1)."""
    dims = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "dim"]
    dims += [arg.value for i, arg in enumerate(call.args) if arg.keyword is None and i == 2]
    return len(dims) == 1 and int_literal(dims[0]) == -1


def _next_reader(ref: StatementRef, name: str) -> StatementRef | None:
    """The next statement of the block that reads ``name``, if a simple one."""
    for later in ref.later():
        if not isinstance(later.node, cst.SimpleStatementLine):
            return None
        reads, defs = names_of(later.node)
        if name in reads:
            return later
        if name in defs:
            return None
    return None


def _picks(scope: Scope, statement: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """The token picks of ``name`` in ``statement`` (``name[...]``, or a same-file function that
    only picks tokens of its first argument given ``name``), if every read of ``name`` there is one."""
    picks: list[cst.CSTNode] = []
    reads = 0
    todo: list[cst.CSTNode] = [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
            if not _picks_tokens(node, name):
                return []
            picks.append(node)
            continue
        if isinstance(node, cst.Call) and _passed_first(node, name) and _picking_function(scope, node.func):
            picks.append(node)
            todo.extend(arg.value for arg in node.args[1:])
            continue
        if isinstance(node, cst.Name) and node.value == name:
            reads += 1
        if isinstance(node, _REPEATING) and _made_from(node, name):
            return []  # picked once per item, the picks may cover every token
        todo.extend(children(node))
    return [] if reads else picks


def _passed_first(call: cst.Call, name: str) -> bool:
    first = call.args[0] if call.args else None
    return first is not None and first.keyword is None and not first.star and \
        isinstance(first.value, cst.Name) and first.value.value == name


def _picking_function(scope: Scope, func: cst.BaseExpression) -> bool:
    """Is ``func`` a top-level function of the file (one definition) that only picks tokens of
    its first parameter, or hands it back unchanged (open_clip's ``text_global_pool``)?"""
    if not isinstance(func, cst.Name) or func.value in scope.params or func.value in scope.tensors:
        return False
    definitions = scope.facts.functions.get(func.value, ())
    if len(definitions) != 1 or not definitions[0].args.args:
        return False
    param = definitions[0].args.args[0].arg
    if not _read_whole_at_most(definitions[0], param):
        return False
    definition = cst.parse_statement(ast.unparse(definitions[0]))
    returned: set[str] = set()
    return isinstance(definition, cst.FunctionDef) and _only_picked(definition.body, param, returned)


def _read_whole_at_most(function: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> bool:
    """A cheap first test, on the function's ``ast``: is ``param`` only indexed, asked for an
    attribute, returned or assigned whole (what ``_only_picked`` goes on to check in detail)?"""
    for node in ast.walk(function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id == param:
                whole = isinstance(node, (ast.Subscript, ast.Attribute, ast.Return, ast.Assign)) and node.value is child
                if not whole:
                    return False
    return True


def _only_picked(node: cst.CSTNode, param: str, aliases: set[str]) -> bool:
    """Is every use of ``param`` under ``node`` a token pick, a read of its metadata, ``return
    param``, or ``alias = param`` with the alias only returned (``aliases`` collects them)?"""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == param:
        return _picks_tokens(node, param)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param:
        return node.attr.value in _METADATA
    if isinstance(node, cst.Return) and isinstance(node.value, cst.Name):
        return node.value.value in aliases or node.value.value == param or _only_picked(node.value, param, aliases)
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == param:
        targets = [t.target for t in node.targets]
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            return False
        aliases.add(targets[0].value)
        return True
    if isinstance(node, cst.Assign):
        stored = [t.target for t in node.targets]
        if any(isinstance(t, cst.Name) and t.value == param for t in stored):
            return False
        return all(isinstance(t, cst.Name) or _only_picked(t, param, aliases) for t in stored) and \
            _only_picked(node.value, param, aliases)
    if isinstance(node, cst.Name):
        return node.value != param and node.value not in aliases
    return all(_only_picked(child, param, aliases) for child in children(node))


def _picks_tokens(subscript: cst.Subscript, name: str) -> bool:
    """``y[:, 0]``, ``y[:, -1, :]``, ``y[0]``, ``y[idx]``, ``y[arange(b), idx]``: full slices,
    then one or two indices (numbers or index tensors, not made from ``y``), then full slices."""
    parts = []
    for element in subscript.slice:
        if not isinstance(element.slice, cst.Index):
            if not (isinstance(element.slice, cst.Slice) and element.slice.lower is None
                    and element.slice.upper is None and element.slice.step is None):
                return False
            parts.append(":")
        elif isinstance(element.slice.value, cst.Ellipsis) or _made_from(element.slice.value, name):
            return False
        elif isinstance(element.slice.value, cst.Name) and element.slice.value.value == "None":
            return False
        else:
            parts.append("i")
    text = "".join(parts)
    return re.fullmatch(r":*i{1,2}:*", text) is not None


def _made_from(expr: cst.CSTNode, name: str) -> bool:
    """Does ``expr`` read the values of ``name`` (not only its metadata: ``name.shape``)?"""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == name:
        return expr.attr.value not in _METADATA
    if isinstance(expr, cst.Name):
        return expr.value == name
    return any(_made_from(child, name) for child in children(expr))


def _read_after(scope: Scope, reader: StatementRef, name: str) -> bool:
    """Is the normalized value read after the statement that picks from it?"""
    if name in names_of(reader.node)[1]:
        return False  # rebound: ``x = x[:, 0]``
    return scope.read_after(reader, name)
