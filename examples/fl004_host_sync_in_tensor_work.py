"""FL004 host-sync-in-tensor-work: `.item()` in a loop that does tensor work.

Each `.item()` hands a value to Python, so the lazy stream is flushed: the pending ops run at once
and every intermediate Python still holds is written, once per iteration. FL004 offers no fix
(only the author knows whether the value is needed earlier); `energy_on_device` below is the
rewrite the rule advises: accumulate on the device, read the value once after the loop.

    python examples/fl004_host_sync_in_tensor_work.py
"""
import torch


def energy(x: torch.Tensor, y: torch.Tensor, steps: int = 4) -> float:
    """Summed tanh energy of x * i + y over a few steps, logged as a Python float."""
    total = 0.0
    for i in range(steps):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total


def energy_on_device(x: torch.Tensor, y: torch.Tensor, steps: int = 4) -> float:
    total = torch.zeros((), dtype=torch.float64)
    for i in range(steps):
        h = torch.tanh(x * i + y)
        total = total + h.sum()
    return total.item()


def example():
    return energy, (torch.randn(512, 256), torch.randn(512, 256))


def rewritten_example():
    return energy_on_device, (torch.randn(512, 256), torch.randn(512, 256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
