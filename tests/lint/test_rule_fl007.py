"""FL007 beyond its own examples: which copies are needed (aliasing, escapes, unknown callees)."""
from __future__ import annotations

import pytest

from fusionlint.analysis import project
from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL007"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "a tensor stacked with itself only to be multiplied by masks": """\
import torch
from torch import nn


class Separator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Conv1d(1, 8, 4)
        self.masknet = nn.Conv1d(8, 16, 1)
        self.num_spks = 2

    def forward(self, mix: torch.Tensor) -> torch.Tensor:
        mix_w = self.encoder(mix)
        est_mask = self.masknet(mix_w)
        mix_w = torch.stack([mix_w] * self.num_spks)
        return mix_w * est_mask
""",
    "a clone stored into a slice of a buffer the function made (shift_tokens_right)": """\
import torch


def shift_tokens_right(input_ids: torch.Tensor, pad_token_id: int, start: int):
    shifted_input_ids = input_ids.new_zeros(input_ids.shape)
    shifted_input_ids[:, 1:] = input_ids[:, :-1].clone()
    shifted_input_ids[:, 0] = start
    shifted_input_ids.masked_fill_(shifted_input_ids == -100, pad_token_id)
    return shifted_input_ids
""",
    "a residual clone whose source only a zeros_like and a module read (a mixture of experts)": """\
import torch
from torch import nn


class MoE(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, 4)
        self.shared = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual_x = x.clone()
        router = self.gate(x)
        y = torch.zeros_like(x)
        y += router.softmax(-1)[..., :1] * x
        return y + self.shared(residual_x)
""",
    "a repeat of an unsqueezed mean named like a nested helper's own local": """\
import torch


def pool(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    L = x.shape[-1]

    def stats(x, m):
        mean = (m * x).sum(2)
        return mean, mean * 2

    mean, std = stats(x, m)
    mean = mean.unsqueeze(2).repeat(1, 1, L)
    return torch.cat([x, mean], dim=1)
""",
    "a clone of rows gathered by a slice of sorted indices": """\
import torch


def elites(pop: torch.Tensor, fitness: torch.Tensor, k: int) -> torch.Tensor:
    order = torch.argsort(fitness, descending=True)
    kept = pop[order[:k]].clone()
    return torch.cat([kept, pop * 2], dim=0)
""",
    "a U-Net's skip clone: its source read by the file's blocks in loops over ModuleLists, then rebound": """\
import torch
from torch import nn


def default(value, make):
    return value if value is not None else make()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor, t=None) -> torch.Tensor:
        return self.proj(x) * 2


class Unet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.init_conv = nn.Conv2d(3, 8, 3, padding=1)
        self.downs = nn.ModuleList([nn.ModuleList([Block(), Block()]) for _ in range(2)])
        self.ups = nn.ModuleList([nn.ModuleList([Block(), Block()]) for _ in range(2)])
        self.final = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond=None) -> torch.Tensor:
        cond = default(cond, lambda: torch.zeros_like(x))
        x = self.init_conv(x + cond)
        r = x.clone()
        h = []
        for block1, block2 in self.downs:
            x = block1(x, t)
            h.append(x)
            x = block2(x, t)
        for block1, block2 in self.ups:
            x = block1(x + h.pop(), t)
        x = torch.cat((x, r), dim=1)
        return self.final(x)
""",
    "a residual clone read by a same-file module and its source by one whose class the file builds": """\
import torch
from torch import nn
from somewhere import Conv


class MPAdd(nn.Module):
    def forward(self, x: torch.Tensor, res: torch.Tensor) -> torch.Tensor:
        return (x * 0.7 + res * 0.3) / 0.76


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block1 = Conv(8, 8)
        self.res_mp_add = MPAdd()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        res = x.clone()
        x = self.block1(x)
        return self.res_mp_add(x, res)
""",
    "clone().detach() is one copy, reported at detach": """\
import torch

def f(x: torch.Tensor):
    h = torch.tanh(x)
    c = h.clone().detach()
    return c * h
""",
    "torch.clone of a fresh value": """\
import torch

def f(x: torch.Tensor):
    c = torch.clone(x * 2)
    return c.sum(-1) + 1
""",
    "a copy used inline by arithmetic": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)
    return torch.sigmoid(h.clone()) * h
""",
    "a copy read through a view and an index": """\
import torch

def f(x: torch.Tensor, i: int):
    h = torch.relu(x)
    c = h.clone()
    return c.T @ h + c[i]
""",
    "contiguous of an expanded view before arithmetic": """\
import torch

def f(ids: torch.Tensor, shape: tuple, past: int):
    return ids.unsqueeze(0).expand(shape).contiguous() + past
""",
    "contiguous of a permuted view before a matmul": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    return x.permute(0, 2, 1).contiguous() @ w
""",
    "a returned copy of an unpadded slice, through a name rebound on the way": """\
import torch

def unpartition(windows: torch.Tensor, h: int, w: int):
    x = windows.view(2, 4, 4, -1)
    x = x.permute(0, 2, 1, 3).contiguous().view(2, 4, 4, -1)
    x = x[:, :h, :w, :].contiguous()
    return x
""",
    "a returned copy of a gathered bias, viewed on the way out": """\
import torch

def bias(table: torch.Tensor, index: torch.Tensor):
    b = table[index].view(4, 4, -1)
    return b.permute(2, 0, 1).contiguous().unsqueeze(0)
""",
    "a copy only concatenated and transformed before the name is rebound": """\
import torch

def kernel(n: int):
    x = torch.eye(n)
    v = x.clone().contiguous().view(-1, n)
    v = torch.cat([v, v.flip([1])], dim=-1)
    v = torch.fft.fft(v, dim=-1)
    v[:, 0] = 0
    return v
""",
    "a name rebound to the clone of the value it alone holds, in an if body": """\
import torch
import torch.nn.functional as F

def gate_of(sim: torch.Tensor, flag: bool):
    gate = F.relu(sim)
    if flag:
        gate = gate.clone()
        gate[..., 0] = 0.0
    return gate * sim
""",
    "a copy whose source an unknown helper read before the copy": """\
import torch

def unpad(x: torch.Tensor, w: torch.Tensor, n: int):
    h = torch.tanh(x @ w)
    mask = make_mask(h, n)
    h = h + mask
    return h[:, :n, 1:].contiguous()
""",
    "a copy whose source is written in place only before it": """\
import torch

def unpad(x: torch.Tensor, w: torch.Tensor, n: int):
    h = torch.tanh(x @ w)
    h[:, 0] = 0.0
    c = h.clone()
    return (c * 2).sum(-1) + h.sum(-1)
""",
    "a copy only read by an element-wise torch.nn module (nn.ReLU)": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        h = torch.tanh(x * 2)
        y = h.permute(0, 2, 1).contiguous()
        return self.act(y)
""",
    "contiguous of a name a statement above made a transposed view (an in-place add between)": """\
import torch


def heads(x: torch.Tensor, w: torch.Tensor):
    h = torch.tanh(x @ w)
    h = h.transpose(1, 2)
    h += 1.0
    h = h.contiguous()
    return torch.relu(h) @ w
""",
    "a copy only read by nn.Linear through nn.Dropout": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = torch.tanh(x * 2)
        y = h.clone()
        z = self.fc(self.drop(y))
        return z + h
""",
    "squeezed pieces of a split along the last dim, handed out in an output record": """\
import torch
from torch.nn import CrossEntropyLoss


def qa_head(h: torch.Tensor, w: torch.Tensor, start_positions: torch.Tensor | None):
    logits = h @ w
    start_logits, end_logits = logits.split(1, dim=-1)
    start_logits = start_logits.squeeze(-1).contiguous()
    end_logits = end_logits.squeeze(-1).contiguous()
    total_loss = None
    if start_positions is not None:
        ignored_index = start_logits.size(1)
        loss_fct = CrossEntropyLoss(ignore_index=ignored_index)
        total_loss = loss_fct(start_logits, start_positions)
    return QuestionAnsweringOutput(loss=total_loss, start_logits=start_logits, end_logits=end_logits)
""",
    "a clone read by a same-file method, its source written in place after its last read": """\
import torch
from torch import nn


class AltUp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.type_as(self.scale) * self.scale).type_as(x)

    def scale_output(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)

    def keep(self, x: torch.Tensor) -> torch.Tensor:
        self.kept = x
        return x * 2


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.altup = AltUp()
        self.gate = nn.Linear(8, 8)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        corrected = self.altup(h) * 2
        first = corrected[0].clone()
        first = self.altup.scale_output(first)
        first = self.gate(first)
        corrected[1:] += first
        return corrected
""",
    "a squeezed piece of a split handed out in the tuple form of a record of outputs": """\
import torch


def qa_head(h: torch.Tensor, w: torch.Tensor, outputs: tuple, loss: torch.Tensor | None):
    start_logits, end_logits = (h @ w).split(1, dim=-1)
    start_logits = start_logits.squeeze(-1).contiguous()
    output = (start_logits, end_logits) + outputs[1:]
    return ((loss,) + output) if loss is not None else output
""",
    "a squeezed piece of the logits a same-file head made, handed out in a record": """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(8, 2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.drop(h)
        h = self.out(h)
        return h


class QA(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, h: torch.Tensor):
        start, end = self.head(h).split(1, dim=-1)
        start = start.squeeze(-1).contiguous()
        return Output(start_logits=start, end_logits=end)
""",
    "clones of values no name holds, written in place and handed out": """\
import torch


class Block(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor, log):
        y = torch.relu(x @ w).clone()
        y[:, 0] = 0
        z = (x * 2)[0].clone()
        z.add_(1)
        self.kept = torch.clone(x - 1)
        log(x.float().sigmoid().detach().clone())
        return y, z
""",
    "contiguous of a conv output no name holds, filled in place and read by ops that take any layout": """\
import torch
from torch import nn


class ConvLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h: torch.Tensor, residual: torch.Tensor, mask: torch.Tensor):
        out = self.conv(h.permute(0, 2, 1).contiguous()).permute(0, 2, 1).contiguous()
        out.masked_fill_((1 - mask).bool().unsqueeze(-1).expand(out.size()), 0)
        out[:, 0] = 0.0
        out = torch.tanh(self.dropout(out))
        return residual + out
""",
    "a name rebound to a clone of a view of the value it alone holds, then written": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    g = x @ w
    g = g.t().clone()
    g[0] = 0
    return g
""",
    "a returned unpadded slice, copied in an if under a name rebound before": """\
import torch


def window_unpartition(windows: torch.Tensor, window_size: int, hp: int, wp: int, h: int, w: int):
    b = windows.shape[0] // (hp * wp // window_size // window_size)
    x = windows.view(b, hp // window_size, wp // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, hp, wp, -1)
    if hp > h or wp > w:
        x = x[:, :h, :w, :].contiguous()
    return x
""",
    "a clone of a cache's state, dead before the cache is updated": """\
import torch


def f(input_ids: torch.Tensor, past_key_values, layer_idx: int):
    cached_ctx = past_key_values.get_conv_state(layer_idx)
    previous_context = cached_ctx.clone()
    out = torch.cat([previous_context, input_ids], dim=-1)
    past_key_values.update_conv_state(input_ids, layer_idx)
    return out
""",
    "contiguous of a transposed view, cast or detached on the way": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    a = h.t().detach().contiguous() + 1
    return (h.transpose(0, 1).float().contiguous() * 2).sum(-1) + a
""",
    "contiguous of channels-last tokens permuted channels-first, read by convolutions": """\
import torch
import torch.nn.functional as F
from torch import nn
from ultra.layers import Conv, Convolution, zero_module


class Area(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.pe = Conv(dim, dim, 7, 1, 3, g=dim, act=False)
        self.proj_out = zero_module(Convolution(spatial_dims=2, in_channels=dim, out_channels=dim))
        self.conv = nn.Conv2d(dim, dim, 1)

    def forward(self, x, v, w, b: int, h: int, c: int):
        v = v.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        x = x.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        y = self.proj_out(self.conv(x) + self.pe(v))
        z = torch.tanh(y).permute(0, 3, 1, 2).contiguous()
        return F.conv2d(z, w)
""",
    "a clone of a module's index buffer, read as an index in its own statement": """\
import torch
from torch import nn


class WindowAttention(nn.Module):
    def __init__(self, heads: int, n: int):
        super().__init__()
        self.bias_table = nn.Parameter(torch.zeros((2 * n - 1) ** 2, heads))
        self.register_buffer("relative_position_index", torch.arange(n * n).view(n, n))

    def forward(self, attn: torch.Tensor, n: int):
        bias = self.bias_table[self.relative_position_index.clone()[:n, :n].reshape(-1)].reshape(n, n, -1)
        return attn + bias.permute(2, 0, 1).unsqueeze(0)
""",
    "stacks only reduced over the dimension they make": """\
import torch
import torch.nn.functional as F


def fuse(xs: list[torch.Tensor], a: torch.Tensor, b: torch.Tensor):
    res = [F.interpolate(x, size=xs[-1].shape[2:]) for x in xs[:-1]]
    s = torch.sum(torch.stack(res + xs[-1:]), dim=0)
    m = torch.stack([a, b], dim=-1).mean(-1)
    return s + torch.stack((a * 2, b), 1).sum(dim=1) + m
""",
    "contiguous of a conv output filled in place, read through dropout by a registry activation": """\
import torch
from torch import nn
from transformers.activations import ACT2FN


class ConvLayer(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 3, padding=1)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h: torch.Tensor, residual: torch.Tensor, mask: torch.Tensor):
        out = self.conv(h.permute(0, 2, 1)).permute(0, 2, 1).contiguous()
        out.masked_fill_(mask.unsqueeze(-1).expand(out.size()), 0)
        out = ACT2FN["gelu"](self.dropout(out))
        return residual + out
""",
    "a returned copy of the negated result of an unknown call": """\
import torch


def similarity(q: torch.Tensor, k: torch.Tensor):
    sim = -distance(q, k)
    return sim.t().contiguous()
""",
    "contiguous of permuted views concatenated, padded or read by a linear layer": """\
import torch
import torch.nn.functional as F
from torch import nn


class Mix(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, probs: torch.Tensor, v: torch.Tensor, conv_out: torch.Tensor, c: torch.Tensor):
        context = torch.matmul(probs, v)
        context = context.permute(0, 2, 1, 3).contiguous()
        context = torch.cat([context, conv_out], 2)
        y = c * v
        y = y.transpose(-1, -2).contiguous()
        return self.out_proj(y), F.pad(v.transpose(1, 2).contiguous(), (1, 1)), context
""",
    "channels-last tokens permuted back for the output projection, the input kept as the residual": """\
import torch
from torch import nn


class SpatialTransformer(nn.Module):
    def __init__(self, inner_dim: int, channels: int, use_linear_projection: bool):
        super().__init__()
        self.use_linear_projection = use_linear_projection
        self.norm = nn.GroupNorm(32, channels)
        if use_linear_projection:
            self.proj_in = nn.Linear(channels, inner_dim)
            self.proj_out = nn.Linear(inner_dim, channels)
        else:
            self.proj_in = nn.Conv2d(channels, inner_dim, 1)
            self.proj_out = nn.Conv2d(inner_dim, channels, 1)
        self.blocks = nn.ModuleList([Block(inner_dim) for _ in range(2)])

    def forward(self, hidden_states: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = hidden_states.shape
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        if not self.use_linear_projection:
            hidden_states = self.proj_in(hidden_states)
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
        else:
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
            hidden_states = self.proj_in(hidden_states)
        for block in self.blocks:
            hidden_states = block(hidden_states, context=context)
        if not self.use_linear_projection:
            hidden_states = hidden_states.reshape(batch, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
            hidden_states = self.proj_out(hidden_states)
        else:
            hidden_states = self.proj_out(hidden_states)
            hidden_states = hidden_states.reshape(batch, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
        return hidden_states + residual
""",
    "repeats of unsqueezed or None-indexed dimensions, only read": """\
import torch
from torch import nn


def masked(h: torch.Tensor, w: torch.Tensor, mask: torch.Tensor):
    hidden = h @ w
    m = mask.unsqueeze(-1).repeat(1, 1, hidden.shape[2])
    hidden[~m] = 0
    return hidden


def grid(x: torch.Tensor, n: int, lengths: torch.Tensor, boxes: torch.Tensor, idx: torch.Tensor):
    pos = torch.cat([x.unsqueeze(0).repeat(n, 1, 1), x[:, None].repeat((1, n, 1))], dim=-1)
    valid = torch.arange(n)[None].repeat(lengths.shape[0], 1) < lengths[:, None]
    return pos, valid, torch.gather(boxes, 1, idx.unsqueeze(-1).repeat(1, 1, 4))


class Queries(nn.Module):
    def __init__(self, n: int, d: int):
        super().__init__()
        self.reference_points = nn.Embedding(n, d)

    def forward(self, batch: int):
        return self.reference_points.weight.unsqueeze(0).repeat(batch, 1, 1).sigmoid()
""",
    "contiguous of tokens swapped channels-first for a 1-d convolution": """\
import torch
import torch.nn.functional as F
from torch import nn


class ConvModule(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.depthwise = nn.Conv1d(dim, dim, 3, padding=1, groups=dim)

    def forward(self, x: torch.Tensor, w: torch.Tensor):
        h = self.depthwise(x.transpose(1, 2).contiguous())
        return F.conv1d(torch.tanh(x).permute(0, 2, 1).contiguous(), w) + h
""",
    "copies bound to annotated names": """\
import torch
import torch.nn.functional as F


def typed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h: torch.Tensor = torch.tanh(x @ w)
    c: torch.Tensor = h.clone()
    y: torch.Tensor = c.sum(-1, keepdim=True)
    return (c - y) * h


def typed_conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x: torch.Tensor = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
    return F.conv2d(x, w)
""",
    "copies in branches for 2-d and 3-d data, each read by the convolution after both": """\
import torch
from torch import nn


class SpatialTransformer(nn.Module):
    def __init__(self, dims: int, inner: int, channels: int):
        super().__init__()
        self.spatial_dims = dims
        self.proj_out = nn.Conv2d(inner, channels, 1) if dims == 2 else nn.Conv3d(inner, channels, 1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor, b: int, h: int, w: int, d: int, c: int):
        x = torch.tanh(x)
        if self.spatial_dims == 2:
            x = x.reshape(b, h, w, c).permute(0, 3, 1, 2).contiguous()
        if self.spatial_dims == 3:
            x = x.reshape(b, h, w, d, c).permute(0, 4, 1, 2, 3).contiguous()
        x = self.proj_out(x)
        return x + residual
""",
    "repeats of the dimensions of size 1 a view names": """\
import torch


def relative(q_ids: torch.Tensor, k_ids: torch.Tensor, query_size: int):
    return q_ids[:, None] - k_ids.view(1, -1).repeat(query_size, 1)


def rope_positions(position_ids: torch.Tensor, delta: torch.Tensor, batch_size: int):
    position_ids = position_ids.view(1, batch_size, -1).repeat(3, 1, 1)
    position_ids = position_ids + delta
    return position_ids


def not_of_size_one(x: torch.Tensor, n: int, rows: int, columns: int):
    ids = torch.arange(rows).reshape(rows, 1).repeat(1, columns).reshape(rows * columns, 1)
    return x.view(-1, 1, 4).repeat(1, n, 2) * 2, ids
""",
    "a module's tensor cloned and repeated under names while only known tensor ops run": """\
import torch
from torch import nn


class Tokens(nn.Module):
    def __init__(self, n: int, dim: int):
        super().__init__()
        self.register_buffer("index", torch.arange(n))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.bias_k = nn.Parameter(torch.Tensor(1, 1, dim))
        self.data = nn.Parameter(torch.Tensor([1, 1]))

    def forward(self, x: torch.Tensor):
        kept = self.index.clone()
        cls_tokens = self.cls_token.repeat(x.shape[0], 1, 1)
        k = torch.cat([x, self.bias_k.repeat(1, x.shape[1], 1), self.data.repeat(1, 4)])
        return torch.cat([cls_tokens, x[:, kept]], dim=1), k
""",
    "a returned copy of a permuted base-class output, split by a view": """\
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + x


class Tokens(Encoder):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, h, w = x.shape[1:]
        x = super().forward(x.flatten(2).permute(0, 2, 1))
        return x.permute(0, 2, 1).view([-1, c, h, w]).contiguous()
""",
    "a clone whose source a module built only when asked and a same-file function only read": """\
import torch
import torch.nn as nn


def softclamp(t: torch.Tensor, value: float) -> torch.Tensor:
    return (t / value).tanh() * value


class Attend(nn.Module):
    def __init__(self, heads: int, talking: bool) -> None:
        super().__init__()
        self.talking = nn.Conv2d(heads, heads, 1) if talking else None

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        sim = q @ k.transpose(-1, -2)
        before = sim.clone()
        if self.talking is not None:
            sim = sim + self.talking(sim)
        sim = softclamp(sim, 50.0)
        return sim.softmax(-1) * before
""",
    "a transposed copy read by a ModuleList's blocks, checkpointed or called with keywords": """\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x) * mask


class Stack(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.checkpointing = False

    def prune(self, n: int) -> None:
        self.blocks = self.blocks[:n]

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x.transpose(0, 1).contiguous()
        for block in self.blocks:
            if self.checkpointing:
                x = checkpoint(block, x, mask, use_reentrant=False)
            else:
                x = block(x, mask=mask)
        return x.transpose(0, 1)
""",
    "a transposed copy passed by keyword to a listed module that transposes it back in a branch": """\
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, hidden: torch.Tensor, channels_first: bool = False) -> torch.Tensor:
        if channels_first:
            hidden = hidden.transpose(1, 2)
        out = self.fc(hidden)
        return out + hidden


class Layer(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n):
            layer = Mixer(d)
            self.layers.append(layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.layers[0](hidden=x.transpose(1, 2).contiguous(), channels_first=True)
        return h
""",
    "a sliced copy read through a same-file DropPath that hands it back when not training": """\
import torch
import torch.nn as nn


def drop_path(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if p == 0.0 or not training:
        return x
    keep = torch.rand(x.shape[0], 1, 1, device=x.device) >= p
    return x * keep / (1 - p)


class DropPath(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.p, self.training)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop_path = DropPath(0.1)

    def forward(self, x: torch.Tensor, shortcut: torch.Tensor) -> torch.Tensor:
        x = x[:, :7].contiguous()
        return shortcut + self.drop_path(x)
""",
    "a returned unpadded slice of a parameter normalised first, its other name rebound; of a ConvTranspose1d's output": """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.ConvTranspose1d(d, d, 4, stride=2)

    def forward(self, x: torch.Tensor, pad: int, shift: bool) -> torch.Tensor:
        x = self.norm(x)
        if pad > 0:
            x = F.pad(x, (0, 0, 0, pad))
        if shift:
            shifted = torch.roll(x, 1, dims=1)
        else:
            shifted = x
        shifted = torch.tanh(shifted * 2)
        x = shifted
        if pad > 0:
            x = x[:, :-pad, :].contiguous()
        return x

    def upsample(self, h: torch.Tensor) -> torch.Tensor:
        h = self.up(h)
        h = h[..., 1:-1]
        return h.contiguous()
""",
}
EXPECTED = {
    "a tensor stacked with itself only to be multiplied by masks": [(15, 17)],
    "a clone stored into a slice of a buffer the function made (shift_tokens_right)": [(6, 32)],
    "a residual clone whose source only a zeros_like and a module read (a mixture of experts)": [(12, 22)],
    "a repeat of an unsqueezed mean named like a nested helper's own local": [(12, 12)],
    "a clone of rows gathered by a slice of sorted indices": [(6, 12)],
    "a U-Net's skip clone: its source read by the file's blocks in loops over ModuleLists, then rebound": [(29, 13)],
    "a residual clone read by a same-file module and its source by one whose class the file builds": [(19, 15)],
    "a returned unpadded slice of a parameter normalised first, its other name rebound; of a ConvTranspose1d's output": [(23, 17), (29, 16)],
    "a sliced copy read through a same-file DropPath that hands it back when not training": [(28, 13)],
    "a clone whose source a module built only when asked and a same-file function only read": [(16, 18)],
    "a transposed copy read by a ModuleList's blocks, checkpointed or called with keywords": [(25, 13)],
    "a transposed copy passed by keyword to a listed module that transposes it back in a branch": [(26, 35)],
    "repeats of the dimensions of size 1 a view names": [(5, 29), (9, 20)],
    "copies in branches for 2-d and 3-d data, each read by the convolution after both": [(14, 17), (16, 17)],
    "copies bound to annotated names": [(7, 23), (13, 23)],
    "contiguous of tokens swapped channels-first for a 1-d convolution": [(12, 28), (13, 25)],
    "repeats of unsqueezed or None-indexed dimensions, only read": [
        (7, 9), (13, 22), (13, 54), (14, 13), (15, 47), (24, 16),
    ],
    "channels-last tokens permuted back for the output projection, the input kept as the residual": [
        (33, 29), (37, 29),
    ],
    "contiguous of permuted views concatenated, padded or read by a linear layer": [(13, 19), (16, 13), (17, 40)],
    "contiguous of a conv output filled in place, read through dropout by a registry activation": [(13, 15)],
    "a returned copy of the negated result of an unknown call": [(6, 12)],
    "contiguous of channels-last tokens permuted channels-first, read by convolutions": [(15, 13), (16, 13), (18, 13)],
    "a clone of a module's index buffer, read as an index in its own statement": [(12, 32)],
    "a returned copy of a permuted base-class output, split by a view": [(18, 16)],
    "a module's tensor cloned and repeated under names while only known tensor ops run": [
        (14, 16), (15, 22), (16, 27),
    ],
    "stacks only reduced over the dimension they make": [(7, 19), (8, 9), (9, 16)],
    "contiguous of a transposed view, cast or detached on the way": [(6, 9), (7, 13)],
    "a clone of a cache's state, dead before the cache is updated": [(6, 24)],
    "a returned unpadded slice, copied in an if under a name rebound before": [(9, 13)],
    "a name rebound to a clone of a view of the value it alone holds, then written": [(6, 9)],
    "clones of values no name holds, written in place and handed out": [(6, 13), (8, 13), (10, 21), (11, 13)],
    "contiguous of a conv output no name holds, filled in place and read by ops that take any layout": [
        (12, 15), (12, 25),
    ],
    "a squeezed piece of the logits a same-file head made, handed out in a record": [(24, 17)],
    "a squeezed piece of a split handed out in the tuple form of a record of outputs": [(6, 20)],
    "a clone read by a same-file method, its source written in place after its last read": [(25, 17)],
    "squeezed pieces of a split along the last dim, handed out in an output record": [(8, 20), (9, 18)],
    "a copy only read by nn.Linear through nn.Dropout": [(13, 13)],
    "contiguous of a name a statement above made a transposed view (an in-place add between)": [(8, 9)],
    "a copy only read by an element-wise torch.nn module (nn.ReLU)": [(12, 13)],
    "a copy whose source an unknown helper read before the copy": [(7, 12)],
    "a copy whose source is written in place only before it": [(6, 9)],
    "a returned copy of an unpadded slice, through a name rebound on the way": [(6, 9)],
    "a returned copy of a gathered bias, viewed on the way out": [(5, 12)],
    "a copy only concatenated and transformed before the name is rebound": [(5, 9)],
    "a name rebound to the clone of the value it alone holds, in an if body": [(7, 16)],
    "clone().detach() is one copy, reported at detach": [(5, 9)],
    "torch.clone of a fresh value": [(4, 9)],
    "a copy used inline by arithmetic": [(5, 26)],
    "a copy read through a view and an index": [(5, 9)],
    "contiguous of a permuted view before a matmul": [(4, 12)],
    "contiguous of an expanded view before arithmetic": [(4, 12)],
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    assert positions(FLAGGED[name]) == EXPECTED[name]


SILENT = {
    "a tensor stacked with itself and written, or stacked with another": """\
import torch


def written(x: torch.Tensor, n: int) -> torch.Tensor:
    y = torch.stack([x] * n)
    y[0] += 1
    return y


def two(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([x, x * 2]) * 3
""",
    "a clone stored into a tensor it may overlap, a caller's tensor or a dict": """\
import torch


def overlap(x: torch.Tensor):
    t = torch.zeros(4, 4)
    v = t[0]
    t[1] = v.clone()
    return t


def same(x: torch.Tensor):
    t = x * 2
    t[1:] = t[:-1].clone()
    return t


def param(t: torch.Tensor, x: torch.Tensor):
    t[1:] = x[:-1].clone()
    return t


def cache(x: torch.Tensor, store: dict):
    store["k"] = x[:, -1].clone()
    return x
""",
    "a clone of the row a 0-d index views, and a name a nested function writes": """\
import torch


def best(pop: torch.Tensor, fitness: torch.Tensor) -> torch.Tensor:
    i = torch.argmax(fitness)
    gene = pop[i].clone()
    pop.mul_(2)
    return gene


def nested(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    mean = x.unsqueeze(2).repeat(1, 1, 4)

    def bump():
        mean.add_(1)

    bump()
    return mean + 1
""",
    "a clone of an object handed to a method that reads its attributes (an audio signal, no tensor)": """\
import torch
from torch import nn


class GANLoss(nn.Module):
    def forward(self, fake, real):
        return self.discriminator(fake.audio_data), self.discriminator(real.audio_data)

    def discriminator_loss(self, fake, real):
        d_fake, d_real = self.forward(fake.clone().detach(), real)
        return torch.mean(d_fake ** 2) + torch.mean((1 - d_real) ** 2)
""",
    "a clone handed to a same-file method that writes its argument through a list of views": """\
import torch
from torch import nn


class Masker(nn.Module):
    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        mixture = torch.stft(wav, 64, return_complex=True).abs()
        masks = self.forward_masker(mixture.clone())
        return mixture * masks

    def forward_masker(self, spec: torch.Tensor) -> torch.Tensor:
        x = spec[..., :16]
        inputs = [x]
        for i in range(len(inputs)):
            inputs[i] += 1.0
        return torch.sigmoid(sum(inputs))
""",
    "a clone whose source a module may write: its forward writes it, or its class is built inplace": """\
import torch
from torch import nn
from somewhere import Conv


class Scale(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.view(-1)
        y.mul_(2)
        return x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = Scale()
        self.act = nn.Sequential(nn.ReLU(inplace=True), Conv(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        r = x.clone()
        y = self.scale(x)
        return y + r

    def other(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        r = x.clone()
        y = self.act(x)
        return y + r

    def closure(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        r = x.clone()
        bump = lambda: x.add_(1)
        bump()
        return x + r
""",
    "a clone handed to a list member that may be the identity, then written through the result": """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, last: bool) -> None:
        super().__init__()
        self.downs = nn.ModuleList([nn.Identity() if last else nn.Linear(8, 8)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        r = x.clone()
        for down in self.downs:
            y = down(r)
            y.mul_(2)
        return x + y
""",
    "a returned copy of an expanded view the function made: the caller gets memory of its own": """\
import torch


def positions(reference: torch.Tensor) -> torch.Tensor:
    batch, seq_len = reference.shape[:2]
    pos = torch.arange(seq_len, dtype=torch.int32)
    return pos.unsqueeze(0).expand(batch, -1).contiguous()
""",
    "the source is written in place after the copy": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)
    c = h.clone()
    h.mul_(2)
    return c + h
""",
    "the source is handed to unknown code that may write it": """\
import torch

def f(x: torch.Tensor, update):
    h = torch.relu(x)
    c = h.clone()
    update(h)
    return c + h
""",
    "the copy is aliased by a view kept under another name": """\
import torch

def f(x: torch.Tensor):
    c = x.clone()
    flat = c.reshape(-1)
    flat.zero_()
    return c * 2
""",
    "the copy is written through out=": """\
import torch

def f(x: torch.Tensor, y: torch.Tensor):
    c = x.clone()
    torch.add(c, y, out=c)
    return c * 2
""",
    "the copy is yielded or stored in a dict": """\
import torch

def f(x: torch.Tensor):
    c = x.clone()
    yield c


def g(x: torch.Tensor):
    c = x.clone()
    return {"x": c}
""",
    "the copy is reassigned in a loop": """\
import torch

def f(x: torch.Tensor):
    c = x.clone()
    for _ in range(3):
        c = c * 0.5
    return c
""",
    "contiguous() before a view, inline or through a view chain": """\
import torch

def f(q: torch.Tensor, k: torch.Tensor, shape: tuple):
    query = q.transpose(1, 2).contiguous().view(shape)
    key = k.permute(0, 2, 1).contiguous().unsqueeze(0).view(shape)
    return torch.matmul(query * 0.5, key.transpose(1, 2))
""",
    "a copy of a module attribute": """\
import torch

class M(torch.nn.Module):
    def forward(self, x):
        c = self.weight.clone()
        return x * c
""",
    "a returned copy of a parameter's slice, and one returned with other values": """\
import torch

def f(x: torch.Tensor, n: int):
    return x[:, :n].contiguous()


def attention_output(w: torch.Tensor, v: torch.Tensor):
    out = torch.matmul(w, v)
    out = out.transpose(1, 2).contiguous()
    return out, w
""",
    "a rebound clone of a parameter, or of a value read in between": """\
import torch

def f(gate: torch.Tensor):
    gate = gate.clone()
    gate[0] = 1
    return gate


def g(sim: torch.Tensor):
    gate = torch.relu(sim)
    total = gate.sum()
    gate = gate.clone()
    gate[0] = 1
    return gate * total
""",
    "a returned transposed copy of an index tensor": """\
import torch

def faces(rows: list) -> torch.Tensor:
    triangle = torch.tensor(rows)
    triangle = triangle.to(torch.int64)
    return triangle.t().contiguous()


def edges(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cat([a.long(), b.long()], dim=0).t().contiguous()
""",
    "a copy written in place before its name is rebound": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)
    c = h.clone()
    c[0] = 0
    c = c * h
    return c
""",
    "a view of the source kept under another name before the copy, written after it": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    h = torch.tanh(x @ w)
    row = h[0]
    c = h.clone()
    row.zero_()
    return c * 2 + h
""",
    "the source written in place after the copy, in the same block": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    h = torch.tanh(x @ w)
    h = h * 2
    c = h.clone()
    h.add_(1)
    return c * 2 + h
""",
    "the source written in place later in the loop that copies it": """\
import torch

def f(x: torch.Tensor, w: torch.Tensor):
    h = torch.tanh(x @ w)
    outs = []
    for _ in range(3):
        c = h.clone()
        outs.append(c.sum(-1) * 2)
        h.mul_(2)
    return outs
""",
    "a copy read by a norm module, which makes its input contiguous, or by an unknown module": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.proj = make_proj()

    def forward(self, x):
        h = torch.tanh(x * 2)
        y = h.permute(0, 2, 1).contiguous()
        z = h.transpose(1, 2).contiguous()
        return self.norm(y), self.proj(z)
""",
    "contiguous before a reshape that merges the transposed dims (it would copy itself)": """\
import torch


def merge_heads(x: torch.Tensor, w: torch.Tensor, b: int, n: int):
    h = torch.tanh(x @ w)
    out = h.transpose(1, 2).contiguous().reshape(b, n, -1)
    return out @ w
""",
    "contiguous of a named transposed view that a view then needs": """\
import torch


def heads(x: torch.Tensor, w: torch.Tensor):
    h = torch.tanh(x @ w)
    h = h.transpose(1, 2)
    h = h.contiguous()
    return h.view(h.shape[0], -1)
""",
    "contiguous of a name an if may have rebound": """\
import torch


def heads(x: torch.Tensor, w: torch.Tensor, flip: bool):
    h = torch.tanh(x @ w)
    h = h.transpose(1, 2)
    if flip:
        h = h.flip(1)
    h = h.contiguous()
    return torch.relu(h) @ w
""",
    "a copy handed to an activation module built with inplace": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = torch.tanh(x * 2)
        y = h.clone()
        z = self.act(y)
        return z + h
""",
    "the output of nn.Dropout (maybe the copy itself) written in place": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = torch.tanh(x * 2)
        y = h.clone()
        z = self.drop(y)
        z[:, 0] = 0.0
        return z + h
""",
    "pieces of a split of a parameter, handed out in an output record (the caller holds the logits)": """\
import torch
from torch.nn import CrossEntropyLoss


def qa_head(logits: torch.Tensor, start_positions: torch.Tensor | None):
    start_logits, end_logits = logits.split(1, dim=-1)
    start_logits = start_logits.squeeze(-1).contiguous()
    end_logits = end_logits.squeeze(-1).contiguous()
    total_loss = None
    if start_positions is not None:
        ignored_index = start_logits.size(1)
        loss_fct = CrossEntropyLoss(ignore_index=ignored_index)
        total_loss = loss_fct(start_logits, start_positions)
    return QuestionAnsweringOutput(loss=total_loss, start_logits=start_logits, end_logits=end_logits)
""",
    "a piece of a split along the first dim is contiguous already": """\
import torch


def f(h: torch.Tensor, w: torch.Tensor):
    a, b = (h @ w).split(1, dim=0)
    return a.squeeze(0).contiguous() + b
""",
    "a copy in an output record whose source is handed out too": """\
import torch


def f(h: torch.Tensor, w: torch.Tensor):
    logits = h @ w
    start = logits.t().contiguous()
    return Output(logits=logits, start=start)
""",
    "a copy returned in a bare tuple, to a caller that may need its layout": """\
import torch


def f(h: torch.Tensor, w: torch.Tensor):
    weights = torch.softmax(h @ w.t(), -1)
    out = (weights @ w).transpose(1, 2).contiguous()
    return out, weights
""",
    "a contiguous copy only read by ops that copy a strided input themselves": """\
import torch
import torch.nn.functional as F


def f(h: torch.Tensor, target: torch.Tensor):
    x = (h * 2).transpose(1, 2).contiguous()
    return F.softmax(x, -1), F.cross_entropy(x, target)
""",
    "a clone handed to a same-file method that keeps it": """\
import torch
from torch import nn


class AltUp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.type_as(self.scale) * self.scale).type_as(x)

    def scale_output(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)

    def keep(self, x: torch.Tensor) -> torch.Tensor:
        self.kept = x
        return x * 2


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.altup = AltUp()
        self.gate = nn.Linear(8, 8)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        corrected = self.altup(h) * 2
        first = corrected[0].clone()
        first = self.altup.keep(first)
        first = self.gate(first)
        corrected[1:] += first
        return corrected
""",
    "a clone whose source is written in place while the clone is still read": """\
import torch
from torch import nn


class AltUp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.type_as(self.scale) * self.scale).type_as(x)

    def scale_output(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)

    def keep(self, x: torch.Tensor) -> torch.Tensor:
        self.kept = x
        return x * 2


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.altup = AltUp()
        self.gate = nn.Linear(8, 8)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        corrected = self.altup(h) * 2
        first = corrected[0].clone()
        corrected[0] += 1
        first = self.altup.scale_output(first)
        first = self.gate(first)
        corrected[1:] += first
        return corrected
""",
    "a contiguous copy of a view of a name written in place while the copy lives": """\
import torch


def f(x0: torch.Tensor):
    x = torch.tanh(x0)
    y = x.t().contiguous()
    x.add_(1)
    return y * x
""",
    "copies of overlapping pieces of one tensor, handed out in one record": """\
import torch


def f(x0: torch.Tensor, d: int):
    x = torch.tanh(x0)
    k, l = torch.chunk(x, 2, -1)
    m, n = x.tensor_split(3, 1)
    g, h = x.unbind(1)
    return Out(k=k.squeeze(-1).contiguous(), m=m.contiguous(), g=g.contiguous())
""",
    "copies of values no name holds that are still needed": """\
import torch
import torch.nn.functional as F


def f(n: int, x: torch.Tensor, w: torch.Tensor, helper):
    ids = torch.arange(n).expand(3, -1).clone()
    ids[0] = 0
    grid = torch.relu(x).unsqueeze(0).expand(2, -1, -1).contiguous()
    grid[0, 0] = 1
    out = F.conv1d(x, w).permute(0, 2, 1).contiguous()
    out.masked_fill_(out > 0, 0)
    flat = out.view(-1)
    kept = (x * 2).t().contiguous()
    kept.mul_(2)
    helper(kept)
    return ids, grid, flat
""",
    "a clone of a tensor over a NumPy array, handed out": """\
import torch


def f(a):
    t = torch.from_numpy(a).clone()
    u = torch.as_tensor(a).float().clone()
    return t, u
""",
    "copies in a module's __init__ and _init_weights, which run once": """\
import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        a = torch.arange(1, n + 1)[None, :].float()
        self.a_log = nn.Parameter(torch.log(a.t().contiguous()))
        self.q_scale = nn.Buffer((a * 2).clone().detach(), persistent=False)

    def _init_weights(self, module: nn.Module):
        a = torch.arange(1, 9)[None, :].float()
        a = a.expand(4, -1).contiguous()
        module.a_log.copy_(torch.log(a))
""",
    "an index table built by a permuted contiguous copy written in place": """\
import torch


def relative_position_index(height: int, width: int) -> torch.Tensor:
    coords = torch.flatten(torch.stack(torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")), 1)
    relative_coords = coords[:, :, None] - coords[:, None, :]
    relative_coords = relative_coords.permute(1, 2, 0).contiguous()
    relative_coords[:, :, 0] += height - 1
    return relative_coords.sum(-1)
""",
    "a copy made in an if under a rebound name, written in place after another if may rebind it": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, c: bool):
    h = x @ w
    y = torch.tanh(h)
    if c:
        y = h.clone()
    z = y * 2
    if c:
        y = torch.relu(h)
    y.add_(1)
    return y + h + z
""",
    "a copy made in a loop or a try under a rebound name": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, n: int):
    h = x @ w
    y = torch.tanh(h)
    for _ in range(n):
        y = h.clone()
        z = y * 2
    try:
        y = h.clone()
        z = y * 2
    except RuntimeError:
        y.add_(1)
    return y + h + z
""",
    "a clone of a cache's state, read after a method of the cache may have written the state": """\
import torch


def f(input_ids: torch.Tensor, past_key_values, layer_idx: int):
    cached_ctx = past_key_values.get_conv_state(layer_idx) if past_key_values is not None else None
    if cached_ctx is not None:
        previous_context = cached_ctx.clone()
    else:
        previous_context = input_ids.new_full((input_ids.shape[0], 4), 0)
    if past_key_values is not None:
        past_key_values.update_conv_state(input_ids, layer_idx)
    return torch.cat([previous_context, input_ids], dim=-1)


def g(x: torch.Tensor, state: dict):
    kept = state["h"]
    before = kept.clone()
    refresh(state, x)
    return before * 2
""",
    "contiguous of a transposed view cast to a layout, or cast and viewed": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor):
    h = x @ w
    a = h.t().to(memory_format=torch.contiguous_format).contiguous() + 1
    return torch.relu(h.t().float().contiguous().view(-1)), a
""",
    "contiguous of a channels-first permute read by a layer that is no convolution, or of another layout": """\
import torch
import torch.nn.functional as F
from torch import nn
from ultra.layers import Conv, Mlp, ConvLSTM


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mlp = Mlp(dim)
        self.rnn = ConvLSTM(dim)
        self.pe = Conv(dim, dim, 3) if dim > 8 else Mlp(dim)

    def forward(self, x, w, b: int, h: int, c: int):
        u = x.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        v = x.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        y = x.reshape(b, h, h, c).permute(0, 3, 1, 2).contiguous()
        z = torch.tanh(x).transpose(2, 3).contiguous()
        return self.mlp(u), self.rnn(v), self.pe(y), F.conv2d(z, w)
""",
    "a clone of a module's tensor, in a statement that runs other code, or kept while other code runs or writes it": """\
import torch
from torch import nn


class Cache(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("index", torch.arange(n))

    def forward(self, x: torch.Tensor, n: int):
        y = x[self.index.clone()[:n].reshape(-1)] + self.advance()
        kept = self.index.clone()
        z = self.advance()
        written = self.index.clone()
        self.index.add_(1)
        return y, x[kept], z, x[written]
""",
    "stacks reduced over another dimension, kept, or reduced with more arguments": """\
import torch


def f(a: torch.Tensor, b: torch.Tensor):
    s = torch.stack([a, b])
    total = s.sum(0)
    return (s, total, torch.stack([a, b]).sum(1), torch.stack([a, b], -1).sum(0), torch.stack([a, b]).sum(),
            torch.stack([a, b]).sum(0, keepdim=True), torch.stack([a, b]).amax(0))
""",
    "a copy of a view of a name whose earlier value another name keeps, written in place while the copy lives": """\
import torch
import torch.nn.functional as F


def f(h: torch.Tensor, w: torch.Tensor):
    kept = h
    h = h.view(2, 8, 8, 16)
    x = h.permute(0, 3, 1, 2).contiguous()
    kept.add_(1)
    return F.conv2d(x, w) + kept.sum()
""",
    "repeats of a dimension that need not be of size 1, written, viewed, handed out or of unknown counts": """\
import torch


def f(x: torch.Tensor, n: int, reps, log):
    a = x.unsqueeze(1).repeat(2, n, 1)
    b = x.unsqueeze(1).repeat(1, n, 1)
    b.add_(1)
    c = x.unsqueeze(1).repeat(1, n, 1).view(-1)
    d = x.unsqueeze(1).repeat(reps) + x.repeat(1, n, 1)
    log(x.unsqueeze(1).repeat(1, n, 1))
    return a + b + c.sum() + d, x.unsqueeze(1).repeat(1, n, 1)
""",
    "contiguous of tokens swapped channels-first for a convolution of unknown dimensions": """\
import torch
import torch.nn.functional as F
from torch import nn
from ultra.layers import Conv


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.pe = Conv(dim, dim, 3)

    def forward(self, x: torch.Tensor, w: torch.Tensor):
        return self.pe(x.transpose(1, 2).contiguous()), F.conv2d(x.transpose(2, 1).contiguous(), w)
""",
    "copies bound to annotated names, then viewed or written in place": """\
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    y: torch.Tensor = x.transpose(1, 2).contiguous()
    z: torch.Tensor = (x * 2).sum(-1)
    c: torch.Tensor = z.clone()
    c.add_(1)
    return y.view(-1), c + z
""",
    "a copy in a branch, then viewed in a later branch that may run too": """\
import torch
import torch.nn.functional as F


def either(x: torch.Tensor, w: torch.Tensor, dims: int, mode: int):
    if dims == 2:
        x = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
    if dims == 2 or mode == 1:
        x = x.view(2, 16, 64).view(2, 16, 8, 8)
    return F.conv2d(x, w)


def other_test(x: torch.Tensor, w: torch.Tensor, dims: int, mode: int):
    if dims == 2:
        x = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
    if mode == 3:
        x = x.view(2, 16, 64).view(2, 16, 8, 8)
    return F.conv2d(x, w)


def with_else(x: torch.Tensor, w: torch.Tensor, dims: int):
    if dims == 2:
        x = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
    if dims == 3:
        x = x.view(2, 16, 64).view(2, 16, 8, 8)
    else:
        x = x * 2
    return F.conv2d(x, w)


def reassigned(x: torch.Tensor, w: torch.Tensor, dims: int):
    if dims == 2:
        x = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
        dims = 3
    if dims == 3:
        x = x.view(2, 16, 64).view(2, 16, 8, 8)
    return F.conv2d(x, w)


class Switching(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor):
        if self.dims == 2:
            x = x.reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
            self.dims = 3
        if self.dims == 3:
            x = x.view(2, 16, 64).view(2, 16, 8, 8)
        return F.conv2d(x, w)
""",
    "the source's earlier value kept under another name, the name bound anew to what may be it": """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, w: torch.Tensor):
        h = torch.tanh(x)
        residual = h
        h = self.dropout(h)
        y = h.t().contiguous()
        residual.add_(1)
        kept = h
        h = h[0]
        z = h.t().contiguous()
        kept.mul_(2)
        return y @ w + residual, z.sum() + kept.sum()
""",
    "a copy checkpointed into, or passed by keyword to, a block that may view it": """\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, flat: bool = False) -> torch.Tensor:
        if flat:
            x = x.view(-1, x.shape[-1])
        return x + self.fc(x)


class Stack(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(0, 1).contiguous()
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x

    def keyword(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks[0](x=x.transpose(0, 1).contiguous(), flat=True)
""",
    "a clone whose source an in-place module, an injected module or an unknown list of blocks may write": """\
import torch
import torch.nn as nn


class Attend(nn.Module):
    def __init__(self, heads: int, act: bool, cope=None) -> None:
        super().__init__()
        self.act = nn.ReLU(inplace=True) if act else None
        self.cope = cope

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        sim = q @ k.transpose(-1, -2)
        before = sim.clone()
        if self.act is not None:
            sim = self.act(sim)
        return sim.softmax(-1) * before

    def other(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        sim = q @ k.transpose(-1, -2)
        before = sim.clone()
        if self.cope is not None:
            sim = sim + self.cope(q, sim)
        return sim.softmax(-1) * before


def stack(x: torch.Tensor, blocks: list) -> torch.Tensor:
    x = x.transpose(0, 1).contiguous()
    for block in blocks:
        x = block(x)
    return x
""",
    "a sliced copy handed back by a same-file function and then viewed": """\
import torch
import torch.nn as nn


def maybe_drop(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training:
        return x
    return x * (torch.rand_like(x) >= p)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.p = 0.1

    def forward(self, x: torch.Tensor, shortcut: torch.Tensor) -> torch.Tensor:
        h = maybe_drop(x[:, :7].contiguous(), self.p, self.training)
        return shortcut + h.view(-1)
""",
    "returned copies of views of a parameter rebound to a view of itself, or of a member that may be an identity": """\
import torch


class A(torch.nn.Module):
    def _reshape(self, t: torch.Tensor, heads: int, einsum: bool):
        s = t.shape
        t = t.reshape(s[0], heads, -1, s[-1])
        if einsum:
            return t.permute(0, 3, 1, 2).contiguous()
        else:
            return t.transpose(-1, -2).contiguous()

    def _flat(self, t: torch.Tensor):
        t = t.reshape(t.shape[0], -1)
        return t.t().contiguous()


class B(torch.nn.Module):
    def __init__(self, d: int, identity: bool) -> None:
        super().__init__()
        if identity:
            self.proj = torch.nn.Identity()
        else:
            self.proj = torch.nn.Linear(d, d)

    def forward(self, x: torch.Tensor, pad: int) -> torch.Tensor:
        x = self.proj(x)
        return x[:, :-pad].contiguous()


def patches(values: torch.Tensor, start: int) -> torch.Tensor:
    out = values[:, start:, :]
    out = out.unfold(dimension=-2, size=4, step=2)
    return out.transpose(-2, -3).contiguous()
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []


def test_a_copy_feeding_a_fused_reduction_is_reported_once_by_fl002():
    source = """\
import torch

def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * y
"""
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL002", "FL007"})))
    assert [(f.code, f.line, f.column) for f in result.findings] == [("FL002", 5, 10)]


def test_callees_imported_from_the_package_count_as_same_file_ones(tmp_path):
    """A ``ModuleList`` of blocks and a ``DropPath`` defined in a sibling module read the copied
    view as the same-file ones do; one that views it keeps its copy."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "blocks.py").write_text(CROSS_FILE_BLOCKS)
    model = package / "model.py"
    model.write_text(CROSS_FILE_MODEL)
    project.forget()
    result = lint_source(CROSS_FILE_MODEL, str(model), OPTIONS)
    assert not result.errors
    assert [(f.line, f.column) for f in result.findings] == [(15, 13), (21, 13)]


CROSS_FILE_BLOCKS = """\
import torch
import torch.nn as nn


def drop_path(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if p == 0.0 or not training:
        return x
    keep = torch.rand(x.shape[0], 1, 1, device=x.device) >= p
    return x * keep / (1 - p)


class DropPath(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.p, self.training)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x) * mask


class Viewing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(-1)
"""

CROSS_FILE_MODEL = """\
import torch
import torch.nn as nn

from .blocks import Block, DropPath, Viewing


class Stack(nn.Module):
    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.drop_path = DropPath(0.1)
        self.flat = Viewing()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x.transpose(0, 1).contiguous()
        for block in self.blocks:
            x = block(x, mask)
        return x.transpose(0, 1)

    def unpad(self, x: torch.Tensor, shortcut: torch.Tensor) -> torch.Tensor:
        x = x[:, :7].contiguous()
        return shortcut + self.drop_path(x)

    def viewed(self, x: torch.Tensor) -> torch.Tensor:
        return self.flat(x.transpose(0, 1).contiguous())
"""


@pytest.mark.parametrize("written,places", [
    ("x.clone().masked_fill_(m, 0.0)", ("fusionrt",)),  # eager's masked_fill copies x as the code does
    ("x.clone().fill_(0.5)", ("fusionrt", "eager")),  # full_like needs no copy anywhere
])
def test_a_copy_written_at_once_says_where_dropping_it_pays(written, places):
    source = f"import torch\n\n\ndef f(x: torch.Tensor, m: torch.Tensor):\n    return {written} + x\n"
    (finding,) = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL007"}))).findings
    assert finding.pays_in == places
