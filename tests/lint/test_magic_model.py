"""``%%fuse`` on a whole model's training step, in IPython's in-process shell: what it prints by
default fits on one screen, and ``--details`` lists every write."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SCREEN = 40

SETUP = """\
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=16, n_head=2, vocab_size=61, n_positions=16,
                                   bos_token_id=0, eos_token_id=0))
ids = torch.randint(0, 61, (2, 8))
"""

TRAINING_CELL = """\
out = model(ids, labels=ids)
out.loss.backward()
"""


def training_cell(name: str) -> str:
    """The training cell, its result named ``name``: each test runs a cell of its own text."""
    return TRAINING_CELL.replace("out", name)


@pytest.fixture
def gpt2(ip):
    assert ip.run_cell(SETUP).error_in_exec is None
    return ip


def test_a_training_cell_prints_one_screen(gpt2, capsys):
    capsys.readouterr()
    result = gpt2.run_cell(f"%%fuse --executor reference -o rep\n{training_cell('out')}")
    assert result.error_in_exec is None
    shown = capsys.readouterr().out
    report = gpt2.user_ns["rep"]
    assert report.writes > 100 and all(p.grad is not None for p in gpt2.user_ns["model"].parameters())
    assert len(shown.splitlines()) <= SCREEN, shown
    top = report.to_dict()["summary"]["causes"][0]
    assert f"  {top['text']}" in shown.splitlines()
    assert "more groups (--details)" in shown and "fusionlint" in shown


def test_details_list_every_write(gpt2, capsys):
    capsys.readouterr()
    result = gpt2.run_cell(f"%%fuse --executor reference --details --no-lint -o rep\n{training_cell('step')}")
    assert result.error_in_exec is None
    shown = capsys.readouterr().out
    report = gpt2.user_ns["rep"]
    assert f"Materialized writes ({report.writes})\n" in shown and "(--details)" not in shown
    assert len(shown.splitlines()) > report.writes + report.kernels
    # a cell line's writes are listed one by one: as many rows name the cell's line 3 as writes came from it
    from_cell = sum(w.source == "cell line 3" for w in report.materialized)
    table = shown.split(f"Materialized writes ({report.writes})\n")[1].split("\n\n")[0]
    assert from_cell and table.count("cell line 3") == from_cell


def test_the_notebook_display_folds_the_full_tables(gpt2):
    from fusionlint.magic import FuseResult

    assert gpt2.run_cell(f"%%fuse --executor reference --no-lint -o rep\n{training_cell('o')}").error_in_exec is None
    report = gpt2.user_ns["rep"]
    html = FuseResult(report=report)._repr_mimebundle_()["text/html"]
    summary, *folded = html.split("<details>")
    assert "Top causes" in summary and "┏" not in summary
    assert f"<summary>Materialized writes ({report.writes})</summary>" in folded[0]
    assert "<details>" not in FuseResult(report=report, details=True)._repr_mimebundle_()["text/html"]


def test_a_cell_run_again_names_its_own_lines(ip):
    for _ in range(2):
        assert ip.run_cell("%%fuse --no-lint -o rep\nz = x * 2 + 1").error_in_exec is None
        ip.execution_count += 1  # as a notebook does: each run is cached under a new name
        assert [w.source for w in ip.user_ns["rep"].materialized] == ["cell line 2"]
