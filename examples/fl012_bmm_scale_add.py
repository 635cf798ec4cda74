"""FL012 bmm-scale-add: residual attention scores (RealFormer), `torch.bmm(q, k^T) * scale + prev`.

Each layer adds its scaled scores to the previous layer's and hands the sum on, so the scores
are written whatever happens. Eager PyTorch writes them three times: the batched matmul, the
scaling and the addition are a kernel each. fusionlint's fix calls `torch.baddbmm(prev, q, k^T,
alpha=scale)`, which scales and adds in the GEMM's epilogue: one kernel and one write. It pays
in eager (the eager count in fusionrt's reports goes from 3 kernels and 384 KiB written to 1
and 128 KiB); fusionrt already runs the scale and the addition as the matmul's epilogue, so its
own counts do not move.

    python examples/fl012_bmm_scale_add.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl012_bmm_scale_add.py
"""
import torch


def residual_scores(q: torch.Tensor, k: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5
    return torch.bmm(q, k.transpose(1, 2)) * scale + prev


def example():
    heads, tokens, head_dim = 8, 64, 32
    q, k = (torch.randn(heads, tokens, head_dim) for _ in range(2))
    prev = torch.randn(heads, tokens, tokens)
    return residual_scores, (q, k, prev)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
