"""FL018 elementwise-by-hand: BLOOM's GELU written out, between the two matmuls of its MLP.

`x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))` is GELU's tanh
approximation: nine operators, so nine kernels in eager PyTorch, each writing a tensor the size
of the hidden layer. `F.gelu(x, approximate="tanh")` is one kernel (eager: 11 -> 3 kernels for
the MLP, 5,248 -> 1,152 KiB written, the eager count in fusionrt's reports). fusionrt fuses the formula into one kernel
either way, so its own counts do not move. FL018 offers no fix (the fused op rounds differently);
`bloom_mlp_gelu` is the rewrite it advises.

    python examples/fl018_elementwise_by_hand.py
"""
import torch
import torch.nn.functional as F


def bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def bloom_mlp(h: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    return bloom_gelu(h @ w_in) @ w_out


def bloom_mlp_gelu(h: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    return F.gelu(h @ w_in, approximate="tanh") @ w_out


def _inputs():
    return torch.randn(256, 128), torch.randn(128, 512) / 16, torch.randn(512, 128) / 16


def example():
    return bloom_mlp, _inputs()


def rewritten_example():
    return bloom_mlp_gelu, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
