"""Batch norm in eval mode fuses (element-wise over the running statistics); in training mode it
runs eagerly, running statistics included. Always eager's values."""
from __future__ import annotations

import copy

import pytest
import torch

import fusionrt

from .differential import assert_same


def _with_statistics(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Running statistics and affine parameters that are not the identity."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g))
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.randn(m.num_features, generator=g))
                m.bias.data.copy_(torch.randn(m.num_features, generator=g))
    return model


def _conv_block() -> torch.nn.Module:
    torch.manual_seed(0)
    return _with_statistics(torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 1), torch.nn.BatchNorm2d(8, affine=False))).eval()


@pytest.mark.parametrize("shape, norm", [
    ((6, 4), torch.nn.BatchNorm1d(4)), ((6, 4, 5), torch.nn.BatchNorm1d(4)),
    ((2, 4, 5, 3), torch.nn.BatchNorm2d(4)), ((2, 4, 3, 2, 5), torch.nn.BatchNorm3d(4)),
    ((2, 4, 5, 3), torch.nn.BatchNorm2d(4, affine=False)),
])
def test_eval_batch_norm_is_one_fused_kernel(shape, norm):
    norm = _with_statistics(norm).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        got, report = fusionrt.measure(lambda t: norm(t * 2) + 1, x)
        assert_same(got, norm(x * 2) + 1)
    assert report.kernels == 1 and not report.fallbacks
    assert (report.eager_kernels, report.eager_writes) == (3, 3)


@pytest.mark.parametrize("dtype, layout", [(torch.float32, torch.contiguous_format),
                                           (torch.float32, torch.channels_last),
                                           (torch.bfloat16, torch.contiguous_format)])
def test_a_conv_block_with_batch_norm_fuses_and_replays(dtype, layout):
    block = _conv_block().to(dtype=dtype, memory_format=layout)
    fast = fusionrt.jit(block)
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
            x = x.to(dtype=dtype, memory_format=layout)
            expected = block(x)
            got = fast(x)
            assert_same(got, expected, low_precision_inside=dtype == torch.bfloat16)
            assert got.stride() == expected.stride()
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording
    assert fast.report.kernels < fast.report.eager_kernels and not fast.report.fallbacks


def test_training_batch_norm_runs_eagerly_with_its_running_statistics():
    block = _conv_block().train()
    expected_block = copy.deepcopy(block)
    x = torch.randn(4, 3, 8, 8)
    with torch.no_grad():
        expected = expected_block(x)
        with fusionrt.lazy() as session:
            got = block(x)
    assert_same(got, expected)
    for mine, theirs in zip(block.buffers(), expected_block.buffers()):
        assert_same(mine, theirs, what="running statistics")
    assert {f.op for f in session.report.fallbacks} == {"native_batch_norm"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype, layout", [(torch.float32, torch.contiguous_format),
                                           (torch.bfloat16, torch.channels_last)])
def test_a_conv_block_with_batch_norm_on_the_gpu(dtype, layout):
    """cuDNN's batch norm op is the one the capture sees on CUDA."""
    block = _conv_block().to(device="cuda", dtype=dtype, memory_format=layout)
    fast = fusionrt.jit(block)
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
            x = x.to(device="cuda", dtype=dtype, memory_format=layout)
            assert_same(fast(x), block(x), low_precision_inside=dtype == torch.bfloat16)
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording
    assert not fast.report.fallbacks
