"""``%%fuse`` end to end: real ``.ipynb`` files executed by a real Jupyter kernel through nbclient."""
from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

SETUP = "%load_ext fusionlint\nimport torch\nx = torch.randn(8, 16)\ny = torch.randn(8, 16)"
BURN_FUNCTION = """\
def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b

out = block(x, y)
"""


def execute(tmp_path, *cells: str):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (SETUP, *cells)])
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, path)
    resources = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources=resources).execute()
    return notebook


def outputs(cell, mime: str) -> list[str]:
    return [o["data"][mime] for o in cell["outputs"] if mime in o.get("data", {})]


def test_report_value_fix_and_compare_in_a_kernel(tmp_path):
    nb = execute(
        tmp_path,
        "%%fuse -o rep\na = x * 2\nb = y + 1\nt3 = a.clone().sum(-1, keepdim=True)\nout = t3 + a * b\nout.shape",
        "[(w.source, w.reason) for w in rep.materialized]",
        "%%fuse --fix --no-run\n" + BURN_FUNCTION,
        "log = []",
        "%%fuse --compare -o cmp\n" + BURN_FUNCTION + "log.append(len(log))\nprint('printed once')\n",
        "(cmp.before.writes, cmp.after.writes, cmp.outputs_equal, log)",
    )
    report_cell, writes_cell, fix_cell, _, compare_cell, numbers_cell = nb.cells[1:]
    html, text = outputs(report_cell, "text/html")[0], outputs(report_cell, "text/plain")[0]
    assert "<pre" in html and "fusionrt report" in html and "FL002" in html
    assert "\x1b" not in text and "Materialized writes" in text and "cell line 5" in text
    value = [o for o in report_cell["outputs"] if o["output_type"] == "execute_result"]
    assert value and value[0]["data"]["text/plain"] == "torch.Size([8, 16])"
    # names assigned in a cell stay alive: the cell's last tensor is written because it is held
    assert "('cell line 5', 'alive')" in outputs(writes_cell, "text/plain")[0]
    fix_text = outputs(fix_cell, "text/plain")[0]
    assert "+    tmp = a * b" in fix_text and "-    t3 = a.clone().sum(-1, keepdim=True)" in fix_text
    assert "outputs equal" in outputs(compare_cell, "text/plain")[0]
    printed = [o["text"] for o in compare_cell["outputs"] if o["output_type"] == "stream"]
    assert "".join(printed).count("printed once") == 1
    before, after, equal, log = eval(outputs(numbers_cell, "text/plain")[0])
    assert after < before and equal is True
    assert log == [0]  # the cell's effects happened once: the fixed cell ran on a copy of log


def test_a_failing_cell_fails_the_notebook_with_its_line(tmp_path):
    with pytest.raises(CellExecutionError) as error:
        execute(tmp_path, "%%fuse\na = x * 2\nb = a.no_such_method()\n", "never = 1")
    message = str(error.value)
    assert "AttributeError" in message and "b = a.no_such_method()" in message
