# FL016 (lerp-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def gru_update(h: torch.Tensor, z: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (1 - z) * h + z * q

# --- example 2
import torch


def ema(average: torch.Tensor, value: torch.Tensor, decay: float) -> torch.Tensor:
    return average + (1.0 - decay) * (value - average)

# --- example 3
import torch


def mask_tokens(x: torch.Tensor, token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = (mask > 0).unsqueeze(-1).type_as(x)
    return x * (1.0 - mask) + token.expand_as(x) * mask

# --- look-alike 1
import torch


def f(running: float, loss: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, v: torch.Tensor):
    running = 0.9 * running + (1 - 0.9) * loss.item()
    return running, x * (1 - w) + y * v

# --- look-alike 2
import torch


def g(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, w: torch.Tensor):
    return a + w * (b - c), (1 - w) * a * 2 + w * b
