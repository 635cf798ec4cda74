"""FL002 clone-before-compute: a tensor cloned for a reduction while it is still used afterwards.

Burn's fusion guide: `a` and `b` feed both the reduction and the element-wise code after it, so a
lazy backend must write them to global memory before the reduction runs, and the `.clone()` keeps
the copy alive on top. fusionlint's fix computes `a * b` first and passes `a` itself, so only
`tmp` crosses the reduction: one write and 512 KiB less.

    python examples/fl002_clone_before_compute.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl002_clone_before_compute.py
"""
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


def example():
    return block, (torch.randn(512, 256), torch.randn(512, 256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
