"""The report of a lazy run: every materialized global-memory write, with its reason and source.

The core fills a ``Report`` while it plans and runs kernels; this module only holds the data,
serializes it (``docs/report.md`` documents the JSON schema) and renders it with rich for a
terminal, plain text and Jupyter: a summary that fits a screen at model size by default (totals,
the top causes from ``causes``, records grouped by line and reason), every record in
``Report.details()``. ``compare`` diffs two reports, the before/after view of a fix.
"""
from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from html import escape
from typing import Any

from rich.console import Console, ConsoleOptions, Group, JustifyMethod, NewLine, RenderableType, RenderResult
from rich.jupyter import JUPYTER_HTML_FORMAT
from rich.table import Table
from rich.text import Text

from .causes import Cause, FallbackGroup, WriteGroup, group_fallbacks, group_writes, top_causes

SCHEMA_VERSION = 1

WRITE_REASONS = ("alive", "consumed-later", "view-break", "fallback-input", "sync", "output", "fallback",
                 "saved-for-backward")
KERNEL_KINDS = ("fused", "reduction", "matmul", "conv", "fallback", "copy")
FLUSH_REASONS = (
    "item", "bool", "tolist", "cpu", "numpy", "print", "fallback", "exit", "pending-bound", "sync", "alias",
    "storage", "pickle", "copy", "data", "dlpack", "thread", "fork",
)

# Plain text has no terminal to measure; wide enough that source paths rarely wrap.
PLAIN_WIDTH = 120
# The default view stays on one screen at model size: this many causes, this many rows a table.
TOP_CAUSES = 4
SUMMARY_ROWS = 5
# A summary table's source column is cut to what the other columns leave, but never below this.
MIN_SOURCE_WIDTH = 24


def _check_choice(kind: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {kind} {value!r}; expected one of {', '.join(choices)}")


@dataclass(frozen=True)
class Write:
    """One materialized global-memory write: the unit the report counts."""

    shape: tuple[int, ...]
    dtype: str
    bytes: int
    reason: str
    source: str
    kernel: int
    op: str

    def __post_init__(self) -> None:
        _check_choice("write reason", self.reason, WRITE_REASONS)


@dataclass(frozen=True)
class KernelRecord:
    """One launched kernel (or eager fallback op) and the global memory it touched.

    ``backend``: what the plan runs it on (``generated``: a generated element-wise or reduction
    kernel; ``template``: the Triton matmul template with its fused prologue and epilogue;
    ``torch``: torch's own kernel, i.e. cuBLAS or cuDNN on a GPU; empty for a fallback op).
    ``decision``: for compute-bound ops, why the cost model chose that backend."""

    index: int
    kind: str
    name: str
    ops: tuple[str, ...]
    sources: tuple[str, ...]
    bytes_read: int
    bytes_written: int
    flush: int
    backend: str = ""
    decision: str = ""

    def __post_init__(self) -> None:
        _check_choice("kernel kind", self.kind, KERNEL_KINDS)


@dataclass(frozen=True)
class Fallback:
    """An op the backend could not record, run eagerly on written inputs."""

    op: str
    source: str
    reason: str


@dataclass(frozen=True)
class Flush:
    """A point where pending ops had to be planned and run, and why."""

    reason: str
    source: str
    ops: int

    def __post_init__(self) -> None:
        _check_choice("flush reason", self.reason, FLUSH_REASONS)


@dataclass
class Report:
    """What a lazy run launched and wrote, next to what eager PyTorch would have done."""

    policy: str = "stream"
    executor: str = "reference"
    kernel_records: list[KernelRecord] = field(default_factory=list)
    materialized: list[Write] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    flushes: list[Flush] = field(default_factory=list)
    eager_kernels: int = 0
    eager_writes: int = 0
    eager_bytes_written: int = 0

    @property
    def kernels(self) -> int:
        return len(self.kernel_records)

    @property
    def writes(self) -> int:
        return len(self.materialized)

    @property
    def bytes_written(self) -> int:
        """Every byte a kernel wrote: the materialized writes plus the outputs of fallback ops,
        which eager's count includes too."""
        return sum(k.bytes_written for k in self.kernel_records)

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.kernel_records)

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; the schema is documented in docs/report.md."""
        return {
            "version": SCHEMA_VERSION,
            "policy": self.policy,
            "executor": self.executor,
            "totals": {
                "kernels": self.kernels,
                "writes": self.writes,
                "bytes_written": self.bytes_written,
                "bytes_read": self.bytes_read,
                "fallbacks": len(self.fallbacks),
                "flushes": len(self.flushes),
            },
            "eager": {
                "kernels": self.eager_kernels,
                "writes": self.eager_writes,
                "bytes_written": self.eager_bytes_written,
            },
            "kernel_records": [_json_record(k) for k in self.kernel_records],
            "materialized": [_json_record(w) for w in self.materialized],
            "fallbacks": [_json_record(f) for f in self.fallbacks],
            "flushes": [_json_record(f) for f in self.flushes],
            "summary": {"causes": [{**_json_record(c), "text": _cause_text(c)} for c in self.causes()]},
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """Inverse of ``to_dict``; ``totals`` and ``summary`` are derived, so they are not read back."""
        version = data.get("version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported report version {version!r}; this fusionrt reads version {SCHEMA_VERSION}")
        eager = data["eager"]
        return cls(
            policy=data["policy"],
            executor=data["executor"],
            kernel_records=[
                KernelRecord(**{**k, "ops": tuple(k["ops"]), "sources": tuple(k["sources"])})
                for k in data["kernel_records"]
            ],
            materialized=[Write(**{**w, "shape": tuple(w["shape"])}) for w in data["materialized"]],
            fallbacks=[Fallback(**f) for f in data["fallbacks"]],
            flushes=[Flush(**f) for f in data["flushes"]],
            eager_kernels=eager["kernels"],
            eager_writes=eager["writes"],
            eager_bytes_written=eager["bytes_written"],
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.from_dict(json.loads(text))

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the kernels and writes on a timeline that Perfetto and chrome://tracing open; the
        widths are bytes moved, not times (see ``fusionrt.trace``)."""
        from .trace import chrome_trace

        with open(path, "w", encoding="utf-8") as file:
            json.dump(chrome_trace(self), file)

    def to_dataframe(self, records: str = "kernels") -> Any:
        """A pandas DataFrame with one row per record of one kind: ``kernels`` (the default),
        ``writes``, ``fallbacks`` or ``flushes``; columns are the records' fields."""
        tables = {"kernels": (KernelRecord, self.kernel_records), "writes": (Write, self.materialized),
                  "fallbacks": (Fallback, self.fallbacks), "flushes": (Flush, self.flushes)}
        _check_choice("record kind", records, tuple(tables))
        try:
            import pandas
        except ImportError as exc:
            raise ImportError("Report.to_dataframe needs pandas: pip install pandas") from exc
        kind, rows = tables[records]
        return pandas.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(kind)])

    # -- rendering -----------------------------------------------------------------------------

    def summary(self) -> str:
        """One line: the totals a log or a test failure message needs."""
        parts = [
            f"{_plural(self.kernels, 'kernel')} (eager {self.eager_kernels})",
            f"{_plural(self.writes, 'write')} (eager {self.eager_writes})",
            f"{human_bytes(self.bytes_written)} written (eager {human_bytes(self.eager_bytes_written)})",
            f"{human_bytes(self.bytes_read)} read",
            _plural(len(self.fallbacks), "fallback"),
            _plural(len(self.flushes), "flush"),
        ]
        return ", ".join(parts)

    def causes(self) -> list[Cause]:
        """The few causes behind most of the writes, fallbacks and repeated host syncs."""
        return top_causes(self.materialized, self.fallbacks, self.flushes, limit=TOP_CAUSES)

    def details(self) -> Details:
        """The report with every write, kernel, fallback and flush listed (``--details``)."""
        return Details(self)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self._overview()
        if self.materialized:
            yield NewLine()
            yield _write_groups_table(f"Materialized writes ({self.writes}) by source line and reason",
                                      group_writes(self.materialized), options.max_width)
        if self.fallbacks:
            yield NewLine()
            yield _fallback_groups_table(len(self.fallbacks), group_fallbacks(self.fallbacks), options.max_width)

    def _overview(self) -> Iterator[RenderableType]:
        """Header, totals against eager, and the top causes: what every view starts with."""
        yield Text(f"fusionrt report (policy {self.policy}, executor {self.executor})", style="bold")
        yield self._totals_table()
        counts = []
        if self.fallbacks:
            counts.append(f"{_plural(len(self.fallbacks), 'fallback')} (ops run eagerly)")
        if self.flushes:
            by_reason = Counter(f.reason for f in self.flushes).most_common()
            counts.append(f"{_plural(len(self.flushes), 'flush')} ({', '.join(f'{r} {n}' for r, n in by_reason)})")
        if counts:
            yield Text(", ".join(counts))
        causes = self.causes()
        if causes:
            yield NewLine()
            yield Text("Top causes", style="bold")
            for cause in causes:
                yield Text(f"  {_cause_text(cause)}", no_wrap=True, overflow="ellipsis")
                if cause.advice:
                    yield Text(f"    → {cause.advice}", style="cyan", no_wrap=True, overflow="ellipsis")

    def _totals_table(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("")
        table.add_column("fusionrt", justify="right")
        table.add_column("eager", justify="right")
        table.add_column("ratio", justify="right")
        for label, ours, eager, fmt in (
            ("kernels", self.kernels, self.eager_kernels, str),
            ("writes", self.writes, self.eager_writes, str),
            ("bytes written", self.bytes_written, self.eager_bytes_written, human_bytes),
        ):
            table.add_row(label, fmt(ours), fmt(eager), _ratio(ours, eager))
        table.add_row("bytes read", human_bytes(self.bytes_read), "", "")
        return table

    def full_tables(self) -> Iterator[tuple[str, Table]]:
        """Every record, one table per kind, each with its title (the HTML folds them under it)."""
        if self.materialized:
            title = f"Materialized writes ({self.writes})"
            yield title, _writes_table(title, self.materialized)
        if self.kernel_records:
            title = f"Kernels ({self.kernels})"
            table = Table(title=title, title_justify="left")
            for name in ("#", "kind", "name", "ops", "read", "written", "flush", "backend"):
                table.add_column(name, justify="right" if name in ("#", "read", "written", "flush") else "left")
            for k in self.kernel_records:
                backend = f"{k.backend}: {k.decision}" if k.decision else k.backend
                table.add_row(
                    str(k.index), k.kind, Text(k.name), Text(" ".join(_short_op(op) for op in k.ops)),
                    human_bytes(k.bytes_read), human_bytes(k.bytes_written), str(k.flush), Text(backend),
                )
            yield title, table
        if self.fallbacks:
            title = f"Fallbacks ({len(self.fallbacks)})"
            table = Table(title=title, title_justify="left")
            for name in ("op", "reason", "source"):
                table.add_column(name)
            for f in self.fallbacks:
                table.add_row(Text(f.op), Text(f.reason), Text(display_source(f.source)))
            yield title, table
        if self.flushes:
            title = f"Flushes ({len(self.flushes)})"
            table = Table(title=title, title_justify="left")
            for name in ("#", "reason", "ops", "source"):
                table.add_column(name, justify="right" if name in ("#", "ops") else "left")
            for i, f in enumerate(self.flushes):
                table.add_row(str(i), f.reason, str(f.ops), Text(display_source(f.source)))
            yield title, table

    def __str__(self) -> str:
        return render_plain(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .diagram import figure  # the diagram draws with this module's helpers
        return mimebundle(self, folded=self.full_tables(), figure=figure(self))

    def _repr_html_(self) -> str:
        return self._repr_mimebundle_()["text/html"]


@dataclass
class Details:
    """A report or a comparison shown in full: its overview, then every record of every kind."""

    of: Report | Comparison

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.of._overview()
        for _, table in self.of.full_tables():
            yield NewLine()
            yield table

    def __str__(self) -> str:
        return render_plain(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .diagram import figure  # the diagram draws with this module's helpers
        return mimebundle(self, figure=figure(self.of))

    def _repr_html_(self) -> str:
        return self._repr_mimebundle_()["text/html"]


def _json_record(record: Write | KernelRecord | Fallback | Flush | Cause) -> dict[str, Any]:
    """A record's fields by name, tuples as lists: what ``json.loads`` gives back."""
    return {name: _json_value(value) for name, value in asdict(record).items()}


def _json_value(value: Any) -> Any:
    return [_json_value(v) for v in value] if isinstance(value, tuple) else value


# -- comparison --------------------------------------------------------------------------------


def _unmatched(ours: list[Write], theirs: list[Write]) -> list[int]:
    """Indices of ``ours`` left over after pairing writes one to one with ``theirs``.

    Pairs first on source line, shape, dtype, reason and op; what is left then pairs on all of
    those but the source line, because the change being compared (a fix) usually moves lines.
    """
    left = list(range(len(ours)))
    spare = list(theirs)
    for key in (lambda w: (w.source, w.shape, w.dtype, w.reason, w.op),
                lambda w: (w.shape, w.dtype, w.reason, w.op)):
        available = Counter(key(w) for w in spare)
        paired: Counter = Counter()
        still_left = []
        for i in left:
            k = key(ours[i])
            if available[k] > paired[k]:
                paired[k] += 1
            else:
                still_left.append(i)
        unpaired_spare = []
        for w in spare:
            k = key(w)
            if paired[k]:
                paired[k] -= 1
            else:
                unpaired_spare.append(w)
        left, spare = still_left, unpaired_spare
    return left


@dataclass
class Comparison:
    """Two reports of the same program, before and after a change, and what the change did."""

    before: Report
    after: Report
    labels: tuple[str, str] = ("before", "after")
    outputs_equal: bool | None = None

    @property
    def kernels(self) -> int:
        return self.after.kernels - self.before.kernels

    @property
    def writes(self) -> int:
        return self.after.writes - self.before.writes

    @property
    def bytes_written(self) -> int:
        return self.after.bytes_written - self.before.bytes_written

    @property
    def bytes_read(self) -> int:
        return self.after.bytes_read - self.before.bytes_read

    @property
    def fallbacks(self) -> int:
        return len(self.after.fallbacks) - len(self.before.fallbacks)

    @property
    def flushes(self) -> int:
        return len(self.after.flushes) - len(self.before.flushes)

    @property
    def disappeared(self) -> list[Write]:
        """Writes of ``before`` with no counterpart after (see ``_unmatched``)."""
        return [self.before.materialized[i] for i in self._disappeared_indices()]

    @property
    def appeared(self) -> list[Write]:
        """Writes of ``after`` with no counterpart before (see ``_unmatched``)."""
        return [self.after.materialized[i] for i in self._appeared_indices()]

    def _disappeared_indices(self) -> list[int]:
        return _unmatched(self.before.materialized, self.after.materialized)

    def _appeared_indices(self) -> list[int]:
        return _unmatched(self.after.materialized, self.before.materialized)

    def to_dict(self) -> dict[str, Any]:
        """The deltas, the unmatched writes as indices into each side's ``materialized``, both reports."""
        return {
            "version": SCHEMA_VERSION,
            "labels": list(self.labels),
            "outputs_equal": self.outputs_equal,
            "delta": {
                "kernels": self.kernels,
                "writes": self.writes,
                "bytes_written": self.bytes_written,
                "bytes_read": self.bytes_read,
                "fallbacks": self.fallbacks,
                "flushes": self.flushes,
            },
            "disappeared": self._disappeared_indices(),
            "appeared": self._appeared_indices(),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        b, a = self.labels
        return (
            f"{b} -> {a}: kernels {self.before.kernels} -> {self.after.kernels} ({self.kernels:+d}), "
            f"writes {self.before.writes} -> {self.after.writes} ({self.writes:+d}), "
            f"bytes written {human_bytes(self.before.bytes_written)} -> {human_bytes(self.after.bytes_written)} "
            f"({_signed_bytes(self.bytes_written)})"
        )

    def details(self) -> Details:
        """The comparison with every write only one side has listed (``--details``)."""
        return Details(self)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self._overview()
        for title, writes in self._one_sided():
            yield NewLine()
            yield _write_groups_table(f"{title} by source line and reason", group_writes(writes), options.max_width)

    def _overview(self) -> Iterator[RenderableType]:
        b, a = self.labels
        yield Text(f"fusionrt comparison: {b} vs {a}", style="bold")
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name, justify in (("", "left"), (b, "right"), (a, "right"), ("delta", "right"), ("ratio", "right")):
            table.add_column(name, justify=justify)
        rows = (
            ("kernels", self.before.kernels, self.after.kernels, str),
            ("writes", self.before.writes, self.after.writes, str),
            ("bytes written", self.before.bytes_written, self.after.bytes_written, human_bytes),
            ("bytes read", self.before.bytes_read, self.after.bytes_read, human_bytes),
            ("fallbacks", len(self.before.fallbacks), len(self.after.fallbacks), str),
            ("flushes", len(self.before.flushes), len(self.after.flushes), str),
        )
        for label, old, new, fmt in rows:
            delta = _signed_bytes(new - old) if fmt is human_bytes else f"{new - old:+d}" if new != old else "0"
            style = "green" if new < old else "red" if new > old else ""
            table.add_row(label, fmt(old), fmt(new), Text(delta, style=style), _ratio(new, old))
        yield table
        if self.outputs_equal is not None:
            yield Text(
                "outputs equal" if self.outputs_equal else "OUTPUTS DIFFER",
                style="green" if self.outputs_equal else "bold red",
            )
        if not self.disappeared and not self.appeared:
            yield NewLine()
            yield Text("Same materialized writes in both.")

    def _one_sided(self) -> Iterator[tuple[str, list[Write]]]:
        """The writes only one side has, under their title, for each side that has some."""
        for label, writes in zip(self.labels, (self.disappeared, self.appeared)):
            if writes:
                yield f"Writes only in {label} ({len(writes)})", writes

    def full_tables(self) -> Iterator[tuple[str, Table]]:
        """The writes only one side has, every one, numbered by their place in that side's report."""
        b, a = self.labels
        for label, report, indices in ((b, self.before, self._disappeared_indices()),
                                       (a, self.after, self._appeared_indices())):
            if indices:
                title = f"Writes only in {label} ({len(indices)})"
                yield title, _writes_table(title, report.materialized, indices)

    def __str__(self) -> str:
        return render_plain(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .diagram import figure  # the diagram draws with this module's helpers
        return mimebundle(self, folded=self.full_tables(), figure=figure(self))

    def _repr_html_(self) -> str:
        return self._repr_mimebundle_()["text/html"]


def compare(
    before: Report,
    after: Report,
    labels: tuple[str, str] = ("before", "after"),
    outputs_equal: bool | None = None,
) -> Comparison:
    """Diff two reports; ``outputs_equal`` says whether the two runs computed the same results."""
    return Comparison(before, after, tuple(labels), outputs_equal)


# -- shared rendering helpers ------------------------------------------------------------------


def _write_groups_table(title: str, groups: list[WriteGroup], width: int) -> Group:
    rows = [(str(g.count), human_bytes(g.bytes), g.reason, display_source(g.source), _counted(g.ops, _short_op))
            for g in groups[:SUMMARY_ROWS]]
    return _summary_table(title, len(groups),
                          (("writes", None, "right"), ("bytes", None, "right"), ("reason", 24, "left"),
                           ("source", None, "left"), ("ops", 30, "left")), rows, 3, width)


def _fallback_groups_table(fallbacks: int, groups: list[FallbackGroup], width: int) -> Group:
    rows = []
    for g in groups[:SUMMARY_ROWS]:
        (source, n), *others = g.sources
        lines = f" ×{n} (+{_plural(len(others), 'line')})" if others else ""
        rows.append((str(g.count), g.op, g.reason, display_source(source) + lines))
    return _summary_table(f"Fallbacks ({fallbacks}) by op and reason", len(groups),
                          (("ops", None, "right"), ("op", 22, "left"), ("reason", 40, "left"),
                           ("source", None, "left")), rows, 3, width)


def _summary_table(title: str, groups: int, columns: tuple[tuple[str, int | None, JustifyMethod], ...],
                   rows: list[tuple[str, ...]], source: int, width: int) -> Group:
    """A title, a borderless table of one line a row in ``width``, and a line for the rows left out.

    A column's maximum width ends its longer cells in an ellipsis; without one (a count) it keeps
    its width. Column ``source`` gets what the others leave, cut from its start: a source's file
    name and line are at its end.
    """
    natural = [max(len(name), *(len(row[i]) for row in rows)) for i, (name, _, _) in enumerate(columns)]
    taken = sum(n if most is None else min(n, most) for i, (n, (_, most, _)) in enumerate(zip(natural, columns))
                if i != source)
    room = max(MIN_SOURCE_WIDTH, width - taken - 2 * (len(columns) - 1))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for i, (name, most, justify) in enumerate(columns):
        keep = most is None
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",
                         min_width=min(natural[i], room) if keep else None, max_width=None if keep else most)
    for row in rows:
        table.add_row(*(Text(_tail(cell, room) if i == source else cell) for i, cell in enumerate(row)))
    parts: list[RenderableType] = [Text(title, style="italic"), table]
    hidden = groups - SUMMARY_ROWS
    if hidden > 0:
        parts.append(Text(f"… {hidden} more {'group' if hidden == 1 else 'groups'} (--details)", style="dim"))
    return Group(*parts)


def _tail(text: str, width: int) -> str:
    """The end of ``text`` in ``width`` characters: a source's file name and line are at its end."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def _counted(items: tuple[tuple[str, int], ...], show: Any, shown: int = 3) -> str:
    """``mul 19, add 11, addmm 8, …``: the most frequent names, a count where there are several."""
    parts = [show(name) + (f" {n}" if n > 1 else "") for name, n in items[:shown]]
    return ", ".join(parts) + (", …" if len(items) > shown else "")


def _cause_text(cause: Cause) -> str:
    if cause.kind == "fallbacks":
        ran = "op ran" if cause.count == 1 else "ops ran"
        return f"{cause.count} {ran} eagerly {cause.explanation}: {_counted(cause.examples, _short_op)}"
    if cause.kind == "syncs":
        [(source, _)] = cause.examples
        return f"{cause.count} host syncs ({cause.reason}) from {display_source(source)}: {cause.explanation}"
    return (f"{_plural(cause.count, 'write')} ({cause.reason}, {human_bytes(cause.bytes)}): "
            f"{cause.explanation}")


def _writes_table(title: str, writes: list[Write], indices: Iterable[int] | None = None) -> Table:
    """The writes at ``indices`` (all by default), numbered by their place in ``writes``."""
    table = Table(title=title, title_justify="left")
    for name in ("#", "shape", "dtype", "bytes", "reason", "source", "op", "kernel"):
        # a narrow table folds a source onto a second line rather than cut off its line number
        table.add_column(name, justify="right" if name in ("#", "bytes", "kernel") else "left",
                         overflow="fold" if name == "source" else "ellipsis")
    for i in range(len(writes)) if indices is None else indices:
        w = writes[i]
        table.add_row(
            str(i), _shape(w.shape), w.dtype, human_bytes(w.bytes),
            Text(w.reason), Text(display_source(w.source)), Text(_short_op(w.op)), str(w.kernel),
        )
    return table


def human_bytes(n: int) -> str:
    """Binary units with three significant digits: 1023 B, 1.00 KiB, 12.5 MiB, 640 MiB."""
    if abs(n) < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024:
            break
    decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{decimals}f} {unit}"


def _signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "-" if n < 0 else "") + human_bytes(abs(n))


def _ratio(ours: int, reference: int) -> str:
    return f"{ours / reference:.2f}x" if reference else "-"


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith(("sh", "ch", "s")) else f"{n} {word}s"


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _short_op(op: str) -> str:
    """``aten.add.Tensor`` -> ``add``: the overload is noise in a table."""
    parts = op.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("aten", "prims") else op


def display_source(source: str, cwd: str | None = None) -> str:
    """``file:line`` with the file relative to ``cwd`` when it lies inside it, and an installed
    library's file relative to its ``site-packages``."""
    path, sep, line = source.rpartition(":")
    if not sep or not line.isdigit() or not os.path.isabs(path):
        return source
    parts = path.split(os.sep)
    installed = [i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages")]
    if installed:  # an installed library: its import path says where, the environment's does not
        return "/".join(parts[installed[-1] + 1:]) + f":{line}"
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:  # another drive on Windows
        return source
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return source
    return f"{rel}:{line}"


def _recorded(renderable: RenderableType, width: int) -> Console:
    """A console that rendered ``renderable`` into its record buffer (styles kept for HTML)."""
    console = Console(
        file=io.StringIO(), record=True, width=width, color_system="truecolor",
        force_terminal=True, force_jupyter=False, highlight=False,
    )
    console.print(renderable)
    return console


def render_plain(renderable: RenderableType, width: int = PLAIN_WIDTH) -> str:
    """Text without ANSI escapes, laid out as in a terminal."""
    return _plain_text(_recorded(renderable, width))


def render_html(renderable: RenderableType, width: int = PLAIN_WIDTH) -> str:
    """A self-contained ``<pre>`` block with inline styles, the way rich shows itself in Jupyter."""
    return _recorded(renderable, width).export_html(inline_styles=True, code_format=JUPYTER_HTML_FORMAT)


def mimebundle(renderable: RenderableType, width: int = PLAIN_WIDTH,
               folded: Iterable[tuple[str, RenderableType]] = (), figure: str = "") -> dict[str, str]:
    """Jupyter display data: HTML plus clean text (a bare renderable would leak ANSI into text/plain).

    ``figure`` (HTML, the plan's diagram) comes first in the HTML. ``folded`` (title, renderable)
    pairs follow in the HTML only, each in a collapsed ``<details>``: a notebook keeps the full
    tables one click away without printing them.
    """
    console = _recorded(renderable, width)
    html = figure + console.export_html(inline_styles=True, code_format=JUPYTER_HTML_FORMAT, clear=False)
    for title, part in folded:
        html += f"<details><summary>{escape(title)}</summary>{render_html(part, width)}</details>"
    return {"text/plain": _plain_text(console), "text/html": html}


def _plain_text(console: Console) -> str:
    text = console.export_text(styles=False)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


__all__ = [
    "Comparison", "Fallback", "Flush", "KernelRecord", "Report", "Write", "compare", "human_bytes",
    "display_source", "FLUSH_REASONS", "KERNEL_KINDS", "SCHEMA_VERSION", "WRITE_REASONS",
]
