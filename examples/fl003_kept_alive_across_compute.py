"""FL003 kept-alive-across-compute: computed tensors held across a matmul for a later element-wise use.

A GRU-style update: `gate` and `candidate` are computed before the projection `context @ weight`
and combined only after it. A lazy backend ends the element-wise block at the matmul, and values
still needed afterwards must be written to global memory and read back. fusionlint's fix moves
`mixed = gate * candidate` above the matmul: two tensors die there and only `mixed` crosses it.

    python examples/fl003_kept_alive_across_compute.py
    fusionlint check --diff --unsafe-fixes examples/fl003_kept_alive_across_compute.py
"""
import torch


def gated_update(state: torch.Tensor, update: torch.Tensor, context: torch.Tensor,
                 weight: torch.Tensor) -> torch.Tensor:
    gate = torch.sigmoid(update)
    candidate = torch.tanh(state)
    attended = context @ weight
    mixed = gate * candidate
    return attended + mixed


def example():
    return gated_update, (torch.randn(512, 256), torch.randn(512, 256), torch.randn(512, 256), torch.randn(256, 256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
