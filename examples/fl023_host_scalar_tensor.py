"""FL023 host-scalar-tensor: torchvision RAFT's correlation volume, divided by a square root taken on the device.

`corr / torch.sqrt(torch.tensor(num_channels))` builds a one-element tensor from a Python int,
launches a kernel to take its square root, and only then divides: the divisor is a number the
host already knows. `channels ** 0.5` (or `math.sqrt`) computes it on the host, so the division
takes a Python scalar: one kernel and one write fewer (fusionrt: 3 -> 2 kernels and writes).
FL023's fix is unsafe: host math is double precision (a square root rounds the same; other
functions may differ in the last place) and `math` raises where torch returns nan or -inf.

    python examples/fl023_host_scalar_tensor.py
"""
import torch


def correlation(fmap1: torch.Tensor, fmap2: torch.Tensor) -> torch.Tensor:
    batch, channels, n = fmap1.shape
    corr = fmap1.transpose(1, 2) @ fmap2
    return corr / torch.sqrt(torch.tensor(channels))


def correlation_host_scale(fmap1: torch.Tensor, fmap2: torch.Tensor) -> torch.Tensor:
    batch, channels, n = fmap1.shape
    corr = fmap1.transpose(1, 2) @ fmap2
    return corr / channels ** 0.5


def _inputs():
    return torch.randn(2, 256, 1024), torch.randn(2, 256, 1024)


def example():
    return correlation, _inputs()


def rewritten_example():
    return correlation_host_scale, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
