"""FL047 loop-invariant-work: tensor work in a loop whose operands the loop never changes: compute it
once before the loop.

The rule's first measured example, as written in fusionlint/rules/loop_invariant_work.py: `decode`
holds the pattern and `decode_rewritten` the rewrite the rule advises (it offers no fix); the
rewrite pays under fusionrt and in eager.

    python examples/fl047_loop_invariant_work.py
"""
import torch
import torch.nn.functional as F


def decode(x: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for i in range(4):
        x = x + F.linear(memory + pos, w[i]).mean(1, keepdim=True)
    return x


def decode_rewritten(x: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    keys = memory + pos
    for i in range(4):
        x = x + F.linear(keys, w[i]).mean(1, keepdim=True)
    return x


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(8, 1, 64), randn(8, 128, 64), randn(8, 128, 64), randn(4, 64, 64),)


def example():
    return decode, _inputs()


def rewritten_example():
    return decode_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
