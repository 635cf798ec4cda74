"""A transformer encoder layer as transformers writes it: BART's.

`BartEncoderLayer.forward` and `eager_attention_forward` below are transformers 5.23's code
(`models/bart/modeling_bart.py`), trimmed to inference (no dropout, no cache, no kwargs). The
layer ends with an fp16 overflow guard that 9 model files of transformers' `models/[a-d]*` carry:
`if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():` clamps
only when something overflowed. Reading `.all()` on the host is a sync (FL004): the lazy stream
is flushed, the final layer norm's output is written, and the clamp runs as a kernel of its own.
`fusionlint check` flags the line here and in transformers' own `modeling_bart.py:304`.
`rewritten_example()` clamps unconditionally, as FL004 advises (the clamp leaves finite values
alone), so the clamp fuses into the layer norm's kernel.

    python examples/transformer_block.py
"""
import torch
from torch import nn


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


class BartAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        attn_output, attn_weights = eager_attention_forward(
            self, query_states, key_states, value_states, attention_mask, self.scaling
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


class BartEncoderLayer(nn.Module):
    def __init__(self, embed_dim: int = 256, num_heads: int = 4, ffn_dim: int = 1024):
        super().__init__()
        self.self_attn = BartAttention(embed_dim, num_heads)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.activation_fn = nn.GELU()
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)

        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = self.fc2(hidden_states)
        hidden_states = residual + hidden_states
        hidden_states = self.final_layer_norm(hidden_states)

        if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        return hidden_states


class ClampAlways(BartEncoderLayer):
    """The same layer without the host sync: the clamp changes nothing but overflowed values."""

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)

        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = self.fc2(hidden_states)
        hidden_states = residual + hidden_states
        hidden_states = self.final_layer_norm(hidden_states)

        if hidden_states.dtype == torch.float16:
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        return hidden_states


def _inputs(layer: nn.Module):
    """A half-precision layer (where the guard runs), a batch of 2 x 64 tokens and a padding mask."""
    batch, seq, dim = 2, 64, 256
    padding = torch.zeros(batch, 1, 1, seq)
    padding[1, ..., 48:] = float("-inf")  # the second sequence is 48 tokens long
    return layer.half().eval(), (torch.randn(batch, seq, dim).half(), padding.half())


def example():
    return _inputs(BartEncoderLayer())


def rewritten_example():
    return _inputs(ClampAlways())


if __name__ == "__main__":
    from showcase import show

    raise SystemExit(show(globals()))
