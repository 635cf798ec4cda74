"""``%%fuse`` in IPython's in-process test shell: execution semantics, report, lint, --fix, --compare."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from fusionrt.report import Comparison, Report  # noqa: E402

BURN_CELL = """\
a = x * 2
b = y + 1
t3 = a.clone().sum(-1, keepdim=True)
out = t3 + a * b
"""

BURN_FUNCTION = """\
def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b

out = block(x, y)
"""


def fuse(ip, options: str, body: str):
    return ip.run_cell(f"%%fuse {options}\n{body}")


def test_cell_runs_in_the_namespace_and_keeps_its_value(ip, capsys):
    result = fuse(ip, "--executor reference -o rep", BURN_CELL + "out.sum().item()\n")
    assert result.error_in_exec is None
    x, y = ip.user_ns["x"], ip.user_ns["y"]
    a = x * 2
    expected = a.sum(-1, keepdim=True) + a * (y + 1)
    torch.testing.assert_close(ip.user_ns["out"], expected)
    assert result.result == pytest.approx(expected.sum().item(), rel=1e-5)
    report = ip.user_ns["rep"]
    assert isinstance(report, Report)
    # every name the cell assigns stays alive in the notebook; out is written because it is held
    sources = {w.source: w.reason for w in report.materialized}
    assert sources["cell line 5"] == "alive"
    assert {"cell line 2", "cell line 3", "cell line 4"} <= set(sources)
    shown = capsys.readouterr().out
    assert "fusionrt report" in shown and "cell line 5" in shown and "\x1b" not in shown
    assert "FL002" in shown  # the clone is found, but at module level nothing can move: no fix


def test_exception_fails_the_cell_once_with_the_cell_line(ip, capsys):
    result = fuse(ip, "", "a = x * 2\nb = a.no_such_method()\n")
    assert isinstance(result.error_in_exec, AttributeError)
    out = capsys.readouterr().out
    assert out.count("Traceback (most recent call last)") == 1
    assert out.count("AttributeError: ") == 1
    assert "----> 3 b = a.no_such_method()" in out  # line 3 of the cell: %%fuse is line 1
    torch.testing.assert_close(ip.user_ns["a"], ip.user_ns["x"] * 2)  # what ran before stays


def test_fix_shows_a_diff_and_offers_the_fixed_cell(ip, capsys):
    result = fuse(ip, "--fix --no-run", BURN_FUNCTION)
    assert result.error_in_exec is None
    assert "out" not in ip.user_ns  # --no-run
    offered = ip.rl_next_input
    assert offered.startswith("%%fuse\n") and "tmp = a * b" in offered and ".clone()" not in offered
    shown = capsys.readouterr().out
    assert "-    t3 = a.clone().sum(-1, keepdim=True)" in shown and "+    tmp = a * b" in shown
    assert "fixed" in shown and "FL002" in shown


def test_compare_runs_both_on_the_same_inputs(ip, capsys):
    ip.run_cell("x_before = x.clone()")
    result = fuse(ip, "--compare --executor reference -o cmp", BURN_FUNCTION + "x.mul_(3)\n")
    assert result.error_in_exec is None
    comparison = ip.user_ns["cmp"]
    assert isinstance(comparison, Comparison)
    assert comparison.outputs_equal is True
    assert comparison.after.writes < comparison.before.writes  # what the fix is for
    assert comparison.labels == ("cell", "fixed cell")
    # the original ran once in the notebook (x scaled once), the fixed one on a copy
    torch.testing.assert_close(ip.user_ns["x"], ip.user_ns["x_before"] * 3)
    assert "tmp" not in ip.user_ns
    shown = capsys.readouterr().out
    assert "outputs equal" in shown and "Writes only in cell" in shown


def test_compare_draws_both_plans_side_by_side_with_each_cells_code(ip):
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = fuse(ip, "--compare --executor reference -o cmp", BURN_FUNCTION)
    assert result.error_in_exec is None
    [shown] = captured.outputs
    html, comparison = shown.data["text/html"], ip.user_ns["cmp"]
    assert html.startswith('<div class="fusionrt-compare"')
    before, after = (plan.split("</svg>")[0] for plan in html.split('<div class="fusionrt-plan"')[1:])
    for plan, report in ((before, comparison.before), (after, comparison.after)):
        assert plan.startswith(f' data-kernels="{report.kernels}" data-writes="{report.writes}"')
        assert plan.count('class="fusionrt-kernel ') == report.kernels  # no kernel repeats here
    # each side's lines carry its own cell's code: the clone is gone from the fixed cell
    assert "t3 = a.clone().sum(-1, keepdim=True)" in before and "a.clone()" not in after
    assert "outlined write: not in fixed cell" in before and before.count("fusionrt-one-sided") == 1


def test_compare_sees_a_changed_result(ip):
    """outputs_equal can fail: here the cell's value is a clock reading, which differs between runs."""
    ip.run_cell("import time\nstart = time.perf_counter_ns()")
    result = fuse(ip, "--compare -o cmp", BURN_FUNCTION + "time.perf_counter_ns() - start\n")
    assert result.error_in_exec is None and result.result > 0
    assert ip.user_ns["cmp"].outputs_equal is False


def test_no_fix_to_compare_runs_once(ip, capsys):
    fuse(ip, "--compare -o rep", "z = torch.relu(x) + 1\n")
    assert isinstance(ip.user_ns["rep"], Report)
    assert "fusionlint has no fix for this cell: it ran once." in capsys.readouterr().out


def test_a_body_that_is_another_cell_magic_has_nothing_to_lint(ip, capsys):
    result = fuse(ip, "--no-run", "%%bash\necho never\n")
    assert result.error_in_exec is None
    assert "fusionlint: no findings in this cell" in capsys.readouterr().out


def test_no_lint_and_mimebundle(ip):
    ip.run_cell("%%fuse --no-lint -o rep\nz = x + y")
    from fusionlint.magic import FuseResult

    bundle = FuseResult(report=ip.user_ns["rep"])._repr_mimebundle_()
    assert "<pre" in bundle["text/html"] and "cell line 2" in bundle["text/html"]
    assert "\x1b" not in bundle["text/plain"] and "fusionlint" not in bundle["text/plain"]


@pytest.mark.parametrize("options", ["--no-lint --fix", "--no-run -o r", "-o 1x", "--policy nope"])
def test_bad_options_are_usage_errors(ip, options, capsys):
    result = fuse(ip, options, "z = x + 1\n")
    assert result.error_in_exec is not None or result.error_before_exec is not None
    assert "z" not in ip.user_ns


def test_help_lists_the_options(ip):
    doc = ip.find_cell_magic("fuse").__doc__
    for option in ("--fix", "--compare", "--no-lint", "--no-run", "--details", "--executor", "--policy", "-o NAME"):
        assert option in doc


def test_load_ext_fusionrt_registers_the_same_magic(ip, capsys):
    from fusionlint.magic import FuseMagics

    cell_magics = ip.magics_manager.magics["cell"]
    cell_magics.pop("fuse")
    ip.extension_manager.loaded.discard("fusionrt")  # one shell per process: load it afresh
    try:
        assert ip.run_cell("%%fuse\nz = x + 1").error_in_exec is not None  # gone until loaded
        ip.run_line_magic("load_ext", "fusionrt")
        assert "fusionrt" in ip.extension_manager.loaded
        assert isinstance(cell_magics["fuse"].__self__, FuseMagics)
        capsys.readouterr()
        result = fuse(ip, "--executor reference -o rep", BURN_CELL)
        assert result.error_in_exec is None and ip.user_ns["rep"].writes == 4
        assert "fusionrt report" in capsys.readouterr().out
    finally:
        if "fuse" not in cell_magics:
            ip.register_magics(FuseMagics)
