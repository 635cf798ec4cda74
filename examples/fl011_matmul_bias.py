"""FL011 matmul-bias: a language-model head tied to the embeddings, `hidden @ embeddings.t() + bias`.

Eager PyTorch runs the matmul as a kernel that writes the whole logits tensor (tokens by the
vocabulary), then the addition as a second kernel that reads it back and writes it again.
fusionlint's fix calls `F.linear(hidden, embeddings, bias)`, which adds the bias in the GEMM's
epilogue: one kernel and one write. It pays in eager only (the eager count in fusionrt's
reports, `report.eager_bytes_written`, goes from 1,536 to 1,024 KiB written, 3 -> 2 kernels):
fusionrt runs the addition as the matmul's epilogue either way, so its own counts do not move.

    python examples/fl011_matmul_bias.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl011_matmul_bias.py
"""
import torch
import torch.nn.functional as F


def lm_head(hidden: torch.Tensor, embeddings: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    logits = torch.matmul(hidden, embeddings.t()) + bias
    return F.log_softmax(logits, -1)


def example():
    batch, tokens, width, vocab = 4, 64, 128, 512
    hidden = torch.randn(batch, tokens, width)
    embeddings = torch.randn(vocab, width)
    bias = torch.randn(vocab)
    return lm_head, (hidden, embeddings, bias)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
