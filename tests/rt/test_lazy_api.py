"""The public API: lazy, sync, measure, Report, compare."""
from __future__ import annotations

import json

import pytest
import torch

import fusionrt


def test_lazy_records_on_tensors_created_before_the_block():
    w = torch.randn(5, 5)
    x = torch.randn(3, 5)
    with fusionrt.lazy(policy="stream", executor="auto") as session:
        h = torch.relu(x @ w + 1)
    torch.testing.assert_close(h, torch.relu(x @ w + 1))
    report = session.report
    assert isinstance(report, fusionrt.Report)
    assert report.executor == "reference" and report.policy == "stream"
    assert [k.kind for k in report.kernel_records] == ["matmul"]  # relu(+1) fused on write
    assert json.loads(report.to_json())["totals"]["writes"] == report.writes == 1


def test_measure_returns_result_and_report_and_compare_diffs_two():
    x = torch.randn(4, 8)
    r1, before = fusionrt.measure(lambda t: (t * 2).clone().sum(-1) + (t * 2).sum(), x)
    r2, after = fusionrt.measure(lambda t: (t * 2).sum(-1) + (t * 2).sum(), x)
    torch.testing.assert_close(r1, r2)
    assert before.eager_kernels > after.eager_kernels
    assert "writes" in str(fusionrt.compare(before, after))


def test_sync_outside_a_block_is_a_no_op():
    fusionrt.sync()


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="policy"):
        fusionrt.lazy(policy="greedy")
    with pytest.raises(ValueError, match="executor"):
        fusionrt.lazy(executor="cuda")
