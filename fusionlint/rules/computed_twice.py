"""FL041: the same reduction or compute-bound op evaluated twice on the same values
(``torch.amax(x, dim)`` on two lines, ``x @ w`` again): the second is a kernel that recomputes a
result Python could have kept."""
from __future__ import annotations

import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, Site, bound_names, children, inner_blocks
from fusionlint.analysis.nodes import Walker, code_of, root_name
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import COMPUTE, OpTables, compute_call_text
from fusionlint.rule import Example, Rule, Violation

# Ops whose result differs from call to call: never the same value twice.
_RANDOM = frozenset(
    """rand rand_like randn randn_like randint randint_like randperm bernoulli multinomial normal poisson
    dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout gumbel_softmax rrelu
    uniform_ normal_ exponential_ geometric_ log_normal_ cauchy_ random_""".split()
)
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "T", "mT", "H", "mH", "real", "imag"})
_PRODUCTS = frozenset({"@", "matmul", "mm", "bmm"})
_PRODUCT_TEXT = re.compile(r"@|\b(?:matmul|mm|bmm)\s*\(")
_TRANSPOSE_SUFFIX = re.compile(r"\.(?:T|mT|t\(\)|t|transpose(?:\([^()]*\))?)$")
_MESSAGE = (
    "`{}` computed again from the same values: keep the first result in a variable and read it here (a kernel "
    "fewer in eager, and under a fusing backend where the two are not read in one kernel)"
)
_TRANSPOSED_MESSAGE = (
    "`{}` is the transpose of a product computed above from the same values: take `.mT` of that result "
    "instead of multiplying again (a matmul kernel and its write fewer, in eager and under a fusing backend)"
)
# The compute ops that are also Python builtins: called bare, they are Python's.
_BUILTIN_STARTS = frozenset({"sum", "max", "min", "all", "any"})
# Builtins that read a value and change nothing.
_HOST_BUILTINS = frozenset({"len", "range", "print", "isinstance", "int", "float", "bool", "min", "max", "abs", "tuple", "list", "zip", "enumerate", "str"})


class ComputedTwice(Rule):
    code = "FL041"
    name = "computed-twice"
    message = "the same reduction or compute-bound op computed again from the same values: keep the first result"
    rationale = """
        A reduction, a matmul, a softmax or a norm is a kernel of its own in eager PyTorch, and
        eager runs every call it is given: code that writes the same call twice on values that
        did not change in between (`c_gmp = torch.amax(x, dim=(-2, -1))` and later `s_gmp =
        torch.amax(x, dim=(-2, -1))`, a softmax of `x @ w` taken again for the argmax, `fp =
        (preds != target).sum()` and `fn = (preds != target).sum()`) runs the kernel twice and
        writes its result twice. Kept in a variable, the first result serves both: eager saves
        one kernel per repeat (the examples: 6 -> 5, 9 -> 7, 9 -> 7 and 4 -> 3 kernels). A fusing
        backend saves as much where the repeat is read by later work than the first (fusionrt:
        the repeated `amax` 2 -> 1 kernels and 3 -> 1 writes, the repeated softmax of a product
        5 -> 3 kernels, the repeated count 3 -> 2 writes), but two reductions of one input read
        by the same expression fuse into one kernel there (`a.exp().sum() / (a.exp().sum() +
        b)`: 2 -> 2 kernels): so the rule claims eager only.

        Flagged: a call of a reduction or compute-bound op (`sum`, `mean`, `amax`, `softmax`,
        `norm`, `matmul`, `einsum`, `conv2d`, `@`, ... as a tensor method or a torch function on
        a tensor) whose code is the same as one evaluated before it in the same statement or in
        an earlier statement of the same block, when no name it reads is assigned or written in
        place in between (an attribute it reads, `self.w`, `p.grad`: also no call of unknown
        code in between, which may change it), neither is inside a lambda, a comprehension, a
        conditional expression, `and`/`or`, a one-line `if` body, an `assert` or a `raise` (it
        may not run, or run on other values), and it draws no random numbers; and, under the
        same conditions, a product that is the transpose of one computed before it
        (`cossim_t = feats2 @ feats1.t()` after `cossim = feats1 @ feats2.t()`, as kornia's
        mutual matcher and CLAP's logits do; `B @ A.mT` after `A @ B.mT`, with `.T`, `.t()`,
        `.transpose(-2, -1)`, `matmul`, `mm`, `bmm`): `cossim.t()` is a view of the first
        result (fusionrt and eager: 4 -> 3 kernels). Of a repeated expression holding repeated
        calls, the outermost is reported. Not flagged: repeats in
        the two arms of an `if` (only one runs) or in a loop's body and after it, repeats of
        element-wise work alone (a fusing backend recomputes it inside the kernel that reads
        it), module calls (`self.norm(x)`: a module may hold state or dropout).
    """
    use_instead = "Assign the first result to a name and read the name where the call is repeated."
    pays_in = (EAGER,)
    fix_safety = FixSafety.NONE
    fix_notes = """
        No fix: the first call may sit inside a larger expression, and naming it means
        splitting that statement; the rule also cannot see a call of unknown code between the
        two that changes a local tensor in place through an alias. Keep the first result by
        hand.
    """
    examples = (
        Example(
            bad="""\
import torch


def gated(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, dim=(-2, -1), keepdim=True)
    h = torch.tanh(x) * peak
    scale = torch.amax(x, dim=(-2, -1), keepdim=True)
    return h + scale * y
""",
            at=((7, 13),),
            fixed=None,
            call="gated(randn(8, 16, 32, 32), randn(8, 16, 32, 32))",
            good="""\
import torch


def gated(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, dim=(-2, -1), keepdim=True)
    h = torch.tanh(x) * peak
    return h + peak * y
""",
        ),
        Example(  # the softmax of a product taken again: the product and the softmax both repeat
            bad="""\
import torch


def entropy_and_choice(x: torch.Tensor, w: torch.Tensor):
    p = torch.softmax(x @ w, dim=-1)
    entropy = -(p * torch.log(p)).sum(-1)
    choice = torch.softmax(x @ w, dim=-1).argmax(-1)
    return entropy, choice
""",
            at=((7, 14),),
            fixed=None,
            call="entropy_and_choice(randn(64, 128), randn(128, 256))",
            good="""\
import torch


def entropy_and_choice(x: torch.Tensor, w: torch.Tensor):
    p = torch.softmax(x @ w, dim=-1)
    entropy = -(p * torch.log(p)).sum(-1)
    choice = p.argmax(-1)
    return entropy, choice
""",
        ),
        Example(  # twice in one expression: the normaliser of a two-way softmax written out
            bad="""\
import torch


def mix(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    w = a.exp().sum() / (a.exp().sum() + b.exp().sum())
    return x * w
""",
            at=((5, 26),),
            fixed=None,
            call="mix(randn(256), randn(256), randn(64, 256))",
            good="""\
import torch


def mix(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    sa = a.exp().sum()
    w = sa / (sa + b.exp().sum())
    return x * w
""",
        ),
        Example(  # the transpose of a product computed above: a mutual nearest-neighbour match
            bad="""\
import torch


def mutual_match(feats1: torch.Tensor, feats2: torch.Tensor):
    cossim = feats1 @ feats2.t()
    cossim_t = feats2 @ feats1.t()
    return cossim.amax(dim=1), cossim_t.amax(dim=1)
""",
            at=((6, 16),),
            fixed=None,
            call="mutual_match(randn(256, 64), randn(300, 64))",
            good="""\
import torch


def mutual_match(feats1: torch.Tensor, feats2: torch.Tensor):
    cossim = feats1 @ feats2.t()
    cossim_t = cossim.t()
    return cossim.amax(dim=1), cossim_t.amax(dim=1)
""",
        ),
    )
    valid = (
        # the operand changes in between; the repeats are in two arms of an if; a random op
        """\
import torch


def f(x: torch.Tensor, flag: bool):
    a = x.sum(-1)
    x = x * 2
    b = x.sum(-1)
    if flag:
        c = x.mean()
    else:
        c = x.mean()
    d = torch.dropout(x, 0.1, True).sum() + torch.dropout(x, 0.1, True).sum()
    return a, b, c, d
""",
        # written in place in between; an attribute after a call of unknown code; element-wise only
        """\
import torch


class Stats:
    def step(self, x: torch.Tensor, opt):
        s = x.sum()
        x.mul_(2)
        t = x.sum()
        n = self.weight.norm()
        opt.step()
        m = self.weight.norm()
        e = torch.exp(x) / (torch.exp(x) + 1)
        return s, t, n, m, e
""",
        # inside comprehensions and lambdas; a module call; a conditional expression
        """\
import torch


def f(xs: list, x: torch.Tensor, norm, flag: bool):
    a = [v.sum() for v in xs]
    b = [v.sum() for v in xs]
    h = norm(x) + norm(x)
    c = x.sum() if flag else 0
    d = x.sum() if flag else 1
    return a, b, h, c, d
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return compute_call_text(ops)

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        for match in compute_call_text(ops).finditer(text):
            name = match.group(0).rstrip("( \t")
            if name in _BUILTIN_STARTS and not text[: match.start()].rstrip().endswith("."):
                continue  # Python's sum/max/min/all/any, not a torch op
            call = _call_text(text, match)
            if call is not None and (_count(text, call) > 1 or any(_count(block[i], call) for i in range(index))):
                return True
            if name in _PRODUCTS and _transposed_partner_text(block, index, text, match):
                return True
        return False

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.is_module:
            return
        groups: dict[tuple[str, int], list[Site]] = {}
        for key, sites in scope.sites.items():
            if key == "@" or scope.ops.op_class(key) == COMPUTE:
                group = "@" if key in _PRODUCTS else key
                for site in sites:
                    if not site.conditional:
                        groups.setdefault((group, id(site.statement.block)), []).append(site)
        found: list[tuple[cst.CSTNode, bool]] = []  # (the repeat, whether it is the first's transpose)
        for sites in groups.values():
            if len(sites) < 2:
                continue
            seen: dict[str, Site] = {}
            products: dict[tuple[str, str], Site] = {}  # (A, B) of each ``A @ B.mT`` seen
            for site in sorted(sites, key=lambda s: s.statement.index):  # stable: in order within a statement
                op = scope.op(site.node)
                if op is None or op[1] != COMPUTE or _checking(site) or _in_one_line_suite(site) or _random(site.node):
                    continue
                code = code_of(site.node)  # type: ignore[arg-type]
                first = seen.setdefault(code, site)
                if first is not site:
                    if _unchanged(scope, site.node, first, site):
                        found.append((site.node, False))
                    continue
                pair = _transposed_product(scope, site.node)
                if pair is None:
                    continue
                first = products.get(pair[::-1])
                if first is not None and pair[0] != pair[1] and _unchanged(scope, site.node, first, site):
                    found.append((site.node, True))
                products.setdefault(pair, site)
        inner: set[int] = set()
        for node, _ in found:
            inner.update(id(child) for child in _descendants(node))
        for node, transposed in found:
            if id(node) not in inner:
                code = code_of(node)  # type: ignore[arg-type]
                quoted = code if len(code) <= 60 and "\n" not in code else code[:57].split("\n")[0] + "..."
                yield Violation(node, message=(_TRANSPOSED_MESSAGE if transposed else _MESSAGE).format(quoted))


def _transposed_product(scope: Scope, node: cst.CSTNode) -> tuple[str, str] | None:
    """(A, B) as code of ``A @ B.mT`` (``B.T``, ``B.t()``, ``B.transpose(-2, -1)``; ``matmul``, ``mm``,
    ``bmm`` as functions or methods), whose transpose is ``B @ A.mT``; None for another product."""
    if isinstance(node, cst.BinaryOperation):
        left, right = node.left, node.right
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and all(arg.keyword is None and not arg.star for arg in node.args):
        if scope.torch_name(node.func) is not None and len(node.args) == 2:
            left, right = node.args[0].value, node.args[1].value
        elif scope.torch_name(node.func) is None and len(node.args) == 1:
            left, right = node.func.value, node.args[0].value
        else:
            return None
    else:
        return None
    untransposed = _untransposed(right)
    return (code_of(left), code_of(untransposed)) if untransposed is not None else None


def _untransposed(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``B`` of ``B.T``, ``B.mT``, ``B.t()``, ``B.transpose(-2, -1)`` (or ``(-1, -2)``)."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT"):
        return expr.value
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    method, args = expr.func.attr.value, expr.args
    if method == "t" and not args:
        return expr.func.value
    if method == "transpose" and len(args) == 2 and sorted(code_of(arg.value) for arg in args) == ["-1", "-2"]:
        return expr.func.value
    return None


def _call_text(text: str, match: re.Match[str]) -> str | None:
    """What two statements computing the same op must both hold: a call's text from its name to
    its closing parenthesis, or for ``@`` the words next to it (``x @ w.T`` -> ``x@w.T``)."""
    if match.group(0) == "@":
        before = re.search(r"[\w.]*\s*$", text[: match.start()])
        after = re.match(r"\s*[\w.]*", text[match.end():])
        return f"{before.group(0).strip() if before else ''}@{after.group(0).strip() if after else ''}"
    depth = 0
    for i in range(match.end() - 1, len(text)):
        char = text[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[match.start(): i + 1]
    return None


def _transposed_partner_text(block: Sequence[str], index: int, text: str, match: re.Match[str]) -> bool:
    """Can a statement up to this one hold the transposed product (``B @ A.T`` for ``A @ B.T``): another
    product, in a statement holding the words next to this product (its right operand's without
    the transpose)?"""
    if match.group(0) == "@":
        before = re.search(r"[\w.]*\s*$", text[: match.start()])
        after = re.match(r"\s*[\w.]*", text[match.end():])
        words = [before.group(0).strip() if before else "", after.group(0).strip() if after else ""]
    else:
        call = _call_text(text, match)
        if call is None:
            return False
        args = _top_level_args(call[call.index("(") + 1: -1])
        if len(args) == 2:
            words = args
        elif len(args) == 1:
            before = re.search(r"[\w.]*$", text[: match.start()].rstrip().rstrip("."))
            words = [before.group(0) if before else "", args[0]]
        else:
            return False
    words[1] = _TRANSPOSE_SUFFIX.sub("", words[1])
    for i in range(index + 1):
        other = block[i]
        markers = len(_PRODUCT_TEXT.findall(other))
        if markers > (1 if i == index else 0) and all(word in other for word in words):
            return True
    return False


def _top_level_args(text: str) -> list[str]:
    """The arguments of a call's text, split at commas outside brackets, stripped."""
    args, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return args + [last] if last else args


def _count(text: str, call: str) -> int:
    """How often ``call`` (a ``_call_text``) occurs in ``text``."""
    if "@" in call and not call.endswith(")"):
        left, _, right = call.partition("@")
        pattern = re.escape(left) + r"\s*@\s*" + re.escape(right)
        return len(re.findall(pattern, text))
    return text.count(call)


def _descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in children(node):
        yield child
        yield from _descendants(child)


def _random(node: cst.CSTNode) -> bool:
    """Does the expression draw random numbers (a different value on each evaluation)?"""
    return any(
        isinstance(inner, cst.Call) and isinstance(inner.func, (cst.Name, cst.Attribute))
        and (inner.func.value if isinstance(inner.func, cst.Name) else inner.func.attr.value) in _RANDOM
        for inner in _descendants(node)
    )


def _checking(site: Site) -> bool:
    """Is the site in an ``assert`` or a ``raise`` (validation: its message runs only on failure)?"""
    statement = site.statement.node
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Assert, cst.Raise)) for small in statement.body
    )


def _in_one_line_suite(site: Site) -> bool:
    """Is the site in the body of ``if c: y = x.sum()`` (a one-line suite runs only sometimes)?"""
    statement = site.statement.node
    if not isinstance(statement, cst.BaseCompoundStatement):
        return False
    suites = [suite for suite in inner_blocks(statement) if isinstance(suite, cst.SimpleStatementSuite)]
    return any(site.node is inner for suite in suites for inner in _descendants(suite))


class _Reads(Walker):
    """The names an expression reads, and whether it reads data through an attribute (``self.w``,
    ``p.grad``), which code elsewhere may change."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.names: set[str] = set()
        self.attribute = False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute):
            if self.scope.torch_name(func) is None:
                self.walk(func.value)  # a method's receiver, not its name
        else:
            self.walk(func)
        for arg in node.args:
            self.walk(arg.value)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self.scope.torch_name(node) is not None:
            return False
        if not (node.attr.value in _METADATA and self.scope.is_tensor(node.value)):
            self.attribute = True
        self.walk(node.value)
        return False


class _Writes(Walker):
    """The names a statement binds or writes in place, and whether it calls code that is not a
    torch op (which may change what an attribute holds)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.names: set[str] = set()
        self.unknown_call = False

    def _target(self, target: cst.BaseExpression) -> None:
        names = bound_names(target)
        if names:
            self.names.update(names)
        else:
            name = root_name(target)
            if name:
                self.names.add(name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._target(node.name)  # type: ignore[arg-type]

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name.endswith("_") and not name.startswith("_") and isinstance(func, cst.Attribute):
            self._target(func.value)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                self._target(arg.value)
        if name in _HOST_BUILTINS and isinstance(func, cst.Name):
            return
        op = self.scope.op(node)
        if op is None or op[1] is None:
            self.unknown_call = True


def _unchanged(scope: Scope, node: cst.CSTNode, first: Site, again: Site) -> bool:
    """Does ``again`` see the values ``first`` saw: nothing it reads rebound or written in place
    from ``first``'s statement on (and, where it reads an attribute, no unknown code called)?"""
    reads = _Reads(scope)
    reads.walk(node)
    block = first.statement.block
    for index in range(first.statement.index, again.statement.index):
        writes = _Writes(scope)
        writes.walk(block.statements[index])
        if writes.names & reads.names or (reads.attribute and writes.unknown_call):
            return False
    return True
