"""A statement's text read as code, for the rules' text tests (``Rule.may_match``).

A text test must never say no where its rule could report, so these readings err towards yes:
brackets are matched without knowing strings and comments, and text holding a quote or a ``#``
is left to the caller to treat as unreliable (``UNRELIABLE``).
"""
from __future__ import annotations

import re
from typing import Iterator, Sequence

SPACE = " \t\r\n\\"  # what may stand between two tokens of one statement (line continuations too)
UNRELIABLE = re.compile(r"[\"'#]")  # strings and comments may hold anything, brackets included


def expression_at(text: str, start: int) -> str:
    """The text of the expression that starts at ``start``: up to the first ``,``, ``;``, closing
    bracket or line end outside brackets."""
    depth = 0
    for i in range(start, len(text)):
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                return text[start:i].strip(SPACE)
            depth -= 1
        elif depth == 0 and (char in ",;" or char == "\n" and text[i - 1] != "\\"):
            return text[start:i].strip(SPACE)
    return text[start:].strip(SPACE)


def outside_brackets(text: str) -> str:
    """``text`` without what its brackets hold (the brackets stay)."""
    kept, depth = [], 0
    for char in text:
        if char in ")]}":
            depth -= 1
        if depth == 0:
            kept.append(char)
        if char in "([{":
            depth += 1
    return "".join(kept)


def opening_bracket(text: str) -> int | None:
    """Where the bracket closed by the last character of ``text`` opens."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] in ")]}":
            depth += 1
        elif text[i] in "([{":
            depth -= 1
            if depth == 0:
                return i
    return None


def closing_bracket(text: str, opening: int) -> int | None:
    """Where the bracket opened at ``opening`` closes."""
    depth = 0
    for i in range(opening, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return None


def assigned_values(name: str, texts: Sequence[str]) -> Iterator[str]:
    """The value of each ``name = value`` in ``texts`` (statements that share a line share their
    text, so an assignment may follow a ``;``)."""
    assignment = re.compile(r"(?:^|;)[ \t]*%s\s*=(?!=)" % re.escape(name), re.M)
    for text in texts:
        for found in assignment.finditer(text):
            yield expression_at(text, found.end())
