"""FL025 min-max-one-output: descript-audio-codec's discriminator, each waveform scaled to its peak.

`y.abs().max(dim=-1, keepdim=True)[0]` asks `max` for the peaks and their int64 indices, from one
kernel that writes both, and keeps the peaks. `y.abs().amax(dim=-1, keepdim=True)` writes the
peaks alone. Under fusionrt the difference is larger: a reduction with two outputs is a kernel of
its own, where `amax` fuses with the `abs` before it and the scaling after it (4 -> 2 kernels).
FL025's fix renames the call; it is unsafe only because `amax` splits its gradient evenly between
tied maxima, where `max` sends it to one of them.

    python examples/fl025_min_max_one_output.py
"""
import torch


def scale_to_peak(y: torch.Tensor) -> torch.Tensor:
    return 0.8 * y / (y.abs().max(dim=-1, keepdim=True)[0] + 1e-9)


def scale_to_peak_amax(y: torch.Tensor) -> torch.Tensor:
    return 0.8 * y / (y.abs().amax(dim=-1, keepdim=True) + 1e-9)


def _inputs():
    return (torch.randn(16, 1, 44100),)


def example():
    return scale_to_peak, _inputs()


def rewritten_example():
    return scale_to_peak_amax, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
