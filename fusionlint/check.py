"""One ``fusionlint check`` run over files: read, consult the cache, lint what missed, fix, write.

The engine (libcst) and the process pool are imported only when some file misses the cache,
so a warm run costs a read and a hash per file. When more than a handful of files miss, they are linted in a
process pool (forked after the engine is imported, so no worker imports it again). Only the
main process writes files, each one atomically and only if its text changed. With ``verify``,
a file's fixes are first proven by running them (``fusionlint.verify``): only the proven ones
are written.
"""
from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator

from fusionlint.cache import Cache, Caches, options_digest
from fusionlint.config import Config, Settings
from fusionlint.model import Finding, FixMode, InternalError, LintOptions, LintResult, internal_error
from fusionlint.sourcefile import SourceFile, SourceFileError, is_notebook_path, read_source, write_source

UNREADABLE = "FL998"  # pseudo rule: a file that cannot be read, decoded, or parsed as a notebook
POOL_THRESHOLD = 8  # files missing the cache before a process pool pays for its start


@dataclass
class FileOutcome:
    path: Path
    source: SourceFile | None  # None when the file could not be read
    findings: tuple[Finding, ...] = ()  # left after fixing
    fixed: tuple[Finding, ...] = ()
    new_text: str | None = None  # the fixed text, when fixing changed it
    errors: tuple[str, ...] = ()  # warnings worth showing (a dropped fix, ...), each naming its file
    internal_errors: tuple[str, ...] = ()  # fusionlint's bugs met on this file: the run fails

    @property
    def text(self) -> str | None:
        """The text the findings point into."""
        if self.new_text is not None:
            return self.new_text
        return self.source.text if self.source is not None else None


def unreadable(path: Path, error: SourceFileError) -> FileOutcome:
    finding = Finding(UNREADABLE, str(error), 1, 1, 1, 1)
    return FileOutcome(path=path, source=None, findings=(finding,))


def known_rule_codes(caches: Caches | None = None, configs: Iterable[Config] = ()) -> frozenset[str]:
    """The registry's codes, from the caches of ``configs`` when one has them (importing the rules
    imports libcst)."""
    opened = [caches.for_config(config) for config in configs] if caches is not None else []
    codes = next((cache.rule_codes for cache in opened if cache.rule_codes is not None), None)
    if codes is None:
        from fusionlint.rules import all_rules

        codes = frozenset(rule.code for rule in all_rules()) | {UNREADABLE}
    for cache in opened:
        cache.remember_rules(codes)
    return codes


def options_for(config: Config, path: Path, known_codes: frozenset[str], fix: FixMode) -> LintOptions:
    return LintOptions(codes=config.enabled_codes(known_codes, path), fix=fix, extra_ops=config.extra_ops)


def lint_text(text: str, path: str, options: LintOptions) -> LintResult:
    if is_notebook_path(path):
        from fusionlint.notebook import lint_notebook

        return lint_notebook(text, path, options)
    from fusionlint.engine import lint_source

    return lint_source(text, path, options)


def _lint_job(job: tuple[str, str, LintOptions]) -> tuple[LintResult, dict[str, str | None]]:
    """Lint one text, with the other files its findings depend on (path -> sha256 of their bytes,
    None for a file looked for and absent); a bug comes back as an ``InternalError`` in
    ``errors``, so the other files still run."""
    from fusionlint.analysis import project

    with project.recording() as depends_on:
        try:
            with _collected_after():
                return lint_text(*job), depends_on
        except SourceFileError as exc:  # a notebook that is not valid JSON
            return LintResult(findings=(Finding(UNREADABLE, str(exc), 1, 1, 1, 1),)), {}
        except Exception as exc:  # noqa: BLE001 - reported per file, the run carries on
            return LintResult(findings=(), errors=(internal_error(job[1], exc),)), {}


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """The objects alive now (the imported engine, for good) left out of the garbage collector's
    passes while files are linted, in this process and in the workers forked from it: linting
    allocates millions of objects, and each full pass would walk the engine's too (a tenth of a
    run). A caller that froze its own heap keeps it so."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def _collected_after() -> Iterator[None]:
    """One pass of the garbage collector after a file is linted, none while it is: a file's syntax
    trees and their analyses are a million objects, and the passes their allocations trigger would
    walk the trees still alive again and again. The trees hold no reference cycles, so they are
    freed as soon as the file is done; the pass after it frees what cycles are left (the analyses
    must not make any that hold a tree). Everything the file allocated is in the youngest
    generation, so the pass is of that one: a full pass would walk every object the run keeps
    (caches), once per file. A caller that turned the collector off keeps it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def usable_cpus() -> int:
    """The cores this process may run on (``sched_getaffinity`` is Linux-only)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _can_fork() -> bool:
    """Workers are forked, so they inherit the imported engine; Windows cannot fork."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _run_jobs(jobs: list[tuple[str, str, LintOptions]]) -> list[tuple[LintResult, dict[str, str | None]]]:
    if not jobs:
        return []
    import fusionlint.engine  # noqa: F401 - imported once here, inherited by the forked workers
    from fusionlint.analysis import project

    project.forget()  # the files of an earlier run in this process may have changed since
    workers = min(usable_cpus(), len(jobs))
    with _frozen_heap():
        if len(jobs) < POOL_THRESHOLD or workers < 2 or not _can_fork():
            return [_lint_job(job) for job in jobs]
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            largest_first = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0]))
            futures = {i: pool.submit(_lint_job, jobs[i]) for i in largest_first}
            return [futures[i].result() for i in range(len(jobs))]


def check_files(
    paths: list[Path], settings: Settings, fix: FixMode, write: bool, caches: Caches | None,
    verify: float | None = None,
) -> list[FileOutcome]:
    """Lint ``paths``, each under its own settings; with ``fix`` other than OFF compute fixes, and
    write them when ``write``. With ``verify`` (seconds per function), keep only the fixes proven
    by running them."""
    return check_sources([_read(path) for path in paths], settings, fix, write, caches, verify)


def _read(path: Path) -> SourceFile | FileOutcome:
    try:
        return read_source(path)
    except SourceFileError as exc:
        return unreadable(path, exc)


def check_sources(
    sources: list[SourceFile | FileOutcome], settings: Settings, fix: FixMode, write: bool, caches: Caches | None,
    verify: float | None = None,
) -> list[FileOutcome]:
    """Lint texts already read (an unreadable file comes as its ``FileOutcome``), in the given order."""
    configs = [settings.for_path(source.path) for source in sources]
    known_codes = known_rule_codes(caches, configs)
    outcomes: list[FileOutcome] = []
    pending: list[tuple[FileOutcome, Cache | None, str | None, LintOptions]] = []
    for source, config in zip(sources, configs):
        cache = caches.for_config(config) if caches is not None else None
        if isinstance(source, FileOutcome):
            if UNREADABLE in config.enabled_codes(known_codes, source.path):
                outcomes.append(source)
            continue
        outcome = FileOutcome(path=source.path, source=source)
        outcomes.append(outcome)
        options = options_for(config, source.path, known_codes, fix)
        key = None
        if cache is not None:
            key = cache.key(source.data, options_digest(options), source.path.suffix)
            cached = cache.get(key, source.path.parent)
            if cached is not None and not any(fix.allows(f.fix_safety) for f in cached.findings):
                outcome.findings, outcome.errors = cached.findings, cached.errors
                continue
        pending.append((outcome, cache, key, options))

    results = _run_jobs([(o.source.text, str(o.path), options) for o, _, _, options in pending])
    for (outcome, cache, key, options), (result, depends_on) in zip(pending, results):
        if verify is not None and result.source not in (None, outcome.source.text) and not _crashed(result):
            try:
                result = _verified(outcome.source, result, options, verify)
            except Exception as exc:  # noqa: BLE001 - a bug: this file fails, unwritten; the others go on
                result = replace(result, errors=result.errors + (internal_error(str(outcome.path), exc),))
        outcome.findings, outcome.fixed = result.findings, result.fixed
        outcome.errors = tuple(e for e in result.errors if not isinstance(e, InternalError))
        outcome.internal_errors = tuple(e for e in result.errors if isinstance(e, InternalError))
        if outcome.internal_errors:  # a half-done lint: its findings are shown, its fixes neither written nor cached
            outcome.findings = tuple(sorted(result.findings + result.fixed, key=_position))
            outcome.fixed = ()
            continue
        if UNREADABLE not in options.codes:  # an invalid notebook, its FL998 ignored by the user
            outcome.findings = tuple(f for f in outcome.findings if f.code != UNREADABLE)
        changed = result.source is not None and result.source != outcome.source.text
        if changed:
            outcome.new_text = result.source
            if write:
                try:
                    write_source(outcome.source, result.source)
                except (SourceFileError, OSError) as exc:  # nothing was fixed after all
                    outcome.findings = tuple(sorted(result.findings + result.fixed, key=_position))
                    outcome.fixed, outcome.new_text = (), None
                    outcome.errors += (f"{outcome.path}: fixes not written: {exc}",)
        elif key is not None and not result.fixed:
            cache.put(key, result, depends_on, outcome.path.parent)
    if caches is not None:
        caches.save()
    return outcomes


def _crashed(result: LintResult) -> bool:
    return any(isinstance(error, InternalError) for error in result.errors)


def _verified(source: SourceFile, result: LintResult, options: LintOptions, timeout: float) -> LintResult:
    """``result`` with only the fixes that running them proved; the findings whose fix was refused
    stay, saying why (a notebook's fixes are not run, so none is applied)."""
    from fusionlint.verify import Verdict, Verification, function_of_line, verify_fix

    path = str(source.path)
    if is_notebook_path(path):
        verification, fallback = Verification(None, {}), Verdict(None, "fixes in notebooks are not verified")
    else:
        verification, fallback = verify_fix(source.text, result.source, source.path, timeout), None
    text = verification.text if verification.text is not None else source.text
    left = lint_text(text, path, replace(options, fix=FixMode.OFF))
    findings = []
    for finding in left.findings:
        where = fallback or verification.verdicts.get(function_of_line(text, finding.line))
        if where is not None and not where.verified and options.fix.allows(finding.fix_safety):
            finding = replace(finding, verified=where.verified, verification=where.reason)
        findings.append(finding)
    # a fix found in a later pass points into an intermediate text: its function is a guess,
    # needed only when some fixes were dropped
    everything = verification.text == result.source
    fixed = []
    for finding in result.fixed if fallback is None else ():
        where = verification.verdicts.get(function_of_line(source.text, finding.line))
        if everything or (where is not None and where.verified):
            reason = where.reason if where is not None and where.verified else "proven with the rest of the file"
            fixed.append(replace(finding, verified=True, verification=reason))
    errors = result.errors + tuple(error for error in left.errors if error not in result.errors)
    return LintResult(findings=tuple(findings), fixed=tuple(fixed), source=verification.text, errors=errors)


def _position(finding: Finding) -> tuple:
    return (finding.cell or 0, finding.line, finding.column, finding.code)
