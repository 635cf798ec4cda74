"""A statement's text read as code, for the rules' text tests (``Rule.may_match``).

A text test must never say no where its rule could report, so these readings err towards yes:
brackets are matched without knowing strings and comments, and text holding a quote or a ``#``
is left to the caller to treat as unreliable (``UNRELIABLE``).
"""
from __future__ import annotations

import functools
import keyword
import re

from fusionlint.ops import ELEMENTWISE, OpTables

SPACE = " \t\r\n\\"  # what may stand between two tokens of one statement (line continuations too)
UNRELIABLE = re.compile(r"[\"'#]")  # strings and comments may hold anything, brackets included
# A string literal or a comment, whichever starts first: a string's `#` is no comment, a comment's
# quote no string.
_STRING_OR_COMMENT = re.compile(r"""('''|\"\"\")(?:\\.|[^\\])*?\1|(['"])(?:\\.|[^\\\n])*?\2|#[^\n]*""")
_ASSIGNMENT = re.compile(r"(?:^|;)[ \t]*([A-Za-z_]\w*)\s*=(?!=)", re.M)  # after a ';' where statements share a line
_NAME_OR_NUMBER = re.compile(r"[A-Za-z_]\w*|[\d.]+")
# A name or dotted name (not the exponent of a number like ``1e-5``), and whether a call follows it.
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*(\()?")


def code_only(text: str) -> str:
    """``text`` with its strings emptied and its comments dropped: the words and operators they
    hold are no code. An unterminated string stays whole."""
    if UNRELIABLE.search(text) is None:
        return text
    return _STRING_OR_COMMENT.sub(lambda m: "" if m.group().startswith("#") else '""', text)


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


@functools.lru_cache(maxsize=4096)
def assignments(text: str) -> tuple[tuple[str, str], ...]:
    """(name, value) of each ``name = value`` in ``text`` (kept: a rule's text test reads the
    statements of a block again for each statement it is asked about)."""
    return tuple((found.group(1), expression_at(text, found.end())) for found in _ASSIGNMENT.finditer(text))


def may_be_elementwise_expr(value: str, ops: OpTables) -> bool:
    """Can ``value``'s text be what ``analysis.is_elementwise_expr`` accepts, beyond a bare name or
    number: names, numbers, operators and calls of element-wise ops only (no attribute read, no
    subscript, list or dict)?"""
    if UNRELIABLE.search(value):
        return True
    if not value or _NAME_OR_NUMBER.fullmatch(value) or "[" in value or "{" in value:
        return False
    for found in _DOTTED.finditer(value):
        name, call = found.group(1), found.group(2)
        last = name.rpartition(".")[2].strip()
        if call and not keyword.iskeyword(last) and ops.op_class(last) != ELEMENTWISE:
            return False
        if not call and "." in name:
            return False
    return True
