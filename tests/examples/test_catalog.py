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
