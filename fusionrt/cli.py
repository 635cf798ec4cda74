"""``fusionrt run SCRIPT [ARGS...]``: run a script under the lazy backend and print its report
(``fusionrt run -m MODULE [ARGS...]`` runs a module, as ``python -m`` does).
``fusionrt compare SCRIPT [ARGS...]``: run it as it is and as ``fusionlint check --fix
--unsafe-fixes`` would rewrite it, and print both reports side by side.

The script runs the way ``python -m cProfile`` runs one: ``sys.argv`` is the script and its
arguments, ``__name__`` is ``"__main__"``, and the script's folder comes first on ``sys.path``.
Exit codes: the script's own (0 when it ends normally), 1 when it raises, 2 for usage errors
(no such script, an unreadable one, an unwritable JSON file).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import io
import os
import random
import runpy
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TextIO

from rich.console import Console, RenderableType

from fusionlint import __version__

from . import lazy
from .executors import EXECUTORS, MissingTriton, require
from .report import PLAIN_WIDTH, Report, compare
from .schedule import POLICIES


def run_script(script: str, args: Sequence[str], policy: str, executor: str,
               source: bytes | None = None) -> tuple[Report, int]:
    """Run ``script`` under ``fusionrt.lazy``; the report covers what ran even when it raised.

    ``source`` runs in place of the file's text, under the file's name (``compare`` runs the
    fixed text that way, so ``__file__``, ``sys.path`` and relative paths are the script's).

    The script runs in a ``__main__`` module this function owns (``sys.modules["__main__"]`` while
    it runs, as runpy does), so its globals stay alive until the lazy block has ended, as they do
    in ``python SCRIPT`` until the interpreter exits: module-level tensors count as alive.
    """
    path = os.path.abspath(script)
    if source is None:
        with io.open_code(path) as file:  # an unreadable script fails here, before anything changes
            source = file.read()
    main_module = types.ModuleType("__main__")
    main_module.__file__ = path
    main_module.__cached__ = None
    saved_main = sys.modules["__main__"]

    def execute() -> None:
        sys.modules["__main__"] = main_module
        exec(compile(source, path, "exec"), main_module.__dict__)

    try:
        return _run_lazily(execute, path, _line_count(source), [script, *args], os.path.dirname(path),
                           policy, executor)
    finally:
        sys.modules["__main__"] = saved_main


def run_module(module: str, args: Sequence[str], policy: str, executor: str) -> tuple[Report, int]:
    """Run ``module`` under ``fusionrt.lazy`` as ``python -m MODULE ARGS`` runs it (runpy, the
    current folder first on ``sys.path``, ``sys.argv[0]`` the module's file); the report covers
    what ran even when it raised. Raises ImportError when there is no such module to run.

    Its globals stay alive until the lazy block has ended: runpy returns them when the module
    ends, and an exception's traceback holds them when it raises.
    """
    sys.path.insert(0, os.getcwd())
    try:
        path = _module_file(module)
    finally:
        del sys.path[0]
    with io.open_code(path) as file:
        end = _line_count(file.read())
    module_globals: list[dict] = []  # held here until the block has ended

    def execute() -> None:
        module_globals.append(runpy.run_module(module, run_name="__main__", alter_sys=True))

    return _run_lazily(execute, path, end, [module, *args], os.getcwd(), policy, executor)


def _module_file(module: str) -> str:
    """The file ``python -m module`` would run (a package's ``__main__``), found as runpy finds it."""
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations is not None:  # a package
        spec = importlib.util.find_spec(module + ".__main__")
        if spec is None:
            raise ImportError(f"{module!r} is a package and cannot be run: it has no __main__ module")
    if spec is None or not spec.has_location or spec.origin is None:
        raise ImportError(f"No module named {module!r}")
    return spec.origin


def _line_count(source: bytes) -> int:
    return source.count(b"\n") + (not source.endswith(b"\n"))


def _run_lazily(execute: Callable[[], None], path: str, end: int, argv: list[str], path0: str,
                policy: str, executor: str) -> tuple[Report, int]:
    """Call ``execute`` (which runs the code of file ``path``) in a lazy block, with ``argv`` and
    ``path0`` first on ``sys.path``, as the interpreter would run it; returns the report and the
    exit code ``python`` would give (the traceback printed from the file's first frame on).

    The block ends where the code did (a raising line, a ``sys.exit()``, or ``path``'s line
    ``end``): left to the context's exit, the flush would name the launcher's line as its source.
    """
    session = lazy(policy=policy, executor=executor)
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = argv
    sys.path.insert(0, path0)
    code, error, exited = 0, None, None
    try:
        with session:
            try:
                execute()
            except SystemExit as exit_:  # a script's sys.exit() is a normal end of the run
                # kept: its traceback keeps the code's globals alive until the flush
                exited, code, end = exit_, _exit_code(exit_), _script_line(exit_, path, end)
            except Exception as exc:
                error, end = exc, _script_line(exc, path, end)
            session.flush("exit", f"{path}:{end}")
    except Exception as exc:  # planning or running the last kernels failed
        error = error or exc
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if error is not None:
        sys.stdout.flush()
        traceback.print_exception(type(error), error, _from_script(error, path))
        code = 1
    return session.report, code


def _exit_code(exit_: SystemExit) -> int:
    """What the interpreter would exit with: None is 0, a message is printed and is 1."""
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=sys.stderr)
    return 1


def _script_tb(exc: BaseException, script: str) -> TracebackType | None:
    """The traceback entry of the script's module-level frame, if the exception passed it."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    return tb


def _script_line(exc: BaseException, script: str, default: int) -> int:
    tb = _script_tb(exc, script)
    return tb.tb_lineno if tb is not None else default


def _from_script(exc: BaseException, script: str) -> TracebackType | None:
    """The traceback from the script's first frame on: the runner's frames are noise to a user.

    An error outside the script (in fusionrt itself) keeps its whole traceback; a syntax error
    needs none, as in ``python SCRIPT``.
    """
    tb = _script_tb(exc, script)
    if tb is None and not isinstance(exc, SyntaxError):
        return exc.__traceback__
    return tb


def print_rendered(renderable: RenderableType, file: TextIO | None = None) -> None:
    """Rich on a terminal; plain text (no colour, fixed width) when piped or under CI."""
    file = file or sys.stdout
    plain = not file.isatty() or bool(os.environ.get("CI"))
    if plain:
        console = Console(file=file, width=PLAIN_WIDTH, color_system=None, force_terminal=False, highlight=False)
    else:
        console = Console(file=file, highlight=False)
    console.print(renderable)


def _missing(script: str) -> bool:
    path = Path(script)
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        print(f"fusionrt: error: script {script!r} {what}", file=sys.stderr)
        return True
    return False


def _run(options: argparse.Namespace) -> int:
    if options.module is not None:
        if not options.module:
            print("fusionrt: error: -m needs a module name", file=sys.stderr)
            return 2
        module, *args = options.module
        try:
            report, code = run_module(module, args, options.policy, options.executor)
        except ImportError as exc:
            print(f"fusionrt: error: {exc}", file=sys.stderr)
            return 2
    else:
        if options.script is None:
            print("fusionrt: error: run needs SCRIPT or -m MODULE", file=sys.stderr)
            return 2
        if _missing(options.script):
            return 2
        try:
            report, code = run_script(options.script, options.args, options.policy, options.executor)
        except OSError as exc:
            print(f"fusionrt: error: cannot read script {options.script!r}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    print_rendered(report.details() if options.details else report)
    if options.json:
        try:
            Path(options.json).write_text(report.to_json() + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"fusionrt: error: cannot write the JSON report: {exc}", file=sys.stderr)
            return code or 2
    return code


def _compare(options: argparse.Namespace) -> int:
    """Both runs print into buffers; the original's output is shown, and the two are compared
    exactly (a script that prints results is what ``outputs agree`` checks)."""
    from fusionlint.config import ConfigError
    from fusionlint.sourcefile import SourceFileError

    if _missing(options.script):
        return 2
    try:
        original, fixed = _fixed_source(Path(options.script))
    except (SourceFileError, ConfigError) as exc:
        print(f"fusionrt: error: cannot lint script {options.script!r}: {exc}", file=sys.stderr)
        return 2
    import torch

    states = random.getstate(), torch.random.get_rng_state()
    runs = []
    for source in (original, fixed if fixed is not None else original):
        random.setstate(states[0])
        torch.random.set_rng_state(states[1])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            report, code = run_script(options.script, options.args, options.policy, options.executor, source)
        runs.append((report, code, printed.getvalue()))
    (before, code_before, out_before), (after, code_after, out_after) = runs
    sys.stdout.write(out_before)
    if fixed is None:
        print(f"fusionlint has no fix for {options.script}: both runs are the same code")
    comparison = compare(before, after, labels=("original", "fixed"), outputs_equal=out_before == out_after)
    print_rendered(comparison.details() if options.details else comparison)
    if out_before != out_after:
        sys.stdout.writelines(difflib.unified_diff(
            out_before.splitlines(keepends=True), out_after.splitlines(keepends=True),
            "original output", "fixed output",
        ))
    return 1 if 1 in (code_before, code_after) else code_before or code_after


def _fixed_source(path: Path) -> tuple[bytes, bytes | None]:
    """The script's bytes and, when a fix applies, what ``fusionlint check --fix --unsafe-fixes``
    would write (same config lookup, same encoding); the file itself is not touched."""
    from fusionlint.check import known_rule_codes
    from fusionlint.config import find_config_file, load_config
    from fusionlint.engine import lint_source
    from fusionlint.model import FixMode, LintOptions
    from fusionlint.sourcefile import read_source

    source = read_source(path)
    config = load_config(find_config_file(path.absolute().parent), Path.cwd())
    options = LintOptions(codes=config.enabled_codes(known_rule_codes(None), path), fix=FixMode.UNSAFE,
                          extra_ops=config.extra_ops)
    result = lint_source(source.text, str(path), options)
    return source.data, None if result.source is None else result.source.encode(source.encoding)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fusionrt",
        description="Run PyTorch code through a lazy fusing backend and report every global-memory write.",
    )
    parser.add_argument("--version", action="version", version=f"fusionrt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser(
        "run", help="run a Python script (or -m MODULE) under the lazy backend and print the report",
        description="Run SCRIPT with ARGS (like `python -m cProfile`), or a module with -m MODULE ARGS (like "
        "`python -m`), under fusionrt.lazy and print the report. Options go before SCRIPT or -m; everything after "
        "it is passed to the script or module.",
        usage="fusionrt run [options] (SCRIPT | -m MODULE) [ARGS ...]",
    )
    run.add_argument("--executor", choices=EXECUTORS, default="auto",
                     help="how planned kernels run (default: auto = triton with CUDA, else reference)")
    run.add_argument("--policy", choices=POLICIES, default="stream", help="fusion policy (default: stream)")
    run.add_argument("--json", metavar="FILE", help="also write the report as JSON (schema: docs/report.md)")
    run.add_argument("--details", action="store_true",
                     help="list every write, kernel, fallback and flush (default: a summary grouped by line and "
                     "reason)")
    run.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE",
                     help="MODULE [ARGS ...]: run a module as `python -m` does (in place of SCRIPT)")
    run.add_argument("script", nargs="?", metavar="SCRIPT")
    run.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    run.set_defaults(handler=_run)
    cmp = commands.add_parser(
        "compare", help="run a script as it is and as fusionlint's fixes rewrite it; print both reports",
        description="Run SCRIPT with ARGS twice under fusionrt.lazy: as it is, and as `fusionlint check --fix "
        "--unsafe-fixes` would rewrite it (in memory, under the script's own name: the file is not touched). "
        "Prints the original run's output, both reports side by side with the deltas, and whether the two runs "
        "printed the same output.",
    )
    cmp.add_argument("--executor", choices=EXECUTORS, default="auto",
                     help="how planned kernels run (default: auto = triton with CUDA, else reference)")
    cmp.add_argument("--policy", choices=POLICIES, default="stream", help="fusion policy (default: stream)")
    cmp.add_argument("--details", action="store_true",
                     help="list every write only one run has (default: grouped by source line and reason)")
    cmp.add_argument("script", metavar="SCRIPT")
    cmp.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    cmp.set_defaults(handler=_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        require(options.executor)  # a missing triton is one line, before the script runs
    except MissingTriton as exc:
        print(exc, file=sys.stderr)
        return 2
    return options.handler(options)
