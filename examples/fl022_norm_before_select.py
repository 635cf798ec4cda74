"""FL022 norm-before-select: open_clip's text pooling, every token normalized, then one picked.

`x = self.ln_final(x)` over all 77 tokens of each caption, then `x[torch.arange(b), text.argmax(-1)]`
keeps the end-of-text token of each: the norm wrote 77 rows per caption to use one. A layer norm
works token by token, so picking first and normalizing the picked rows gives the same values
(fusionrt: 1.22 MiB -> 32 KiB written, the same three kernels: the argmax and the pick run
eagerly either way). FL022 offers no fix (which dim the pick runs along is not known statically);
`pool_then_norm` is the rewrite it advises.

    python examples/fl022_norm_before_select.py
"""
import torch
import torch.nn.functional as F


def norm_then_pool(x: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x = F.layer_norm(x, x.shape[-1:], w, b)
    return x[torch.arange(x.shape[0]), text.argmax(dim=-1)]


def pool_then_norm(x: torch.Tensor, text: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
    return F.layer_norm(pooled, x.shape[-1:], w, b)


def _inputs():
    return torch.randn(8, 77, 512), torch.randint(0, 49408, (8, 77)), torch.randn(512), torch.randn(512)


def example():
    return norm_then_pool, _inputs()


def rewritten_example():
    return pool_then_norm, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
