"""The fused plan as a picture: source lines on the left, edges to the kernels they joined on
the right, each kernel's box listing the tensors it wrote to global memory (why, how many bytes).

Inline SVG inside HTML, drawn here, so a notebook needs nothing installed (no graphviz). Colours
are SVG presentation attributes, not a stylesheet, so viewers that strip ``<style>`` keep them.
Each part carries a class (``fusionrt-line``, ``fusionrt-kernel``, ``fusionrt-edge``,
``fusionrt-write``) and its counts in ``data-`` attributes: what was drawn can be counted.

At model size the picture stays readable the way the text summary does: kernels that repeat
(same kind, name, ops and source lines, as a layer's kernels do in every layer) are one box with
a count, a box shows its few largest groups of writes, and only the boxes that write the most
are drawn, with one line saying what was left out.
"""
from __future__ import annotations

import linecache
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from .causes import WRITE_CAUSES
from .report import Comparison, KernelRecord, Report, Write, _plural, _shape, _short_op, display_source, human_bytes

# Boxes drawn at most, and groups of writes listed per box: past these, a line says what is left.
MAX_BOXES = 40
MAX_WRITE_GROUPS = 4

# Monospace text, 12 px: about this many pixels a character.
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
CHAR_WIDTH = 7.3
LINE_CHARS = 34  # a source line's label is cut to this many characters, a kernel box's text to
KERNEL_CHARS = 44  # this many: two pictures fit side by side in a notebook
PAD = 8
HEADER = 28
BOX_HEAD = 40  # a kernel box's name and numbers; its writes are listed under them
ROW = 18
ROW_GAP = 3
BOX_GAP = 10
EDGE_SPAN = 56  # room between the source lines and the kernels for the edges

KIND_FILL = {"fused": "#dbeafe", "reduction": "#ede9fe", "matmul": "#dcfce7", "conv": "#dcfce7",
             "copy": "#f3f4f6", "fallback": "#ffedd5"}
KIND_STROKE = {"fused": "#2563eb", "reduction": "#7c3aed", "matmul": "#16a34a", "conv": "#16a34a",
               "copy": "#6b7280", "fallback": "#ea580c"}
EXTERN_STROKE = "#111827"
REASON_COLOUR = {"alive": "#dc2626", "consumed-later": "#2563eb", "view-break": "#9333ea",
                 "fallback-input": "#ea580c", "sync": "#ca8a04", "output": "#059669", "fallback": "#c2410c",
                 "saved-for-backward": "#db2777"}
OTHER_COLOUR = "#6b7280"
# How each backend runs a kernel, as a box says it; a generated Triton kernel is the rule, unsaid.
BACKEND_WORDS = {"generated": "", "template": "template", "torch": "extern", "": "eager"}


@dataclass(eq=False)
class _Box:
    """Kernels of one signature (all alike but for their place in the run) and what they wrote."""

    kernels: list[KernelRecord]
    writes: list[tuple[int, Write]] = field(default_factory=list)  # (index in the report, write)

    @property
    def first(self) -> KernelRecord:
        return self.kernels[0]

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.kernels)


@dataclass(frozen=True)
class _WriteGroup:
    """Writes of one box alike in reason, op, shape, dtype and note; no reason: the box's other writes."""

    reason: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    note: str
    count: int
    bytes: int


def plan_figure(report: Report, code: Mapping[str, str] | None = None, notes: Mapping[int, str] | None = None,
                label: str = "") -> str:
    """The plan of ``report`` as an HTML block holding one SVG.

    ``code`` maps a source (as the report names it, e.g. ``cell line 3``) to its text where the
    file cannot be read back; ``notes`` maps a write's index in ``report.materialized`` to a note
    that outlines it (a comparison marks the writes only one side has); ``label`` titles it.
    """
    code = code or {}
    notes = notes or {}
    boxes = _boxes(report)
    shown = _largest(boxes, MAX_BOXES)
    hidden = [b for b in boxes if b not in shown]
    sources = list(dict.fromkeys(s for box in shown for s in box.first.sources))
    texts = {s: _line_code(s, code) for s in sources}
    labels = {s: _line_label(s, texts[s]) for s in sources}

    line_width = PAD * 2 + CHAR_WIDTH * max((len(t) for t in labels.values()), default=12)
    kernel_x = PAD + line_width + EDGE_SPAN
    kernel_width = PAD * 2 + CHAR_WIDTH * KERNEL_CHARS
    parts: list[str] = []
    box_y: dict[int, float] = {}
    y = float(HEADER)
    for box in shown:
        box_y[id(box)] = y
        rows = _rows(_write_groups(box, notes))
        parts.append(_kernel_box(box, rows, kernel_x, y, kernel_width))
        y += BOX_HEAD + len(rows) * (ROW + ROW_GAP) + BOX_GAP
    height = y

    line_y: dict[str, float] = {}
    y = float(HEADER)
    for source in sources:
        first_box = min(box_y[id(b)] for b in shown if source in b.first.sources)
        line_y[source] = y = max(y, first_box + (BOX_HEAD - ROW) / 2)
        y += ROW + ROW_GAP
    height = max(height, y + BOX_GAP)
    edges = [
        _edge(PAD + line_width, line_y[s] + ROW / 2, kernel_x, box_y[id(box)] + BOX_HEAD / 2,
              box.first.kind == "fallback")
        for box in shown for s in box.first.sources
    ]
    lines = [_source_line(s, labels[s], texts[s], PAD, line_y[s], line_width) for s in sources]
    if hidden:
        height += ROW
        parts.append(_hidden_line(hidden, PAD, height - PAD))
    width = kernel_x + kernel_width + PAD

    headers = "".join(
        f'<text x="{x:.0f}" y="18" font-weight="bold" fill="#374151">{escape(title)}</text>'
        for x, title in ((PAD, "source line"), (kernel_x, "kernel, and what it wrote to global memory"))
    )
    svg = (
        f'<svg class="fusionrt-plan-svg" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" font-size="12" '
        f'style="display:block;max-width:100%;height:auto">'
        f'<rect width="100%" height="100%" fill="#ffffff"/>{headers}{"".join(edges)}{"".join(lines)}'
        f'{"".join(parts)}</svg>'
    )
    title = f"{escape(label)}: " if label else ""
    distinct = f" ({len(boxes)} distinct)" if len(boxes) < report.kernels else ""
    caption = (f"{title}{_plural(report.kernels, 'kernel')}{distinct}, "
               f"{_plural(report.writes, 'write')} ({human_bytes(sum(w.bytes for w in report.materialized))})")
    return (
        f'<div class="fusionrt-plan" data-kernels="{report.kernels}" data-writes="{report.writes}" '
        f'style="font-family:{FONT};font-size:12px;color:#111827;max-height:640px;overflow:auto;'
        f'background:#ffffff;padding:4px 0">'
        f'<div style="font-weight:bold;margin:0 0 4px 8px">{caption}</div>'
        f'{_legend(boxes, set(notes.values()))}{svg}</div>'
    )


def figure(shown: Report | Comparison, code: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})) -> str:
    """A report's plan (nothing for a run without kernels), or a comparison's two plans side by
    side; ``code`` as for ``side_by_side``."""
    if isinstance(shown, Report):
        return plan_figure(shown, code[0]) if shown.kernels else ""
    return side_by_side(shown, code)


def side_by_side(comparison: Comparison, code: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})) -> str:
    """Both plans of a comparison next to each other, each marking the writes the other lacks.

    ``code`` holds the source text of each side's lines, where the files cannot be read back."""
    before_label, after_label = comparison.labels
    figures = (
        plan_figure(comparison.before, code[0],
                    dict.fromkeys(comparison._disappeared_indices(), f"not in {after_label}"), before_label),
        plan_figure(comparison.after, code[1],
                    dict.fromkeys(comparison._appeared_indices(), f"not in {before_label}"), after_label),
    )
    return ('<div class="fusionrt-compare" style="display:flex;gap:16px;align-items:flex-start">'
            + "".join(f'<div style="flex:1 1 0;min-width:0">{f}</div>' for f in figures) + "</div>")


def cell_code(cell: str) -> dict[str, str]:
    """``cell line N`` -> that line's text, for a cell whose line 1 is its ``%%fuse`` line."""
    return {f"cell line {n}": text for n, text in enumerate(cell.splitlines(), start=1)}


# -- what is drawn -------------------------------------------------------------------------------


def _boxes(report: Report) -> list[_Box]:
    """Kernels grouped by signature, in the order each signature first ran, with their writes."""
    by_signature: dict[tuple, _Box] = {}
    by_index: dict[int, _Box] = {}
    for k in report.kernel_records:
        box = by_signature.setdefault((k.kind, k.name, k.backend, k.ops, k.sources), _Box([]))
        box.kernels.append(k)
        by_index[k.index] = box
    for i, w in enumerate(report.materialized):
        by_index[w.kernel].writes.append((i, w))
    return list(by_signature.values())


def _largest(boxes: Sequence[_Box], limit: int) -> list[_Box]:
    """The ``limit`` boxes that write the most bytes, kept in program order."""
    kept = set(map(id, sorted(boxes, key=lambda b: -b.bytes_written)[:limit]))
    return [b for b in boxes if id(b) in kept]


def _write_groups(box: _Box, notes: Mapping[int, str]) -> list[_WriteGroup]:
    groups: dict[tuple, list[Write]] = {}
    for i, w in box.writes:
        groups.setdefault((w.reason, _short_op(w.op), w.shape, w.dtype, notes.get(i, "")), []).append(w)
    ordered = sorted(groups.items(), key=lambda item: -sum(w.bytes for w in item[1]))
    return [_WriteGroup(*key, count=len(ws), bytes=sum(w.bytes for w in ws)) for key, ws in ordered]


def _rows(groups: list[_WriteGroup]) -> list[_WriteGroup]:
    """The largest groups, then one group without a reason for the rest."""
    if len(groups) <= MAX_WRITE_GROUPS:
        return groups
    shown, rest = groups[:MAX_WRITE_GROUPS - 1], groups[MAX_WRITE_GROUPS - 1:]
    return [*shown, _WriteGroup("", "", (), "", "", sum(g.count for g in rest), sum(g.bytes for g in rest))]


def _line_code(source: str, code: Mapping[str, str]) -> str:
    """The text of a source line: from ``code``, else read back from its file; empty if neither."""
    path, _, line = source.rpartition(":")
    text = code.get(source)
    if text is None:
        text = linecache.getline(path, int(line)) if line.isdigit() else ""
    return text.strip()


def _line_label(source: str, text: str) -> str:
    """``file.py:12  its code``: the file's name is enough beside its code (the tooltip has the path)."""
    path, _, line = source.rpartition(":")
    shown = f"{os.path.basename(path)}:{line}" if os.path.isabs(path) and line.isdigit() else source
    return _cut(f"{shown}  {text}" if text else shown, LINE_CHARS)


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


# -- SVG parts -----------------------------------------------------------------------------------


def _kernel_box(box: _Box, rows: list[_WriteGroup], x: float, y: float, width: float) -> str:
    k = box.first
    extern = k.backend == "torch"
    classes = ["fusionrt-kernel", f"fusionrt-kind-{k.kind}"]
    if k.kind == "fallback":
        classes.append("fusionrt-fallback")
    if extern:
        classes.append("fusionrt-extern")
    count = len(box.kernels)
    name = f"×{count} {k.name}" if count > 1 else f"#{k.index} {k.name}"
    backend = BACKEND_WORDS.get(k.backend, k.backend)
    detail = (f"{k.kind}{f' · {backend}' if backend else ''} · {human_bytes(sum(r.bytes_read for r in box.kernels))} "
              f"in, {human_bytes(box.bytes_written)} out")
    stroke = EXTERN_STROKE if extern else KIND_STROKE[k.kind]
    dash = ' stroke-dasharray="5 3"' if k.kind == "fallback" else ""
    indices = ", ".join(str(r.index) for r in box.kernels[:8]) + (", …" if count > 8 else "")
    tooltip = [f"{_plural(count, 'kernel')} ({indices}): {k.kind} {k.name}",
               f"ops: {' '.join(_short_op(op) for op in k.ops)}",
               f"backend: {k.backend or 'none, an op run eagerly'}" + (f" ({k.decision})" if k.decision else ""),
               *(f"line: {display_source(s)}" for s in k.sources)]
    height = BOX_HEAD + len(rows) * (ROW + ROW_GAP)
    writes = "".join(_write_row(group, x + 5, y + BOX_HEAD + i * (ROW + ROW_GAP), width - 10)
                     for i, group in enumerate(rows))
    return (f'<g class="{" ".join(classes)}" data-kernels="{count}" data-kind="{escape(k.kind)}">'
            f'<title>{escape(chr(10).join(tooltip))}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height}" rx="4" '
            f'fill="{KIND_FILL[k.kind]}" stroke="{stroke}" stroke-width="{2.5 if extern else 1.5}"{dash}/>'
            f'<text x="{x + PAD:.1f}" y="{y + 16:.1f}" font-weight="bold">{escape(_cut(name, KERNEL_CHARS))}</text>'
            f'<text x="{x + PAD:.1f}" y="{y + 32:.1f}" fill="#374151">{escape(_cut(detail, KERNEL_CHARS))}</text>'
            f'{writes}</g>')


def _write_row(group: _WriteGroup, x: float, y: float, width: float) -> str:
    colour = REASON_COLOUR.get(group.reason, OTHER_COLOUR)
    classes = "fusionrt-write " + (f"fusionrt-reason-{group.reason}" if group.reason else "fusionrt-more-writes")
    if group.note:
        classes += " fusionrt-one-sided"
    outline = f' stroke="{colour}" stroke-width="2"' if group.note else ""
    return (f'<g class="{classes}" data-writes="{group.count}" data-bytes="{group.bytes}" '
            f'data-reason="{escape(group.reason)}"><title>{escape(_write_tooltip(group))}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{ROW}" rx="3" fill="#ffffff"{outline}/>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="5" height="{ROW}" fill="{colour}"/>'
            f'<text x="{x + PAD + 2:.1f}" y="{y + 13:.1f}">{escape(_cut(_write_text(group), KERNEL_CHARS - 1))}</text>'
            f'</g>')


def _write_text(group: _WriteGroup) -> str:
    if not group.reason:
        return f"+ {_plural(group.count, 'write')} more, {human_bytes(group.bytes)}"
    times = f"×{group.count} " if group.count > 1 else ""
    return f"{times}{group.reason} {human_bytes(group.bytes)} {_shape(group.shape)} {group.op}"


def _write_tooltip(group: _WriteGroup) -> str:
    if not group.reason:
        return f"{_plural(group.count, 'write')} more of these kernels, {human_bytes(group.bytes)}"
    why = WRITE_CAUSES.get(group.reason, ("", None))[0]
    return (f"{_plural(group.count, 'write')} of {_shape(group.shape)} {group.dtype} by {group.op}, "
            f"{human_bytes(group.bytes)}: {group.reason}" + (f", {why}" if why else "")
            + (f" ({group.note})" if group.note else ""))


def _source_line(source: str, label: str, text: str, x: float, y: float, width: float) -> str:
    tooltip = f"{display_source(source)}\n{text}" if text else display_source(source)
    return (f'<g class="fusionrt-line" data-source="{escape(source)}"><title>{escape(tooltip)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{ROW}" rx="3" fill="#f3f4f6" '
            f'stroke="#d1d5db"/><text x="{x + PAD:.1f}" y="{y + 13:.1f}">{escape(label)}</text></g>')


def _edge(x1: float, y1: float, x2: float, y2: float, fallback: bool) -> str:
    colour, dash = (KIND_STROKE["fallback"], ' stroke-dasharray="4 3"') if fallback else ("#9ca3af", "")
    mid = (x1 + x2) / 2
    return (f'<path class="fusionrt-edge fusionrt-line-edge" d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} '
            f'{mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" fill="none" stroke="{colour}" stroke-width="1.2"{dash}/>')


def _hidden_line(hidden: list[_Box], x: float, y: float) -> str:
    kernels = sum(len(b.kernels) for b in hidden)
    writes = sum(len(b.writes) for b in hidden)
    text = (f"… {_plural(kernels, 'kernel')} more ({len(hidden)} distinct) that write less, with "
            f"{_plural(writes, 'write')}: every one is in the tables below")
    return (f'<text class="fusionrt-more" x="{x:.1f}" y="{y:.1f}" data-kernels="{kernels}" data-writes="{writes}" '
            f'fill="#6b7280">{escape(text)}</text>')


def _legend(boxes: Sequence[_Box], notes: set[str]) -> str:
    """Swatches for the kinds, backends, write reasons and notes this picture uses, nothing more."""
    kinds = dict.fromkeys(b.first.kind for b in boxes)
    reasons = dict.fromkeys(w.reason for b in boxes for _, w in b.writes)
    items = [(KIND_FILL[kind], KIND_STROKE[kind], kind + (" (ran eagerly)" if kind == "fallback" else ""))
             for kind in kinds]
    if any(b.first.backend == "torch" for b in boxes):
        items.append(("#ffffff", EXTERN_STROKE, "extern (torch's kernel)"))
    items += [(REASON_COLOUR.get(r, OTHER_COLOUR), REASON_COLOUR.get(r, OTHER_COLOUR), f"write: {r}") for r in reasons]
    items += [("#ffffff", "#111827", f"outlined write: {note}") for note in sorted(notes)]
    swatches = "".join(
        f'<span style="display:inline-flex;align-items:center;margin-right:12px">'
        f'<span style="display:inline-block;width:12px;height:12px;margin-right:4px;background:{fill};'
        f'border:2px solid {stroke};border-radius:2px"></span>{escape(text)}</span>'
        for fill, stroke, text in items
    )
    return f'<div class="fusionrt-legend" style="margin:0 0 6px 8px;line-height:20px">{swatches}</div>'
