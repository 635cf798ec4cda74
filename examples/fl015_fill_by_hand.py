"""FL015 fill-by-hand: a padding column made as `torch.ones(...) * pad_id`, then concatenated.

A generation loop (open_clip's CoCa) appends a column of padding tokens to the sequences with
`torch.ones((n, 1), dtype=torch.long) * pad_id`: a tensor of ones is written, then read and
written again scaled. fusionlint's fix makes it with `torch.full((n, 1), pad_id,
dtype=torch.long)`, one kernel. fusionrt fuses the multiply into the factory's kernel where the
constant is used at once, but here it goes into `torch.cat`, a data-movement op, so the constant
is written: the fix saves a kernel and a write under fusionrt too.

    python examples/fl015_fill_by_hand.py     # findings, the fix, both fusionrt reports
    fusionlint check --diff --unsafe-fixes examples/fl015_fill_by_hand.py
"""
import torch


def append_padding(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    column = torch.ones((tokens.shape[0], 1), dtype=torch.long) * pad_id
    return torch.cat([tokens, column], dim=1)


def example():
    batch, length, vocab = 64, 16, 1000
    return append_padding, (torch.randint(0, vocab, (batch, length)), 3)


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
