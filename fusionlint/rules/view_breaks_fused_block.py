"""FL001: a view that merges dims of a value still being computed, in the middle of a fused block.

fusionrt (docs/semantics.md 3.5) absorbs simple views of a pending element-wise value (transpose,
permute, unsqueeze, ``x[..., None]``, slices, ``.T``/``.mT``): the consumer recomputes the value
through the view, so moving them saves nothing. A view that merges dims (``flatten``, ``ravel``,
``view``/``reshape`` to fewer dims) or walks two dims at once (``diagonal``) has no such index
map: the value is written (``view-break``) and read back by a second kernel. Taking the view of
the element-wise expression's input instead keeps one kernel. Views of inputs and parameters
are metadata either way, and an input of a matmul is written anyway: neither is flagged.
"""
from __future__ import annotations

import keyword
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope, Site, StatementRef, ancestors, children, names_of, reaching_assignment, reaching_value,
)
from fusionlint.analysis.numbers import int_literal
from fusionlint.model import FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, ELEMENTWISE, FUSED_REDUCTIONS, MERGING_VIEWS, VIEW, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes
from fusionlint.statement_text import (
    SPACE, UNRELIABLE, assignments, closing_bracket, expression_at, opening_bracket, outside_brackets,
)

_PERMUTING_VIEWS = frozenset({"t", "T", "mT", "H", "mH", "transpose", "swapaxes", "swapdims", "permute", "movedim",
                              "moveaxis", "adjoint"})
# Concatenations: they copy every piece into a new tensor, which element-wise work after them
# reads back.
_CATS = frozenset({"cat", "concat", "concatenate"})
_TRIGGER = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(MERGING_VIEWS | _CATS)))
_VIEW_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(MERGING_VIEWS)))
_CAT_CALL = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(_CATS)))
_NAME = re.compile(r"[A-Za-z_]\w*")
_NAME_AT_END = re.compile(r"([A-Za-z_]\w*)$")
_PARENTHESIZED_NAME_AT_END = re.compile(r"\(\s*([A-Za-z_]\w*)\s*\)$")
_DOTTED_AT_END = re.compile(r"(?:[A-Za-z_]\w*\s*\.\s*)*$")
_RETURN_AT_END = re.compile(r"(?:^|[^\w.])return$")
_NUMBER = re.compile(r"[-+]?[\d.]+")
_OPERATOR = re.compile(r"[-+*/%&|^~<>]")
_VIEWED_DEPTH = 3  # assignments followed back to the view a value was made with
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "size", "dim"})
# Casts: a no-op where the tensor has the dtype already, so no work surely follows a cat.
_CASTS = frozenset({"to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "bool",
                    "byte", "char"})


class ViewBreaksFusedBlock(Rule):
    code = "FL001"
    name = "view-breaks-fused-block"
    message = "view that merges dims of a value still being computed: it is written and read back; view the inputs"
    rationale = """
        A lazy fusing backend reads a view of a value it is still computing through an index
        map. Simple views (`transpose`, `permute`, `unsqueeze`, `x[..., None]`, slices, `.T`,
        `.mT`) map each dim to one dim of the value, so the consumer just recomputes the value
        through the view, in the same kernel. A view that merges dims (`flatten`, `ravel`,
        `view`/`reshape` to fewer dims) or walks two dims at once (`diagonal`) has no such map:
        the value is written to global memory (`view-break`), and the rest of the block runs as
        a second kernel that reads it back. The same view of the element-wise expression's
        *input* is only metadata, so `F.gelu(x.flatten(0, 1)) + bias` is one kernel where
        `F.gelu(x).flatten(0, 1) + bias` is two (fusionrt: 2 -> 1 kernels and writes).

        Flagged: a merging view of an element-wise result (inline, or of a name assigned one
        in the same block) whose result flows into more element-wise code or a fused reduction
        (`sum`, `mean`, `amax`, `softmax`, `layer_norm`, ...), there or right after the `if` it
        is made in. A `view`/`reshape` merges when its shape says so, or when it gives fewer
        dims than the view an operand was made with (Swin's `attn.view(-1, heads, n, n)` of a
        masked 5-d `attn.view(b, w, heads, n, n) + mask`, up to three assignments back). Not flagged, because fusionrt shows
        no saving there: simple views, views of inputs, parameters and matmul results, a view
        feeding a matmul directly (its input is written anyway), a view that is only returned;
        nor views of values not known to be tensors (NumPy, `memoryview`, a framework's
        `.view`), `view(dtype)`, or `view`/`reshape` shapes that look like a split.

        A concatenation breaks a block the same way: `torch.cat` copies its pieces into a new
        tensor, so element-wise work on the result is a second kernel that reads the whole
        concatenation back and writes it again, where done on each piece it joins the kernels
        that compute the pieces into the cat (x_transformers' `cat((emb.sin(), emb.cos()), -1)
        * scale`: fusionrt 4 -> 3 writes, 96 -> 64 KiB). Flagged: element-wise work on a `cat`
        (inline, or of a name read once, metadata aside, by the next statement that reads it,
        there or right after the `if` it is made in) with at least one piece computed by the function (an element-wise
        result, a reduction, a matmul), where that work ends the statement's element-wise work.
        Not flagged: a cat of inputs and parameters only (one copy kernel either way; scaling
        each piece adds kernels); work whose result more arithmetic reads (the rest still runs
        after the cat: a rotary `h * cos + cat((-x2, x1), -1) * sin` measured 3 -> 5 writes)
        or a matmul or a reduction takes on read (no saving); an op with another tensor
        argument (`masked_fill(mask, 0.0)`, its mask sliced for each piece: a write more); a
        cast (a no-op where the dtype is already right); a cat read again. Eager runs one
        kernel more after the rewrite, one per piece.
    """
    use_instead = """
        Apply the view to the input of the element-wise expression (`F.gelu(x.flatten(0, 1))`,
        `x.reshape(-1, d) * 0.5`), so the whole block reads the input through metadata. Where
        the inputs have other shapes (the value is broadcast from them), do the element-wise
        work that follows the view before it instead (`(a * b).to(dtype).reshape(n, -1)`), so
        the view is the block's last step. After a `cat`, do the element-wise work on each piece
        (an operand that varies along the cat's dim is sliced to match).
    """
    fix_safety = FixSafety.UNSAFE
    pays_in = (FUSIONRT,)
    fix_notes = """
        The fix moves the view onto the only tensor operand of an inline element-wise
        expression: `(x * 2).flatten(0, 1)` becomes `(x.flatten(0, 1) * 2)`. It is offered only
        when that operand is a parameter, a `self.<tensor>` or a compute-bound result (moving
        the view onto a value that is itself pending would move the write, not remove it),
        every other operand is a constant (so broadcasting cannot change), the operand is never
        written in place, and the view is evaluated unconditionally. `view` becomes `reshape`
        on the input, which is a view wherever `view` would succeed and a copy where the input
        is not viewable (a slice, an expanded tensor), so the fix never raises where the
        original did not. Element-wise ops commute with reshapes, so the values are equal. It is
        **unsafe**: it rests on the static guess that the names hold tensors and the calls are
        torch's element-wise ops. A view of a named value (`g = torch.sigmoid(h)` then
        `g.flatten(0, 1)`) is reported without a fix: view the inputs of `g` by hand.
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def mlp_out(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x).flatten(0, 1)
    return h + bias
""",
            at=((6, 9),),
            fixed="""\
import torch
import torch.nn.functional as F


def mlp_out(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x.flatten(0, 1))
    return h + bias
""",
            call="mlp_out(randn(8, 16, 64), randn(64))",
        ),
        Example(  # `view` to fewer dims feeding a fused reduction; `view` becomes `reshape` on the input
            bad="""\
import torch


class Head(torch.nn.Module):
    def forward(self, x, temperature: float = 0.5):
        probs = (x * 0.5).view(-1, x.size(-1)).softmax(-1)
        return probs
""",
            at=((6, 17),),
            fixed="""\
import torch


class Head(torch.nn.Module):
    def forward(self, x, temperature: float = 0.5):
        probs = (x.reshape(-1, x.size(-1)) * 0.5).softmax(-1)
        return probs
""",
            call="Head().forward(randn(8, 16, 64))",
        ),
        Example(  # a view statement of a computed name in the middle of the block: reported only
            bad="""\
import torch


def gate(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    h = x * 2
    g = torch.sigmoid(h)
    g2 = g.flatten(0, 1)
    return g2 + c
""",
            at=((7, 10),),
            fixed=None,
            good="""\
import torch


def gate(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    xf = x.flatten(0, 1)
    h = xf * 2
    g = torch.sigmoid(h)
    return g + c
""",
            call="gate(randn(8, 16, 64), randn(128, 64))",
        ),
        Example(  # two tensor operands: broadcasting is unknown statically, so no fix
            bad="""\
import torch


def mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.flatten(x * y, 1).sum(-1)
""",
            at=((5, 12),),
            fixed=None,
            good="""\
import torch


def mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (torch.flatten(x, 1) * torch.flatten(y, 1)).sum(-1)
""",
            call="mix(randn(32, 16, 64), randn(32, 16, 64))",
        ),
        Example(  # element-wise work on a concatenation of computed values: do it on each piece
            bad="""\
import torch


def sinusoidal(pos: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    emb = torch.einsum("i, j -> i j", pos, inv_freq)
    emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
    return emb * scale
""",
            at=((7, 12),),
            fixed=None,
            good="""\
import torch


def sinusoidal(pos: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> torch.Tensor:
    emb = torch.einsum("i, j -> i j", pos, inv_freq)
    return torch.cat((emb.sin() * scale, emb.cos() * scale), dim=-1)
""",
            call="sinusoidal(randn(128), randn(32), 0.125)",
        ),
        Example(  # the 5-d view two element-wise statements back
            bad="""\
import torch


def masked_scores(scores: torch.Tensor, mask: torch.Tensor, heads: int, n: int) -> torch.Tensor:
    w = mask.shape[0]
    scores = scores.view(-1, w, heads, n, n)
    scores = scores + mask.unsqueeze(1).unsqueeze(0)
    scores = scores * 0.5
    scores = scores.view(-1, heads, n, n)
    return scores.softmax(-1)
""",
            at=((9, 14),),
            fixed=None,
            good="""\
import torch


def masked_scores(scores: torch.Tensor, mask: torch.Tensor, heads: int, n: int) -> torch.Tensor:
    w = mask.shape[0]
    scores = scores.view(-1, w, heads, n, n)
    scores = scores + mask.unsqueeze(1).unsqueeze(0)
    scores = scores * 0.5
    return scores.softmax(-1).view(-1, heads, n, n)
""",
            call="masked_scores(randn(8, 4, 16, 16), randn(4, 16, 16), 4, 16)",
        ),
    )
    valid = (
        # a cat of inputs (one copy either way), a scaled cat fed to a matmul or a reduction (the
        # work is taken on read), a cat read twice (written anyway)
        """\
import torch


def f(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor):
    x = torch.cat((a, b), -1) * 2
    y = (torch.cat((a * 2, b), -1) * 2) @ w
    z = torch.cat((torch.tanh(a), b), -1)
    s = (torch.cat((torch.tanh(a), b), -1) + 1).sum(-1)
    return x, y, z.sum(-1), z * 2, s
""",
        # work that more arithmetic reads (a rotary embedding's rotate-half), an op with another
        # tensor argument, a sum a softmax reads next, a cast: each measured no saving or a cost
        """\
import torch


def f(h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor, q, k, m):
    r = torch.cat((-h[..., 16:], h[..., :16]), dim=-1)
    rotated = h * cos + r * sin
    filled = torch.cat((h[:, :1], h[:, 1:] - 0.97 * h[:, :-1]), dim=1).masked_fill(mask, 0.0)
    w = torch.cat((q @ k, q @ m), dim=-1)
    w = w + mask
    p = w.softmax(-1)
    return rotated, filled, p, torch.cat((h * 2, h), 0).float()
""",
        # a one-element result made a scalar merges nothing (and once crashed the rule)
        """\
import torch


def flag(mask: torch.Tensor) -> bool:
    return bool((mask * 2).reshape(()))
""",
        # views of inputs are metadata (Burn's unsqueeze-matmul example: 2 -> 2 writes)
        """\
import torch


def burn(t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor) -> torch.Tensor:
    t4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)
    return t4 + t1.flatten() * 2
""",
        # simple views of computed values are absorbed: transpose, .T/.mT, None/... indexing,
        # permute, splitting view/reshape
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, q: torch.Tensor, n: int, d: int):
    y = (x * 2).transpose(0, 1) @ w + (x * 2).T + b.mT
    z = (x * 2)[..., None] * b[None, :] + (x - 1).unsqueeze(0)
    heads = (q * 0.125).view(n, -1, 4, d).permute(0, 2, 1, 3) + 1
    return y, z, heads, (q + 1).reshape(-1, 1) + 1
""",
        # a merging view feeding a matmul directly, or only returned: nothing saved
        """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    out = (x * 2).flatten(0, 1) @ w
    return out, torch.relu(x).reshape(-1)
""",
        # a merging view of a matmul result, of a module's output, of an input
        """\
import torch


class Block(torch.nn.Module):
    def forward(self, x, w):
        h = x @ w
        a = self.act(x)
        return h.flatten(0, 1) + 1, a.view(-1) * 2, x.flatten(1) * 2
""",
        # a permuted operand: the merging view copies, and so would the same view of the operand
        """\
import torch


def f(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    kt = k.transpose(1, 2)
    scores = (kt * 0.125).flatten(2) + 1
    return (x.t() * 2).reshape(-1) + 1, scores
""",
        # a 4-d view keeping a merged batch dim splits (wav2vec2's codevectors); `.to(device)` is
        # no work, as producer or consumer (moshi's labels)
        """\
import torch


def f(probs: torch.Tensor, codebook: torch.Tensor, labels: torch.Tensor, logits: torch.Tensor, b: int, s: int):
    per_group = probs.unsqueeze(-1) * codebook
    codevectors = per_group.view(b * s, 2, 320, -1).sum(-2)
    labels = labels.masked_fill(labels == 7, -100).reshape(-1)
    labels = labels.to(logits.device)
    feats = logits.to(labels.device).flatten(1) + 1
    return codevectors, labels, feats
""",
        # the viewed value is read by two reductions: it is written anyway (a dice loss, 2 -> 3 writes
        # if the view moved onto `inputs`)
        """\
import torch


def dice(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    probs = inputs.sigmoid().flatten(1)
    numerator = 2 * (probs * labels).sum(-1)
    denominator = probs.sum(-1) + labels.sum(-1)
    h = inputs * 2
    g = h.flatten(1) + 1
    return 1 - (numerator + 1) / (denominator + 1) + g.sum() + h.sum()
""",
        # a view ending in a size-1 dim, made to broadcast against a larger tensor (wavlm's gate):
        # the larger consumer cannot join the value's block either way
        """\
import torch


def gate(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, n: int) -> torch.Tensor:
    g = a * (b * 2.0 - 1.0) + 2.0
    return g.view(n * 4, -1, 1) * bias
""",
        # view(dtype) reinterprets bytes: not a shape view
        """\
import torch


def bits(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).view(torch.int32) & 1
""",
        # NumPy arrays, memoryview, a web framework's view, a name computed in another block
        """\
import numpy as np
import torch


def f(self, a: np.ndarray, request, buf: bytes, x: torch.Tensor, flag: bool):
    r = (a * 2).reshape(-1) + 1
    mv = memoryview(buf).cast("B").tolist()
    page = self.view(request).render()
    if flag:
        x = x * 2
    return r, mv, page, x.flatten(1) + 1
""",
        # a file that never imports torch
        """\
def f(x, c):
    return (x * 2).flatten(0, 1) + c
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _TRIGGER

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """A merging view whose operand may be an element-wise result (written inline, or a name
        assigned one earlier in the block), or a concatenation of a literal list or tuple that is
        not just returned: ``check`` reports nothing else, and most views in model code reshape
        a layer's output."""
        text = block[index]
        earlier = [block[i] for i in range(index + 1)]
        return any(_may_view_computed(text, call, earlier, ops) for call in _VIEW_CALL.finditer(text)) or any(
            _cat_may_feed_work(text, call) for call in _CAT_CALL.finditer(text)
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        for name in sorted(MERGING_VIEWS):
            for site in scope.sites.get(name, ()):
                violation = _merging_view(scope, site)
                if violation is not None:
                    yield violation
        reported: set[int] = set()  # `a_cat * b_cat` is one piece of work to move
        for name in sorted(_CATS):
            for site in scope.sites.get(name, ()):
                violation = _cat_before_elementwise(scope, site)
                if violation is not None and id(violation.node) not in reported:
                    reported.add(id(violation.node))
                    yield violation


def _may_view_computed(text: str, call: re.Match[str], earlier: Sequence[str], ops: OpTables) -> bool:
    """Can the view ``call`` in a statement's text read an element-wise result? As a method, its
    receiver may be one (written inline, or a name assigned one in the block: ``earlier`` holds
    the texts of the statements up to this one); as a function (``torch.flatten(h * 2, 1)``), so
    may its first argument."""
    before = text[: call.start()].rstrip(SPACE)
    if before.endswith("."):
        receiver = before[:-1].rstrip(SPACE)
        if receiver.endswith(")") and _call_may_be_elementwise(receiver, ops):
            return True
        name = _NAME_AT_END.search(receiver) or _PARENTHESIZED_NAME_AT_END.search(receiver)
        if name is not None and _assigned_elementwise(name.group(1), earlier, ops):
            return True
    argument = expression_at(text, call.end())
    parenthesized = _PARENTHESIZED_NAME_AT_END.fullmatch(argument)
    name = parenthesized.group(1) if parenthesized else argument
    if _NAME.fullmatch(name):
        return _assigned_elementwise(name, earlier, ops)
    return _may_be_elementwise(argument, ops)


def _cat_may_feed_work(text: str, call: re.Match[str]) -> bool:
    """Can the concatenation ``call`` (``torch.cat(`` in a statement's text) of a literal list or
    tuple be read by more work? Not where the statement only returns it."""
    if UNRELIABLE.search(text):
        return True
    if text[call.end() :].lstrip(SPACE)[:1] not in ("(", "["):
        return False
    head = _DOTTED_AT_END.sub("", text[: call.start()]).rstrip(SPACE)
    if not _RETURN_AT_END.search(head):
        return True
    closing = closing_bracket(text, text.index("(", call.start()))
    return closing is None or text[closing + 1 :].strip(SPACE) != ""


def _assigned_elementwise(name: str, texts: Sequence[str], ops: OpTables) -> bool:
    """Does one of ``texts`` assign ``name`` a value that may be element-wise work?"""
    return any(target == name and _may_be_elementwise(value, ops) for text in texts for target, value in assignments(text))


def _may_be_elementwise(expression: str, ops: OpTables) -> bool:
    """Can this expression's text be element-wise work: an operator outside its brackets, or a
    call of an element-wise op last? Not a number or a starred argument."""
    if UNRELIABLE.search(expression):
        return True
    if not expression or _NUMBER.fullmatch(expression) or expression.startswith("*"):
        return False
    if _OPERATOR.search(outside_brackets(expression)):
        return True
    return expression.endswith(")") and _call_may_be_elementwise(expression, ops)


def _call_may_be_elementwise(text: str, ops: OpTables) -> bool:
    """Does ``text`` end (in ``)``) with a call of an element-wise op, or with a parenthesized
    expression that may be element-wise work?"""
    if UNRELIABLE.search(text):
        return True
    opening = opening_bracket(text)
    if opening is None:
        return True
    callee = _NAME_AT_END.search(text[:opening].rstrip(SPACE))
    if callee is not None and not keyword.iskeyword(callee.group(1)):
        return ops.op_class(callee.group(1)) == ELEMENTWISE
    inner = text[opening + 1 : -1].strip(SPACE)
    return "," not in outside_brackets(inner) and _may_be_elementwise(inner, ops)


def _merging_view(scope: Scope, site: Site) -> Violation | None:
    call = site.node
    op = scope.op(call)
    if op is None or op[1] != VIEW or op[2] is None or not isinstance(call, cst.Call):
        return None
    name, receiver = op[0], op[2]
    shape_args = call.args if isinstance(call.func, cst.Attribute) and call.func.value is receiver else call.args[1:]
    ref = site.statement
    if not (_merges(name, shape_args) or _fewer_dims_than_viewed(scope, ref, receiver, shape_args)):
        return None
    if isinstance(receiver, cst.Name):
        value = reaching_value(ref, receiver.value)
        leaves = None if value is None else _leaves(scope, value)
        if leaves is None or any(_permuted(scope, ref, leaf) for leaf in leaves):
            return None
        if not _only_reader(scope, ref, receiver.value) or not _feeds_fused_work(scope, ref, call):
            return None
        return Violation(call, message=f"`{name}` merges dims of `{receiver.value}`, an element-wise result still "
                         f"being computed: it is written and read back; view the inputs of `{receiver.value}`, "
                         "or do the element-wise work that follows before the view")
    leaves = _leaves(scope, receiver)
    if leaves is None or any(_permuted(scope, ref, leaf) for leaf in leaves):
        return None
    if not _feeds_fused_work(scope, ref, call):
        return None
    fix = None if site.conditional else _fix(scope, ref, call, name, receiver, shape_args)
    return Violation(call, fix=fix, message=f"`{name}` merges dims of an element-wise result still being computed: "
                     "it is written and read back; apply the view to the expression's input")


def _cat_before_elementwise(scope: Scope, site: Site) -> Violation | None:
    """``torch.cat((emb.sin(), emb.cos()), -1) * scale``: the pieces are computed into the cat, which
    is written, and the element-wise work after it reads it back and writes it again; done on each
    piece, it joins the kernels that write them into the cat."""
    call = site.node
    op = scope.op(call)
    if op is None or op[0] not in _CATS or not isinstance(call, cst.Call) or scope.torch_name(call.func) is None:
        return None
    pieces = op[2]
    if not isinstance(pieces, (cst.List, cst.Tuple)) or len(pieces.elements) < 2:
        return None
    if any(isinstance(element, cst.StarredElement) for element in pieces.elements):
        return None
    ref = site.statement
    if not any(_computed(scope, ref, element.value) for element in pieces.elements):
        return None  # a cat of inputs is one copy kernel: scaling each piece adds kernels
    consumer = _elementwise_consumer(scope, ref, call)
    if consumer is None:
        return None
    return Violation(consumer, message=f"element-wise work on a `{op[0]}` of values still being computed: the "
                     f"`{op[0]}` is written and read back; do the work on each piece before it")


def _computed(scope: Scope, ref: StatementRef, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` (through views, and the name's value in its block) computed by the function:
    an element-wise result, a reduction or a matmul, not an input or a parameter?"""
    if isinstance(expr, cst.Name):
        value = reaching_value(ref, expr.value)
        if value is None:
            return False
        expr = value
    while (op := scope.op(expr)) is not None and (op[1] == VIEW or op[0] in _CASTS) and op[2] is not None:
        expr = op[2]  # a cast of an input may be the input itself
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return scope.op(expr) is not None or _leaves(scope, expr) is not None
    op = scope.op(expr) or scope.module_op(expr)
    if op is None or not isinstance(expr, cst.Call):
        return False
    return op[1] == COMPUTE or (op[1] == ELEMENTWISE and _elementwise_work(scope, expr, op[0]))


def _elementwise_consumer(
    scope: Scope, ref: StatementRef, node: cst.CSTNode, follow: bool = True
) -> cst.CSTNode | None:
    """The element-wise work that reads the value of ``node`` (inline, or, assigned to a name, in
    the next statement that reads it, once) that ends the statement's element-wise work."""
    path = ancestors(ref.node, node) or []
    parent = path[0] if path else None
    if isinstance(parent, cst.Assign):
        targets = parent.targets
        if not follow or len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
            return None
        return _read_once_elementwise(scope, ref, targets[0].target.value)
    call = _call_reading(path, node)
    if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
        if scope.op(parent) is not None or isinstance(parent.operator, cst.Not):
            return None
        consumer: cst.CSTNode = parent
    elif call is not None and not (isinstance(parent, cst.Arg) and parent.keyword is not None):
        op = scope.op(call) or scope.module_op(call)
        if op is None or op[1] != ELEMENTWISE or op[2] is not node or op[0] in _CASTS:
            return None
        if any(arg.value is not node and scope.is_tensor(arg.value) for arg in call.args):
            return None  # `masked_fill(mask, v)`: the mask sliced for each piece measured a write more
        consumer = call
    else:
        return None
    if _feeds_more_work(scope, ref, consumer) or _assigned_for_compute(scope, ref, consumer):
        return None
    return consumer


def _call_reading(path: Sequence[cst.CSTNode], node: cst.CSTNode) -> cst.Call | None:
    """The call that takes ``node`` (whose parents, nearest first, are ``path``) as an argument or
    as the receiver of its method."""
    if len(path) < 2 or not isinstance(path[1], cst.Call):
        return None
    parent, call = path[0], path[1]
    if isinstance(parent, cst.Arg) or isinstance(parent, cst.Attribute) and parent.value is node and call.func is parent:
        return call
    return None


def _feeds_more_work(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is ``node`` an operand of more work in its statement: arithmetic (the rest would still run
    after the cat, as a kernel of its own: Wav2Vec2-Conformer's rotary `h * cos + cat(...) * sin`
    measured 3 -> 5 writes), an element-wise op, or a matmul or reduction, which takes the work
    on read anyway (`(cat(...) * s) @ w`: no saving)?"""
    path = ancestors(ref.node, node) or []
    if path and isinstance(path[0], (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget)):
        return True
    call = _call_reading(path, node)
    op = None if call is None else scope.op(call) or scope.module_op(call)
    return op is not None and op[1] in (ELEMENTWISE, COMPUTE) and op[0] not in _CASTS


def _assigned_for_compute(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """``w = <node>`` where the next statement that reads ``w`` hands it to a matmul or a reduction
    (Pegasus-X's `w = cat(...) + mask`, then `softmax(w)`: the softmax reads the sum on read, and
    the sum moved into the pieces measured 4 -> 6 writes), or to a call the rule does not know,
    which may be one (a norm module). A torch function the tables do not know runs on a written
    input: it takes nothing on read."""
    small = ref.simple
    if not (isinstance(small, cst.Assign) and small.value is node and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    for later in _later_out_of_if(ref):
        if target.value in names_of(later.node)[0]:
            return any(_may_take_on_read(scope, later, use) for use in _reads(later.node, target.value))
    return False


def _may_take_on_read(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is ``node`` an input of a matmul, a reduction, or a call the rule does not know?"""
    path = ancestors(ref.node, node) or []
    if path and isinstance(path[0], cst.BinaryOperation):
        return isinstance(path[0].operator, cst.MatrixMultiply)
    call = _call_reading(path, node)
    if call is None:
        return False
    op = scope.op(call) or scope.module_op(call)
    return op is None or op[1] == COMPUTE


def _read_once_elementwise(scope: Scope, ref: StatementRef, name: str) -> cst.CSTNode | None:
    """The element-wise work of the next statement that reads the value assigned to ``name`` (in
    its block, or right after the ``if`` it is made in), where it reads it once (metadata aside)
    and the value dies there."""
    for later in _later_out_of_if(ref):
        if name not in names_of(later.node)[0]:
            continue
        uses = [use for use in _reads(later.node, name) if not _reads_metadata(later, use)]
        if not (isinstance(later.node, cst.SimpleStatementLine) and len(uses) == 1 and _dies_at(scope, later, name)):
            return None
        return _elementwise_consumer(scope, later, uses[0], follow=False)
    return None


def _reads_metadata(ref: StatementRef, use: cst.Name) -> bool:
    """``x.dtype``, ``x.shape``, ``x.size(0)``: a read of what the tensor is, not of its values."""
    path = ancestors(ref.node, use) or []
    parent = path[0] if path else None
    return isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in _METADATA


# --------------------------------------------------------------------------- which views merge


def _merges(name: str, args: Sequence[cst.Arg]) -> bool:
    """Does this view (probably) merge dims? ``view``/``reshape`` are judged by their shape."""
    if name in ("ravel", "diagonal"):
        return True
    if name == "flatten":
        dims = [int_literal(a.value) for a in args]
        return not (len(dims) == 2 and dims[0] is not None and dims[0] == dims[1])
    if any(a.keyword is not None or a.star for a in args):
        return False
    shape = [a.value for a in args]
    if len(shape) == 1 and isinstance(shape[0], (cst.Tuple, cst.List)):
        if any(isinstance(el, cst.StarredElement) for el in shape[0].elements):
            return False
        shape = [el.value for el in shape[0].elements]
    if not shape:
        return False  # `reshape(())`: a one-element tensor made a scalar merges nothing
    if len(shape) == 1:
        return int_literal(shape[0]) is not None  # `view(-1)`: one dim; `view(dtype)`, `view(shape)`: unknown
    if int_literal(shape[-1]) == 1:
        return False  # `view(b * h, -1, 1)` is made to broadcast against a larger tensor: its block closes anyway
    product = any(isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Multiply) for s in shape)
    if product and len(shape) <= 3:
        return True  # `reshape(b, t * h)`; `view(b * t, g, v, -1)` more likely keeps a merged dim and splits
    # `view(-1, d)`, not `view(-1, 1)`
    return len(shape) == 2 and int_literal(shape[0]) == -1 and int_literal(shape[1]) != 1


def _fewer_dims_than_viewed(
    scope: Scope, ref: StatementRef, receiver: cst.BaseExpression, args: Sequence[cst.Arg]
) -> bool:
    """Does the view give fewer dims than a view an operand of ``receiver`` was made with
    (``a = s.view(b, w, h, n, n)``, ``a = a + m``, then ``a.view(-1, h, n, n)``)? Then it merges."""
    rank = _explicit_rank(args)
    return rank is not None and _viewed_to_more_dims(scope, ref, receiver, rank, _VIEWED_DEPTH)


def _viewed_to_more_dims(scope: Scope, at: StatementRef, expr: cst.BaseExpression, rank: int, depth: int) -> bool:
    """Is ``expr`` a ``view``/``reshape`` to more than ``rank`` dims, or element-wise work on one,
    following names to their values in the block up to ``depth`` assignments back (Swin V2 adds
    its mask twice: ``a = a.view(b, w, h, n, n) + m``, ``a = a + m``, ``a.view(-1, h, n, n)``)?"""
    if isinstance(expr, cst.Name):
        found = reaching_assignment(at, expr.value) if depth > 0 else None
        if found is None:
            return False
        (at, expr), depth = found, depth - 1
    op = scope.op(expr)
    if op is not None and op[0] in ("view", "reshape") and isinstance(expr, cst.Call):
        viewed = _explicit_rank(expr.args if isinstance(expr.func, cst.Attribute) else expr.args[1:])
        return viewed is not None and viewed > rank
    leaves = _leaves(scope, expr) or []
    return any(_viewed_to_more_dims(scope, at, leaf, rank, depth) for leaf in leaves if leaf is not expr)


def _explicit_rank(args: Sequence[cst.Arg]) -> int | None:
    """The number of dims a ``view``/``reshape`` gives, when its shape is spelt out."""
    if any(a.keyword is not None or a.star for a in args):
        return None
    shape = [a.value for a in args]
    if len(shape) == 1 and isinstance(shape[0], (cst.Tuple, cst.List)):
        if any(isinstance(el, cst.StarredElement) for el in shape[0].elements):
            return None
        return len(shape[0].elements)
    if len(shape) == 1 and int_literal(shape[0]) is None:
        return None  # `view(shape)`, `view(dtype)`
    return len(shape)


# --------------------------------------------------------------------------- element-wise trees


def _leaves(scope: Scope, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The operands of an element-wise tensor expression (its leaves), None if ``expr`` is not one."""
    if not scope.is_tensor(expr):
        return None
    operands = _operands(scope, expr)
    if operands is None:
        return None
    leaves: list[cst.BaseExpression] = []
    for operand in operands:
        leaves += _leaves(scope, operand) or [operand]
    return leaves


def _operands(scope: Scope, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if isinstance(expr, cst.BinaryOperation):
        return None if isinstance(expr.operator, cst.MatrixMultiply) else [expr.left, expr.right]
    if isinstance(expr, cst.UnaryOperation):
        return None if isinstance(expr.operator, cst.Not) else [expr.expression]
    if isinstance(expr, cst.Call):
        op = scope.op(expr)
        if op is None or not _elementwise_work(scope, expr, op[0]) or any(a.star for a in expr.args):
            return None
        receiver = [expr.func.value] if isinstance(expr.func, cst.Attribute) and op[2] is expr.func.value else []
        return receiver + [a.value for a in expr.args]
    return None


def _permuted(scope: Scope, ref: StatementRef, leaf: cst.BaseExpression) -> bool:
    """Is the operand a permuted view (``x.t()``, ``k.transpose(1, 2)`` here or where the name was
    assigned)? Then the element-wise result has its layout, the merging view copies, and the
    same view of the operand copies too: nothing to save."""
    if isinstance(leaf, cst.Name):
        value = reaching_value(ref, leaf.value)
        if value is None:
            return False
        leaf = value
    while (op := scope.op(leaf)) is not None and op[1] == VIEW and op[2] is not None:
        if op[0] in _PERMUTING_VIEWS:
            return True
        leaf = op[2]
    return False


def _elementwise_work(scope: Scope, call: cst.Call, name: str) -> bool:
    """An element-wise op that computes something. ``.to(device)``, ``.to(x.device, x.dtype)``
    are often no-ops, so ``to`` counts only as a cast: ``to(torch.float16)``, ``to(dtype=...)``,
    ``to(dtype)``."""
    if scope.ops.op_class(name) != ELEMENTWISE:
        return False
    if name != "to":
        return True
    if any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args):
        return True
    if len(call.args) != 1:
        return False
    value = call.args[0].value
    if isinstance(value, cst.Name):
        return value.value.endswith("dtype")
    return isinstance(value, cst.Attribute) and scope.torch_name(value) is not None


def _constant(scope: Scope, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False", "None")
    if isinstance(expr, cst.UnaryOperation):
        return _constant(scope, expr.expression)
    return isinstance(expr, cst.Attribute) and scope.torch_name(expr) is not None  # torch.float16, torch.pi


# --------------------------------------------------------------------------- where the view goes


def _feeds_fused_work(scope: Scope, ref: StatementRef, node: cst.CSTNode, follow: bool = True) -> bool:
    """Is the value of ``node`` read by element-wise code or a fused reduction (through simple
    views), here or, when it is assigned to a name, in the next statement that reads it?"""
    path = ancestors(ref.node, node) or []
    current: cst.CSTNode = node
    i = 0
    while i < len(path):
        parent = path[i]
        if isinstance(parent, (cst.Attribute, cst.Arg)) and not _is_view(scope, parent):
            call = path[i + 1] if i + 1 < len(path) else None  # the call this method or argument belongs to
            if not isinstance(call, cst.Call) or (isinstance(parent, cst.Attribute) and call.func is not parent):
                return False
            op = scope.op(call) or scope.module_op(call)
            if op is None or not (_elementwise_work(scope, call, op[0]) or op[1] == VIEW or op[0] in FUSED_REDUCTIONS):
                return False
            if op[1] != VIEW:
                return True
            if op[2] is not current:
                return False  # the value is a view's argument (a shape), not what it views
            parent, i = call, i + 1
        elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)):
            return scope.op(parent) is None  # `@` is the only operator with an op class
        elif isinstance(parent, cst.Subscript):
            if parent.value is not current or not all(_view_index(el.slice) for el in parent.slice):
                return False
        elif isinstance(parent, cst.Assign):
            targets = parent.targets
            if not follow or len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
                return False
            return _read_by_fused_work(scope, ref, targets[0].target.value)
        elif not _is_view(scope, parent):
            return False
        current = parent
        i += 1
    return False


def _read_by_fused_work(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is the view, assigned to ``name``, read once, by fused work (in its block, or right after
    the ``if`` it is made in)? A value read by several kernels is written anyway, with or
    without the view."""
    for later in _later_out_of_if(ref):
        if name not in names_of(later.node)[0]:
            continue
        uses = _reads(later.node, name)
        return (
            isinstance(later.node, cst.SimpleStatementLine)
            and len(uses) == 1
            and _dies_at(scope, later, name)
            and _feeds_fused_work(scope, later, uses[0], follow=False)
        )
    return False


def _dies_at(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is the value ``name`` holds before ``ref`` read no more after it (``ref`` rebinds the
    name, or nothing reads it)?"""
    return name in names_of(ref.node)[1] or not scope.read_after(ref, name)


def _reads(statement: cst.CSTNode, name: str) -> list[cst.Name]:
    """The reads of ``name`` in ``statement``: its names but a plain assignment's targets."""
    targets = set()
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                targets |= {id(t.target) for t in small.targets}
    return [node for node in _names(statement, name) if id(node) not in targets]


def _later_out_of_if(ref: StatementRef) -> Iterator[StatementRef]:
    yield from ref.later()
    owner = ref.block.parent
    if owner is not None and isinstance(owner.node, cst.If):
        yield from owner.later()


def _only_reader(scope: Scope, ref: StatementRef, name: str) -> bool:
    """Is the view in ``ref`` the only read of the value ``name`` holds there (so that value
    is not written for another reader anyway)?"""
    if len(_reads(ref.node, name)) != 1 or not _dies_at(scope, ref, name):
        return False
    for earlier in ref.earlier():
        reads, assigned = names_of(earlier.node)
        if name in assigned:
            return True
        if name in reads:
            return False
    return False


def _names(node: cst.CSTNode, name: str) -> Iterator[cst.Name]:
    if isinstance(node, cst.Name) and node.value == name:
        yield node
    for child in children(node):
        yield from _names(child, name)


def _is_view(scope: Scope, node: cst.CSTNode) -> bool:
    op = scope.op(node) if isinstance(node, (cst.Attribute, cst.Call)) else None
    return op is not None and op[1] == VIEW


def _view_index(index: cst.BaseSlice) -> bool:
    """An index that makes a view: ``None``, ``...``, an integer, a slice of constants."""
    if isinstance(index, cst.Slice):
        return True
    value = index.value
    return isinstance(value, (cst.Integer, cst.Ellipsis)) or int_literal(value) is not None or (
        isinstance(value, cst.Name) and value.value == "None"
    )


# --------------------------------------------------------------------------- the fix


def _fix(scope: Scope, ref: StatementRef, call: cst.Call, name: str, receiver: cst.BaseExpression,
         shape_args: Sequence[cst.Arg]) -> tuple[StatementEdit, ...] | None:
    """``(x * 2).flatten(0, 1)`` -> ``(x.flatten(0, 1) * 2)``: the view moved onto the one operand."""
    if ref.simple is None:
        return None
    leaves = _leaves(scope, receiver) or []
    tensors = [leaf for leaf in leaves if not _constant(scope, leaf)]
    if len(tensors) != 1 or not _concrete(scope, ref, tensors[0]):
        return None
    operand = tensors[0]
    if isinstance(call.func, cst.Attribute) and call.func.value is receiver:
        method = "reshape" if name == "view" else name
        viewed: cst.BaseExpression = cst.Call(cst.Attribute(operand, cst.Name(method)), args=call.args)
    else:
        viewed = call.with_changes(args=[cst.Arg(operand), *shape_args], lpar=[], rpar=[])
    moved = replace_nodes(receiver, {operand: viewed})
    if not moved.lpar and not isinstance(moved, cst.Call):
        moved = moved.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return (StatementEdit(ref.node, (replace_nodes(ref.node, {call: moved}),)),)


def _concrete(scope: Scope, ref: StatementRef, operand: cst.BaseExpression) -> bool:
    """Does the operand have storage when the block runs (so a view of it is only metadata)?"""
    if isinstance(operand, cst.Name):
        name = operand.value
        if name not in scope.tensors or name in scope.inplace:
            return False
        values = (value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == name)
        return all(_leaves(scope, value) is None for value in values)
    if isinstance(operand, cst.Attribute):
        return isinstance(operand.value, cst.Name) and operand.value.value == "self" and scope.is_tensor(operand)
    op = scope.op(operand)
    return op is not None and op[1] == COMPUTE and op[0] not in FUSED_REDUCTIONS
