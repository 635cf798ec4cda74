"""A rule's needle (``Rule.needle``) is found wherever its text test passes.

The engine asks a rule's text test only about the statements on whose lines one search of the
file found the needle; a needle that misses a statement the test passes on would hide findings.
Every statement of every rule's examples and snapshot fixture is asked both ways here, with the
statements laid out to trip a search of the whole file (a call split over lines, statements
sharing a line, a header over several lines).
"""
from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from fusionlint.engine import _LINE, _alternatives, _blocks, _file_searches, _Texts, _TextTests
from fusionlint.ops import op_tables
from fusionlint.rules import SYNTAX_ERROR_CODE, all_rules

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "rules"
RULES = [rule for rule in all_rules() if rule.code != SYNTAX_ERROR_CODE]

LAYOUTS = '''
import torch


def f(x, w, items, cache, n):
    y = x.view(
        -1, 4
    ) * 2; z = torch.softmax(y, -1); cache.last = z
    for item in items: items.append(item * 2 + 1)
    if (y.sum()
            > 0): y = y @ w
    out = torch.matmul(x,
                       w) / n + torch.ones(
        3)
    if n == x.shape[0]:
        out = out * 2
    return out.clone(), float(out.mean().item())
'''


def sources() -> list[str]:
    texts = [LAYOUTS]
    for rule in RULES:
        for example in rule.examples:
            texts += [example.bad, example.fixed or "", example.good or ""]
        texts += list(rule.valid)
    texts += [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.glob("*.py"))]
    return [text for text in texts if text]


def statements(text: str):
    """Each statement of ``text`` as the engine's masking sees it: (block, index)."""
    lines = _LINE.findall(text)
    todo = [ast.parse(text).body]
    while todo:
        body = todo.pop()
        texts = _Texts(body, lines)
        for index, node in enumerate(body):
            yield texts, index
            todo += _blocks(node)


@pytest.mark.parametrize("text", sources(), ids=lambda text: f"{len(text.splitlines())}-lines")
def test_the_needle_is_found_where_the_text_test_passes(text):
    tables = op_tables()
    tests = _TextTests(RULES, text, _LINE.findall(text), tables)
    for texts, index in statements(text):
        expected = {rule.code for rule in RULES if rule.may_match(texts, index, tables)}
        assert tests(texts, index) == expected, texts[index]


def test_every_needle_is_put_to_the_test():
    """Each rule with a needle passes its text test on some statement above, so the comparison
    is not vacuous for it."""
    tables = op_tables()
    passed = set()
    for text in sources():
        tests = _TextTests(RULES, text, _LINE.findall(text), tables)
        passed |= set().union(*(tests(texts, index) for texts, index in statements(text)))
    with_needles = {rule.code for rule in RULES if rule.needle(tables) is not None}
    assert with_needles and with_needles <= passed, sorted(with_needles - passed)


def test_a_statement_without_needles_is_asked_only_by_rules_without_one():
    tables = op_tables()
    text = "import torch\n\n\ndef f(x):\n    return x\n"
    asked = []

    class Spy:
        def __init__(self, rule):
            self.rule = rule
            self.code = rule.code

        def needle(self, ops):
            return self.rule.needle(ops)

        def may_match(self, block, index, ops):
            asked.append(self.code)
            return self.rule.may_match(block, index, ops)

    rules = [Spy(rule) for rule in random.sample(RULES, len(RULES))]
    tests = _TextTests(rules, text, _LINE.findall(text), tables)
    for texts, index in statements(text):
        tests(texts, index)
    assert set(asked) == {rule.code for rule in RULES if rule.needle(tables) is None}


@pytest.mark.parametrize(
    "pattern, parts",
    [
        (r"@|\b(?:bmm|mm)\s*\(", ["@", r"\b(?:bmm|mm)\s*\("]),
        (r"a[|]b|(c|d)|[]|]x|\|y|[^]|]z", ["a[|]b", "(c|d)", "[]|]x", r"\|y", "[^]|]z"]),
        (r"[*/@]|[*-/]|y", ["[*/@]", "[*-/]", "y"]),  # searched as one literal per character; a range not
        (r"(?i)cat|dog", [r"(?i)cat|dog"]),  # a flag for the whole pattern
        (r"(\w)=\1|x", [r"(\w)=\1|x"]),  # a reference to a group of another part
    ],
)
def test_a_needle_is_searched_as_its_top_level_alternatives(pattern, parts):
    assert _alternatives(pattern) == parts
    text = "y = A @ (b | c).bmm(w)  # Cat=C, x\n[q]|] x |y ]z\n"
    for needle in (re.compile(pattern), re.compile(pattern, re.I)):
        assert lines_searched(needle, text) >= lines_matched(needle, text)


@pytest.mark.parametrize("pattern", [r"\b(?:bmm|mm)\s*\(", r"\bclone\s*\(", r"@|\b(?:view|reshape)\s*\("])
def test_a_needle_of_calls_finds_the_lines_of_those_calls(pattern):
    """One search finds every call of a file: the lines it gives a needle of calls are those of
    its matches, a call split over lines included, and not those of a name that only ends alike."""
    text = "y = torch.bmm(a, b)\nt = x.addmm(c)\nz = mm\nw = (bmm\n   (a))\nv = x.clone()@m\nu = reshape_(x)\n"
    needle = re.compile(pattern)
    assert any(isinstance(search, frozenset) for search in _file_searches(needle))
    assert lines_searched(needle, text) == lines_matched(needle, text)


def lines_searched(needle: re.Pattern[str], text: str) -> set[int]:
    class Needled:
        code = "FL000"

        def needle(self, ops):
            return needle

    tests = _TextTests([Needled()], text, _LINE.findall(text), op_tables())
    return {line for line, bits in enumerate(tests.found_on) if bits}


def lines_matched(needle: re.Pattern[str], text: str) -> set[int]:
    return {
        line
        for m in needle.finditer(text)
        for line in range(text.count("\n", 0, m.start()) + 1, text.count("\n", 0, m.end() - 1) + 2)
    }
