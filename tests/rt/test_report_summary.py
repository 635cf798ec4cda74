"""The default report stays on one screen at model size: totals, top causes with advice, groups.

A 12-layer GPT-2 (tiny hidden size, built from its config, no download) runs under
``fusionrt.measure`` on CPU, for inference and for a training step; its report has hundreds of
records, and the default view must still fit in 40 lines while ``details()`` lists them all.
"""
from __future__ import annotations

import re

import pytest
import torch

import fusionrt
from fusionrt.causes import AS_IN_EAGER, WRITE_CAUSES, group_fallbacks, group_writes
from fusionrt.report import SUMMARY_ROWS, WRITE_REASONS, Fallback, Flush, Report, Write, display_source

transformers = pytest.importorskip("transformers")

SCREEN = 40


@pytest.fixture(scope="module")
def gpt2() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=12, n_embd=16, n_head=2, vocab_size=61, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config), torch.randint(0, 61, (2, 8))


def inference(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def training_step(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    loss = model(ids, labels=ids).loss
    loss.backward()
    return loss


@pytest.fixture(scope="module", params=[inference, training_step], ids=["no_grad", "training"])
def measured(request, gpt2) -> tuple[Report, torch.Tensor, torch.Tensor]:
    """The report of one call, its result and eager's."""
    model, ids = gpt2
    model.zero_grad()
    torch.manual_seed(1)  # the same dropout masks in both runs
    expected = request.param(model, ids).detach()
    model.zero_grad()
    torch.manual_seed(1)
    result, report = fusionrt.measure(request.param, model, ids, executor="reference")
    return report, result.detach(), expected


def test_the_model_runs_as_in_eager(measured):
    report, result, expected = measured
    torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-5)
    assert report.writes > 100  # a report that needs a summary


def test_default_text_fits_on_a_screen_and_leads_with_the_top_causes(measured):
    report, _, _ = measured
    text = str(report)
    lines = text.splitlines()
    assert len(lines) <= SCREEN, text
    causes = report.to_dict()["summary"]["causes"]
    assert causes, text
    assert lines.index("Top causes") < lines.index(f"Materialized writes ({report.writes}) by source line and reason")
    for cause in causes:
        assert f"  {cause['text']}" in lines
        if cause["advice"]:
            assert f"    → {cause['advice']}" in lines
    groups = group_writes(report.materialized)
    assert len(groups) > SUMMARY_ROWS
    assert f"… {len(groups) - SUMMARY_ROWS} more groups (--details)" in lines


def test_details_list_every_write(measured):
    report, _, _ = measured
    text = str(report.details())
    title = f"Materialized writes ({report.writes})"
    table = text.split(title + "\n")[1].split("\n\n")[0]
    rows: list[list[str]] = []  # a row's cells; a source too long for its column goes on below
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if re.fullmatch(r"\d+", cells[0]):
            rows.append(cells)
        elif line.startswith("│") and rows:
            rows[-1][5] += cells[5]
    assert [int(row[0]) for row in rows] == list(range(report.writes))
    for row, write in zip(rows, report.materialized):
        assert (row[4], row[5]) == (write.reason, display_source(write.source))


def test_html_shows_the_summary_and_folds_the_full_tables(measured):
    report, _, _ = measured
    html = report._repr_html_()
    summary, *folded = html.split("<details>")
    assert "Top causes" in summary and "<pre" in summary
    assert f"<summary>Materialized writes ({report.writes})</summary>" in folded[0]
    assert len(folded) == 2 + bool(report.fallbacks) + bool(report.flushes)


def test_groups_count_every_record(measured):
    report, _, _ = measured
    writes = group_writes(report.materialized)
    assert sum(g.count for g in writes) == report.writes
    assert sum(g.bytes for g in writes) == sum(w.bytes for w in report.materialized)
    assert [g.bytes for g in writes] == sorted((g.bytes for g in writes), reverse=True)
    assert len({(g.source, g.reason) for g in writes}) == len(writes)
    fallbacks = group_fallbacks(report.fallbacks)
    assert sum(g.count for g in fallbacks) == len(report.fallbacks)
    assert [g.count for g in fallbacks] == sorted((g.count for g in fallbacks), reverse=True)


def test_dropout_in_training_mode_is_named(gpt2):
    """The model is in training mode: dropout's bernoulli_ falls back, and the advice says why."""
    model, ids = gpt2
    _, report = fusionrt.measure(inference, model, ids, executor="reference")
    assert any(f.op == "bernoulli_" for f in report.fallbacks)
    assert "    → dropout is active: for inference, call model.eval()" in str(report).splitlines()


def test_inputs_that_require_grad_are_the_cause_and_no_grad_the_advice(tmp_path):
    fallbacks = [Fallback(op, f"{tmp_path}/m.py:{i}", "requires grad") for i, op in enumerate(["mul", "add", "mul"])]
    text = str(Report(fallbacks=fallbacks, flushes=[Flush("fallback", "m.py:1", 1)] * 3))
    assert "  3 ops ran eagerly because their inputs require grad: mul 2, add" in text.splitlines()
    assert "    → for inference, run under torch.no_grad() or torch.inference_mode()" in text.splitlines()
    assert "3 fallbacks (ops run eagerly), 3 flushes (fallback 3)" in text.splitlines()


def test_a_host_sync_in_a_loop_points_at_fl004():
    x = torch.randn(64, 32)
    with fusionrt.lazy(executor="reference") as session:
        total = 0.0
        for _ in range(6):
            total += (x * 2).relu().sum().item()
    lines = str(session.report).splitlines()
    cause = next(line for line in lines if "host syncs" in line)
    assert re.fullmatch(r"  6 host syncs \(item\) from \S+test_report_summary.py:\d+: each flushes the stream", cause)
    assert lines[lines.index(cause) + 1] == "    → read the host once, after the loop (fusionlint FL004)"


@pytest.mark.parametrize("reason", WRITE_REASONS)
def test_every_write_reason_is_grouped_and_explained(reason):
    writes = [Write((4, 4), "float32", 64, reason, f"m.py:{line}", 0, "aten.mul.Tensor") for line in (3, 3, 5)]
    lines = str(Report(materialized=writes)).splitlines()
    assert ["2", "128", "B", reason, "m.py:3", "mul", "2"] in [line.split() for line in lines]
    causes = [line.strip() for line in lines[lines.index("Top causes") + 1:]] if "Top causes" in lines else []
    if reason in AS_IN_EAGER:
        assert not causes
    else:
        explanation = WRITE_CAUSES.get(reason, (f"written because {reason}",))[0]
        assert causes[0] == f"3 writes ({reason}, 192 B): {explanation}"


def test_an_unknown_fallback_reason_is_shown_as_it_comes():
    report = Report(fallbacks=[Fallback("frobnicate", "m.py:2", "a reason nobody foresaw")])
    assert "  1 op ran eagerly (a reason nobody foresaw): frobnicate" in str(report).splitlines()


def test_installed_libraries_are_shown_from_their_import_path(tmp_path):
    source = f"{tmp_path}/venv/lib/python3.11/site-packages/transformers/activations.py:66"
    assert display_source(source, cwd=str(tmp_path)) == "transformers/activations.py:66"
    assert display_source(f"{tmp_path}/dist-packages/torch/nn/functional.py:9") == "torch/nn/functional.py:9"
