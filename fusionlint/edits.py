"""A fix's edits as Ruff reports them: the engine's fixes replace whole lines (so untouched lines
stay byte for byte), and an editor or a review tool wants the smallest replacement instead,
``content`` from one (row, column) to another."""
from __future__ import annotations

from dataclasses import dataclass

from fusionlint.model import LineEdit
from fusionlint.notebook import source_lines


@dataclass(frozen=True)
class TextEdit:
    """A fix's change as Ruff reports it: ``content`` replaces the text from ``start`` to ``end``
    (exclusive), each a 1-based (row, column) in characters."""

    content: str
    start: tuple[int, int]
    end: tuple[int, int]


def text_edits(text: str, edits: tuple[LineEdit, ...]) -> list[TextEdit]:
    """Each whole-line edit of ``text`` narrowed to the characters it changes."""
    lines = source_lines(text)
    return [_narrowed(lines, edit) for edit in edits]


def _narrowed(lines: list[str], edit: LineEdit) -> TextEdit:
    """The edit less the text its old and new lines share at both ends, cut between words (a
    replacement reads ``torch.addcmul(t3, a, b)``, not ``orch.addcmul(t3, a, b)``)."""
    old, new = "".join(lines[edit.start - 1 : edit.end]), edit.text
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    while prefix and _word(old, prefix - 1) and (_word(old, prefix) or _word(new, prefix)):
        prefix -= 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    while suffix and _word(old, -suffix) and (_word(old, -suffix - 1) or _word(new, -suffix - 1)):
        suffix -= 1
    if old[prefix - 1 : prefix + 1] == "\r\n":  # never split a CRLF line break
        prefix -= 1
    end = len(old) - suffix
    if old[end - 1 : end + 1] == "\r\n":
        suffix -= 1
        end += 1
    start, stop = _position(old[:prefix], edit.start), _position(old[:end], edit.start)
    return TextEdit(new[prefix : len(new) - suffix], start, stop)


def _word(text: str, index: int) -> bool:
    """Is ``text[index]`` part of a name or number (False outside the text; negative counts from the end)?"""
    return -len(text) <= index < len(text) and (text[index].isalnum() or text[index] == "_")


def _position(before: str, row: int) -> tuple[int, int]:
    """The (row, column) just after ``before``, a text that starts at column 1 of ``row``."""
    lines = source_lines(before)
    if not lines:
        return row, 1
    if lines[-1].endswith(("\n", "\r")):
        return row + len(lines), 1
    return row + len(lines) - 1, len(lines[-1]) + 1
