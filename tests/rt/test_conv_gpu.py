"""Convolution with its ReLU fused (cuDNN's convolution-bias-ReLU) on a CUDA GPU, run through the
device tool: against eager on odd shapes, strides, groups, no bias, both memory formats and
fp32/fp16/bf16, recorded and replayed."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fusionrt

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# cuDNN adds the bias to the float32 accumulator before rounding once; eager rounds the
# convolution, then rounds again after the bias.
TOL = {torch.float32: dict(atol=1e-2, rtol=1e-2), torch.float16: dict(atol=5e-2, rtol=1e-2),
       torch.bfloat16: dict(atol=2.5e-1, rtol=4e-2)}
CASES = [  # (x shape, w shape, stride, padding, groups, bias)
    ((2, 8, 13, 11), (16, 8, 3, 3), 1, 1, 1, True),
    ((1, 3, 7, 9), (5, 3, 1, 1), 2, 0, 1, False),
    ((4, 16, 20, 20), (16, 4, 3, 3), 1, 1, 4, True),
    ((2, 64, 28, 28), (128, 64, 3, 3), 2, 1, 1, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_conv_relu_matches_eager(case, channels_last, dtype):
    xs, ws, stride, padding, groups, with_bias = case
    gen = torch.Generator(device="cuda").manual_seed(len(xs) + ws[0])
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(xs, device="cuda", dtype=dtype, generator=gen).to(memory_format=fmt)
    w = torch.randn(ws, device="cuda", dtype=dtype, generator=gen).to(memory_format=fmt)
    b = torch.randn(ws[0], device="cuda", dtype=dtype, generator=gen) if with_bias else None

    def fn(x, w, b):
        return torch.relu(F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups))

    ref = fn(x, w, b)
    fused = fusionrt.jit(fn, executor="triton")
    for _ in range(2):  # recorded (bound plan), then replayed
        out = fused(x, w, b)
        torch.testing.assert_close(out, ref, **TOL[dtype])
        assert out.stride() == ref.stride()
    assert (fused.report.kernels, fused.report.writes) == (1, 1)
    assert fused.stats.replays == 1
