"""FL008 reduce-before-compute: a row sum computed after a matmul and added to its result.

`a.sum(-1, keepdim=True)` reads `a`, which exists before the matmul, but runs after it: the
matmul's result must then be written on its own, and read back by the kernel that adds the
sum. fusionlint's fix computes the sum first, so the addition runs as the matmul's epilogue:
one kernel and one write less, 512 KiB written instead of 1.5 MiB. It pays under a fusing
backend only: eager PyTorch runs the same four kernels in either order.

    python examples/fl008_reduce_before_compute.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl008_reduce_before_compute.py
"""
import torch


def centered_scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a = torch.tanh(x)
    h = a @ w
    return h + a.sum(-1, keepdim=True)


def example():
    return centered_scores, (torch.randn(512, 256), torch.randn(256, 256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
