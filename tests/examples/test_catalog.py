"""examples/README.md, numbers.json and the files on disk tell the same story, and `make demo` prints it."""
from __future__ import annotations

import demo


def test_numbers_cover_every_example_file():
    files = {p.name for p in demo.scripts() + demo.notebooks()}
    assert set(demo.load_numbers()) == files


def test_every_script_has_its_notebook():
    assert {p.stem for p in demo.scripts()} == {p.stem for p in demo.notebooks()}


def test_readme_table_is_the_committed_numbers():
    readme = demo.README.read_text(encoding="utf-8")
    assert demo.readme_table(readme) == demo.markdown_table(demo.load_numbers())


def test_demo_prints_one_before_after_table(capsys):
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "fusionlint check examples/" in out
    table = out[out.index("fusionrt: each example's pattern"):]
    for name, numbers in demo.load_numbers().items():
        if name.endswith(".py"):
            before, after = numbers["before"], numbers["after"]
            assert name in table and f"{before['writes']} -> {after['writes']}" in table


def test_every_fusion_rule_has_an_example():
    """A rule's example is one script (and its notebook) named after the rule's code."""
    from fusionlint.rules import all_rules

    codes = {rule.code for rule in all_rules() if rule.examples}
    covered = {path.name.split("_")[0].upper() for path in demo.scripts() if path.name.startswith("fl")}
    assert codes <= covered, f"rules without an example in examples/: {sorted(codes - covered)}"


def test_readme_lists_every_example():
    readme = demo.README.read_text(encoding="utf-8")
    for script in demo.scripts():
        assert f"[{script.stem}]({script.name})" in readme
