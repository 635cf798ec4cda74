"""FL020 layer-norm-by-hand: Cohere's layer norm, written out with tensor ops.

`mean = x.mean(-1, keepdim=True)`, `variance = (x - mean).pow(2).mean(-1, keepdim=True)`,
`(x - mean) * torch.rsqrt(variance + eps)`: eight operators, so eight kernels in eager PyTorch,
each writing a tensor the size of the input or of its statistics, before the weight's product.
`F.layer_norm(x, x.shape[-1:], weight, None, eps)` is one kernel (eager: 9 -> 1 kernels, 2,568
-> 516 KiB written, the eager count in fusionrt's reports). fusionrt fuses the written-out norm
into one kernel either way, so its own counts do not move. FL020 offers no fix (the fused op
rounds differently); `cohere_layer_norm_fused` is the rewrite it advises.

    python examples/fl020_layer_norm_by_hand.py
"""
import torch
import torch.nn.functional as F


def cohere_layer_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    x = (x - mean) * torch.rsqrt(variance + 1e-5)
    return weight * x


def cohere_layer_norm_fused(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, None, 1e-5)


def _inputs():
    return torch.randn(4, 128, 256), torch.randn(256)


def example():
    return cohere_layer_norm, _inputs()


def rewritten_example():
    return cohere_layer_norm_fused, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
