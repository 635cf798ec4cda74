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


def test_relu_after_a_convolution_runs_in_its_kernel_unless_the_convolution_is_read_elsewhere():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 8, 12, 12), torch.randn(8, 8, 3, 3), torch.randn(8)

    def conv_relu(x, w, b):
        return torch.relu(torch.nn.functional.conv2d(x, w, b, padding=1))

    def conv_relu_and_conv(x, w, b):
        c = torch.nn.functional.conv2d(x, w, b, padding=1)
        return torch.relu(c) + c

    for fn, kernels, writes in ((conv_relu, 1, 1), (conv_relu_and_conv, 2, 2)):
        out, report = fusionrt.measure(fn, x, w, b, executor="reference")
        torch.testing.assert_close(out, fn(x, w, b))
        assert (report.kernels, report.writes) == (kernels, writes), fn.__name__
    fused = fusionrt.jit(conv_relu, executor="reference")
    for _ in range(2):  # recorded, then replayed
        torch.testing.assert_close(fused(x, w, b), conv_relu(x, w, b))
    assert fused.stats.replays == 1
    assert fused.report.kernel_records[0].decision == "cuDNN's fused convolution-bias-ReLU kernel"


def test_a_channels_last_convolution_keeps_eager_layout():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 13, 11).to(memory_format=torch.channels_last)
    w = torch.randn(16, 8, 3, 3)
    for fn in (lambda x, w: torch.nn.functional.conv2d(x, w, padding=1),
               lambda x, w: torch.relu(torch.nn.functional.conv2d(x, w, padding=1))):
        out, _ = fusionrt.measure(fn, x, w, executor="reference")
        ref = fn(x, w)
        assert out.stride() == ref.stride() == (2288, 1, 176, 16)
        torch.testing.assert_close(out, ref)



@pytest.mark.parametrize("update", [
    lambda t, m, i: t.masked_fill(m, 0.0),
    lambda t, m, i: t.index_fill(0, i, 1.0),
    lambda t, m, i: t.index_add(0, i, t[:3]),
    lambda t, m, i: t.scatter(0, i[:, None].expand(3, 8), 1.0),
], ids=["masked_fill", "index_fill", "index_add", "scatter"])
def test_eager_counts_the_copy_an_out_of_place_update_makes(update):
    """Eager runs ``t.masked_fill(m, v)`` as ``t.clone().masked_fill_(m, v)`` (ATen copies first):
    a kernel and a full-size write for the copy, besides the multiply and the update."""
    x, mask, index = torch.randn(6, 8), torch.rand(6, 8) > 0.5, torch.tensor([0, 2, 5])
    result, report = fusionrt.measure(lambda t: update(t * 2, mask, index), x)
    torch.testing.assert_close(result, update(x * 2, mask, index))
    assert (report.eager_kernels, report.eager_writes) == (3, 3)
    assert report.eager_bytes_written == 3 * x.numel() * x.element_size()


def test_an_out_of_place_update_costs_eager_what_a_clone_updated_in_place_does():
    x, mask = torch.randn(6, 8), torch.rand(6, 8) > 0.5
    _, out_of_place = fusionrt.measure(lambda t: (t * 2).masked_fill(mask, 0.0), x)
    _, in_place = fusionrt.measure(lambda t: (t * 2).clone().masked_fill_(mask, 0.0), x)
    _, update_only = fusionrt.measure(lambda t: (t * 2).masked_fill_(mask, 0.0), x)
    assert out_of_place.eager_kernels == in_place.eager_kernels == update_only.eager_kernels + 1
