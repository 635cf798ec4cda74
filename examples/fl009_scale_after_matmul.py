"""FL009 scale-after-matmul: attention scores scaled after `q @ k.transpose(-1, -2)`.

The score matrix (queries by keys, per head) is larger than `q` (queries by the head
dimension), and eager PyTorch runs `* scale` as a kernel that reads and writes the whole of it.
fusionlint's fix scales `q` before the matmul instead: the same scores (up to rounding) for a
kernel over the smaller tensor. It pays in eager only: fusionrt runs the scale inside the
matmul's kernel either way, so its own counts do not move, and the eager count in its reports
(`report.eager_bytes_written`) goes from 224 to 192 KiB written.

    python examples/fl009_scale_after_matmul.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl009_scale_after_matmul.py
"""
import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5
    scores = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(scores, -1) @ v


def example():
    heads, tokens, head_dim = 4, 64, 32
    q, k, v = (torch.randn(heads, tokens, head_dim) for _ in range(3))
    return attention, (q, k, v)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
