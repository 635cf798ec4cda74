"""FL005 kept-alive-by-container: every step of a loop appended to a list "to plot it later".

Each Euler step is element-wise and would fuse into the next one, so a lazy backend writes only
the final state. `trajectory.append(h)` keeps every step alive, and each one must be written:
one full-size write per iteration. FL005 offers no fix (whether the steps are needed is the
author's call); `integrate_final` is the rewrite the rule advises: keep only what is used, here
the final state.

    python examples/fl005_kept_alive_by_container.py
"""
import torch


def integrate(x: torch.Tensor, velocity: torch.Tensor, trajectory: list, steps: int = 4) -> torch.Tensor:
    """Euler steps of dh/dt = tanh(h * v), every state recorded."""
    h = x
    for _ in range(steps):
        h = h + 0.25 * torch.tanh(h * velocity)
        trajectory.append(h)
    return h * 0.5


def integrate_final(x: torch.Tensor, velocity: torch.Tensor, trajectory: list, steps: int = 4) -> torch.Tensor:
    h = x
    for _ in range(steps):
        h = h + 0.25 * torch.tanh(h * velocity)
    trajectory.append(h)
    return h * 0.5


def example():
    return integrate, (torch.randn(512, 256), torch.randn(512, 256), [])


def rewritten_example():
    return integrate_final, (torch.randn(512, 256), torch.randn(512, 256), [])


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
