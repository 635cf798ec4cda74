"""The data that crosses the boundary between the engine and its front ends.

The engine (``fusionlint.engine``) turns one source text into a ``LintResult``; the CLI, the
notebook layer, pre-commit and ``%%fuse`` only ever see these types, so they stay small and
plain (hashable, picklable for worker processes, JSON-able for the cache).
"""
from __future__ import annotations

import enum
import os
import traceback
from dataclasses import dataclass, field

DEBUG_VARIABLE = "FUSIONLINT_DEBUG"  # set to 1: internal errors come with their traceback


class FixSafety(str, enum.Enum):
    """How far a rule's fix may be trusted (Ruff's tiers)."""

    SAFE = "safe"  # applied by --fix: never changes behaviour
    UNSAFE = "unsafe"  # applied only with --unsafe-fixes: may change behaviour in corner cases
    NONE = "none"  # reported only


class FixMode(str, enum.Enum):
    """Which fixes the engine applies to the source."""

    OFF = "off"
    SAFE = "safe"
    UNSAFE = "unsafe"

    def allows(self, safety: FixSafety) -> bool:
        if self is FixMode.OFF or safety is FixSafety.NONE:
            return False
        return self is FixMode.UNSAFE or safety is FixSafety.SAFE


# Where a rule's rewrite saves (``Rule.pays_in``), each claim measured by the contract test:
FUSIONRT = "fusionrt"  # fusionrt's stream policy writes less (count or bytes) or runs fewer kernels
EAGER = "eager"  # eager PyTorch does (the report's eager counts)


@dataclass(frozen=True)
class LineEdit:
    """A fix's change to a text: whole lines replaced, so untouched lines stay byte for byte."""

    start: int  # first replaced line, 1-based
    end: int  # last replaced line, inclusive
    text: str  # the replacement, line endings included ("" deletes the lines)


@dataclass(frozen=True)
class Finding:
    """One reported pattern. Lines are 1-based, columns 1-based (as editors and Ruff show them)."""

    code: str
    message: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix_safety: FixSafety = FixSafety.NONE  # safety of the fix this finding carries, NONE if none
    cell: int | None = None  # notebook cell number (1-based over all cells), set by the notebook layer
    # set by `check --verify` on a finding whose fix it tried: True proven (and applied), False
    # refused, None not run (no harness); `verification` says why (None: not tried)
    verified: bool | None = None
    verification: str | None = None
    pays_in: tuple[str, ...] = ()  # where the rule's rewrite saves: FUSIONRT and/or EAGER
    # the fix's edits, in the coordinates of the text the finding points into (empty: no fix);
    # derived from the finding, so left out of comparisons
    edits: tuple[LineEdit, ...] = field(default=(), compare=False)
    # the rule's name and what its fix does, for reports that link the rule and describe the fix
    rule: str = field(default="", compare=False)
    fix_title: str = field(default="", compare=False)

    @property
    def fixable(self) -> bool:
        return self.fix_safety is not FixSafety.NONE


@dataclass(frozen=True)
class LintOptions:
    """Everything, besides the source text, that decides a file's findings (part of the cache key)."""

    codes: frozenset[str]  # enabled rule codes, already resolved from select/ignore/per-file-ignores
    fix: FixMode = FixMode.OFF
    extra_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (op class, extra names) from config


@dataclass(frozen=True)
class LintResult:
    """The outcome for one source text."""

    findings: tuple[Finding, ...]  # what is left after fixing, sorted by position
    fixed: tuple[Finding, ...] = ()  # findings whose fix was applied
    source: str | None = None  # the fixed text, or None when nothing changed
    errors: tuple[str, ...] = field(default=())  # internal problems worth showing (a dropped fix, ...)


class InternalError(str):
    """An error message that reports a bug in fusionlint, not a problem of the file.

    It travels in ``LintResult.errors`` like any message (the notebook layer and ``%%fuse`` pass
    those on as they are), and its type tells ``fusionlint check`` to fail the run (exit 2) and
    not to cache the file.
    """


def internal_error(where: str, exc: BaseException) -> InternalError:
    """One line naming the file and the exception; the traceback too when debugging."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # a KeyError's text is its key's repr, which may fail too
        lines = []
    message = f"{where}: internal error: {type(exc).__name__}" + (f": {lines[0]}" if lines else "")
    if os.environ.get(DEBUG_VARIABLE):
        return InternalError(message + "\n" + "".join(traceback.format_exception(exc)).rstrip())
    return InternalError(f"{message} (a bug in fusionlint; {DEBUG_VARIABLE}=1 shows the traceback)")
