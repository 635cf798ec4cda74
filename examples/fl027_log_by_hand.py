"""FL027 log-by-hand: Deformable DETR's `inverse_sigmoid` (transformers), a logit written out.

`x = x.clamp(min=0, max=1)`, `x1 = x.clamp(min=eps)`, `x2 = (1 - x).clamp(min=eps)`,
`torch.log(x1 / x2)` refines each box in logit space through six kernels in eager PyTorch, each
writing a tensor as large as the boxes. `torch.logit(x.clamp(min=0, max=1), eps)` is two (the
clamps of `logit` and of the written-out form agree on [0, 1] up to `eps` in the logarithm).
fusionrt fuses either form into one kernel (it records `logit` as its element-wise
decomposition): the rewrite pays in eager only. FL027 offers no fix; `inverse_sigmoid_logit` is the rewrite it advises.

    python examples/fl027_log_by_hand.py
"""
import torch


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x = x.clamp(min=0, max=1)
    x1 = x.clamp(min=eps)
    x2 = (1 - x).clamp(min=eps)
    return torch.log(x1 / x2)


def inverse_sigmoid_logit(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return torch.logit(x.clamp(min=0, max=1), eps)


def _inputs():
    generator = torch.Generator().manual_seed(0)
    return (torch.rand(8, 300, 4, 4, generator=generator),)


def example():
    return inverse_sigmoid, _inputs()


def rewritten_example():
    return inverse_sigmoid_logit, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
