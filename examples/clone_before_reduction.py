"""Burn's fusion guide: cloning a tensor before a reduction while it is still used afterwards.

`a` and `b` stay alive across the reduction, so a lazy backend must write both to global memory;
the rewrite computes `a * b` first, so only `tmp` crosses the reduction.
Run it: `fusionrt run examples/clone_before_reduction.py`; lint it: `fusionlint check examples/`.
"""
import torch


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


if __name__ == "__main__":
    torch.manual_seed(0)
    x, y = torch.randn(512, 256), torch.randn(512, 256)
    out = block(x, y)
    print(f"out: {tuple(out.shape)} checksum {out.double().sum().item():.4f}")
