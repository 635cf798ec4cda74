"""A notebook is one program in cell order: imports carry over, findings and fixes go back to
their cells, and the project's example notebooks each show their rule."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from fusionlint.model import FixMode, LintOptions
from fusionlint.notebook import Program, code_cells, lint_notebook, read_notebook
from fusionlint.rules import SYNTAX_ERROR_CODE, all_rules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL = frozenset(rule.code for rule in all_rules())

IMPORTS = "import torch\n"
CLONE = """\
def g(x, y):
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    out = t3 + a * b
    return out
"""
SYNC = """\
def energy(x, y, steps=4):
    total = 0.0
    for i in range(steps):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total
"""


def notebook_text(*sources: str, kinds: tuple[str, ...] = ()) -> str:
    notebook = nbformat.v4.new_notebook()
    for index, source in enumerate(sources):
        kind = kinds[index] if index < len(kinds) else "code"
        maker = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        notebook.cells.append(maker(source))
    return nbformat.writes(notebook) + "\n"


def where(result) -> list[tuple[str, int, int, int]]:
    return [(f.code, f.cell, f.line, f.column) for f in result.findings]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("fl[0-9][0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_each_example_notebook_reports_its_rule(path):
    code = path.name[:5].upper()
    result = lint_notebook(path.read_text(encoding="utf-8"), str(path), LintOptions(codes=ALL))
    assert code in {f.code for f in result.findings} and not result.errors


def test_an_import_in_the_first_cell_is_seen_by_the_others():
    text = notebook_text("# Notes", IMPORTS, "%matplotlib inline\n" + SYNC, kinds=("markdown",))
    result = lint_notebook(text, "nb.ipynb", LintOptions(codes=ALL))
    assert where(result) == [("FL004", 3, 6, 18)]  # cell 3, counted over all cells; line 6 of the cell
    alone = notebook_text("%matplotlib inline\n" + SYNC)
    assert lint_notebook(alone, "nb.ipynb", LintOptions(codes=ALL)).findings == ()  # no torch import: no tensors


def test_fixes_go_back_cell_by_cell_and_later_findings_keep_their_lines():
    text = notebook_text(IMPORTS, CLONE, SYNC, "x = torch.ones(2)")
    result = lint_notebook(text, "nb.ipynb", LintOptions(codes=ALL, fix=FixMode.UNSAFE))
    assert [(f.code, f.cell) for f in result.fixed] == [("FL002", 2)]
    assert where(result) == [("FL004", 3, 5, 18)]  # cell 2 grew a line; cell 3's lines did not move
    before, after = json.loads(text)["cells"], json.loads(result.source)["cells"]
    assert [a == b for a, b in zip(before, after)] == [True, False, True, True]  # only cell 2 rewritten
    fixed = "".join(after[1]["source"])
    assert "a.clone()" not in fixed and fixed.count("\n") == CLONE.count("\n") + 1


def test_a_cell_that_is_not_python_is_reported_alone_and_the_rest_is_one_program():
    text = notebook_text(IMPORTS, "def broken(:\n", SYNC)
    result = lint_notebook(text, "nb.ipynb", LintOptions(codes=ALL))
    assert [(f.code, f.cell, f.line) for f in result.findings] == [(SYNTAX_ERROR_CODE, 2, 1), ("FL004", 3, 5)]


def test_a_fix_that_moves_a_separator_is_refused():
    cells = code_cells(read_notebook(notebook_text("x = 1\n", "%time y = 2\nz = 3")))
    program = Program(cells)
    assert program.restore(program.text) == {}
    assert program.restore(program.text.replace("x = 1\n", "x = 10\n")) == {1: "x = 10\n"}
    assert program.restore(program.text.replace("z = 3", "z = 4")) == {2: "%time y = 2\nz = 4"}
    lines = program.text.splitlines(keepends=True)
    assert program.restore("".join([lines[0], lines[2], lines[1], *lines[3:]])) is None  # a line crossed a cell
    assert program.restore(program.text.replace("pass  # fusionlint: masked IPython line 0\n", "")) is None
