"""README's rule table and docs/rules.md are generated from the rules' metadata and must be up to
date: after changing a rule, run ``python -m fusionlint.ruledocs``."""
from __future__ import annotations

from pathlib import Path

import pytest

from fusionlint.cli import main
from fusionlint.ruledocs import TABLE_END, TABLE_START, demote_headings, documented_rules, markdown_table, rules_page
from fusionlint.ruledocs import main as regenerate
from fusionlint.ruledocs import with_table

REPO = Path(__file__).resolve().parents[2]
STALE = "out of date: run `python -m fusionlint.ruledocs` and commit the result"


def test_readme_rule_table_is_up_to_date():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert with_table(readme, markdown_table(documented_rules())) == readme, f"README.md's rule table is {STALE}"


def test_rules_page_is_up_to_date():
    page = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    assert rules_page(documented_rules()) == page, f"docs/rules.md is {STALE}"


def test_every_documented_rule_has_a_row_and_a_section():
    page = rules_page(documented_rules())
    for rule in documented_rules():
        assert f"| [{rule.code}](#{rule.code.lower()}-{rule.name}) | {rule.name} |" in page
        assert f"\n## {rule.code} ({rule.name})\n" in page
        assert f"| {', '.join(rule.pays_in)} |" in markdown_table([rule])


def test_headings_go_one_level_down_outside_code():
    markdown = "# FL001 (x)\n\n```python\n# a comment\nx = 1\n```\n## Fix safety\n"
    assert demote_headings(markdown) == "## FL001 (x)\n\n```python\n# a comment\nx = 1\n```\n### Fix safety\n"


def test_regenerating_replaces_only_the_table(tmp_path):
    (tmp_path / "docs").mkdir()
    readme = f"# Project\n\nbefore\n{TABLE_START}\n| stale |\n{TABLE_END}\nafter\n"
    (tmp_path / "README.md").write_text(readme)
    assert regenerate([str(tmp_path)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert text == f"# Project\n\nbefore\n{TABLE_START}\n{markdown_table(documented_rules())}{TABLE_END}\nafter\n"
    assert (tmp_path / "docs" / "rules.md").read_text() == rules_page(documented_rules())
    with pytest.raises(ValueError, match="markers"):
        with_table("# no markers\n", "| table |\n")


def test_rules_command_prints_the_table(capsys):
    assert main(["rules", "--format", "markdown"]) == 0
    assert capsys.readouterr().out == markdown_table(documented_rules())
