"""Jupyter notebooks: lint each code cell as its own source, write fixes back into the same JSON.

IPython syntax is masked before linting: a line magic (``%time``), a shell escape (``!ls``),
their assignment forms (``x = !ls``) and help lines (``obj?``) become a ``pass`` statement with
a numbered marker, so line numbers and indentation stay the same. A cell that starts with a
cell magic is skipped unless its body is Python (``%%time``, ``%%fuse``, ...), like Ruff.
Findings carry the cell number counted over all cells, markdown included, as Jupyter and Ruff
show it.

The notebook is read and written with ``json``, not ``nbformat``: ``nbformat.write`` re-indents
and adds cell ids. The file is written back only when a cell changed, in its own indentation,
key order, ASCII escaping, trailing newline and line endings, so that everything but the fixed
cells stays byte for byte the same.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from fusionlint.model import LintOptions, LintResult
from fusionlint.sourcefile import SourceFileError

PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "fuse"})
IPYTHON_LINE = re.compile(r"\s*(?:[%!]|[\w.]+\s*=\s*[%!]|[\w.]+\?\??\s*$)")
MARKER = "pass  # fusionlint: masked IPython line {}"


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based over all cells
    text: str  # the Python text the engine sees
    masked: tuple[str, ...]  # original lines behind the markers, in order


def read_notebook(text: str) -> dict:
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        raise SourceFileError(f"notebook is not valid JSON: {exc}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        version = notebook.get("nbformat") if isinstance(notebook, dict) else None
        raise SourceFileError(f"not a notebook in nbformat 4 (no 'cells' list; nbformat {version})")
    return notebook


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
        source = cell_source(cell)
        magic = re.match(r"%%(\w+)", source)
        if magic and magic.group(1) not in PYTHON_CELL_MAGICS:
            continue
        lines = source.splitlines(keepends=True)
        masked: list[str] = []
        for index, line in enumerate(lines):
            if (index == 0 and magic) or IPYTHON_LINE.match(line):
                body = line.rstrip("\r\n")
                indent = body[: len(body) - len(body.lstrip())]
                lines[index] = indent + MARKER.format(len(masked)) + line[len(body) :]
                masked.append(body)
        cells.append(CodeCell(number=number, text="".join(lines), masked=tuple(masked)))
    return cells


def unmask(cell: CodeCell, fixed: str) -> str | None:
    """Put the IPython lines back into a fixed cell; None if the fix lost or duplicated one."""
    lines = fixed.splitlines(keepends=True)
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
    from fusionlint.engine import lint_source  # the engine (libcst) only when a file really is linted

    notebook = read_notebook(text)
    if not is_python_notebook(notebook):
        return LintResult(findings=())
    findings, fixed, errors = [], [], []
    new_sources: dict[int, str] = {}
    for cell in code_cells(notebook):
        where = f"{path}:cell {cell.number}"  # how the engine's messages name the cell
        result = lint_source(cell.text, where, options)
        findings += [replace(finding, cell=cell.number) for finding in result.findings]
        errors += result.errors
        if result.source is None:
            continue
        restored = unmask(cell, result.source)
        if restored is None:  # the fix moved an IPython line: keep the cell, report unfixed
            errors.append(f"{where}: fixes not applied, they would move an IPython line")
            findings += [replace(finding, cell=cell.number) for finding in result.fixed]
            continue
        fixed += [replace(finding, cell=cell.number) for finding in result.fixed]
        new_sources[cell.number] = restored
    new_text = None
    if new_sources:
        for number, source in new_sources.items():
            set_cell_source(notebook["cells"][number - 1], source)
        new_text = dump_like(text, notebook)
    order = sorted(findings, key=lambda f: (f.cell, f.line, f.column, f.code))
    return LintResult(findings=tuple(order), fixed=tuple(fixed), source=new_text, errors=tuple(errors))


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
