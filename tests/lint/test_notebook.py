"""Notebooks: IPython masking, cell numbering, byte-exact write-back, and linting through the CLI."""
from __future__ import annotations

import json

import nbformat
import pytest

from fusionlint.notebook import code_cells, dump_like, read_notebook, set_cell_source, unmask
from fusionlint.sourcefile import SourceFileError


def make_notebook(*cells: tuple[str, str], **metadata) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(metadata=metadata)
    for kind, source in cells:
        maker = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        notebook.cells.append(maker(source))
    return notebook


def test_ipython_syntax_is_masked_keeping_lines_and_indentation():
    notebook = make_notebook(
        ("markdown", "# Title"),
        ("code", "%matplotlib inline\nimport torch\nfiles = !ls\nfor f in files:\n    !echo {f}\ntorch.ones?\nx = a != b"),
        ("code", "%%bash\nls -l"),
        ("code", "%%time\ny = torch.ones(3)"),
    )
    cells = code_cells(json.loads(nbformat.writes(notebook)))
    assert [cell.number for cell in cells] == [2, 4]  # numbered over all cells; %%bash skipped
    masked = cells[0].text.splitlines()
    assert len(masked) == 7
    assert masked[1] == "import torch" and masked[3] == "for f in files:" and masked[6] == "x = a != b"
    for index in (0, 2, 5):
        assert masked[index].startswith("pass  # fusionlint: masked IPython line")
    assert masked[4].startswith("    pass  #")
    compile(cells[0].text, "cell", "exec")  # what the engine sees is plain Python
    assert cells[1].text.splitlines()[1] == "y = torch.ones(3)"
    for cell in cells:
        assert unmask(cell, cell.text) == cell_source_of(notebook, cell.number)


def cell_source_of(notebook, number: int) -> str:
    return notebook.cells[number - 1].source


def test_unmask_refuses_a_fix_that_lost_or_reordered_an_ipython_line():
    (cell,) = code_cells({"cells": [{"cell_type": "code", "source": "!a\nx = 1\n!b\n"}]})
    first, second = cell.text.splitlines(keepends=True)[0], cell.text.splitlines(keepends=True)[2]
    assert unmask(cell, "y = 0\n" + cell.text) == "y = 0\n!a\nx = 1\n!b\n"
    assert unmask(cell, first + "x = 1\n") is None
    assert unmask(cell, second + "x = 1\n" + first) is None


def test_unchanged_notebook_serializes_byte_for_byte():
    notebook = make_notebook(("markdown", "Caf\u00e9 \u2014 notes"), ("code", "x = 1\ny = 2"))
    notebook.metadata["custom"] = {"ratio": 1.5e-07, "list": [1, 2]}
    written = nbformat.writes(notebook) + "\n"  # what Jupyter saves
    assert dump_like(written, read_notebook(written)) == written
    crlf = written.replace("\n", "\r\n")
    assert dump_like(crlf, read_notebook(crlf)) == crlf
    escaped = json.dumps(json.loads(written), indent=2, ensure_ascii=True)  # another writer's style
    assert dump_like(escaped, read_notebook(escaped)) == escaped
    one_line = json.dumps(json.loads(written))
    assert dump_like(one_line, read_notebook(one_line)) == one_line


def test_a_changed_cell_changes_only_its_source_lines():
    notebook = make_notebook(("markdown", "text"), ("code", "a = 1\nb = 2"), ("code", "c = 3"))
    written = nbformat.writes(notebook) + "\n"
    data = read_notebook(written)
    set_cell_source(data["cells"][1], "a = 1\nb = 20")
    changed = dump_like(written, data)
    before, after = written.splitlines(), changed.splitlines()
    assert len(before) == len(after)
    assert [(x, y) for x, y in zip(before, after) if x != y] == [('    "b = 2"', '    "b = 20"')]


def test_cell_source_keeps_its_form():
    as_list, as_string = {"source": ["a\n", "b"]}, {"source": "a\nb"}
    set_cell_source(as_list, "x\ny\n")
    set_cell_source(as_string, "x\ny\n")
    assert as_list["source"] == ["x\n", "y\n"] and as_string["source"] == "x\ny\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"cells": [', "notebook is not valid JSON"),
        ('{"worksheets": [], "nbformat": 3}', "not a notebook in nbformat 4"),
        ("[1, 2]", "not a notebook in nbformat 4"),
    ],
)
def test_broken_notebooks_say_why(text, message):
    with pytest.raises(SourceFileError, match=message):
        read_notebook(text)


# Through the CLI, with the rules' own examples ------------------------------------------------


def fixable_example():
    from fusionlint.rules import all_rules

    for rule in all_rules():
        for example in rule.examples:
            if example.fixed is not None:
                return rule, example
    pytest.skip("no rule with a fixable example")


def test_findings_name_the_cell_and_fixes_touch_only_that_cell(tmp_path, capsys, monkeypatch):
    from fusionlint.cli import main

    monkeypatch.chdir(tmp_path)
    rule, example = fixable_example()
    notebook = make_notebook(
        ("markdown", "# Notes"),
        ("code", "%load_ext fusionrt\n!nvidia-smi"),
        ("code", example.bad),
        ("code", "%%bash\necho not python"),
    )
    notebook.cells[2].outputs = [nbformat.v4.new_output("stream", text="kept\n")]
    original = nbformat.writes(notebook) + "\n"
    path = tmp_path / "nb.ipynb"
    path.write_text(original)

    assert main(["check", "--output-format", "json", "nb.ipynb"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(row["cell"], row["line"], row["column"]) for row in rows] == [(3, *at) for at in example.at]
    assert main(["check", "--output-format", "concise", "nb.ipynb"]) == 1
    line, column = example.at[0]
    assert capsys.readouterr().out.startswith(f"nb.ipynb:cell 3:{line}:{column}: {rule.code}")
    assert path.read_text() == original  # checking writes nothing

    flags = ["--fix", "--unsafe-fixes"]
    assert main(["check", "--diff", *flags, "nb.ipynb"]) == 1
    assert capsys.readouterr().out.startswith("--- nb.ipynb:cell 3\n+++ nb.ipynb:cell 3\n")
    assert main(["check", *flags, "nb.ipynb"]) == 0
    fixed = path.read_text()
    assert nbformat.reads(fixed, as_version=4).cells[2].source == example.fixed
    expected = read_notebook(original)
    set_cell_source(expected["cells"][2], example.fixed)
    assert fixed == dump_like(original, expected)  # only that cell's source lines changed
    assert json.loads(fixed)["cells"][2]["outputs"][0]["text"] == ["kept\n"]


def test_an_invalid_notebook_is_reported_and_the_rest_checked(tmp_path, capsys, monkeypatch):
    from fusionlint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.ipynb").write_text('{"cells": [')
    (tmp_path / "ok.ipynb").write_text(nbformat.writes(make_notebook(("code", "x = 1"))))
    (tmp_path / "syntax.ipynb").write_text(nbformat.writes(make_notebook(("markdown", "m"), ("code", "def f(:"))))
    assert main(["check", "--output-format", "json", "--fix"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(row["path"], row["code"], row["cell"]) for row in rows] == [
        ("broken.ipynb", "FL998", None),
        ("syntax.ipynb", "FL999", 2),
    ]
    assert "notebook is not valid JSON" in rows[0]["message"]
    assert (tmp_path / "broken.ipynb").read_text() == '{"cells": ['
