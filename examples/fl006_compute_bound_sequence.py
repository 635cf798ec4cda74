"""FL006 compute-bound-sequence: element-wise work between two convolutions that could join either side.

A two-stream block (RGB and depth, one convolution each, summed). fusionrt runs a convolution on
torch's kernel with nothing fused around it but a ReLU of its result, so the `sigmoid` between
the two convolutions is a kernel of its own and its output is written, to be read back by the
sum. It does not feed the second convolution, so it can run after it, where it fuses into the sum. FL006 offers no fix
(whether moved work joins a block depends on shapes the linter cannot see); `two_stream_grouped`
is the rewrite it advises.

    python examples/fl006_compute_bound_sequence.py
"""
import torch
import torch.nn.functional as F


def two_stream(rgb: torch.Tensor, depth: torch.Tensor, k_rgb: torch.Tensor, k_depth: torch.Tensor) -> torch.Tensor:
    features = F.conv2d(rgb, k_rgb, padding=1)
    features = torch.sigmoid(features)
    depth_features = F.conv2d(depth, k_depth, padding=1)
    return features + depth_features


def two_stream_grouped(rgb: torch.Tensor, depth: torch.Tensor, k_rgb: torch.Tensor,
                       k_depth: torch.Tensor) -> torch.Tensor:
    features = F.conv2d(rgb, k_rgb, padding=1)
    depth_features = F.conv2d(depth, k_depth, padding=1)
    features = torch.sigmoid(features)
    return features + depth_features


def _inputs():
    return torch.randn(4, 16, 64, 64), torch.randn(4, 16, 64, 64), torch.randn(16, 16, 3, 3), torch.randn(16, 16, 3, 3)


def example():
    return two_stream, _inputs()


def rewritten_example():
    return two_stream_grouped, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
