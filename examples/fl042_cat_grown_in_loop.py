"""FL042 cat-grown-in-loop: a tensor grown by `torch.cat` in every iteration of a loop: collect the
pieces in a list and join them once.

The rule's first measured example, as written in fusionlint/rules/cat_grown_in_loop.py:
`column_sums` holds the pattern and `column_sums_rewritten` the rewrite the rule advises (it offers
no fix); the rewrite pays under fusionrt and in eager.

    python examples/fl042_cat_grown_in_loop.py
"""
import torch


def column_sums(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x
    out = torch.tanh(h @ w)
    for _ in range(5):
        h = torch.tanh(h @ w)
        out = torch.cat((out, h.sum(-1, keepdim=True)), dim=-1)
    return out


def column_sums_rewritten(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x
    outs = [torch.tanh(h @ w)]
    for _ in range(5):
        h = torch.tanh(h @ w)
        outs.append(h.sum(-1, keepdim=True))
    return torch.cat(outs, dim=-1)


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(16, 64), randn(64, 64),)


def example():
    return column_sums, _inputs()


def rewritten_example():
    return column_sums_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
