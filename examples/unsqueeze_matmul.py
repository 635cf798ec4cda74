"""Burn's fusion guide: view ops inline in a compute-bound expression.

`t1.unsqueeze(0)` and `t3.unsqueeze(0)` sit inside the matmul expression; grouping the views
first keeps the element-wise epilogue (`+ t3`) a simple fused block.
Run it: `fusionrt run examples/unsqueeze_matmul.py`; lint it: `fusionlint check examples/`.
"""
import torch


def block(t1: torch.Tensor, t2: torch.Tensor, t3: torch.Tensor) -> torch.Tensor:
    t4 = t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)
    return t4


if __name__ == "__main__":
    torch.manual_seed(0)
    t1, t2, t3 = torch.randn(64, 64), torch.randn(4, 64, 64), torch.randn(64, 64)
    out = block(t1, t2, t3)
    print(f"out: {tuple(out.shape)} checksum {out.double().sum().item():.4f}")
