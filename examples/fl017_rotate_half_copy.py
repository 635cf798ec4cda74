"""FL017 rotate-half-copy: Llama's rotary embedding, `q * cos + rotate_half(q) * sin`.

`rotate_half` builds `torch.cat((-q2, q1), dim=-1)`, a rotated copy of the query (and of the
key): concatenation is data movement, so fusionrt writes the negated half and the copy, then
reads them back for the products and the sum. Rotating each half element-wise (`q1 * cos1 - q2 *
sin1`, `q2 * cos2 + q1 * sin2`) and concatenating the results once writes the halves of each
result and the result: 8 -> 6 writes, 6 -> 4 kernels, 3.5 -> 2 MiB written. FL017 offers no fix (the
split is in another function's body, and eager PyTorch launches more kernels for the halves);
`apply_rotary_pos_emb_halves` is the rewrite it advises.

    python examples/fl017_rotate_half_copy.py
"""
import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def rotate_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    cos1, cos2 = cos.chunk(2, dim=-1)
    sin1, sin2 = sin.chunk(2, dim=-1)
    return torch.cat((x1 * cos1 - x2 * sin1, x2 * cos2 + x1 * sin2), dim=-1)


def apply_rotary_pos_emb_halves(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return rotate_halves(q, cos, sin), rotate_halves(k, cos, sin)


def _inputs():
    batch, heads, tokens, head_dim = 2, 8, 128, 64
    return (torch.randn(batch, heads, tokens, head_dim), torch.randn(batch, heads, tokens, head_dim),
            torch.randn(batch, tokens, head_dim), torch.randn(batch, tokens, head_dim))


def example():
    return apply_rotary_pos_emb, _inputs()


def rewritten_example():
    return apply_rotary_pos_emb_halves, _inputs()


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
