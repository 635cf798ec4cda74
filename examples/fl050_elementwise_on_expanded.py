"""FL050 elementwise-on-expanded: an element-wise op applied to an expanded view: apply it before
the expand.

The rule's first measured example, as written in fusionlint/rules/elementwise_on_expanded.py:
`fill` holds the pattern and `fill_rewritten` the rewrite the rule advises (it offers no fix);
the rewrite pays under fusionrt and in eager.

    python examples/fl050_elementwise_on_expanded.py
"""
import torch


def fill(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = lengths.unsqueeze(-1).expand(-1, -1, x.size(-1)).gt(0)
    return x.masked_fill(mask, -1e4)


def fill_rewritten(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = lengths.gt(0).unsqueeze(-1)
    return x.masked_fill(mask, -1e4)


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(4, 32, 64), randn(4, 32),)


def example():
    return fill, _inputs()


def rewritten_example():
    return fill_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
