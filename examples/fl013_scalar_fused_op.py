"""FL013 scalar-fused-op: an SGD step with momentum written with operators.

`buf * momentum + grad` and `p - lr * buf` are two kernels each in eager PyTorch: the scaled
tensor is written, then read back by the sum. fusionlint's fix calls `torch.add(grad, buf,
alpha=momentum)` and `torch.sub(p, buf, alpha=lr)`, one kernel each (4 -> 2 eager kernels,
1,024 -> 512 KiB written, the eager count in fusionrt's reports). fusionrt fuses the whole step
into one kernel either way, so its own counts do not move.

    python examples/fl013_scalar_fused_op.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl013_scalar_fused_op.py
"""
import torch


def sgd_momentum(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor, lr: float, momentum: float):
    buf = buf * momentum + grad
    return p - lr * buf, buf


def example():
    p, grad, buf = (torch.randn(256, 256) for _ in range(3))
    return sgd_momentum, (p, grad, buf, 0.01, 0.9)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
