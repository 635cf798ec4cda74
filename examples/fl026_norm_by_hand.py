"""FL026 norm-by-hand: DimeNet's interatomic distances (torch_geometric), a vector norm written out.

`(pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()` squares every coordinate difference into a tensor of
its own, sums it and takes the root: three kernels in eager PyTorch after the subtraction, the
first writing as much as the differences. `torch.linalg.vector_norm(pos[i] - pos[j], dim=-1)`
is one (eager: 6 -> 4 kernels with the two gathers and the subtraction). A fusing backend
(fusionrt, torch.compile) fuses the written-out norm into one kernel anyway: the rewrite pays in
eager only. FL026 offers no fix (`vector_norm` does not overflow where the squares do, and its
gradient at a zero vector differs); `edge_distances_norm` is the rewrite it advises.

    python examples/fl026_norm_by_hand.py
"""
import torch


def edge_distances(pos: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return (pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()


def edge_distances_norm(pos: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(pos[i] - pos[j], dim=-1)


def _inputs():
    generator = torch.Generator().manual_seed(0)
    pos = torch.randn(2048, 3, generator=generator)
    i, j = torch.randint(0, 2048, (2, 65536), generator=generator)
    return pos, i, j


def example():
    return edge_distances, _inputs()


def rewritten_example():
    return edge_distances_norm, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
