"""FL019 unit-offset-scale: Gemma's RMS norm, `output * (1.0 + self.weight)`.

Gemma stores its norm's gain as an offset from one and adds the one back at every call: `1.0 +
weight` is a kernel of its own (small: one value per channel), written before the product reads
it. `torch.addcmul(output, output, weight)` computes `output + output * weight` in one kernel
(eager: 7 -> 6 kernels for the norm, the eager count in fusionrt's reports). fusionrt fuses the
sum into the norm's kernel either way, so its own counts do not move. FL019 offers no fix (the
fused op rounds differently); `gemma_rms_norm_addcmul` is the rewrite it advises.

    python examples/fl019_unit_offset_scale.py
"""
import torch


def gemma_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    output = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return output * (1.0 + weight)


def gemma_rms_norm_addcmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    output = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return torch.addcmul(output, output, weight)


def _inputs():
    return torch.randn(4, 128, 256), torch.randn(256) / 10


def example():
    return gemma_rms_norm, _inputs()


def rewritten_example():
    return gemma_rms_norm_addcmul, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
