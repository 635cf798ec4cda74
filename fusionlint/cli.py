"""The ``fusionlint`` command: ``check`` files, list the ``rules``, ``explain`` one (Ruff's conventions).

Exit status: 0 when no finding is left, 1 when some are (or, with ``--diff``, when a fix would
change a file), 2 for a usage, configuration or internal error.
"""
from __future__ import annotations

import argparse
import difflib
import io
import os
import sys
from pathlib import Path

import fusionlint
from fusionlint import output
from fusionlint.cache import Caches
from fusionlint.check import (
    UNREADABLE,
    FileOutcome,
    check_files,
    check_sources,
    known_rule_codes,
    unreadable,
)
from fusionlint.config import ConfigError, Settings
from fusionlint.discovery import Exclusion, find_source_files
from fusionlint.model import FixMode, internal_error
from fusionlint.notebook import cell_source, read_notebook
from fusionlint.sourcefile import SourceFile, SourceFileError, decode_source, is_notebook_path, write_atomic

FORMATS = ("text", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "rdjson")
DEFAULT_VERIFY_TIMEOUT = 60.0  # the same as fusionlint.verify's, which is not imported unless --verify
UNREADABLE_DOC = output.RuleDoc(
    code=UNREADABLE,
    name="unreadable-file",
    message="File cannot be read or decoded",
    rationale=(
        "The file could not be read (permissions), decoded with the encoding it declares (PEP 263"
        " cookie or BOM; UTF-8 by default), or, for a notebook, parsed as nbformat 4 JSON."
        " Nothing in it was checked and nothing is written to it."
    ),
    help=(
        "# FL998 unreadable-file\n\nReported for a file that fusionlint could not read, decode with"
        " its declared encoding, or parse as a notebook. The file is left untouched; the other"
        " files are still checked. Fix the permissions, the encoding declaration or the bytes.\n"
    ),
)


def _selectors(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fusionlint", description="Find and fix PyTorch code patterns that break kernel fusion."
    )
    parser.add_argument("--version", action="version", version=f"fusionlint {fusionlint.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser("check", help="check files and folders (default: the current folder)")
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders; '-' reads stdin")
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix, apply unsafe fixes too")
    check.add_argument("--diff", action="store_true", help="print the diffs --fix would make, write nothing")
    check.add_argument(
        "--verify", action="store_true",
        help="with --fix or --diff: apply a fix only once running the original and the fixed function under"
        " fusionrt gives equal results at a lower cost (runs your code; needs torch)",
    )
    check.add_argument(
        "--verify-timeout", type=float, default=DEFAULT_VERIFY_TIMEOUT, metavar="SECONDS",
        help=f"with --verify: time allowed to each function, per version (default {DEFAULT_VERIFY_TIMEOUT:g})",
    )
    for flag, text in (
        ("--select", "rule codes or prefixes to enable (replaces the config's select)"),
        ("--extend-select", "rule codes or prefixes to enable in addition"),
        ("--ignore", "rule codes or prefixes to disable"),
    ):
        check.add_argument(flag, type=_selectors, action="extend", metavar="CODES", help=text)
    check.add_argument("--output-format", choices=FORMATS, default="text")
    check.add_argument("--output-file", type=Path, metavar="PATH",
                       help="write the report to PATH (replaced atomically; never through a symlink)")
    check.add_argument("--show-fixes", action="store_true",
                       help="show each finding's fix as a diff, and after --fix the fixes applied per file")
    check.add_argument("--statistics", action="store_true", help="show counts per rule instead of findings")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings remain")
    check.add_argument("--exit-non-zero-on-fix", action="store_true",
                       help="exit 1 when --fix changed a file, even with no finding left (CI: fail so the fix is "
                       "committed)")
    check.add_argument("--stdin-filename", metavar="NAME", help="the name of the text read from stdin")
    check.add_argument("--config", type=Path, metavar="FILE", help="a pyproject.toml to use instead of searching")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument("--cache-dir", type=Path, metavar="DIR",
                       help="the cache folder (instead of $FUSIONLINT_CACHE_DIR or the config's cache-dir)")
    check.add_argument("--show-settings", action="store_true", help="print the settings of each path, then exit")
    check.add_argument("--show-files", action="store_true", help="print the files that would be checked, then exit")
    check.add_argument("--force-exclude", action="store_true", help="apply the exclusions (globs, .gitignore) to named files too")
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    check.set_defaults(run=run_check)

    rules = commands.add_parser("rules", help="list the rules")
    rules.add_argument("--format", choices=("text", "markdown"), default="text", help="markdown: README's table")
    rules.set_defaults(run=run_rules)

    explain = commands.add_parser("explain", help="show a rule's documentation")
    explain.add_argument("code", metavar="CODE")
    explain.set_defaults(run=run_explain)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "verify", False) and not (args.fix or args.diff):
            parser.error("check --verify proves the fixes it applies: give --fix (or --diff) with it")
        if getattr(args, "verify_timeout", 1) <= 0:
            parser.error("--verify-timeout must be positive")
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.run(args)
    except (ConfigError, FileNotFoundError, ReportFileError) as exc:
        print(f"fusionlint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: say so in one line (the traceback under FUSIONLINT_DEBUG)
        print(internal_error("fusionlint", exc), file=sys.stderr)
        return 2


def _settings(args: argparse.Namespace) -> Settings:
    if args.config is not None and not args.config.is_file():
        raise ConfigError(f"{args.config}: config file not found")
    return Settings(
        args.config,
        select=tuple(args.select) if args.select is not None else None,
        extend_select=tuple(args.extend_select or ()),
        ignore=tuple(args.ignore or ()),
        cache_dir=args.cache_dir,
    )


def _fix_mode(args: argparse.Namespace) -> FixMode:
    if not (args.fix or args.diff):
        return FixMode.OFF
    return FixMode.UNSAFE if args.unsafe_fixes else FixMode.SAFE


def _verify(args: argparse.Namespace) -> float | None:
    """Seconds per function for ``--verify``, None without it."""
    return args.verify_timeout if args.verify else None


def run_check(args: argparse.Namespace) -> int:
    if args.output_file is not None:
        _check_report_path(args.output_file)  # before any fix is written
    reads_stdin = args.paths == [Path("-")] or (args.stdin_filename is not None and not args.paths)
    if reads_stdin:
        return _check_stdin(args)
    if Path("-") in args.paths:
        raise ConfigError("'-' (stdin) cannot be mixed with other paths")
    paths = args.paths or [Path(".")]
    settings = _settings(args)
    files = find_source_files(paths, settings, force_exclude=args.force_exclude)
    if args.show_files or args.show_settings:
        return _show(args, settings, paths, files)
    if not files and not args.quiet:
        print("fusionlint: warning: no Python files or notebooks found", file=sys.stderr)
    caches = None if args.no_cache else Caches()
    settings.check_selectors(known_rule_codes(caches, settings.configs()))
    outcomes = check_files(files, settings, _fix_mode(args), write=not args.diff, caches=caches, verify=_verify(args))
    for warning in caches.warnings if caches is not None else ():
        print(f"fusionlint: warning: {warning}; the findings are complete all the same", file=sys.stderr)
    return _report(args, outcomes, sys.stdout)


def _show(args: argparse.Namespace, settings: Settings, paths: list[Path], files: list[Path]) -> int:
    """``--show-files``: the files a check would read; ``--show-settings``: each path's settings."""
    if args.show_files:
        sys.stdout.writelines(f"{output.display_path(path)}\n" for path in files)
    if args.show_settings:
        known_codes = known_rule_codes()
        sys.stdout.write("\n".join(settings.described(path, known_codes) for path in paths))
    return 0


def _check_stdin(args: argparse.Namespace) -> int:
    """Lint stdin; with --fix the (fixed) text goes to stdout and the findings to stderr."""
    name = args.stdin_filename or "-"
    path = Path(name)
    settings = _settings(args)
    settings.for_path(path).check_selectors(known_rule_codes())
    data = sys.stdin.buffer.read()
    fixing = args.fix and not args.diff
    if args.force_exclude and Exclusion(settings).excludes(path, is_dir=False):
        if fixing:
            sys.stdout.buffer.write(data)
        return 0
    try:
        text, encoding = decode_source(data, notebook=is_notebook_path(name))
        source: SourceFile | FileOutcome = SourceFile(path=path, data=data, text=text, encoding=encoding)
    except SourceFileError as exc:
        source = unreadable(path, exc)
    outcomes = check_sources([source], settings, _fix_mode(args), write=False, caches=None, verify=_verify(args))
    if fixing:
        outcome = outcomes[0]
        fixed = outcome.new_text is not None
        sys.stdout.buffer.write(outcome.new_text.encode(outcome.source.encoding) if fixed else data)
        sys.stdout.flush()
        return _report(args, outcomes, sys.stderr)
    return _report(args, outcomes, sys.stdout)


def _report(args: argparse.Namespace, outcomes: list[FileOutcome], stream) -> int:
    """Show the outcomes on ``stream`` (or in ``--output-file``) and return the exit status."""
    if args.output_file is None:
        return _write_report(args, outcomes, stream)
    report = io.StringIO()
    status = _write_report(args, outcomes, report)
    _save_report(args.output_file, report.getvalue())
    return status


def _write_report(args: argparse.Namespace, outcomes: list[FileOutcome], stream) -> int:
    for outcome in outcomes:
        for error in outcome.errors:
            print(f"fusionlint: warning: {error}", file=sys.stderr)
        for error in outcome.internal_errors:
            print(f"fusionlint: error: {error}", file=sys.stderr)
    crashed = any(outcome.internal_errors for outcome in outcomes)
    if args.diff:
        diffs = "".join(_diff(outcome) for outcome in outcomes if outcome.new_text is not None)
        stream.write(diffs)
        fixes = sum(len(outcome.fixed) for outcome in outcomes)
        if not args.quiet:
            print(f"Would fix {fixes} error{'s' if fixes != 1 else ''}." if fixes else "No fixes to apply.", file=sys.stderr)
        return 2 if crashed else int(bool(diffs))

    remaining = any(outcome.findings for outcome in outcomes)
    if args.statistics:
        docs = {doc.code: doc for doc in _rule_docs()}
        stream.write(output.format_statistics(outcomes, docs, unsafe_hint=args.unsafe_fixes))
    elif args.output_format in ("text", "concise"):
        text = args.output_format == "text"
        output.write_text(outcomes, stream, args.unsafe_fixes, show_source=text, show_fixes=text and args.show_fixes)
        if not args.quiet:
            if args.show_fixes:
                stream.write(output.fixed_summary(outcomes))
            stream.write(output.summary(outcomes, _fix_mode(args), unsafe_hint=args.unsafe_fixes))
            if args.verify:
                stream.write(output.verify_summary(outcomes))
    elif args.output_format == "sarif":
        stream.write(output.format_sarif(outcomes, _rule_docs(), root=Path.cwd()))
    else:
        stream.write(_machine_report(args.output_format, outcomes))
    if crashed:
        return 2
    fixed = args.exit_non_zero_on_fix and any(outcome.fixed for outcome in outcomes)
    return int(fixed or (remaining and not args.exit_zero))


def _machine_report(output_format: str, outcomes: list[FileOutcome]) -> str:
    if output_format == "json":
        return output.format_json(outcomes)
    if output_format == "json-lines":
        return output.format_json_lines(outcomes)
    if output_format == "gitlab":
        return output.format_gitlab(outcomes, root=Path.cwd())
    if output_format == "junit":
        return output.format_junit(outcomes)
    if output_format == "rdjson":
        return output.format_rdjson(outcomes)
    return output.format_github(outcomes)


class ReportFileError(Exception):
    """``--output-file`` names a path the report must not be written to."""


def _check_report_path(path: Path) -> None:
    """A report is replaced, never written through a link: a link there is refused, not replaced,
    since whoever planted it meant something else to be written."""
    if path.is_symlink():
        raise ReportFileError(f"{path}: is a symlink; --output-file never writes through one (name the file itself)")
    if path.is_dir():
        raise ReportFileError(f"{path}: is a folder, not a file (--output-file)")


def _save_report(path: Path, report: str) -> None:
    """Write the report in one step (a reader never sees half of it); an existing report keeps its mode."""
    _check_report_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        previous = os.lstat(path) if path.exists() else None
        write_atomic(path, report.encode("utf-8"), like=previous)
    except OSError as exc:
        raise ReportFileError(f"{path}: cannot write the report: {exc.strerror or exc}") from None


def _diff(outcome: FileOutcome) -> str:
    """A unified diff of the fixed file; for a notebook, one per changed cell (its JSON is unreadable)."""
    name = output.display_path(outcome.path)
    if not is_notebook_path(name):
        return _unified(outcome.source.text, outcome.new_text, name)
    before, after = read_notebook(outcome.source.text)["cells"], read_notebook(outcome.new_text)["cells"]
    return "".join(
        _unified(cell_source(old), cell_source(new), f"{name}:cell {number}")
        for number, (old, new) in enumerate(zip(before, after), start=1)
        if old != new
    )


def _unified(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=name, tofile=name
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _rule_docs() -> list[output.RuleDoc]:
    from fusionlint.rules import all_rules

    docs = [
        output.RuleDoc(
            rule.code, rule.name, rule.message, rule.rationale, rule.explain(), documented=bool(rule.examples)
        )
        for rule in all_rules()
    ]
    if all(doc.code != UNREADABLE for doc in docs):
        docs.append(UNREADABLE_DOC)
    return sorted(docs, key=lambda doc: doc.code)


def run_rules(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        from fusionlint.ruledocs import documented_rules, markdown_table

        sys.stdout.write(markdown_table(documented_rules()))
        return 0
    docs = _rule_docs()
    from fusionlint.rules import all_rules

    safety = {rule.code: rule.fix_safety.value for rule in all_rules()}
    width = max(len(doc.name) for doc in docs)
    for doc in docs:
        print(f"{doc.code}  {doc.name:<{width}}  fix: {safety.get(doc.code, 'none'):<6}  {doc.message}")
    return 0


def run_explain(args: argparse.Namespace) -> int:
    code = args.code.upper()
    doc = next((doc for doc in _rule_docs() if doc.code == code), None)
    if doc is None:
        print(f"fusionlint: error: unknown rule code {args.code!r} (see `fusionlint rules`)", file=sys.stderr)
        return 2
    if output.is_interactive(sys.stdout):
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(doc.help))
    else:
        sys.stdout.write(doc.help if doc.help.endswith("\n") else doc.help + "\n")
    return 0
