"""Lint one source text: prefilter, parse only what can hold a finding, run all rules, fix.

The expensive step is libcst's parser (~11k lines/s). Most code cannot hold a finding, so the
engine narrows the text before parsing it:

1. a file that never mentions ``torch`` only gets its syntax checked (stdlib ``ast``, ~10x faster);
2. the ``ast`` gives the file's torch imports and the line ranges of its functions; a function
   (or module-level statement) is a candidate when the text test of an enabled rule matches it;
3. every other line is left out (only the headers of enclosing classes stay) and libcst parses
   the lines kept; a finding's line is mapped back to the file's (a blank line costs libcst
   three nodes). When the kept lines do not parse, the whole file is parsed instead.

Fixes are rendered per statement and spliced into the original text as whole-line edits, so the
lines a fix does not touch stay byte for byte what they were (CRLF included). A fix is kept only
if the fixed text still parses and the fixes reach a fixpoint (a second lint fixes nothing).
"""
from __future__ import annotations

import ast
import functools
import io
import itertools
import re
import sys
import threading
import tokenize
from bisect import bisect_right
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Callable, Collection, Iterable, Iterator, TypeVar

from libcst.metadata.position_provider import PositionProvidingCodegenState

from fusionlint.analysis import project
from fusionlint.analysis.nodes import remembered_children
from fusionlint.model import Finding, FixMode, FixSafety, LineEdit, LintOptions, LintResult, internal_error
from fusionlint.ops import OpTables, op_tables
from fusionlint.rule import Rule, StatementEdit
from fusionlint.rules import SYNTAX_ERROR_CODE, all_rules

_MAX_FIX_PASSES = 8
# libcst and the analysis recurse about ten Python frames per nesting level of an expression; a
# file the default limit cannot lint is linted again in a thread with room for any nesting that
# CPython itself compiles (ast.parse, run first under the default limit, bounds it).
_DEEP_RECURSION_LIMIT = 40_000
_DEEP_STACK_BYTES = 256 * 1024 * 1024
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_NEWLINE_AT_END = re.compile(r"(?:\r\n|\r|\n)$")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"[ \t]*#[ \t]*fusionlint:[ \t]*noqa[ \t]*", re.IGNORECASE)


@dataclass(frozen=True)
class _Report:
    finding: Finding
    edits: tuple[LineEdit, ...] | None  # None: no fix offered

    @property
    def key(self) -> tuple:
        """Identifies a finding across fix passes (its line number may move)."""
        f = self.finding
        return f.code, f.column, f.message


def lint_source(source: str, path: str, options: LintOptions) -> LintResult:
    """Lint (and with ``options.fix``, fix) one file's text.

    Never raises: a bug in the engine comes back as an ``InternalError`` in ``errors``, so the
    other files still run and the caller can tell a crash from a clean file.
    """
    try:
        return _lint(source, path, options)
    except Exception as exc:
        failure = exc
    if _recursed(failure):  # deep nesting, valid Python all the same
        try:
            return _with_deep_stack(lambda: _lint(source, path, options))
        except Exception as exc:
            failure = exc
    return LintResult(findings=(), errors=(internal_error(path, failure),))


def _recursed(exc: BaseException | None) -> bool:
    """Did ``exc`` come from running out of recursion? libcst turns some RecursionErrors into
    other errors while it unwinds, so the whole chain of causes is searched."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RecursionError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


_T = TypeVar("_T")


def _with_deep_stack(work: Callable[[], _T]) -> _T:
    """``work()`` in a thread with a large stack, under a recursion limit that it can afford."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:
            outcome.append((False, exc))

    limit = sys.getrecursionlimit()
    previous_stack = threading.stack_size(_DEEP_STACK_BYTES)
    sys.setrecursionlimit(max(limit, _DEEP_RECURSION_LIMIT))
    try:
        worker = threading.Thread(target=run, name="fusionlint-deep", daemon=True)
        worker.start()
        worker.join()
    finally:
        sys.setrecursionlimit(limit)
        threading.stack_size(previous_stack)
    finished, value = outcome[0]
    if not finished:
        raise value
    return value


def _lint(source: str, path: str, options: LintOptions) -> LintResult:
    tables = op_tables(options.extra_ops)
    rules = _rules_to_run(options.codes)
    check_syntax = SYNTAX_ERROR_CODE in options.codes
    errors: list[str] = []

    def check(text: str) -> list[_Report]:
        reports, problems = _check(text, path, rules, options.codes, tables, check_syntax)
        errors.extend(p for p in problems if p not in errors)
        return _unsuppressed(reports, text)

    reports = check(source)
    allowed = lambda r: r.edits is not None and options.fix.allows(r.finding.fix_safety)  # noqa: E731
    if options.fix is FixMode.OFF or not any(allowed(r) for r in reports):
        return _result(reports, (), None, errors)

    text, fixed, dropped = source, [], set()
    for _ in range(_MAX_FIX_PASSES):
        todo = [r for r in reports if allowed(r) and r.key not in dropped]
        if not todo:
            break
        chosen = _non_overlapping(todo)
        new_text = _apply(text, [e for r in chosen for e in r.edits])
        if not _parses(new_text, path):
            good = [r for r in chosen if _parses(_apply(text, list(r.edits)), path)]
            for r in chosen:
                if r not in good:
                    dropped.add(r.key)
                    errors.append(f"{path}:{r.finding.line}:{r.finding.column}: {r.finding.code} fix dropped: "
                                  "the fixed text does not parse")
            if not good:
                continue
            chosen, new_text = good, _apply(text, [e for r in good for e in r.edits])
        text = new_text
        fixed.extend(r.finding for r in chosen)
        reports = check(text)
    else:
        if any(allowed(r) and r.key not in dropped for r in reports):
            errors.append(f"{path}: fixes dropped: they did not reach a fixpoint in {_MAX_FIX_PASSES} passes")
            return _result(check(source), (), None, errors)
    return _result(reports, fixed, text if text != source else None, errors)


def _rules_to_run(codes: frozenset[str]) -> list[Rule]:
    """The enabled rules and the rules they yield to, each after the rules it yields to."""
    by_code = {rule.code: rule for rule in all_rules() if rule.code != SYNTAX_ERROR_CODE}
    wanted = {code for code in codes if code in by_code}
    todo = list(wanted)
    while todo:
        for code in by_code[todo.pop()].yields_to - wanted:
            wanted.add(code)
            todo.append(code)

    return [by_code[code]() for code in sorted(wanted, key=lambda code: (_depth(by_code, code), code))]


def _depth(by_code: dict[str, type[Rule]], code: str) -> int:
    """1 + the length of the longest chain of rules ``code`` yields to."""
    return 1 + max((_depth(by_code, other) for other in by_code[code].yields_to), default=0)


def _result(reports: list[_Report], fixed: Iterable[Finding], text: str | None, errors: list[str]) -> LintResult:
    findings = sorted((r.finding for r in reports), key=lambda f: (f.line, f.column, f.code))
    return LintResult(findings=tuple(findings), fixed=tuple(fixed), source=text, errors=tuple(errors))


# --------------------------------------------------------------------------- one check


def _check(
    text: str, path: str, rules: list[Rule], codes: frozenset[str], tables: OpTables, check_syntax: bool
) -> tuple[list[_Report], list[str]]:
    """Findings of one text (before suppression), and internal problems worth showing."""
    mentions_torch = "torch" in text
    if not mentions_torch and not check_syntax:
        return [], []
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return ([_syntax_report(exc, text)] if check_syntax else []), []
    if not mentions_torch or not rules:
        return [], []

    from fusionlint.analysis import module_facts

    facts = module_facts(tree, path)
    if not facts.imports_torch:
        return [], []
    lines = _LINE.findall(text)
    enabled = [rule for rule in rules if rule.code in codes]
    masked = _mask(lines, tree, _TextTests(enabled, text, lines, tables))
    if masked is None:
        return [], []

    try:
        module = _parse_module(masked.text)
    except Exception as exc:  # the masked text may trip libcst where the whole file does not
        if _recursed(exc):
            raise  # lint_source retries with a deeper stack
        masked = None
        try:
            module = _parse_module(text)
        except Exception as exc:
            if _recursed(exc):
                raise
            return [], [f"{path}: libcst cannot parse this file, it was not checked: {_describe(exc)}"]
    try:
        with remembered_children():
            return _run_rules(module, masked, lines, path, rules, codes, tables, facts)
    finally:
        project.record(facts)  # the files of the package whose facts the rules consulted


def _parse_module(text: str):
    """libcst's module of ``text``, parsed without validating each node as it is built.

    A node validates its fields when it is made, which is a tenth of a parse; the parser makes
    valid nodes. The nodes the rules make for their fixes, after the parse, are still validated.
    """
    import libcst as cst
    from libcst._nodes.base import CSTNode

    validate = CSTNode.__post_init__
    CSTNode.__post_init__ = _unvalidated
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = validate


def _unvalidated(node) -> None:
    pass


def _run_rules(
    module, masked: _Masked | None, lines: list[str], path: str, rules: list[Rule], codes: frozenset[str],
    tables: OpTables, facts
) -> tuple:
    from fusionlint.analysis import collect_scopes

    scopes = collect_scopes(module, facts, tables)
    # A rule runs only on the top-level units where its text test passed: where it says False
    # the rule cannot report (Rule.may_match), and the analyses of the other rules' units are
    # not its business. A rule that yields to others is always run with them, so those see
    # every unit where it might report. Without the units' texts, every rule runs everywhere.
    codes_at: dict[int, set[str]] = {}
    if masked is not None and masked.units is not None and len(masked.units) == len(module.body):
        codes_at = {
            id(unit): masked.codes.get(masked.first_line(node), set()) for unit, node in zip(module.body, masked.units)
        }
    found = []
    problems = []
    for rule in rules:
        deciding = {rule.code} | {other.code for other in rules if rule.code in other.yields_to}

        def runs_on(scope, deciding=deciding) -> bool:
            wanted = codes_at.get(id(scope.unit)) if codes_at and scope.unit is not None else None
            return wanted is None or not deciding.isdisjoint(wanted)

        try:
            found.extend((rule, scope, v) for scope in scopes if runs_on(scope) for v in rule.check(scope))
        except Exception as exc:  # the other rules still run; the run fails all the same
            if _recursed(exc):
                raise  # lint_source retries with a deeper stack
            problems.append(internal_error(f"{path} ({rule.code})", exc))
    if not found:
        return [], problems
    located = [(scope, (v.node, *v.spans, *(e.statement for e in v.fix or ()))) for _, scope, v in found]
    positions = _Positions(module, masked, lines, {id(node) for _, nodes in located for node in nodes})
    for scope, nodes in located:
        positions.expect(scope, nodes)
    reports = []
    kept_lines: dict[str, list[int]] = {}  # the first line of each finding kept so far, by code
    for rule, scope, violation in found:  # in the order of ``rules``: a rule after those it yields to
        locate = positions.of(scope)
        where = locate(violation.node)
        spans = [locate(node) for node in violation.spans] or [where]
        if any(
            span.start.line <= line <= span.end.line
            for code in rule.yields_to
            for line in kept_lines.get(code, ())
            for span in spans
        ):
            continue
        kept_lines.setdefault(rule.code, []).append(where.start.line)
        if rule.code not in codes:
            continue  # it ran only to take precedence
        edits = None
        if violation.fix is not None:
            edits = tuple(_render(module, locate, lines, edit) for edit in violation.fix)
        finding = Finding(
            code=rule.code,
            message=violation.message or rule.message,
            line=where.start.line,
            column=where.start.column + 1,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            fix_safety=rule.fix_safety if edits is not None else FixSafety.NONE,
            pays_in=_pays_in(rule, violation),
            edits=edits or (),
            rule=rule.name,
            fix_title=rule.fix_title() if edits is not None else "",
        )
        reports.append(_Report(finding, edits))
    return reports, problems


def _pays_in(rule: Rule, violation) -> tuple[str, ...]:
    """The finding's places: the violation's own, which may only narrow the rule's claim."""
    if not violation.pays_in:
        return rule.pays_in
    if not set(violation.pays_in) <= set(rule.pays_in):
        raise ValueError(f"{rule.code}: a finding claims {violation.pays_in}, beyond the rule's {rule.pays_in}")
    return violation.pays_in


class _Positions:
    """Line/column of nodes, computed only for the functions that hold a finding.

    libcst's PositionProvider renders the whole module it is given. Rendering only the method
    or top-level function (or class) around a node, at its indentation and from its first line
    (both known from the stdlib ast), costs a fraction of that: a class is mostly other methods.
    The rendering stops once the nodes expected in the statement are placed (a finding is often
    early in its function); a node it did not reach has the statement rendered again, whole.
    """

    def __init__(self, module, masked: "_Masked | None", lines: list[str], wanted: set[int] | None = None) -> None:
        """``wanted``: the ids of the nodes that will be located (None: any node)."""
        self.module = module
        self.lines = lines
        self.wanted = wanted
        self.numbers = masked.numbers if masked is not None else None  # the file's line of each parsed line
        self.parsed_line = {number: i for i, number in enumerate(self.numbers or (), start=1)}
        self.first_lines: dict[int, int] = {}  # id(statement) -> its first line, for units and class members
        if masked is not None and masked.units is not None and len(masked.units) == len(module.body):
            for unit, node in zip(module.body, masked.units):
                self._place(unit, node, masked)
        self.cache: dict[int, tuple[dict, int, bool]] = {}  # id(statement) -> (positions, shift, partial)
        self.expected: dict[int, set[int]] = {}  # id(statement) -> the ids of the nodes to be located in it

    def _place(self, statement, node: ast.stmt, masked: "_Masked") -> None:
        """Record the first line of ``statement`` (parsed from ``node``'s text) and of its members."""
        import libcst as cst

        self.first_lines[id(statement)] = masked.first_line(node)
        if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            members = [inner for inner in node.body if masked.keep[inner.lineno]]
            parsed = statement.body.body
            if len(members) == len(parsed) and all(
                isinstance(member, (cst.FunctionDef, cst.ClassDef))
                and member.name.value == getattr(inner, "name", None)
                for member, inner in zip(parsed, members)
            ):
                for member, inner in zip(parsed, members):
                    self._place(member, inner, masked)

    def _placed(self, scope) -> list:
        """The placed statements around ``scope``, smallest first ([None]: the whole module)."""
        return [n for n in (scope.node, scope.unit) if n is not None and id(n) in self.first_lines] or [None]

    def expect(self, scope, nodes: Iterable) -> None:
        """``nodes`` will be located in ``scope``."""
        self.expected.setdefault(id(self._placed(scope)[0]), set()).update(map(id, nodes))

    def of(self, scope) -> Callable:
        """A function from node to CodeRange, for nodes inside ``scope``: found in the smallest
        placed statement around the scope that holds them (the whole module when none is placed)."""
        placed = self._placed(scope)

        def locate(node):
            for statement in placed:
                where = self._where(statement, node)
                if where is not None:
                    return where
            raise KeyError(node)

        return locate

    def _where(self, statement, node):
        key = id(statement)
        if key not in self.cache:
            self.cache[key] = self._render(statement, self.expected.get(key))
        recorded, shift, partial = self.cache[key]
        where = recorded.get(node)
        if where is None and partial:
            self.cache[key] = self._render(statement, None)
            recorded, shift, partial = self.cache[key]
            where = recorded.get(node)
        if where is None or not shift and self.numbers is None:
            return where
        from libcst.metadata import CodeRange

        return CodeRange(self._in_file(where.start, shift), self._in_file(where.end, shift, end=True))

    def _in_file(self, position, shift: int, end: bool = False):
        """A position in the parsed text (``shift`` lines down), in the file. A range that ends at
        the start of a line ends after the line before, which the next parsed line may not follow."""
        from libcst.metadata import CodePosition

        line = position.line + shift
        if self.numbers is None:
            return CodePosition(line, position.column)
        if end and position.column == 0 and line > 1:
            return CodePosition(self.numbers[line - 2] + 1, 0)
        return CodePosition(self.numbers[line - 1], position.column)

    def _render(self, statement, until: set[int] | None) -> tuple[dict, int, bool]:
        """The positions of the nodes of ``statement`` (None: the whole module) rendered alone, the
        lines to add to them to place them in the text parsed, and whether the rendering stopped
        early: once the nodes of ``until`` were placed (None: never)."""
        recorded = _Recorded(None if self.wanted is None else set(self.wanted), None if until is None else set(until))
        state = _RecordingState(
            default_indent=self.module.default_indent, default_newline=self.module.default_newline, provider=recorded
        )
        shift = 0
        try:
            if statement is None:
                self.module._codegen(state)
            else:
                first = self.first_lines[id(statement)]
                line = self.lines[first - 1]
                state.increase_indent(line[: len(line) - len(line.lstrip(" \t"))])
                shift = self.parsed_line.get(first, first) - 1
                statement.with_changes(leading_lines=())._codegen(state)
        except _Placed:  # the nodes still open were recorded cut short on the way out: dropped
            return {node: where for node, where in recorded._computed.items() if id(node) in recorded.done}, shift, True
        return recorded._computed, shift, False


class _Recorded:
    """Where libcst's position-recording codegen state puts each node's range (a metadata
    provider's ``_computed``), without a provider's machinery; with ``wanted``, the ids of the
    only nodes to record; with ``until``, those after whose placing the rendering stops."""

    def __init__(self, wanted: set[int] | None, until: set[int] | None = None) -> None:
        self._computed: dict = {}
        self.wanted = wanted
        self.until = until
        self.done: set[int] = set()  # the ids of the nodes whose rendering ended


class _Placed(Exception):
    """The nodes a rendering was for are placed: it stops."""


class _RecordingState(PositionProvidingCodegenState):
    """libcst's position-recording codegen, recording only the nodes its provider wants (and the
    children whose positions theirs are taken from): recording every node of a method cost more
    than rendering it."""

    __slots__ = ()

    def before_codegen(self, node) -> None:
        if self.provider.wanted is None or id(node) in self.provider.wanted:
            super().before_codegen(node)

    def after_codegen(self, node) -> None:
        provider = self.provider
        if provider.wanted is None or id(node) in provider.wanted:
            super().after_codegen(node)
            provider.done.add(id(node))
            if provider.until is not None:
                provider.until.discard(id(node))
                if not provider.until:
                    raise _Placed

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> Iterator[None]:
        wanted = self.provider.wanted
        if wanted is not None and id(node) not in wanted:
            yield
            return
        if wanted is not None:
            wanted.update(id(child) for child in (start_node, end_node) if child is not None)
        with super().record_syntactic_position(node, start_node=start_node, end_node=end_node):
            yield


def _render(module, locate: Callable, lines: list[str], edit: StatementEdit) -> LineEdit:
    """The statement's whole lines, replaced by the edit's statements at its indentation."""
    where = locate(edit.statement)
    start, end = where.start.line, where.end.line
    first = lines[start - 1]
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    newline = _NEWLINE_AT_END.search(first)
    newline = newline.group() if newline else module.default_newline
    last_ending = _NEWLINE_AT_END.search(lines[end - 1])
    rendered = [
        _NEWLINE_AT_END.sub("", _code_at(module, s.with_changes(leading_lines=()), indent)) for s in edit.replacement
    ]
    text = newline.join(rendered)
    if rendered:
        text += last_ending.group() if last_ending else ""
    return LineEdit(start, end, text)


def _code_at(module, statement, indent: str) -> str:
    """The statement's code at ``indent``. ``Module.code_for_node`` renders it at column 0, which
    shifts continuation lines inside brackets left of the statement they belong to."""
    from libcst._nodes.internal import CodegenState

    state = CodegenState(module.default_indent, module.default_newline, indent_tokens=[indent])
    statement._codegen(state)
    return "".join(state.tokens)


def _syntax_report(exc: BaseException, text: str) -> _Report:
    if "\0" in text and "null bytes" in str(exc):  # 3.10 gives no position, 3.11 column 1
        nul = text.index("\0")
        exc = SyntaxError("source code cannot contain null bytes")
        exc.lineno, exc.offset = text.count("\n", 0, nul) + 1, nul - text.rfind("\n", 0, nul)
    if isinstance(exc, SyntaxError):
        line, column = exc.lineno or 1, exc.offset or 1
        message = f"SyntaxError: {exc.msg} (line {line}, column {column}); the file was not checked"
    else:
        line, column = 1, 1
        message = f"cannot parse: {_describe(exc)}; the file was not checked"
    finding = Finding(SYNTAX_ERROR_CODE, message, line, column, line, column)
    return _Report(finding, None)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# --------------------------------------------------------------------------- masking


@dataclass(frozen=True)
class _Masked:
    """The text libcst parses: the file's lines that may hold a finding."""

    text: str
    numbers: list[int] | None = None  # the file's line of each line of ``text`` (None: all its lines)
    # The top-level statements kept, in order, which place each parsed one without rendering the
    # module before it (None: the whole text is kept), and the codes of the rules whose text test
    # passed in each, by its first line.
    units: list[ast.stmt] | None = None
    codes: dict[int, set[str]] = field(default_factory=dict)
    keep: list[bool] = field(default_factory=list)  # by line number: kept

    def first_line(self, node: ast.stmt) -> int:
        """The statement's first kept line: its first decorator's, unless those were blanked (the
        decorators of a class kept only as the header around a candidate)."""
        start = _start_line(node)
        return start if self.keep[start] else node.lineno


def _mark_class_body(body: list[ast.stmt], lines: list[str], matching: "_Matching", keep: list[bool],
                     found: set[str]) -> bool:
    """Whether the functions of ``body`` hold a candidate, marking in ``keep`` the lines that hold
    them and adding to ``found`` the codes matched."""
    marked = False
    for node in body:
        if isinstance(node, ast.ClassDef):
            body_first = _start_line(node.body[0])
            if body_first <= node.lineno:  # `class A: ...` on one line
                if _candidates_in(node.body, lines, matching, found):
                    _mark(keep, _start_line(node), node.end_lineno or node.lineno)
                    marked = True
            elif _mark_class_body(node.body, lines, matching, keep, found):
                _mark(keep, node.lineno, body_first - 1)
                marked = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _candidates_in(node.body, lines, matching, found):
                _mark(keep, _start_line(node), node.end_lineno or node.lineno)
                marked = True
    return marked


def _mark(keep: list[bool], first: int, last: int) -> None:
    for i in range(first, last + 1):
        keep[i] = True


def _mask(lines: list[str], tree: ast.Module, matching: "_Matching") -> _Masked | None:
    """The lines that may hold a finding; None if there are none.

    The rules' text tests (``Rule.may_match``) run on every statement. A function holding a
    candidate statement is kept whole (with its decorators), classes around it keep their
    header lines; a candidate at module level keeps the whole file (module-level analysis
    needs all of it). Kept lines are kept whole, so every kept token keeps its column.
    """
    keep = [False] * (len(lines) + 1)
    if _candidates_in(tree.body, lines, matching, set(), skip_definitions=True, first_only=True):
        return _Masked("".join(lines))
    codes: dict[int, set[str]] = {}
    for node in tree.body:
        found: set[str] = set()
        if _mark_class_body([node], lines, matching, keep, found):
            codes[_start_line(node) if keep[_start_line(node)] else node.lineno] = found
    if not codes:
        return None
    numbers = [i for i in range(1, len(lines) + 1) if keep[i]]
    text = "".join(lines[i - 1] for i in numbers)
    return _Masked(text, numbers, [node for node in tree.body if keep[node.lineno]], codes, keep)


class _Texts:
    """The source text of each statement of a block, computed on demand (headers only for
    compound statements)."""

    def __init__(self, body: list[ast.stmt], lines: list[str]) -> None:
        self.body = body
        self.lines = lines
        self.texts: list[str | None] = [None] * len(body)  # a rule's test may read every statement
        self.spans: list[tuple[int, int] | None] = [None] * len(body)

    def __len__(self) -> int:
        return len(self.body)

    def __getitem__(self, index: int) -> str:
        text = self.texts[index]
        if text is None:
            first, last = self.span(index)
            text = self.texts[index] = "".join(self.lines[first - 1 : last])
        return text

    def span(self, index: int) -> tuple[int, int]:
        """The first and last line of the statement's text."""
        span = self.spans[index]
        if span is None:
            node = self.body[index]
            last = node.end_lineno or node.lineno
            inner = _blocks(node)
            if inner:
                last = max(node.lineno, min(b[0].lineno for b in inner) - 1)
            span = self.spans[index] = node.lineno, last
        return span


class _TextTests:
    """The codes of the rules whose text test passes on a statement.

    A rule with a needle (``Rule.needle``) is asked only about the statements on whose lines
    its needle matched, found by one search of the whole text per needle: most statements hold
    few of the rules' needles, and a regex over the text costs less than a call per statement
    and rule.
    """

    def __init__(self, rules: list[Rule], text: str, lines: list[str], ops: OpTables) -> None:
        self.ops = ops
        self.untested: list[Rule] = []
        self.searched: list[tuple[Rule, int]] = []  # with the bits of its needle's searches
        bits: dict[re.Pattern[str] | frozenset[str], int] = {}
        for rule in rules:
            needle = rule.needle(ops)
            if needle is None:
                self.untested.append(rule)
            else:
                mask = 0
                for search in _file_searches(needle):
                    mask |= 1 << bits.setdefault(search, len(bits))
                self.searched.append((rule, mask))
        starts = list(itertools.accumulate(map(len, lines), initial=0))
        self.found_on = found_on = [0] * (len(lines) + 1)  # by line number: the bits of the needles found

        def found(start: int, end: int, flag: int) -> None:
            first = bisect_right(starts, start)
            found_on[first] |= flag
            if end - start > 1:  # it may run onto the lines after
                for line in range(first + 1, bisect_right(starts, end - 1) + 1):
                    found_on[line] |= flag

        called: dict[str, int] = {}  # a name, reversed -> the flags of the searches for its calls
        for search, bit in bits.items():
            if isinstance(search, frozenset):
                for name in search:
                    called[name[::-1]] = called.get(name[::-1], 0) | 1 << bit
                continue
            for match in search.finditer(text):
                found(*match.span(), 1 << bit)
        if called:
            size = len(text)
            for match in _REVERSED_CALL.finditer(text[::-1]):
                flags = called.get(match.group(1))
                if flags:
                    found(size - match.end(), size - match.start(), flags)
        self.asked: dict[int, list[Rule]] = {}  # by the bits found on a statement's lines

    def __call__(self, block: _Texts, index: int, settled: Collection[str] = ()) -> set[str]:
        """The codes that pass on the statement, the rules of ``settled`` not asked."""
        first, last = block.span(index)
        bits = 0
        for line in range(first, last + 1):
            bits |= self.found_on[line]
        asked = self.asked.get(bits)
        if asked is None:
            asked = self.asked[bits] = self.untested + [rule for rule, mask in self.searched if bits & mask]
        return {rule.code for rule in asked if rule.code not in settled and rule.may_match(block, index, self.ops)}


# A rule set's text tests: the codes that pass on statement ``index`` of a block, the codes
# given (settled) not asked.
_Matching = Callable[["_Texts", int, Collection[str]], set[str]]


@functools.lru_cache(maxsize=64)
def _file_searches(needle: re.Pattern[str]) -> tuple[re.Pattern[str] | frozenset[str], ...]:
    """The searches of a whole file that find the needle's matches (a superset of them): one per
    alternative of a top-level ``a|b`` (the regex engine tries every alternative at every
    position, several searches of one alternative each cost less; rules share some), each
    without a leading ``\\b``, which makes a search try the whole pattern at every word boundary
    instead of skipping to the characters it starts with. An alternative that is a call of some
    names (``\\b(?:bmm|mm)\\s*\\(``) comes as the set of those names: one search of the file finds
    every call (``_REVERSED_CALL``), where a search per set tries its names at each letter."""
    searches: list[re.Pattern[str] | frozenset[str]] = []
    for part in _alternatives(needle.pattern):
        call = _CALL_NEEDLE.fullmatch(part) if needle.flags == re.UNICODE else None
        characters = _CHARACTERS.fullmatch(part)
        if call is not None:
            searches.append(frozenset((call.group(1) or call.group(2)).split("|")))
        elif characters is not None:  # `[*/@]`: a search of a class tries it at every character
            searches += [re.compile(re.escape(c), needle.flags) for c in characters.group(1)]
        else:
            searches.append(re.compile(part.removeprefix(r"\b"), needle.flags))
    return tuple(searches)


# A needle's alternative that is a call of one of some names: `\b(?:bmm|mm)\s*\(`, `\bclone\s*\(`.
_CALL_NEEDLE = re.compile(r"\\b(?:\(\?:(\w+(?:\|\w+)*)\)|(\w+))\\s\*\\\(")
# A class of punctuation characters (no `-`, which makes a range), searched as one literal each
# (the other rules share some).
_CHARACTERS = re.compile(r"\[([!-,./:-@{-~]+)\]")
# Each call in a text read backwards: its parenthesis, then the name called, reversed. A search
# for a pattern that starts with a literal skips from one to the next; `\w+\s*\(` forwards would
# try every letter.
_REVERSED_CALL = re.compile(r"\(\s*(\w+)")


def _alternatives(pattern: str) -> list[str]:
    """The alternatives of ``pattern``'s top-level ``|``; itself whole where splitting could change
    what a part means (inline flags, group references)."""
    if pattern.startswith("(?") and pattern[2:3].isalpha() or re.search(r"\\[1-9]|\(\?P=", pattern):
        return [pattern]
    parts, start, depth, in_class, i = [], 0, 0, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 1  # the escaped character
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1  # a leading `]` is a member
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested directly in a compound statement."""
    if not hasattr(node, "body"):  # a simple statement, most of them
        return []
    blocks = [getattr(node, f, None) for f in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(node, "handlers", ())]
    blocks += [c.body for c in getattr(node, "cases", ())]
    return [b for b in blocks if b]


def _candidates_in(body: list[ast.stmt], lines: list[str], matching: "_Matching", found: set[str],
                   passed: bool = False, skip_definitions: bool = False, first_only: bool = False) -> bool:
    """Whether a rule's text test passes on a statement of ``body`` (or of the blocks nested in
    it) or ``passed`` already, adding to ``found`` the codes of those that pass; with
    ``first_only``, stopping at the first. Once one passed, the rules in ``found`` are not asked
    again: what they would add is there already."""
    texts = _Texts(body, lines)
    for index, node in enumerate(body):
        if skip_definitions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if not _is_literal(node):
            codes = matching(texts, index, found if passed else ())
            found |= codes
            passed = passed or bool(codes)
        for block in _blocks(node):
            if first_only and passed:
                return True
            passed = _candidates_in(block, lines, matching, found, passed, first_only=first_only)
        if first_only and passed:
            return True
    return passed


def _start_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])


def _is_literal(node: ast.stmt) -> bool:
    """A docstring, or names bound to constants in displays (``MAPPING = {"ln/norm": "a/b"}``): no
    rule reports there, whatever the text of its strings (at module level, a statement a text test
    passes on has the whole file parsed)."""
    if isinstance(node, ast.Expr):
        value = node.value
    elif isinstance(node, ast.Assign) and all(isinstance(target, ast.Name) for target in node.targets):
        value = node.value
    else:
        return False
    if not isinstance(value, _LITERAL_PARTS):  # most statements: a call, an operation (no walk begun)
        return False
    return all(isinstance(part, _LITERAL_PARTS) for part in ast.walk(value))


_LITERAL_PARTS = (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.expr_context)


# --------------------------------------------------------------------------- suppression and fixes


def _unsuppressed(reports: list[_Report], text: str) -> list[_Report]:
    """Drop what ``# noqa`` / ``# fusionlint: noqa`` suppress (syntax errors cannot be)."""
    if not reports or "noqa" not in text.lower():
        return reports
    comments = _comments(text)
    if any(_FILE_NOQA.fullmatch(comment) for comment in comments.values()):
        return [report for report in reports if report.finding.code == SYNTAX_ERROR_CODE]
    kept = []
    for report in reports:
        finding = report.finding
        match = _NOQA.search(comments.get(finding.line, ""))
        if finding.code != SYNTAX_ERROR_CODE and match and (
            not match.group("codes")
            or finding.code in {c.strip().upper() for c in match.group("codes").split(",")}
        ):
            continue
        kept.append(report)
    return kept


def _comments(text: str) -> dict[int, str]:
    """The comment of each line, as the tokenizer sees it: ``# noqa`` inside a string is no comment.

    A line whose comment is all it holds maps to the whole line, for ``# fusionlint: noqa``.
    """
    lines = _LINE.findall(text)
    comments = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.COMMENT:
                line = token.start[0]
                alone = not lines[line - 1][: token.start[1]].strip()
                comments[line] = lines[line - 1].rstrip("\r\n") if alone else token.string
    except (tokenize.TokenError, SyntaxError):
        pass  # the comments before the point where the tokenizer gave up still count
    return comments


def _non_overlapping(reports: list[_Report]) -> list[_Report]:
    chosen, taken = [], []
    for report in sorted(reports, key=lambda r: (r.finding.line, r.finding.column)):
        spans = [(e.start, e.end) for e in report.edits]
        if any(a <= d and c <= b for a, b in spans for c, d in taken):
            continue
        chosen.append(report)
        taken.extend(spans)
    return chosen


def _apply(text: str, edits: list[LineEdit]) -> str:
    lines = _LINE.findall(text)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        lines[edit.start - 1 : edit.end] = [edit.text]
    return "".join(lines)


def _parses(text: str, path: str) -> bool:
    try:
        ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True
