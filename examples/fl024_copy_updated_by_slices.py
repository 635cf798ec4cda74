"""FL024 copy-updated-by-slices: segment_anything's prompt encoder, a copy updated coordinate by coordinate.

`coords = coords_input.clone()` then `coords[..., 0] = coords[..., 0] / width` and the same for
`y`: a copy kernel, then per coordinate a read of the slice, a division and a write back through
a strided view, each its own kernel in eager and each write a store into the copy. Dividing the
whole tensor by a two-element vector computes the same values in one element-wise kernel.
FL024 offers no fix (the vector depends on which slices are updated); `normalize_coords_at_once`
is the rewrite it advises.

    python examples/fl024_copy_updated_by_slices.py
"""
import torch


def normalize_coords(coords_input: torch.Tensor, width: int, height: int) -> torch.Tensor:
    coords = coords_input.clone()
    coords[:, :, 0] = coords[:, :, 0] / width
    coords[:, :, 1] = coords[:, :, 1] / height
    return coords


def normalize_coords_at_once(coords_input: torch.Tensor, width: int, height: int) -> torch.Tensor:
    return coords_input / torch.tensor([width, height], dtype=coords_input.dtype)


def _inputs():
    return torch.rand(64, 1024, 2) * 1024, 1024, 768


def example():
    return normalize_coords, _inputs()


def rewritten_example():
    return normalize_coords_at_once, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
