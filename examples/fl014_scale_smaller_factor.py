"""FL014 scale-smaller-factor: an RMS norm that scales the normalized activation, then the gain.

`F.normalize(x, dim=-1) * self.scale * self.g` (x_transformers' `RMSNorm`) multiplies left to
right: `* self.scale` is a kernel that reads and writes the whole activation, then `* self.g`
another. fusionlint's fix scales the small gain instead, `* (self.g * self.scale)`: only the last
multiply touches the full size (the same 5 eager kernels, 790,528 -> 528,896 bytes written,
the eager count in fusionrt's reports). fusionrt fuses the multiplies into the norm's kernels
either way, so its own counts do not move.

    python examples/fl014_scale_smaller_factor.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl014_scale_smaller_factor.py
"""
import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = dim**0.5
        self.g = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * self.scale * self.g


def example():
    batch, tokens, dim = 8, 64, 128
    return RMSNorm(dim), (torch.randn(batch, tokens, dim),)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
