"""FL048 sum-started-from-zeros: a running sum started from a tensor of zeros: the first add only
copies its term; start from the first term.

The rule's first measured example, as written in fusionlint/rules/sum_started_from_zeros.py:
`summed` holds the pattern and `summed_rewritten` the rewrite the rule advises (it offers no fix);
the rewrite pays in eager only.

    python examples/fl048_sum_started_from_zeros.py
"""
import torch


def summed(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(xs[0])
    for x in xs:
        acc = acc + torch.tanh(x @ w)
    return acc


def summed_rewritten(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    acc = None
    for x in xs:
        term = torch.tanh(x @ w)
        acc = term if acc is None else acc + term
    return acc


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(8, 256, 64), randn(64, 64),)


def example():
    return summed, _inputs()


def rewritten_example():
    return summed_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
