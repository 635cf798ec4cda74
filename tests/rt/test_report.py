"""The report's data, JSON schema and rendering, on hand-built reports (no lazy run needed)."""
from __future__ import annotations

import io
import json
import os

import pytest
from rich.console import Console

from fusionrt.report import (
    SCHEMA_VERSION, Comparison, Fallback, Flush, KernelRecord, Report, Write, compare, display_source,
    human_bytes,
)


def render(renderable, width: int = 120) -> str:
    console = Console(file=io.StringIO(), record=True, width=width, force_terminal=True)
    console.print(renderable)
    return console.export_text(styles=False)


def make_report(src: str) -> Report:
    """Two kernels (x*2 -> relu -> +1 fused, then a row sum), the fused result kept alive."""
    return Report(
        policy="stream",
        executor="reference",
        kernel_records=[
            KernelRecord(0, "fused", "fused_mul_relu_add", ("aten.mul.Tensor", "aten.relu.default", "aten.add.Tensor"),
                         (f"{src}:3", f"{src}:4"), 8192, 4096, 0),
            KernelRecord(1, "reduction", "sum_dim", ("aten.sum.dim_IntList",), (f"{src}:5",), 4096, 128, 1),
        ],
        materialized=[
            Write((32, 32), "float32", 4096, "alive", f"{src}:4", 0, "aten.add.Tensor"),
            Write((32, 1), "float32", 128, "output", f"{src}:5", 1, "aten.sum.dim_IntList"),
        ],
        fallbacks=[Fallback("aten.nonzero.default", f"{src}:6", "data-dependent output shape")],
        flushes=[Flush("item", f"{src}:7", 3), Flush("exit", f"{src}:8", 1)],
        eager_kernels=5,
        eager_writes=5,
        eager_bytes_written=20480,
    )


@pytest.fixture
def script(tmp_path, monkeypatch) -> str:
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "model.py")


def test_totals_are_derived_from_the_records(script):
    report = make_report(script)
    assert (report.kernels, report.writes) == (2, 2)
    assert report.bytes_written == 4096 + 128
    assert report.bytes_read == 8192 + 4096
    assert Report().kernels == Report().writes == Report().bytes_written == 0


def test_fallback_outputs_count_as_bytes_written_not_as_writes(script):
    report = make_report(script)
    report.kernel_records.append(KernelRecord(2, "fallback", "nonzero", ("nonzero",), (f"{script}:6",), 4096, 512, 1))
    assert (report.kernels, report.writes, report.bytes_written) == (3, 2, 4096 + 128 + 512)


def test_summary_line(script):
    assert make_report(script).summary() == (
        "2 kernels (eager 5), 2 writes (eager 5), 4.12 KiB written (eager 20.0 KiB), "
        "12.0 KiB read, 1 fallback, 2 flushes"
    )


def test_details_show_totals_ratios_and_every_record(script):
    text = render(make_report(script).details())
    lines = text.splitlines()
    assert "policy stream, executor reference" in lines[0]
    assert any(line.split() == ["kernels", "2", "5", "0.40x"] for line in lines)
    assert any(line.split() == ["writes", "2", "5", "0.40x"] for line in lines)
    assert any(line.split() == ["bytes", "written", "4.12", "KiB", "20.0", "KiB", "0.21x"] for line in lines)
    assert "Materialized writes (2)" in text
    row = next(line for line in lines if "(32, 32)" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    # source relative to the cwd; op shown without its overload
    assert cells == ["0", "(32, 32)", "float32", "4.00 KiB", "alive", "model.py:4", "add", "0"]
    row = next(line for line in lines if "(32, 1)" in line)
    assert "128 B" in row and "output" in row and "model.py:5" in row and "sum" in row
    assert "Kernels (2)" in text and "fused_mul_relu_add" in text
    assert "Fallbacks (1)" in text and "aten.nonzero.default" in text and "data-dependent output shape" in text
    assert "Flushes (2)" in text and "model.py:7" in text
    assert script not in text  # no absolute path once inside the cwd


def test_default_view_groups_records_by_line_and_reason(script):
    text = str(make_report(script))
    lines = text.splitlines()
    assert any(line.split() == ["kernels", "2", "5", "0.40x"] for line in lines)
    assert "1 fallback (ops run eagerly), 2 flushes (item 1, exit 1)" in lines
    assert "Materialized writes (2) by source line and reason" in lines
    assert ["1", "4.00", "KiB", "alive", "model.py:4", "add"] in [line.split() for line in lines]
    assert ["1", "128", "B", "output", "model.py:5", "sum"] in [line.split() for line in lines]
    assert "Fallbacks (1) by op and reason" in lines
    assert ["1", "aten.nonzero.default", "data-dependent", "output", "shape", "model.py:6"] in [
        line.split() for line in lines]
    assert "Kernels (" not in text and "Flushes (" not in text and "┏" not in text  # full tables: details only
    assert "more groups" not in text  # nothing left out
    # the causes: the fallback first, then the writes eager would not make, with advice where known
    causes = lines[lines.index("Top causes") + 1:lines.index("Materialized writes (2) by source line and reason") - 1]
    assert [line.strip() for line in causes] == [
        "1 op ran eagerly (data-dependent output shape): nonzero",
        "1 write (alive, 4.00 KiB): still referenced from Python at the flush (a variable, a list, a notebook name)",
        "→ del what is no longer needed, or compute inside a function whose locals die at return",
    ]


def test_empty_sections_are_left_out():
    for view in (Report(eager_kernels=3, eager_writes=3, eager_bytes_written=300),
                 Report(eager_kernels=3, eager_writes=3, eager_bytes_written=300).details()):
        text = render(view)
        assert "Materialized writes" not in text and "Fallbacks" not in text and "Flushes" not in text
        assert "Top causes" not in text and "fallback" not in text
        assert any(line.split() == ["kernels", "0", "3", "0.00x"] for line in text.splitlines())
    assert any(line.split()[:3] == ["kernels", "0", "0"] and line.split()[3] == "-"
               for line in render(Report()).splitlines())


def test_plain_text_and_jupyter_bundle_are_clean(script):
    report = make_report(script)
    plain = str(report)
    assert "\x1b" not in plain and "4.00 KiB" in plain and "model.py:4" in plain
    bundle = report._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == plain
    html = bundle["text/html"]
    assert html.startswith('<div class="fusionrt-plan"') and "<pre" in html and "\x1b" not in html  # the diagram first
    assert "Materialized writes (2) by source line and reason" in html and "model.py:4" in html
    # the full tables follow, each folded under its title
    folded = html.split("<details>")[1:]
    assert [part.split("</summary>")[0] for part in folded] == [
        "<summary>Materialized writes (2)", "<summary>Kernels (2)", "<summary>Fallbacks (1)", "<summary>Flushes (2)"]
    assert "┏━━━┳" in folded[0] and "(32, 32)" in folded[0] and all(p.endswith("</details>") for p in folded)
    assert report._repr_html_() == html
    details = report.details()._repr_mimebundle_()
    assert "<details>" not in details["text/html"] and "(32, 32)" in details["text/plain"]


def test_ipython_display_uses_the_clean_bundle(script):
    formatters = pytest.importorskip("IPython.core.formatters")  # not on the GPU machine
    data, _ = formatters.DisplayFormatter().format(make_report(script))
    assert "\x1b" not in data["text/plain"] and "0.40x" in data["text/plain"]
    assert "alive" in data["text/html"]


def test_markup_like_text_is_shown_verbatim(script):
    report = Report(fallbacks=[Fallback("aten.index.Tensor", f"{script}:2", "[bold]not markup[/bold]")])
    assert "[bold]not markup[/bold]" in str(report)


def test_json_round_trip_and_schema(script):
    report = make_report(script)
    data = json.loads(report.to_json())
    assert data["version"] == SCHEMA_VERSION == 1
    assert data["totals"] == {"kernels": 2, "writes": 2, "bytes_written": 4224, "bytes_read": 12288,
                              "fallbacks": 1, "flushes": 2}
    assert data["eager"] == {"kernels": 5, "writes": 5, "bytes_written": 20480}
    assert data["materialized"][0] == {"shape": [32, 32], "dtype": "float32", "bytes": 4096,
                                       "reason": "alive", "source": f"{script}:4", "kernel": 0,
                                       "op": "aten.add.Tensor"}
    assert data["kernel_records"][0]["ops"] == ["aten.mul.Tensor", "aten.relu.default", "aten.add.Tensor"]
    assert Report.from_json(report.to_json()) == report
    assert Report.from_dict(data).materialized[0].shape == (32, 32)
    # the summary is derived, like the totals: its causes as the text report words them
    [fallback, alive] = data["summary"]["causes"]
    assert fallback == {"kind": "fallbacks", "reason": "data-dependent output shape", "count": 1, "bytes": 0,
                        "examples": [["aten.nonzero.default", 1]], "explanation": "(data-dependent output shape)",
                        "advice": None, "text": "1 op ran eagerly (data-dependent output shape): nonzero"}
    assert (alive["kind"], alive["reason"], alive["count"], alive["bytes"]) == ("writes", "alive", 1, 4096)


def test_unknown_schema_version_is_refused(script):
    data = make_report(script).to_dict()
    data["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        Report.from_dict(data)


@pytest.mark.parametrize("make", [
    lambda: Write((1,), "float32", 4, "because", "a.py:1", 0, "aten.add.Tensor"),
    lambda: KernelRecord(0, "magic", "k", (), (), 0, 0, 0),
    lambda: Flush("whim", "a.py:1", 1),
])
def test_unknown_vocabulary_is_refused(make):
    with pytest.raises(ValueError, match="expected one of"):
        make()


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"), (10 * 1024, "10.0 KiB"),
    (1000 * 1024, "1000 KiB"), (3 * 2**30, "3.00 GiB"), (64 * 2**20, "64.0 MiB"),
])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_display_source(tmp_path):
    inside = str(tmp_path / "pkg" / "m.py")
    assert display_source(f"{inside}:12", cwd=str(tmp_path)) == os.path.join("pkg", "m.py") + ":12"
    assert display_source(f"{inside}:12", cwd=str(tmp_path / "other")) == f"{inside}:12"
    assert display_source("<ipython-input-3-abc>:4", cwd=str(tmp_path)) == "<ipython-input-3-abc>:4"
    assert display_source("unknown", cwd=str(tmp_path)) == "unknown"


def _fixed_report(src: str) -> Report:
    """The rewrite: the row sum no longer keeps the fused result alive, one kernel fewer read."""
    return Report(
        kernel_records=[KernelRecord(0, "reduction", "fused_mul_relu_add_sum",
                                     ("aten.mul.Tensor", "aten.sum.dim_IntList"), (f"{src}:5",), 4096, 128 + 2048, 0)],
        materialized=[Write((32, 1), "float32", 128, "output", f"{src}:5", 0, "aten.sum.dim_IntList"),
                      Write((32, 32), "float16", 2048, "alive", f"{src}:4", 0, "aten.add.Tensor")],
        flushes=[Flush("exit", f"{src}:8", 2)],
        eager_kernels=5, eager_writes=5, eager_bytes_written=20480,
    )


def test_compare_deltas_and_matched_writes(script):
    before, after = make_report(script), _fixed_report(script)
    comparison = compare(before, after, labels=("original", "fixed"))
    assert isinstance(comparison, Comparison)
    assert (comparison.kernels, comparison.writes) == (-1, 0)
    assert comparison.bytes_written == 2048 + 128 - 4224
    assert comparison.bytes_read == 4096 - 12288
    assert (comparison.fallbacks, comparison.flushes) == (-1, -1)
    # the float32 write of line 4 disappeared; a float16 one of the same line appeared
    assert comparison.disappeared == [before.materialized[0]]
    assert comparison.appeared == [after.materialized[1]]
    data = json.loads(comparison.to_json())
    assert data["delta"] == {"kernels": -1, "writes": 0, "bytes_written": -2048, "bytes_read": -8192,
                             "fallbacks": -1, "flushes": -1}
    assert (data["disappeared"], data["appeared"], data["labels"]) == ([0], [1], ["original", "fixed"])
    assert Report.from_dict(data["after"]) == after


def test_compare_pairs_repeated_writes_one_to_one(script):
    w = Write((8,), "float32", 32, "alive", f"{script}:2", 0, "aten.mul.Tensor")
    comparison = compare(Report(materialized=[w, w, w]), Report(materialized=[w]))
    assert comparison.disappeared == [w, w] and comparison.appeared == []
    assert comparison.to_dict()["disappeared"] == [1, 2]


def test_compare_pairs_writes_whose_line_moved(script):
    """A fix moves lines: the same write from another line is the same write, and a write of
    another op or reason is not."""
    moved = Write((8,), "float32", 32, "alive", f"{script}:2", 0, "mul")
    before = Report(materialized=[moved, Write((8,), "float32", 32, "alive", f"{script}:3", 0, "add")])
    after = Report(materialized=[Write((8,), "float32", 32, "alive", f"{script}:5", 0, "mul"),
                                 Write((8,), "float32", 32, "output", f"{script}:6", 0, "add")])
    comparison = compare(before, after)
    assert [w.source for w in comparison.disappeared] == [f"{script}:3"]
    assert [w.source for w in comparison.appeared] == [f"{script}:6"]


def test_compare_rendering(script):
    comparison = compare(make_report(script), _fixed_report(script), labels=("original", "fixed"), outputs_equal=True)
    text = render(comparison)
    lines = text.splitlines()
    assert lines[0].strip() == "fusionrt comparison: original vs fixed"
    header = next(line for line in lines if "original" in line and "fixed" in line and "delta" in line)
    assert header.split() == ["original", "fixed", "delta", "ratio"]
    assert any(line.split() == ["kernels", "2", "1", "-1", "0.50x"] for line in lines)
    assert any(line.split() == ["writes", "2", "2", "0", "1.00x"] for line in lines)
    assert any(line.split() == ["bytes", "written", "4.12", "KiB", "2.12", "KiB", "-2.00", "KiB", "0.52x"]
               for line in lines)
    assert "outputs equal" in text
    # by default the writes one side has are grouped by line and reason; details() lists each one
    assert "Writes only in original (1) by source line and reason" in lines
    assert "Writes only in fixed (1) by source line and reason" in lines
    assert [["1", "4.00", "KiB", "alive", "model.py:4", "add"], ["1", "2.00", "KiB", "alive", "model.py:4", "add"]] == [
        line.split() for line in lines if "model.py:4" in line]
    details = render(comparison.details()).splitlines()
    assert "Writes only in fixed (1)" in [line.strip() for line in details] and "outputs equal" in details
    assert next(line for line in details if "float16" in line).strip("│ ").split("│")[0].strip() == "1"
    bundle = comparison._repr_mimebundle_()
    assert "\x1b" not in bundle["text/plain"] and "Writes only in fixed" in bundle["text/html"]
    assert "<summary>Writes only in fixed (1)</summary>" in bundle["text/html"] and "float16" in bundle["text/html"]
    assert "OUTPUTS DIFFER" in str(compare(Report(), Report(), outputs_equal=False))
    assert "Same materialized writes in both." in str(compare(make_report(script), make_report(script)))


def test_compare_summary(script):
    assert compare(make_report(script), _fixed_report(script)).summary() == (
        "before -> after: kernels 2 -> 1 (-1), writes 2 -> 2 (+0), bytes written 4.12 KiB -> 2.12 KiB (-2.00 KiB)"
    )
