"""Jupyter notebooks: lint the code cells as one program in cell order, as the kernel runs them
(``import torch`` in the first cell is seen by the others), and write fixes back into the same
JSON, cell by cell. A cell that is not Python on its own is linted alone, for its syntax error.

IPython syntax is masked before linting: a line magic (``%time``), a shell escape (``!ls``),
their assignment forms (``x = !ls``) and help lines (``obj?``, ``?obj``) become a ``pass``
statement with a numbered marker, so line numbers and indentation stay the same. As in IPython,
only a line that starts a logical line can be one: ``!= b`` or ``% b`` continuing a bracket, a
backslash or a string is Python. A cell whose first line (after blank ones) is a cell magic is
skipped unless its body is Python (``%%time``, ``%%fuse``, ...), like Ruff.
Findings carry the cell number counted over all cells, markdown included, as Jupyter and Ruff
show it, and the line inside the cell. ``# fusionlint: noqa`` in any cell covers the notebook.

The notebook is read and written with ``json``, not ``nbformat``: ``nbformat.write`` re-indents
and adds cell ids. The file is written back only when a cell changed, in its own indentation,
key order, ASCII escaping, trailing newline and line endings, so that everything but the fixed
cells stays byte for byte the same.
"""
from __future__ import annotations

import bisect
import collections
import io
import json
import re
import tokenize
from dataclasses import dataclass, replace
from typing import Any

from fusionlint.model import Finding, FixMode, LintOptions, LintResult
from fusionlint.sourcefile import SourceFileError

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "fuse"})
IPYTHON_LINE = re.compile(r"\s*(?:[%!?]|[\w.]+\s*=\s*[%!]|[\w.]+\?\??\s*$)")
MARKER = "pass  # fusionlint: masked IPython line {}"
SEPARATOR_PREFIX = "# fusionlint: notebook cell "
SEPARATOR = SEPARATOR_PREFIX + "{}"


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based over all cells
    text: str  # the Python text the engine sees
    masked: tuple[str, ...]  # original lines behind the markers, in order


def read_notebook(text: str) -> dict:
    """The notebook's JSON, checked for the shape the linter reads, so that no other shape gets further."""
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        raise SourceFileError(f"notebook is not valid JSON: {exc}") from None
    except RecursionError:
        raise SourceFileError("notebook JSON is nested too deeply to read") from None
    problem = _shape_problem(notebook)
    if problem is not None:
        raise SourceFileError(f"not a notebook in nbformat 4: {problem}")
    return notebook


def _shape_problem(notebook: Any) -> str | None:
    """What in the JSON is not the shape the linter, the fixer and the output read without checks."""
    if not isinstance(notebook, dict):
        return f"the file holds {_kind(notebook)}, not an object"
    version = notebook.get("nbformat", 4)
    if version != 4:
        hint = " (`jupyter nbconvert --to notebook --inplace` converts it)" if version in (1, 2, 3) else ""
        return f"nbformat is {version if isinstance(version, int) else _kind(version)}, not 4{hint}"
    cells, metadata = notebook.get("cells"), notebook.get("metadata", {})
    if not isinstance(cells, list):
        return "no 'cells' list" if cells is None else f"'cells' is {_kind(cells)}, not a list"
    if not isinstance(metadata, dict):
        return f"'metadata' is {_kind(metadata)}, not an object"
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        entry = metadata.get(key, {})
        if not isinstance(entry, dict) or not isinstance(entry.get(field, ""), str):
            return f"'metadata.{key}' is not an object with a string '{field}'"
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            return f"cell {number} is {_kind(cell)}, not an object"
        if not isinstance(cell.get("cell_type"), str):
            return f"cell {number} has no 'cell_type' string"
        source = cell.get("source")
        odd = [line for line in source if not isinstance(line, str)] if isinstance(source, list) else []
        if odd:
            return f"cell {number}'s 'source' list holds {_kind(odd[0])}, not only strings"
        if not isinstance(source, (str, list)):
            return f"cell {number}'s 'source' is {_kind(source)}, not a string or a list of strings"
    return None


def _kind(value: Any) -> str:
    """A JSON value's kind, in JSON's words."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "null")


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def is_python_notebook(notebook: dict) -> bool:
    metadata = notebook.get("metadata", {})
    language = metadata.get("kernelspec", {}).get("language") or metadata.get("language_info", {}).get("name")
    return language in (None, "python")


def code_cells(notebook: dict) -> list[CodeCell]:
    """The cells to lint, with IPython syntax masked."""
    cells = []
    for number, cell in enumerate(notebook["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        lines = source_lines(cell_source(cell))
        first = next((index for index, line in enumerate(lines) if line.strip()), len(lines))
        magic = re.match(r"%%(\w+)", lines[first]) if first < len(lines) else None
        if magic and magic.group(1) not in PYTHON_CELL_MAGICS:
            continue
        masked = _mask(lines, first if magic else None)
        cells.append(CodeCell(number=number, text="".join(lines), masked=masked))
    return cells


def source_lines(text: str) -> list[str]:
    """Lines as Python splits them: at ``\\n``, ``\\r\\n`` and ``\\r`` only (``str.splitlines`` also splits
    at form feeds and Unicode separators, which may sit inside a string literal)."""
    return io.StringIO(text, newline="").readlines()


def _mask(lines: list[str], cell_magic: int | None) -> tuple[str, ...]:
    """Replace, in place, the IPython lines among ``lines`` by markers; return the originals.

    The tokenizer pulls the lines one by one, so when it asks for a line, the tokens of the
    lines before it are out: the line starts a logical line when the last of them is the end
    of the line before (NEWLINE, or NL outside brackets). After a tokenizer error (the cell is
    not Python then, and will be reported) the remaining lines stay as they are.
    """
    masked: list[str] = []
    last: tokenize.TokenInfo | None = None
    depth = 0
    read = 0

    def readline() -> str:
        nonlocal read
        if read == len(lines):
            return ""
        index, line = read, lines[read]
        read += 1
        starts = index == 0 or (
            last is not None and last.type in (tokenize.NEWLINE, tokenize.NL) and last.end[0] == index and depth == 0
        )
        if index == cell_magic or (starts and IPYTHON_LINE.match(line)):
            body = line.rstrip("\r\n")
            indent = body[: len(body) - len(body.lstrip())]
            lines[index] = indent + MARKER.format(len(masked)) + line[len(body) :]
            masked.append(body)
        return lines[index]

    try:
        for last in tokenize.generate_tokens(readline):
            if last.type == tokenize.OP and last.string in ("(", "[", "{"):
                depth += 1
            elif last.type == tokenize.OP and last.string in (")", "]", "}"):
                depth -= 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return tuple(masked)


def unmask(cell: CodeCell, fixed: str) -> str | None:
    """Put the IPython lines back into a fixed cell; None if the fix lost or duplicated one."""
    lines = source_lines(fixed)
    seen = 0
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if body.strip() == MARKER.format(seen):
            lines[index] = cell.masked[seen] + line[len(body) :]
            seen += 1
        elif "# fusionlint: masked IPython line" in body:
            return None
    return "".join(lines) if seen == len(cell.masked) else None


def lint_notebook(text: str, path: str, options: LintOptions) -> LintResult:
    """Lint the code cells as one program in cell order (an import in the first cell is seen by
    the others); findings and fixes go back to their cells."""
    from fusionlint.engine import _parses, lint_source  # the engine (libcst) only when a file really is linted

    notebook = read_notebook(text)
    if not is_python_notebook(notebook):
        return LintResult(findings=())
    program, alone = [], []
    for cell in code_cells(notebook):
        (program if _parses(cell.text, path) else alone).append(cell)
    findings, fixed, errors = [], [], []
    for cell in alone:  # not Python on its own: reported alone (its syntax error), left out of the program
        result = lint_source(cell.text, f"{path}:cell {cell.number}", options)
        findings += [replace(finding, cell=cell.number) for finding in result.findings]
        errors += result.errors
    new_sources: dict[int, str] = {}
    if program:
        joined = Program(program)
        result = lint_source(joined.text, path, options)
        errors += [joined.locate_message(error, path) for error in result.errors]
        restored = joined.restore(result.source) if result.source is not None else {}
        if restored is None:  # keep every cell, report unfixed
            errors.append(f"{path}: fixes not applied, they would move code between cells or move an IPython line")
            result = lint_source(joined.text, path, replace(options, fix=FixMode.OFF))
        else:
            new_sources = restored
            fixed += [joined.locate(finding, joined.starts) for finding in result.fixed]
        starts = joined.starts if result.source is None or restored is None else joined.starts_in(result.source)
        findings += [joined.locate(finding, starts) for finding in result.findings]
    new_text = None
    if new_sources:
        for number, source in new_sources.items():
            set_cell_source(notebook["cells"][number - 1], source)
        new_text = dump_like(text, notebook)
    order = sorted(findings, key=lambda f: (f.cell, f.line, f.column, f.code))
    return LintResult(findings=tuple(order), fixed=tuple(fixed), source=new_text, errors=tuple(errors))


class Program:
    """Code cells joined into one source, each after a separator comment line, so that findings
    map back to (cell, line) and a fixed text splits back into cells. Fixes are whole-line edits
    of statements, which never span a separator: a comment between top-level statements."""

    def __init__(self, cells: list[CodeCell]) -> None:
        self.cells = cells
        self.starts: list[int] = []  # the first line of each cell in the joined text
        pieces, line = [], 1
        for cell in cells:
            pieces.append(SEPARATOR.format(cell.number) + "\n")
            line += 1
            self.starts.append(line)
            body = cell.text if cell.text.endswith(("\n", "\r")) or not cell.text else cell.text + "\n"
            pieces.append(body)
            line += len(source_lines(body))
        self.text = "".join(pieces)

    def starts_in(self, text: str) -> list[int]:
        """The first line of each cell in a fixed joined text (whose separators ``restore`` checked)."""
        lines = source_lines(text)
        return [i + 2 for i, line in enumerate(lines) if line.startswith(SEPARATOR_PREFIX)]

    def locate(self, finding: Finding, starts: list[int]) -> Finding:
        """The finding with its lines counted inside its cell, and the cell's number."""
        index = bisect.bisect_right(starts, finding.line) - 1
        shift = starts[index] - 1
        edits = tuple(replace(edit, start=edit.start - shift, end=edit.end - shift) for edit in finding.edits)
        return replace(
            finding, cell=self.cells[index].number, line=finding.line - shift, end_line=finding.end_line - shift,
            edits=edits,
        )

    def locate_message(self, message: str, path: str) -> str:
        """``path:LINE:...`` in an engine message becomes ``path:cell N:LINE:...``."""
        head = f"{path}:"
        match = re.match(r"(\d+):", message[len(head):]) if message.startswith(head) else None
        if match is None:
            return message
        line = int(match.group(1))
        index = bisect.bisect_right(self.starts, line) - 1
        if index < 0:
            return message
        rest = message[len(head) + match.end():]
        return f"{head}cell {self.cells[index].number}:{line - self.starts[index] + 1}:{rest}"

    def restore(self, fixed: str) -> dict[int, str] | None:
        """The new source of each cell a fix changed, by cell number, IPython lines put back; None
        if a separator moved or went, a line went from one cell to another, or a fix moved an
        IPython line."""
        lines = source_lines(fixed)
        marks = [i for i, line in enumerate(lines) if line.startswith(SEPARATOR_PREFIX)]
        if [lines[i] for i in marks] != [SEPARATOR.format(cell.number) + "\n" for cell in self.cells]:
            return None
        changed, gone, added = {}, collections.Counter(), collections.Counter()
        for cell, start, end in zip(self.cells, marks, [*marks[1:], len(lines)]):
            part = "".join(lines[start + 1 : end])
            if cell.text and not cell.text.endswith(("\n", "\r")) and part.endswith("\n"):
                part = part[:-1]
            if part == cell.text:
                continue
            source = unmask(cell, part)
            if source is None:
                return None
            old, new = _stripped_lines(cell.text), _stripped_lines(part)
            if gone & (new - old) or added & (old - new):  # a line left an earlier cell for this one, or back
                return None
            gone += old - new
            added += new - old
            changed[cell.number] = source
        return changed


def _stripped_lines(text: str) -> collections.Counter:
    return collections.Counter(line.strip() for line in source_lines(text) if line.strip())


def set_cell_source(cell: dict, source: str) -> None:
    """Keep the cell's own form: a list of lines (the usual) or one string."""
    cell["source"] = source.splitlines(keepends=True) if isinstance(cell.get("source"), list) else source


def dump_like(original: str, notebook: dict) -> str:
    """Serialize ``notebook`` the way ``original`` was: indentation, escaping, final newline, CRLF."""
    newline = "\r\n" if "\r\n" in original else "\n"
    head = original.split(newline, 2)
    indent = None  # one line, as json writes it by default
    if len(head) > 1 and head[0].strip() == "{":
        indent = head[1][: len(head[1]) - len(head[1].lstrip())]
    ensure_ascii = original.isascii() and "\\u" in original
    text = json.dumps(notebook, indent=indent, ensure_ascii=ensure_ascii)
    if original.endswith(newline):
        text += "\n"
    return text.replace("\n", newline)
