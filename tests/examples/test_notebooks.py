"""Every example notebook runs top to bottom in a real Jupyter kernel (nbclient, CPU) and measures
what numbers.json says. One module, one test per notebook, so xdist spreads them."""
from __future__ import annotations

import pytest

pytest.importorskip("nbclient")

import demo  # noqa: E402
from fusionlint.rules import get_rule  # noqa: E402

COMMITTED = demo.load_numbers()


@pytest.mark.parametrize("notebook", demo.notebooks(), ids=lambda p: p.name)
def test_notebook_numbers_are_the_committed_ones(notebook):
    numbers = demo.notebook_numbers(notebook)
    assert numbers == COMMITTED[notebook.name], "re-measure with python examples/demo.py --update"
    assert numbers["results_equal"] is True
    before, after = numbers["before"], numbers["after"]
    rules = COMMITTED[notebook.with_suffix(".py").name]["rules"]  # its script's twin says what it shows
    counts = ("kernels", "writes", "bytes_written")
    assert all(after[k] <= before[k] for k in counts)  # fusionrt no worse
    if any("fusionrt" in get_rule(code).pays_in for code in rules):  # and better, as the contract test says
        assert any(after[k] < before[k] for k in counts)
