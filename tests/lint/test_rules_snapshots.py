"""Snapshot tests of what each rule says, Ruff's style: ``fusionlint check`` on the rule's fixture
(tests/data/rules/CODE.py) must print exactly the committed snapshot (tests/data/rules/CODE.txt).

After a deliberate change of messages or positions, re-generate and review the diff:
``FUSIONLINT_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/lint/test_rules_snapshots.py``.
That also writes the fixture of a rule that has none, from the rule's examples and look-alikes;
from then on the fixture is a test input of its own, to extend with cases worth pinning down.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusionlint.cli import main
from fusionlint.rules import SYNTAX_ERROR_CODE, all_rules

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path("tests/data/rules")  # relative to REPO: the paths printed in the snapshots
UPDATE = os.environ.get("FUSIONLINT_UPDATE_SNAPSHOTS") == "1"
RULES = [rule for rule in all_rules() if rule.code != SYNTAX_ERROR_CODE]


def _fixture_from_examples(rule) -> str:
    """The examples, then the look-alikes, in one file (those of a file without torch left out:
    the others import it)."""
    parts = [f"# {rule.code} ({rule.name}): its examples, flagged, then its look-alikes, not flagged.\n"]
    parts += [f"\n# --- example {i}\n{example.bad}" for i, example in enumerate(rule.examples, start=1)]
    valid = [source for source in rule.valid if "torch" in source]
    parts += [f"\n# --- look-alike {i}\n{source}" for i, source in enumerate(valid, start=1)]
    return "".join(parts)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_text_output_matches_the_snapshot(rule, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    fixture, snapshot = FIXTURES / f"{rule.code}.py", FIXTURES / f"{rule.code}.txt"
    if UPDATE and not fixture.exists():
        fixture.parent.mkdir(parents=True, exist_ok=True)
        fixture.write_text(_fixture_from_examples(rule))
    assert fixture.exists(), f"no fixture for {rule.code}: run with FUSIONLINT_UPDATE_SNAPSHOTS=1 to write one"
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.fusionlint]\n")  # the defaults, whatever the project's own config says
    status = main(["check", "--no-cache", "--config", str(config), "--select", rule.code, str(fixture)])
    out, err = capsys.readouterr()
    assert err == "" and status == 1, f"exit {status}, stderr: {err}"
    if UPDATE:
        snapshot.write_text(out)
    assert snapshot.exists(), f"no snapshot for {rule.code}: run with FUSIONLINT_UPDATE_SNAPSHOTS=1 to write one"
    assert out == snapshot.read_text()


def test_every_fixture_belongs_to_a_rule():
    codes = {rule.code for rule in RULES}
    strays = {path.name for path in (REPO / FIXTURES).iterdir() if path.stem not in codes}
    assert not strays, f"fixtures or snapshots of no registered rule: {sorted(strays)}"
