"""FL028 mask-multiply: a tensor multiplied by a boolean mask turned into numbers: `torch.where`
selects in one kernel.

The rule's first measured example, as written in fusionlint/rules/mask_multiply.py: `mask_padding`
holds the pattern and `mask_padding_rewritten` the rewrite the rule advises (it offers no fix); the
rewrite pays in eager only.

    python examples/fl028_mask_multiply.py
"""
import torch


def mask_padding(out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    keep = torch.logical_not(padding).unsqueeze(-1).float()
    return out * keep


def mask_padding_rewritten(out: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    return torch.where(padding.unsqueeze(-1), 0.0, out)


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(64, 256, 128), (randn(64).abs() * 128).long(),)


def example():
    return mask_padding, _inputs()


def rewritten_example():
    return mask_padding_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
