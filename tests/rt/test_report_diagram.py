"""The plan diagram of real fusionrt runs: every kernel and write is drawn or counted, repeated
kernels share a box, fallbacks and torch's own kernels are marked, text is escaped, and a
comparison draws both plans with the one-sided writes outlined. (The browser renders it in
tests/examples/test_notebook_render.py.)"""
from __future__ import annotations

import re
from dataclasses import replace

import torch

import fusionrt
from fusionrt import diagram
from fusionrt.report import Report


def drawn(html: str, cls: str, count: str) -> list[int]:
    """The ``data-<count>`` of each element whose classes start with ``cls``."""
    return [int(n) for n in re.findall(rf'class="{cls}[ "][^>]*?data-{count}="(\d+)"', html)]


def layers(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(6):
        x = torch.tanh(x @ w) * 0.5
    return x


def with_fallbacks(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x @ w
    where = torch.nonzero(h > 0)
    return torch.cumsum(h, 0) * 2, where


def measured(fn, *args) -> Report:
    _, report = fusionrt.measure(fn, *args, executor="reference")
    return report


def test_repeated_kernels_share_a_box_and_every_kernel_and_write_is_counted():
    x, w = torch.randn(64, 32), torch.randn(32, 32)
    report = measured(layers, x, w)
    html = diagram.plan_figure(report)
    boxes = drawn(html, "fusionrt-kernel", "kernels")
    assert sum(boxes) == report.kernels == 6 and boxes == [6]
    assert sum(drawn(html, "fusionrt-write", "writes")) == report.writes
    assert f'data-kernels="{report.kernels}" data-writes="{report.writes}"' in html
    assert "×6 mm_tanh_mul" in html and "(1 distinct)" in html
    # one line of this file joined the box: its code is read back and shown beside it
    assert html.count('class="fusionrt-line"') == 1 and "x = torch.tanh(x @ w) * 0.5" in html


def test_a_run_without_kernels_draws_nothing():
    assert diagram.figure(Report(eager_kernels=3)) == ""


def test_fallbacks_and_extern_kernels_are_marked():
    x, w = torch.randn(64, 32), torch.randn(32, 32)
    report = measured(with_fallbacks, x, w)
    html = diagram.plan_figure(report)
    fallbacks = [k for k in report.kernel_records if k.kind == "fallback"]
    assert len(fallbacks) == 2 and html.count("fusionrt-fallback") == 2
    assert html.count('stroke-dasharray="5 3"') == 2  # their boxes are dashed
    extern = measured(lambda a, b: a @ b, x, w)
    assert [k.backend for k in extern.kernel_records] == ["torch"]
    assert diagram.plan_figure(extern).count("fusionrt-extern") == 1


def test_at_model_size_the_boxes_that_write_the_most_are_drawn(monkeypatch):
    x, w = torch.randn(64, 32), torch.randn(32, 32)
    report = measured(with_fallbacks, x, w)
    monkeypatch.setattr(diagram, "MAX_BOXES", 2)
    html = diagram.plan_figure(report)
    largest = sorted(report.kernel_records, key=lambda k: -k.bytes_written)[:2]
    assert drawn(html, "fusionrt-kernel", "kernels") == [1, 1]
    assert all(f"#{k.index} {k.name}" in html for k in largest)
    [hidden] = drawn(html, "fusionrt-more", "kernels")
    assert hidden == report.kernels - 2
    assert sum(drawn(html, "fusionrt-write", "writes")) + sum(drawn(html, "fusionrt-more", "writes")) == report.writes


def test_all_text_is_escaped():
    x, w = torch.randn(16, 8), torch.randn(8, 8)
    report = measured(layers, x, w)
    cell = replace(report, kernel_records=[replace(k, sources=("cell line 2",)) for k in report.kernel_records])
    html = diagram.plan_figure(cell, code={"cell line 2": "y = '<script>alert(1)</script>' & 1"},
                               label="<b>run</b>")
    assert "<script>" not in html and "<b>run" not in html
    assert "&lt;script&gt;" in html and "&amp; 1" in html and "&lt;b&gt;run&lt;/b&gt;" in html


def test_a_comparison_draws_both_plans_and_outlines_the_writes_one_side_has():
    x, y = torch.randn(64, 32), torch.randn(64, 32)

    def cloned(x, y):  # FL002's pattern: b stays needed after the reduction, so it is written
        a = x * 2
        b = y + 1
        t3 = a.clone().sum(-1, keepdim=True)
        return t3 + a * b

    def fixed(x, y):
        a = x * 2
        c = a * (y + 1)
        return a.sum(-1, keepdim=True) + c

    comparison = fusionrt.compare(measured(cloned, x, y), measured(fixed, x, y), labels=("cell", "fixed cell"))
    html = comparison._repr_html_()
    before, after = html.split('<div class="fusionrt-plan"')[1:]
    assert html.startswith('<div class="fusionrt-compare"')
    assert sum(drawn(before, "fusionrt-kernel", "kernels")) == comparison.before.kernels
    assert sum(drawn(after, "fusionrt-kernel", "kernels")) == comparison.after.kernels
    gone = len(comparison.disappeared)
    assert gone and before.count("fusionrt-one-sided") >= 1 and "outlined write: not in fixed cell" in before
    assert sum(int(n) for n in re.findall(r'fusionrt-one-sided" data-writes="(\d+)"', before)) == gone
    assert after.count("fusionrt-one-sided") == len(comparison.appeared)
