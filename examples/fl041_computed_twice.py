"""FL041 computed-twice: the same reduction or compute-bound op computed again from the same values:
keep the first result.

The rule's first measured example, as written in fusionlint/rules/computed_twice.py: `gated` holds
the pattern and `gated_rewritten` the rewrite the rule advises (it offers no fix); the rewrite pays
in eager only.

    python examples/fl041_computed_twice.py
"""
import torch


def gated(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, dim=(-2, -1), keepdim=True)
    h = torch.tanh(x) * peak
    scale = torch.amax(x, dim=(-2, -1), keepdim=True)
    return h + scale * y


def gated_rewritten(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    peak = torch.amax(x, dim=(-2, -1), keepdim=True)
    h = torch.tanh(x) * peak
    return h + peak * y


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(8, 16, 32, 32), randn(8, 16, 32, 32),)


def example():
    return gated, _inputs()


def rewritten_example():
    return gated_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
