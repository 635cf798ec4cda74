"""Every example script runs as ``python examples/<script>.py`` would, and measures what numbers.json says."""
from __future__ import annotations

import runpy

import pytest

import demo
from showcase import measure_example

SCRIPTS = demo.scripts()
COMMITTED = demo.load_numbers()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_shows_findings_fix_and_equal_results(script, capsys):
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for code in COMMITTED[script.name]["rules"]:
        assert f"{script.name}:" in out and f" {code} " in out
    assert "fusionrt comparison: pattern vs" in out and "outputs equal" in out


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_numbers_are_the_committed_ones(script):
    """Write counts, bytes and kernels come from the plan: deterministic on every machine."""
    numbers = measure_example(script).numbers()
    assert numbers == COMMITTED[script.name], "re-measure with python examples/demo.py --update"
    assert numbers["results_equal"] is True
    before, after = numbers["before"], numbers["after"]
    assert all(after[k] <= before[k] for k in before), f"the better program costs more: {before} -> {after}"
