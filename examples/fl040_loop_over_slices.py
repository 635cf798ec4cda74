"""FL040 loop-over-slices: torchmetrics' uniform filter, one convolution per channel in a comprehension.

`torch.cat([F.conv2d(inputs[:, c].unsqueeze(1), kernel) for c in range(C)], dim=1)` runs the same
one-channel convolution once per channel: a kernel and a write per channel, then a copy of every
result into the joined tensor. Folding the channels into the batch convolves every channel in one
kernel, written once. FL040 offers no fix (where the sliced dim goes depends on the op);
`uniform_filter_at_once` is the rewrite it advises.

    python examples/fl040_loop_over_slices.py
"""
import torch
import torch.nn.functional as F


def uniform_filter(inputs: torch.Tensor, kernel_weight: torch.Tensor) -> torch.Tensor:
    return torch.cat(
        [F.conv2d(inputs[:, channel].unsqueeze(1), kernel_weight) for channel in range(inputs.shape[1])], dim=1
    )


def uniform_filter_at_once(inputs: torch.Tensor, kernel_weight: torch.Tensor) -> torch.Tensor:
    b, c, h, w = inputs.shape
    out = F.conv2d(inputs.reshape(b * c, 1, h, w), kernel_weight)
    return out.reshape(b, c, *out.shape[-2:])


def _inputs():
    return torch.rand(8, 3, 128, 128), torch.full((1, 1, 11, 11), 1 / 121)


def example():
    return uniform_filter, _inputs()


def rewritten_example():
    return uniform_filter_at_once, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
