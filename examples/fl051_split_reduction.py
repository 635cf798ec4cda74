"""FL051 split-reduction: torchmetrics' signal-to-distortion ratio, each energy summed over time
and then over channels.

`(target**2).sum(dim=-1).sum(dim=-1)` runs two reductions: the first writes a tensor of per-channel
sums that the second reads back. `(target**2).sum(dim=(-2, -1))` reads the squares once and writes
the result alone: a kernel and an intermediate fewer, in eager and under fusionrt, where a
reduction ends its kernel. FL051's fix merges the two calls; it is unsafe only because one sum may
round differently from two.

    python examples/fl051_split_reduction.py
"""
import torch


def distortion_ratio(target: torch.Tensor, distortion: torch.Tensor) -> torch.Tensor:
    eps = 1e-8
    val = ((target**2).sum(dim=-1).sum(dim=-1) + eps) / ((distortion**2).sum(dim=-1).sum(dim=-1) + eps)
    return 10 * torch.log10(val)


def distortion_ratio_merged(target: torch.Tensor, distortion: torch.Tensor) -> torch.Tensor:
    eps = 1e-8
    val = ((target**2).sum((-2, -1)) + eps) / ((distortion**2).sum((-2, -1)) + eps)
    return 10 * torch.log10(val)


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(16, 4, 8000), randn(16, 4, 8000),)


def example():
    return distortion_ratio, _inputs()


def rewritten_example():
    return distortion_ratio_merged, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
