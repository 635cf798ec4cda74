"""FL007 redundant-copy: a `.clone()` that nothing needs, next to a reduction that materializes it.

Neither `h` nor its copy `c` is written in place, and `c` never leaves the function, so the copy
protects nothing. It still costs: the row sum is a kernel of its own, and `c` and `h` are both
read after it, so a lazy backend writes the copy *and* its source (eager PyTorch runs one more
kernel for the clone). fusionlint's fix uses `h` itself: one write and 512 KiB less under
fusionrt, one kernel and one write less in eager.

    python examples/fl007_redundant_copy.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl007_redundant_copy.py
"""
import torch


def centered(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2 + bias)
    c = h.clone()
    m = c.sum(-1, keepdim=True)
    return (c - m) * h


def example():
    return centered, (torch.randn(512, 256), torch.randn(256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
