"""FL021 softmax-by-hand: a mixture-of-experts router's top-k weights, normalised by hand.

`torch.exp(topk_log_probs - torch.logsumexp(topk_log_probs, dim=-1, keepdim=True))` is a softmax
written out: a log-sum-exp, a subtraction and an exponential, three kernels in eager PyTorch,
each writing a tensor. `torch.softmax(topk_log_probs, dim=-1)` is one (eager: 4 -> 2 kernels
with the log-sigmoid before it, the eager count in fusionrt's reports). Standing alone, as
here, it pays under fusionrt too: `logsumexp` runs outside fusionrt's fused kernels, while
the softmax fuses with the log-sigmoid before it (3 -> 1 kernels and writes). Before a matmul it would not: the matmul's
prologue takes the written-out exponential. FL021 offers no fix (the fused op rounds
differently); `router_weights_softmax` is the rewrite it advises.

    python examples/fl021_softmax_by_hand.py
"""
import torch
import torch.nn.functional as F


def router_weights(topk_logits: torch.Tensor) -> torch.Tensor:
    topk_log_probs = F.logsigmoid(topk_logits)
    return torch.exp(topk_log_probs - torch.logsumexp(topk_log_probs, dim=-1, keepdim=True))


def router_weights_softmax(topk_logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(F.logsigmoid(topk_logits), dim=-1)


def _inputs():
    return (torch.randn(4096, 8),)


def example():
    return router_weights, _inputs()


def rewritten_example():
    return router_weights_softmax, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
