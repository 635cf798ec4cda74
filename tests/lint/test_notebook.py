"""Notebooks: IPython masking, cell numbering, byte-exact write-back, and linting through the CLI."""
from __future__ import annotations

import json
import re

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


@pytest.mark.parametrize(
    ("source", "masked"),
    [
        ("x = (a\n    != b)\ny = (a\n    % b)\n", ()),  # continuation lines inside brackets
        ("z = a \\\n    % b\n", ()),  # after a backslash
        ("s = \"\"\"\n%d items\n!done\nhelp?\n\"\"\"\n", ()),  # inside a string
        ("u = [a\n    # a comment\n    != b]\n", ()),
        ("s = 'a\u2028%d'\nt = 'b\x0c!c'\n", ()),  # separators str.splitlines splits at
        ("x = (1,\n     2)\n!ls\n%time f()\n", ("!ls", "%time f()")),  # a bracket closed: new lines again
        ("?torch.ones\ntorch.ones??\nfiles = !ls\n", ("?torch.ones", "torch.ones??", "files = !ls")),
        ("\n\n%%time\nx = (a\n    % b)\n", ("%%time",)),  # IPython drops leading blank lines
    ],
)
def test_only_a_line_that_starts_a_logical_line_is_ipython(source, masked):
    (cell,) = code_cells({"cells": [{"cell_type": "code", "source": source}]})
    assert cell.masked == masked
    assert cell.text.count("\n") == source.count("\n")
    compile(cell.text, "cell", "exec")
    assert unmask(cell, cell.text) == source


def test_a_cell_magic_counts_only_as_the_first_line():
    skipped = code_cells({"cells": [{"cell_type": "code", "source": "\n%%bash\nls -l\n"}]})
    assert skipped == []
    (cell,) = code_cells({"cells": [{"cell_type": "code", "source": "x = 1\n%%bash\n"}]})
    assert cell.masked == ("%%bash",)  # not a cell magic there: IPython runs it as a line magic


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


BAD_SHAPES = [
    ('{"cells": [', "notebook is not valid JSON"),
    ("[" * 100_000, "notebook JSON is nested too deeply to read"),
    ('{"worksheets": [], "nbformat": 3}', "nbformat is 3"),
    ("[1, 2]", "the file holds a list, not an object"),
    ('"text"', "the file holds a string, not an object"),
    ('{"nbformat": 4, "metadata": {}}', "no 'cells' list"),
    ('{"cells": {}}', "'cells' is an object, not a list"),
    ('{"cells": [], "metadata": []}', "'metadata' is a list, not an object"),
    ('{"cells": [], "metadata": {"kernelspec": "python3"}}', "'metadata.kernelspec' is not an object"),
    ('{"cells": [], "metadata": {"language_info": {"name": 3}}}', "'metadata.language_info' is not an object"),
    ('{"cells": ["x = 1"]}', "cell 1 is a string, not an object"),
    ('{"cells": [{"cell_type": "markdown", "source": ""}, null]}', "cell 2 is null, not an object"),
    ('{"cells": [{"source": "x = 1"}]}', "cell 1 has no 'cell_type' string"),
    ('{"cells": [{"cell_type": "code", "source": 5}]}', "cell 1's 'source' is a number"),
    ('{"cells": [{"cell_type": "code"}]}', "cell 1's 'source' is null"),
    ('{"cells": [{"cell_type": "code", "source": ["x = 1\\n", 2]}]}', "cell 1's 'source' list holds a number"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SHAPES)
def test_broken_notebooks_say_why(text, message):
    with pytest.raises(SourceFileError, match=re.escape(message)):
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


def test_a_notebook_of_unexpected_shape_is_one_fl998_and_never_rewritten(tmp_path, capsys, monkeypatch):
    from fusionlint.cli import main

    monkeypatch.chdir(tmp_path)
    for index, (text, _) in enumerate(BAD_SHAPES):
        (tmp_path / f"bad{index:02}.ipynb").write_text(text)
    assert main(["check", "--no-cache", "--output-format", "concise", "--fix", "--unsafe-fixes"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = [line for line in captured.out.splitlines() if ": FL998 " in line]
    assert len(lines) == len(BAD_SHAPES)
    for index, (text, message) in enumerate(BAD_SHAPES):
        assert f"bad{index:02}.ipynb:1:1: FL998 " in lines[index] and message in lines[index]
        assert (tmp_path / f"bad{index:02}.ipynb").read_text() == text


def test_continuation_lines_are_linted_as_python(tmp_path, capsys, monkeypatch):
    from fusionlint.cli import main

    monkeypatch.chdir(tmp_path)
    notebook = make_notebook(("code", "a, b = 1, 2\nx = (a\n    != b)\ny = (a\n    % b)\n!echo {x}"))
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(notebook))
    assert main(["check", "--no-cache", "nb.ipynb"]) == 0
    assert "FL999" not in capsys.readouterr().out
