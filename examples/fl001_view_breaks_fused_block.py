"""FL001 view-breaks-fused-block: a view that merges dims of a value still being computed.

A lazy fusing backend reads a simple view (transpose, unsqueeze, a slice) of a pending value
through an index map, in the same kernel. A view that merges dims (`flatten`, `view`/`reshape` to
fewer dims) has no such map: the GELU output below is written (`view-break`) and read back by a
second kernel for `+ bias`. fusionlint's fix flattens the input instead, which is only metadata,
so GELU and the bias add run as one kernel.

    python examples/fl001_view_breaks_fused_block.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl001_view_breaks_fused_block.py
"""
import torch
import torch.nn.functional as F


def token_features(hidden: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GELU features of every token of a (batch, seq, dim) batch, as one (tokens, dim) matrix."""
    features = F.gelu(hidden).flatten(0, 1)
    return features + bias


def example():
    return token_features, (torch.randn(8, 128, 256), torch.randn(256))


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
