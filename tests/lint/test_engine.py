"""The engine's contract with its front ends: syntax errors, suppression, prefilters, masking,
fix validation, line endings, extra ops."""
from __future__ import annotations

import sys

import pytest

import fusionlint.engine as engine
from fusionlint.engine import lint_source
from fusionlint.model import EAGER, FUSIONRT, FixMode, FixSafety, InternalError, LintOptions, internal_error
from fusionlint.rule import Rule, StatementEdit, Violation
from fusionlint.rules import all_rules

# FL013 also reports Burn's `t3 + a * b` (one `torch.addcmul`); these tests are about FL002's findings
ALL = frozenset(rule.code for rule in all_rules()) - {"FL013"}
CHECK = LintOptions(codes=ALL)
FIX = LintOptions(codes=ALL, fix=FixMode.UNSAFE)

CLONE = """\
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True){comment}
    out = t3 + a * b
    return out
"""


def codes(result):
    return [f.code for f in result.findings]


@pytest.mark.parametrize(
    "source,line,column",
    [("x = (\n", 1, 5), ("import torch\ndef f(:\n    pass\n", 2, 7), ("x = 1\0\n", 1, 6), ("if x:\npass\n", 2, 1)],
)
def test_syntax_error_is_one_finding_at_the_error(source, line, column):
    result = lint_source(source, "bad.py", FIX)
    assert codes(result) == ["FL999"]
    finding = result.findings[0]
    assert (finding.line, finding.column) == (line, column)
    assert "line" in finding.message and result.source is None


def test_syntax_error_not_reported_when_deselected():
    assert lint_source("x = (\n", "bad.py", LintOptions(codes=frozenset({"FL002"}))).findings == ()


@pytest.mark.parametrize("source", ["", "\n", "# only a comment", "\ufeffimport torch\n", "x = 1\r\ny = 2", "\tx = 1\n"])
def test_odd_but_harmless_input_never_raises(source):
    result = lint_source(source, "odd.py", FIX)
    assert result.errors == () or all("internal" not in e for e in result.errors)


@pytest.mark.parametrize(
    "comment,flagged",
    [("", True), ("  # noqa", False), ("  # noqa: FL002", False), ("  # NOQA:FL001, FL002", False),
     ("  # noqa: FL001", True), ("  # noqa: E501", True)],
)
def test_line_noqa(comment, flagged):
    result = lint_source(CLONE.format(comment=comment), "m.py", FIX)
    assert bool(result.findings or result.fixed) == flagged
    if not flagged:
        assert result.source is None


@pytest.mark.parametrize(
    "comment",
    ["; s = '# noqa'", '; s = """# noqa"""', "; s = 'x  # noqa: FL002'", "  # real comment, then 'noqa' in words"],
)
def test_noqa_counts_only_in_a_real_comment(comment):
    assert codes(lint_source(CLONE.format(comment=comment), "m.py", CHECK)) == ["FL002"]


def test_noqa_inside_a_multi_line_string_suppresses_nothing():
    string = '    doc = """\n# fusionlint: noqa\nx  # noqa\n"""\n'
    source = CLONE.format(comment="").replace("    out = t3", string + "    out = t3")
    assert codes(lint_source(source, "m.py", CHECK)) == ["FL002"]


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_noqa_comments_are_found_whatever_the_line_endings(newline):
    source = CLONE.format(comment="  # noqa: FL002").replace("\n", newline)
    assert codes(lint_source(source.replace("# noqa: FL002", ""), "m.py", CHECK)) == ["FL002"]
    assert lint_source(source, "m.py", CHECK).findings == ()


def test_file_level_noqa_silences_everything_but_syntax_errors():
    source = "# fusionlint: noqa\n" + CLONE.format(comment="")
    assert lint_source(source, "m.py", FIX).findings == ()
    assert lint_source(source, "m.py", FIX).source is None
    assert codes(lint_source("# fusionlint: noqa\nx = (\n", "m.py", FIX)) == ["FL999"]


def test_files_that_never_import_torch_have_no_findings():
    source = CLONE.format(comment="").replace("import torch\n", "").replace("torch.Tensor", "'torch.Tensor'")
    assert "torch" in source
    assert lint_source(source, "m.py", FIX).findings == ()


def test_masked_parse_keeps_positions_of_methods_in_classes():
    filler = "".join(f"def helper{i}(v):\n    return v + {i}\n\n\n" for i in range(30))
    source = (
        "import torch\n\n\n" + filler
        + "class Block(torch.nn.Module):\n    '''doc'''\n\n    scale = 2\n\n"
        + "    def other(self, x):\n        return x\n\n"
        + "    @torch.no_grad()\n    def forward(self, a, w):\n"
        + "        h = a.clone().sum(-1) + w\n        return h + a.mean()\n"
    )
    result = lint_source(source, "m.py", FIX)
    line = source.splitlines().index("        h = a.clone().sum(-1) + w") + 1
    assert [(f.code, f.line, f.column) for f in result.findings] == [("FL002", line, 13)]


def test_masking_keeps_the_lines_of_candidates_and_their_numbers():
    import ast

    source = "import torch\r\nX = g(1)\r\nclass A:\r\n    y = 2\r\n    def f(self):\r\n        hit()\r\n"
    lines = engine._LINE.findall(source)
    tree = ast.parse(source)
    masked = engine._mask(lines, tree, lambda block, index, settled=(): {"FL1"} if "hit" in block[index] else set())
    assert masked.text == "class A:\r\n    def f(self):\r\n        hit()\r\n"
    assert masked.numbers == [3, 5, 6]
    assert [masked.first_line(unit) for unit in masked.units] == [3]
    assert masked.codes == {3: {"FL1"}}
    module_level = engine._mask(lines, tree, lambda block, index, settled=(): {"FL1"} if "X" in block[index] else set())
    assert module_level.text == source and module_level.units is None
    assert engine._mask(lines, tree, lambda block, index, settled=(): set()) is None


def test_a_literal_at_module_level_asks_no_text_test():
    """Its strings may read like code (``"ln/norm"``); a text test passing there would have the
    whole file parsed, and nothing in it can be a finding."""
    import ast

    source = 'import torch\nMAP = {"a/b": ("x*y", [1, None])}\n"""x.norm() * y"""\nZ = f(2)\ndef f(x):\n    hit(x)\n'
    lines = engine._LINE.findall(source)
    asked = []

    def matching(block, index, settled=()):
        asked.append(block[index].strip())
        return {"FL1"} if "Z" in block[index] else set()

    masked = engine._mask(lines, ast.parse(source), matching)
    assert asked == ["import torch", "Z = f(2)"]  # the first module-level candidate has the whole file parsed
    assert masked.units is None


def test_a_rule_runs_only_on_the_units_its_text_test_keeps(monkeypatch):
    """FL002's text test passes in ``a`` alone and FL004's in ``b`` alone: each rule's check runs
    on its own function (and the module scope), and both findings are still reported."""
    from fusionlint.model import LintOptions
    from fusionlint.rules import get_rule

    source = (
        "import torch\n\n\ndef a(x, w):\n    h = x.clone().sum(-1) + w\n    return h + x.mean()\n\n\n"
        "def b(x, y):\n    total = 0.0\n    for i in range(4):\n        h = torch.tanh(x * i + y)\n"
        "        total += h.sum().item()\n    return total\n"
    )
    seen: dict[str, set] = {}
    for code in ("FL002", "FL004"):
        rule = get_rule(code)

        def spy(self, scope, check=rule.check, code=code):
            seen.setdefault(code, set()).add(scope.unit.name.value if scope.unit is not None else None)
            return check(self, scope)

        monkeypatch.setattr(rule, "check", spy)
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL002", "FL004"})))
    assert sorted(f.code for f in result.findings) == ["FL002", "FL004"]
    assert seen == {"FL002": {"a", None}, "FL004": {"b", None}}  # None: the module's own scope


def test_fix_keeps_untouched_lines_byte_for_byte():
    source = CLONE.format(comment="  # keep me").replace("    return out\n", "    return out  \t\r\n") + "\x0c\n# end"
    result = lint_source(source, "m.py", FIX)
    assert result.source is not None and result.source.endswith("    return out  \t\r\n\x0c\n# end")
    assert "    t3 = a.sum(-1, keepdim=True)  # keep me\n" in result.source


def test_check_only_reports_and_never_rewrites():
    result = lint_source(CLONE.format(comment=""), "m.py", CHECK)
    assert result.source is None and result.fixed == ()
    assert [(f.code, f.fix_safety) for f in result.findings] == [("FL002", FixSafety.UNSAFE)]


class _BrokenFix(Rule):
    """A rule whose fix produces text that does not parse: the engine must drop it."""

    code = "FL002"
    name = "broken-fix"
    message = "broken"
    rationale = "test"
    fix_safety = FixSafety.SAFE

    @classmethod
    def may_match(cls, block, index, ops):
        return "clone" in block[index]

    def check(self, scope):
        import libcst as cst

        unparsable = cst.SimpleStatementLine([cst.Del(cst.Call(cst.Name("f")))])  # `del f()`
        for site in scope.sites.get("clone", ()):
            yield Violation(site.node, fix=(StatementEdit(site.statement.node, (unparsable,)),))


def test_fix_that_does_not_parse_is_dropped_and_finding_kept(monkeypatch):
    monkeypatch.setattr(engine, "all_rules", lambda: [_BrokenFix])
    source = CLONE.format(comment="")
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL002"}), fix=FixMode.SAFE))
    assert result.source is None and result.fixed == ()
    assert [(f.code, f.fix_safety) for f in result.findings] == [("FL002", FixSafety.SAFE)]
    assert any("does not parse" in e for e in result.errors)


class _NarrowClaim(Rule):
    """A rule that pays in both places, with one finding that pays in eager only."""

    code = "FL002"
    name = "narrow-claim"
    message = "narrow"
    rationale = "test"
    pays_in = (FUSIONRT, EAGER)
    claim: tuple[str, ...] = (EAGER,)

    @classmethod
    def may_match(cls, block, index, ops):
        return "clone" in block[index]

    def check(self, scope):
        for site in scope.sites.get("clone", ()):
            yield Violation(site.node, pays_in=self.claim)


def test_a_finding_may_narrow_where_its_rule_pays(monkeypatch):
    monkeypatch.setattr(engine, "all_rules", lambda: [_NarrowClaim])
    result = lint_source(CLONE.format(comment=""), "m.py", LintOptions(codes=frozenset({"FL002"})))
    assert [f.pays_in for f in result.findings] == [(EAGER,)]


def test_a_finding_may_not_claim_more_than_its_rule(monkeypatch):
    class Wider(_NarrowClaim):
        pays_in = (EAGER,)
        claim = (FUSIONRT,)

    monkeypatch.setattr(engine, "all_rules", lambda: [Wider])
    result = lint_source(CLONE.format(comment=""), "m.py", LintOptions(codes=frozenset({"FL002"})))
    assert result.findings == () and "beyond the rule's" in result.errors[0]  # an internal error: the run fails


def test_extra_ops_extend_the_tables():
    source = "import torch\n\n\ndef f(a: torch.Tensor):\n    h = my_act(a).flatten(0, 1)\n    return h + 1\n"
    assert lint_source(source, "m.py", FIX).findings == ()
    source = source.replace("my_act(", "torch.my_act(")
    assert lint_source(source, "m.py", FIX).findings == ()  # a torch op the tables do not know
    extra = LintOptions(codes=ALL, extra_ops=(("elementwise", ("my_act",)),))
    assert codes(lint_source(source, "m.py", extra)) == ["FL001"]


def test_unknown_op_class_in_extra_ops_is_reported_not_raised():
    result = lint_source("import torch\n", "m.py", LintOptions(codes=ALL, extra_ops=(("vew", ("x",)),)))
    assert result.findings == () and "vew" in result.errors[0]


def test_fixed_statement_keeps_its_continuation_lines_in_place():
    source = (
        "import torch\n\n\nclass Head(torch.nn.Module):\n    def forward(self, x, c):\n        if c is not None:\n"
        "            y = (x * 2).flatten(0, 1) + (\n                c.sum()\n            )\n            return y\n"
    )
    result = lint_source(source, "m.py", FIX)
    assert result.source == source.replace("(x * 2).flatten(0, 1)", "(x.flatten(0, 1) * 2)")


def test_recursion_libcst_turned_into_another_error_is_retried_with_a_deep_stack(monkeypatch):
    """libcst's position provider unwinds a RecursionError into a KeyError; the retry must still happen."""
    real = engine._lint

    def shallow_stack_fails(source, path, options):
        if sys.getrecursionlimit() < engine._DEEP_RECURSION_LIMIT:
            try:
                raise RecursionError("maximum recursion depth exceeded")
            except RecursionError:
                raise KeyError("a node")  # chained implicitly, as libcst does
        return real(source, path, options)

    monkeypatch.setattr(engine, "_lint", shallow_stack_fails)
    result = lint_source(CLONE.format(comment=""), "m.py", CHECK)
    assert codes(result) == ["FL002"] and result.errors == ()


def test_an_exception_without_a_printable_message_is_still_one_line():
    class Unprintable(Exception):
        def __str__(self):
            raise RecursionError

    message = internal_error("m.py", Unprintable())
    assert isinstance(message, InternalError) and message.startswith("m.py: internal error: Unprintable (a bug")


def test_a_linted_files_trees_are_freed_without_the_garbage_collector() -> None:
    """Each file's syntax trees are a million objects on real code: held in a reference cycle,
    they would wait for a pass of the collector, which walks them all."""
    import ast
    import gc
    from pathlib import Path

    import libcst as cst

    fixtures = sorted((Path(__file__).resolve().parents[1] / "data" / "rules").glob("*.py"))
    assert fixtures
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        fixed = 0
        for path in fixtures:  # every rule's patterns, checked and fixed
            fixed += len(lint_source(path.read_text(encoding="utf-8"), str(path), FIX).fixed)
        gc.collect()
        held = [type(o).__name__ for o in gc.garbage if isinstance(o, (cst.CSTNode, ast.AST))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert fixed > 0
    assert held == []
