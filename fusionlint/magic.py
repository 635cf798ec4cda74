"""``%%fuse``: run a notebook cell under fusionrt, lint it, and show what a fix would change.

The cell runs the way ``%%time`` runs one, not through a nested ``run_cell``: transformed by the
shell, compiled through its compiler cache (tracebacks show the cell's lines), executed in
``shell.user_ns``, with a trailing expression evaluated so it stays the cell's value. An
exception propagates out of the magic, so the cell fails once, with one traceback.

Lines are the cell's own as Jupyter shows them: line 1 is the ``%%fuse`` line.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import difflib
import dis
import inspect
import random
import re
import shlex
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from IPython.utils.capture import capture_output
from rich.console import Console, ConsoleOptions, NewLine, RenderResult
from rich.table import Table
from rich.text import Text

import fusionrt
from fusionlint.check import known_rule_codes
from fusionlint.config import find_config_file, load_config
from fusionlint.engine import lint_source
from fusionlint.model import Finding, FixMode, LintOptions
from fusionlint.notebook import code_cells, unmask
from fusionrt.diagram import cell_code, figure
from fusionrt.executors import EXECUTORS, MissingTriton, require
from fusionrt.report import Comparison, Report, mimebundle
from fusionrt.schedule import POLICIES

_WORD = re.compile(r"[A-Za-z_]\w*")


# -- linting a cell ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellLint:
    """The findings of one cell and, when a fix applies, the fixed cell body."""

    findings: tuple[Finding, ...]  # what is left after the fix
    fixed: tuple[Finding, ...]  # what the fix removed
    fixed_body: str | None
    errors: tuple[str, ...]


def lint_cell(body: str, namespace: dict[str, Any], fix: bool) -> CellLint:
    """Lint a cell body with what the notebook's namespace knows.

    A cell rarely imports torch itself, and the linter only knows names as tensors from the
    code it sees; a prelude states the namespace's torch imports, the other modules and the
    tensors the cell reads (``math.sqrt`` is a number only where ``math`` is the module), and its
    lines are taken off again. ``fix`` applies unsafe fixes too: the fixed cell is only
    shown and offered, never run without the user.
    """
    cells = code_cells({"cells": [{"cell_type": "code", "source": body}]})
    if not cells:  # the body is another cell magic's (``%%bash``): no Python to lint
        return CellLint((), (), None, ())
    [cell] = cells
    prelude = _prelude(cell.text, namespace)
    config = load_config(find_config_file(Path.cwd()), Path.cwd())
    config.check_selectors(known_rule_codes(None))
    options = LintOptions(
        codes=config.enabled_codes(known_rule_codes(None)), fix=FixMode.UNSAFE if fix else FixMode.OFF,
        extra_ops=config.extra_ops,
    )
    result = lint_source(prelude + cell.text, "<cell>", options)
    shift = prelude.count("\n") - 1  # body line 1 is cell line 2
    fixed_body = None
    if result.source is not None and result.source.startswith(prelude):
        fixed_body = unmask(cell, result.source[len(prelude):])
    if fixed_body is None:
        return CellLint(_moved(result.findings + result.fixed, shift), (), None, result.errors)
    return CellLint(_moved(result.findings, shift), _moved(result.fixed, shift), fixed_body, result.errors)


def _moved(findings: tuple[Finding, ...], shift: int) -> tuple[Finding, ...]:
    moved = (replace(f, line=f.line - shift, end_line=f.end_line - shift) for f in findings)
    return tuple(sorted(moved, key=lambda f: (f.line, f.column, f.code)))


def _prelude(text: str, namespace: dict[str, Any]) -> str:
    read = set(_WORD.findall(text))
    lines = []
    for name, value in namespace.items():
        if (isinstance(value, types.ModuleType) and name.isidentifier()
                and (value.__name__.split(".")[0] == "torch" or name in read)):
            lines.append(f"import {value.__name__} as {name}")  # the cell's math, np, einops too
    torch_name = next((line.split()[-1] for line in lines if line.split()[1] == "torch"), None)
    if torch_name is None:
        torch_name = "torch"
        lines.append("import torch")
    lines += [f"{name} = {torch_name}.Tensor()" for name in sorted(read)
              if isinstance(namespace.get(name), torch.Tensor)]
    return "".join(line + "\n" for line in lines)


# -- running a cell ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledCell:
    filename: str
    code: types.CodeType
    value: types.CodeType | None  # the trailing expression, evaluated for the cell's value
    end: int  # the cell's last line, where its exit flush is attributed


def compile_cell(shell: Any, line: str, body: str) -> CompiledCell:
    """Compile as IPython compiles a cell; the cached text puts the ``%%fuse`` line back as line 1."""
    transformed = shell.transform_cell(body)
    filename = shell.compile.cache(f"%%fuse {line}\n{transformed}", shell.execution_count, f"%%fuse {line}\n{body}")
    tree = shell.transform_ast(shell.compile.ast_parse("\n" + transformed, filename))
    value = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        value = shell.compile(ast.Expression(tree.body.pop().value), filename, "eval")
    code = shell.compile(tree, filename, "exec")
    return CompiledCell(filename, code, value, 1 + transformed.count("\n") + (not transformed.endswith("\n")))


def run_cell(cell: CompiledCell, namespace: dict[str, Any], policy: str, executor: str) -> tuple[Report, Any]:
    """Execute under ``fusionrt.lazy``; names the cell assigns stay in ``namespace``, so they are alive."""
    __tracebackhide__ = True  # noqa: F841  (IPython's tracebacks skip this frame)
    session = fusionrt.lazy(policy=policy, executor=executor)
    with session:
        exec(cell.code, namespace)
        value = eval(cell.value, namespace) if cell.value is not None else None
        session.mark_outputs(value)
        session.flush("exit", f"{cell.filename}:{cell.end}")
    return _cell_sources(session.report, cell.filename), value


def _cell_sources(report: Report, filename: str) -> Report:
    """``/tmp/ipykernel_1/123.py:4`` -> ``cell line 4``: the cache file name means nothing to a reader."""
    def name(source: str) -> str:
        path, _, line = source.rpartition(":")
        return f"cell line {line}" if path == filename else source

    return replace(
        report,
        materialized=[replace(w, source=name(w.source)) for w in report.materialized],
        kernel_records=[replace(k, sources=tuple(map(name, k.sources))) for k in report.kernel_records],
        fallbacks=[replace(f, source=name(f.source)) for f in report.fallbacks],
        flushes=[replace(f, source=name(f.source)) for f in report.flushes],
    )


def same_results(names: set[str], before: dict[str, Any], after: dict[str, Any], values: tuple[Any, Any]) -> bool:
    """The cell's assigned tensors and its value agree, within the tolerance fusion may change."""
    pairs = [(before[n], after.get(n)) for n in sorted(names) if isinstance(before.get(n), torch.Tensor)]
    return all(_same(a, b) for a, b in [*pairs, values])


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.dtype == b.dtype and torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        )
    try:
        return bool(a == b)
    except Exception:  # a value without a truthy ==
        return a is b


# -- --compare: a second run that the notebook never sees ----------------------------------------

OUTSIDE_MODULES = frozenset({
    "os", "posix", "nt", "sys", "io", "shutil", "pathlib", "tempfile", "subprocess", "multiprocessing", "socket",
    "ssl", "http", "urllib", "requests", "httpx", "aiohttp", "ftplib", "smtplib", "sqlite3", "logging", "webbrowser",
})
OUTSIDE_CALLS = frozenset({
    "input", "breakpoint", "exit", "quit", "globals", "vars", "eval", "exec", "__import__", "get_ipython",
})
WRITING_METHODS = frozenset({
    "write", "writelines", "write_text", "write_bytes", "save", "savez", "savefig", "dump", "to_csv", "to_json",
    "to_parquet", "to_pickle", "unlink", "mkdir", "rmdir", "touch", "rename", "send", "sendall",
})

GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


class CannotIsolate(Exception):
    """What the second run of ``--compare`` would do outside the copies it runs on."""


def _second_run_inputs(shell: Any, cells: tuple[str, ...]) -> dict[str, Any]:
    """Deep copies of what the cells read from the notebook, for a run the notebook must not see.

    The copies share one memo, so objects shared between names stay shared (a model and its
    optimizer). The cells' names, and the globals read by notebook functions and classes they
    reach, are copied; modules, classes and functions are not, so a cell that changes them, or
    that reaches outside the process (files, network, IPython), raises ``CannotIsolate``.
    """
    namespace = shell.user_ns
    trees = [_cell_tree(shell, cell) for cell in cells]
    for tree in trees:
        _check_isolable(tree, namespace)
    names = _reached_names(set().union(*map(_read_names, trees)), namespace)
    values = {name: namespace[name] for name in sorted(names) if not isinstance(namespace[name], types.ModuleType)}
    # deepcopy refuses a tensor computed with autograd; its copy is a new leaf holding the same values
    memo: dict[int, Any] = {
        id(v): v.detach().clone().requires_grad_() for v in values.values()
        if isinstance(v, torch.Tensor) and v.grad_fn is not None
    }
    copies = {}
    for name, value in values.items():
        try:
            copies[name] = copy.deepcopy(value, memo)
        except Exception as exc:  # noqa: BLE001 - whatever deepcopy raises, the answer is the same
            why = (str(exc).splitlines() or [""])[0]
            raise CannotIsolate(f"{name} cannot be copied ({type(exc).__name__}: {why})") from None
    return copies


def _cell_tree(shell: Any, cell: str) -> ast.Module:
    """The cell as it runs, with the cell's own line numbers (line 1 is the ``%%fuse`` line)."""
    return ast.parse("\n" + shell.transform_cell(cell))


def _check_isolable(tree: ast.Module, namespace: dict[str, Any]) -> None:
    """Raise ``CannotIsolate`` for the first thing in the cell that copies of its names cannot hold."""
    nodes = [node for node in ast.walk(tree) if hasattr(node, "lineno")]
    # in reading order, the inner node first: ``open(p, "w").write(s)`` opens a file for writing
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)):
        why = _outside_effect(node, namespace)
        if why is not None:
            raise CannotIsolate(f"line {node.lineno} {why}")


def _outside_effect(node: ast.AST, namespace: dict[str, Any]) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        outside = [m for m in modules if m.split(".")[0] in OUTSIDE_MODULES]
        return f"imports {outside[0]}, which reaches outside the notebook" if outside else None
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != "open":  # IPython's open
        value = namespace.get(node.id)
        module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(module, str) and module.split(".")[0] in OUTSIDE_MODULES:
            return f"uses {node.id} (from {module}), which reaches outside the notebook"
        return None
    if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
        root = _root(node)
        if isinstance(namespace.get(root), (types.ModuleType, type)):
            return f"changes {ast.unparse(node)}, which {root} holds for the whole notebook"
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name):
        if func.id == "open" and not _reads_only(node):
            return "opens a file for writing"
        if func.id == "print" and any(k.arg == "file" for k in node.keywords):
            return "prints to a file"
        if func.id == "get_ipython":
            return "runs an IPython magic or shell command"
        return f"calls {func.id}()" if func.id in OUTSIDE_CALLS else None
    if isinstance(func, ast.Attribute):
        if func.attr in WRITING_METHODS:
            return f"calls .{func.attr}(), which may write a file"
        if _held_state(func.value, namespace):
            return f"calls {ast.unparse(func)}(), on what {_root(func)} holds for the whole notebook"
    return None


def _reads_only(call: ast.Call) -> bool:
    """``open(path)``, ``open(path, "rb")``: a constant mode without w, a, x or +."""
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    default = ast.Constant("r")
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), default)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and not set(mode.value) & set("wax+")


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _held_state(node: ast.AST, namespace: dict[str, Any]) -> bool:
    """Whether ``node`` is an object a module or class of the namespace holds (``mod.cache``,
    ``Counter.seen``): not copied, so calling its methods would change it for the notebook."""
    chain = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        chain.append(node)
        node = node.value
    value = namespace.get(node.id) if isinstance(node, ast.Name) else None
    if not chain or not isinstance(value, (types.ModuleType, type)):
        return False
    for link in reversed(chain):
        if not isinstance(value, (types.ModuleType, type)) or isinstance(link, ast.Subscript):
            return True
        value = inspect.getattr_static(value, link.attr, None)
        if value is None:  # not there without running code (a lazy submodule): leave it be
            return False
    return not isinstance(value, (types.ModuleType, type)) and not inspect.isroutine(value)


def _read_names(tree: ast.Module) -> set[str]:
    """Names the cell may read before assigning them (a name only assigned needs no copy)."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    updated = {n.target for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}  # x += 1 reads x
    return names | {n.id for n in updated if isinstance(n, ast.Name)}


def _reached_names(names: set[str], namespace: dict[str, Any]) -> set[str]:
    """``names`` and, through the notebook's functions and classes among them, the globals those read."""
    reached: set[str] = set()
    todo = [name for name in names if name in namespace]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for code in _notebook_code(namespace[name], namespace):
            todo += [n for n in _code_names(code) if n in namespace]
    return reached


def _notebook_code(value: Any, namespace: dict[str, Any]) -> Iterator[types.CodeType]:
    """The code of notebook functions a value runs: itself, a bound method's function, its class's methods."""
    value = getattr(value, "__func__", value)
    if isinstance(value, types.FunctionType):
        functions = [value]
    else:
        cls = value if isinstance(value, type) else type(value)
        functions = [
            attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
            for klass in cls.__mro__ for attr in vars(klass).values()
        ]
    for function in functions:
        if isinstance(function, types.FunctionType) and function.__globals__ is namespace:
            yield function.__code__


def _code_names(code: types.CodeType) -> set[str]:
    """The global names a function's code (nested functions and classes included) reads or writes."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


@contextlib.contextmanager
def _random_state_kept() -> Iterator[None]:
    """Both runs draw the same random numbers, and the generators end as one run leaves them."""
    numpy = sys.modules.get("numpy")
    states = [(random.setstate, random.getstate())]
    if numpy is not None:
        states.append((numpy.random.set_state, numpy.random.get_state()))
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        for restore, state in states:
            restore(state)


def _compare(shell: Any, line: str, body: str, fixed: str, original: CompiledCell, inputs: dict[str, Any],
             args: Any) -> tuple[Comparison, Any]:
    """Run the fixed cell on ``inputs`` (copies from ``_second_run_inputs``), then the cell for real.

    The fixed cell runs in the notebook's own namespace, so the notebook functions it calls see
    the copies; its output is dropped, and every name is put back as it was afterwards. Then the
    original runs as a plain ``%%fuse`` would: the notebook ends in the state one run leaves.
    """
    __tracebackhide__ = True  # noqa: F841
    namespace = shell.user_ns
    fixed_cell = compile_cell(shell, line, fixed)
    saved = dict(namespace)
    try:
        namespace.update(inputs)
        with _random_state_kept(), capture_output():
            after, fixed_value = run_cell(fixed_cell, namespace, args.policy, args.executor)
        fixed_names = dict(namespace)
    finally:
        namespace.clear()
        namespace.update(saved)
    before, value = run_cell(original, namespace, args.policy, args.executor)
    tree = _cell_tree(shell, body)
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    equal = same_results(assigned, namespace, fixed_names, (value, fixed_value))
    return fusionrt.compare(before, after, labels=("cell", "fixed cell"), outputs_equal=equal), value


# -- what the magic shows ------------------------------------------------------------------------


@dataclass
class FuseResult:
    """Everything one ``%%fuse`` produced, rendered as one block (rich HTML and clean text)."""

    report: Report | None = None
    comparison: Comparison | None = None
    lint: CellLint | None = None
    diff: str | None = None
    note: str | None = None
    details: bool = False  # list every record; otherwise the summary, with the full tables folded in HTML
    code: tuple[dict[str, str], dict[str, str]] = ({}, {})  # the text of each run's ``cell line N``

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        sections: list[Any] = []
        shown = self._shown()
        if shown is not None:
            sections.append(shown.details() if self.details else shown)
        if self.lint is not None:
            sections.append(self._lint_table())
        if self.diff is not None:
            sections.append(self._diff_text())
        if self.note is not None:
            sections.append(Text(self.note))
        for i, section in enumerate(sections):
            if i:
                yield NewLine()
            yield section

    def _lint_table(self) -> Table | Text:
        assert self.lint is not None
        rows = sorted([(f, "fixed") for f in self.lint.fixed] + [(f, f.fix_safety.value if f.fixable else "")
                                                                  for f in self.lint.findings],
                      key=lambda row: (row[0].line, row[0].column))
        if not rows and not self.lint.errors:
            return Text("fusionlint: no findings in this cell")
        table = Table(title=f"fusionlint findings ({len(rows)})", title_justify="left")
        for name in ("line", "code", "fix", "message"):
            table.add_column(name, justify="right" if name == "line" else "left")
        for f, fix in rows:
            table.add_row(str(f.line), f.code, fix, Text(f.message))
        for error in self.lint.errors:
            table.add_row("", "error", "", Text(error))
        return table

    def _diff_text(self) -> Text:
        assert self.diff is not None
        text = Text("fusionlint --fix (offered as the next cell):\n", style="bold")
        for line in self.diff.splitlines():
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
            text.append(line + "\n", style=style)
        return text

    def _shown(self) -> Report | Comparison | None:
        return self.comparison if self.comparison is not None else self.report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The plan's diagram (both side by side with --compare), then the report and the findings."""
        shown = self._shown()
        if shown is None:
            return mimebundle(self)
        return mimebundle(self, folded=() if self.details else shown.full_tables(), figure=figure(shown, self.code))

    def __str__(self) -> str:
        return mimebundle(self)["text/plain"]


def _diff(cell: str, fixed: str) -> str:
    lines = difflib.unified_diff(
        cell.splitlines(keepends=True), fixed.splitlines(keepends=True), "cell", "fixed cell", n=2,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@magics_class
class FuseMagics(Magics):
    @magic_arguments()
    @argument("--fix", action="store_true",
              help="show the cell as fusionlint --fix --unsafe-fixes rewrites it, as a diff, and offer it as the "
              "next cell")
    @argument("--compare", action="store_true",
              help="also run the fixed cell (on copies of what the cell reads) and show both reports side "
              "by side, with the deltas and whether the results are equal")
    @argument("--no-lint", action="store_true", help="do not lint the cell")
    @argument("--no-run", action="store_true", help="only lint the cell (and with --fix, show the fix)")
    @argument("--details", action="store_true",
              help="list every write, kernel, fallback and flush (default: a summary grouped by line and reason)")
    @argument("--executor", choices=EXECUTORS, default="auto",
              help="how planned kernels run (default: auto = triton with CUDA, else reference)")
    @argument("--policy", choices=POLICIES, default="stream", help="fusion policy (default: stream)")
    @argument("-o", "--output", metavar="NAME",
              help="store the report (with --compare, the comparison) in the variable NAME")
    @cell_magic
    def fuse(self, line: str, cell: str) -> Any:
        """Run the cell under fusionrt and lint it; show every global-memory write and each finding.

        Names the cell assigns stay alive in the notebook, so the report counts them as written
        (reason ``alive``). The cell's last expression is still its value.
        """
        __tracebackhide__ = True  # noqa: F841
        args = parse_argstring(self.fuse, line)
        if args.no_lint and (args.fix or args.compare):
            raise UsageError("--fix and --compare need the linter: drop --no-lint")
        if args.no_run and (args.compare or args.output):
            raise UsageError("--compare and -o need a run: drop --no-run")
        if args.output and not args.output.isidentifier():
            raise UsageError(f"-o needs a variable name, not {args.output!r}")
        if not args.no_run:
            try:
                require(args.executor)  # a missing triton is one line, not a traceback
            except MissingTriton as exc:
                raise UsageError(str(exc)) from None
        shell = self.shell
        namespace = shell.user_ns
        result = FuseResult(details=args.details)
        if not args.no_lint:
            result.lint = lint_cell(cell, namespace, fix=args.fix or args.compare)
            fixed = result.lint.fixed_body
            if fixed is not None and args.fix:
                offered = f"%%fuse {_measuring(line)}".rstrip() + "\n" + fixed
                result.diff = _diff(f"%%fuse {line}".rstrip() + "\n" + cell, offered)
                shell.set_next_input(offered, replace=False)
            elif fixed is None and (args.fix or args.compare):
                result.note = "fusionlint has no fix for this cell" + (": it ran once." if args.compare else ".")
        value = None
        if not args.no_run:
            compiled = compile_cell(shell, line, cell)
            fixed = result.lint.fixed_body if args.compare and result.lint is not None else None
            inputs = None
            if fixed is not None:
                try:
                    inputs = _second_run_inputs(shell, (cell, fixed))
                except CannotIsolate as exc:
                    result.note = f"--compare not run, a second run could not be isolated: {exc}. The cell ran once."
            if inputs is not None:
                result.comparison, value = _compare(shell, line, cell, fixed, compiled, inputs, args)
            else:
                result.report, value = run_cell(compiled, namespace, args.policy, args.executor)
            result.code = (cell_code(f"%%fuse {line}\n{cell}"),
                           cell_code(f"%%fuse {line}\n{fixed}") if result.comparison is not None else {})
            if args.output:
                namespace[args.output] = result.comparison or result.report
        display(result)
        return value


def _measuring(line: str) -> str:
    """The magic's options for the offered cell: measuring it is the point, fixing it is done."""
    return " ".join(shlex.quote(w) for w in shlex.split(line) if w not in ("--fix", "--compare", "--no-run"))


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(FuseMagics)
