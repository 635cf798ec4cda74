"""FL049 replicated-for-broadcast: a tensor replicated only to be read where broadcasting would do:
drop the copies.

The rule's first measured example, as written in fusionlint/rules/replicated_for_broadcast.py:
`attend` holds the pattern and `attend_rewritten` the rewrite the rule advises (it offers no fix);
the rewrite pays under fusionrt and in eager.

    python examples/fl049_replicated_for_broadcast.py
"""
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    k = k.repeat_interleave(4, dim=1)
    v = v.repeat_interleave(4, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2)


def attend_rewritten(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return y.transpose(1, 2)


def _inputs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    return (randn(2, 8, 16, 16), randn(2, 2, 16, 16), randn(2, 2, 16, 16),)


def example():
    return attend, _inputs()


def rewritten_example():
    return attend_rewritten, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
