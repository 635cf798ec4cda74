"""FL014: a number that scales a broadcasting product (``x * s * g[None, :]``, ``emb = t[:, None] *
f[None, :]`` then ``emb = s * emb``) where it could scale the smaller factor before it."""
from __future__ import annotations

import ast
import re
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import Scope, StatementRef, own_parts, scope_statements
from fusionlint.analysis.nodes import code_of, dotted_name, operations, same_expression
from fusionlint.analysis.numbers import NumberNames, int_literal
from fusionlint.analysis.torch_calls import keepdim_reduction
from fusionlint.analysis.rescale import PLAIN_RESCALE_TEXT, RESCALE_TEXT, Rescale, mentions, rescaled_later, rescaled_below, zero_dim
from fusionlint.model import EAGER, FixSafety
from fusionlint.ops import ELEMENTWISE, VIEW, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes
from fusionlint.statement_text import code_only

_SMALL_TEXT = re.compile(r"\bNone\b|\bunsqueeze\s*\(|\bself\.|\bkeepdim\b|norm|\[[^\]]*(?:-1\s*:|:\s*1\s*[,\]])")
# a tensor scaled by two plain factors in a row, the last a literal or a module's number, spaced as code
# is: `x * self.s * 2`, `x / w / 2` (a constant such as `math.pi` would let in many more statements that
# scale ranges of frequencies, all small)
_CHAIN_TEXT = re.compile(r"[\w)\]]\s+[*/]\s+[\w.]+\s+[*/]\s+(?:\d[\d.]*|self\.\w+)\b(?!\s*[(\[.])")
_PRODUCT_TEXT = re.compile(r"(?<![*/])[*/](?![*/=])")  # `*` or `/`, not `**`, `//` or `*=`
_ASSIGNED_PRODUCT = re.compile(r"\s*(\w+)\s*=[^=].*[\w\])]\s*(?:\*(?![*=])|/(?![/=]))")  # `name = a * b`, `a / b`, not `*args`
_ASSIGNED_MATMUL = re.compile(r"\s*(\w+)\s*=[^=].*@")
# a module's output, a linear's or a matmul's, scaled by a plain factor (an attribute chain of `self` or
# a config, a number): `y = self.b(h) * self.s`, `return s * F.linear(t, w)`, `(t @ self.w) / 2.0`
_FACTOR = r"(?:self\.[\w.]+|[\w.]*config\.[\w.]+|\d[\d.e+-]*)"
_OUTPUT = r"(?:self\.\w+|[\w.]*\blinear)\s*\("
_SCALED_OUTPUT = re.compile(
    rf"^\s*(?:[\w.]+\s*=|return\b)\s*(?:{_FACTOR}\s*\*\s*{_OUTPUT}|{_OUTPUT}.*\)\s*[*/]\s*{_FACTOR}\s*(?:#.*)?$)"
    rf"|\((?:[^()]|\([^()]*\))*@(?:[^()]|\([^()]*\))*\)\s*[*/]\s*{_FACTOR}"
)
_RANGES = frozenset({"torch.arange", "torch.linspace", "torch.logspace"})
_NUMBER_CONSTANTS = frozenset({"math.pi", "math.tau", "math.e", "np.pi", "numpy.pi", "torch.pi"})
_REDUCTIONS = ("sum", "mean", "norm", "amax", "amin", "std", "var", "logsumexp", "prod")
_SELECTIONS = frozenset({"max", "min", "argmax", "argmin", "topk", "median"})  # along a dim: a smaller tensor
_NORMS = frozenset({"normalize", "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm"})


class ScaleSmallerFactor(Rule):
    code = "FL014"
    name = "scale-smaller-factor"
    message = "a number scales a broadcasting product: scale its smaller factor instead"
    rationale = """
        In `x * s * g`, where `g` is broadcast against `x` (a per-channel weight, `g[None, :]`,
        `f.unsqueeze(0)`), Python multiplies left to right: `x * s` is a kernel that reads and
        writes the whole of `x`, then `* g` another. `x * (s * g)` scales the small `g` instead, and
        only the last multiply touches the full size: eager PyTorch writes 790 -> 529 KiB for a
        normalized 8 x 64 x 128 activation. The same holds when the product is made first and scaled
        after (`emb = t[:, None] * f[None, :]`, then `emb = scale * emb`, the sinusoidal embedding
        of a diffusion model): the scale can go on `f`. A lazy fusing backend runs all of it as one
        element-wise kernel either way, so the rewrite pays in eager only; fusionrt counts the same
        writes and kernels. The scale may itself be a small tensor: in a global response norm,
        `gamma * (x * nx)` with a per-channel `gamma` and a per-sample, per-channel `nx` makes two
        passes over `x` where `x * (nx * gamma)` makes one (monai's MedNeXt block: eager 256 -> 192
        KiB written). And a matmul with a module's own tensor (`coords @ self.gaussian`, a
        random-feature position encoding, then `coords = 2 * pi * coords`) can take the number on
        that tensor, `coords @ (self.gaussian * (2 * pi))`: eager 1.5 -> 1.25 MiB written for a 32 x
        32 grid of 128 features. A norm's output is the activation at full size, so a number scaling
        it before another factor (an adaptive RMS norm's `normed * scale * (gamma + 1.)`, `gamma`
        made from a condition of one row per sample) belongs on that factor: 390 -> 259 KiB written
        under fusionrt and in eager for 4 x 64 x 128; where the factor is as large as the
        activation, no pass is saved and none added. Two Linear maps with nothing between
        (`self.lora_b(self.lora_a(x))`, the second without bias) are a low-rank product, a LoRA
        adapter or a bottleneck: a number scaling its output (`(self.alpha / self.rank) * ...`) can
        scale the narrow middle instead, `self.lora_b(h * s)`: 260 -> 136 KiB written for a rank-8
        adapter of 64 -> 256 features over 4 x 32 tokens, in eager and under fusionrt alike. So can
        a language model's head onto the vocabulary (`nn.Linear(hidden, vocab_size, bias=False)`),
        whose logits a number rescales (`logits = logits * self.logit_scale`): 250 -> 133 KiB
        written for 2 x 16 tokens of 64 features and 1000 logits, in eager and under fusionrt; and
        logits made with a tied embedding's table (`t @ self.emb.weight.t()`, `F.linear(t,
        self.emb.weight)`): 500 -> 266 KiB for 2 x 32 tokens.

        Flagged: a product of two tensors one of which is smaller than the product because it
        broadcasts (indexed with `None`, `unsqueeze`d), is a module's own tensor (`self.g`), a range
        (`torch.arange(n)`), a reduction that keeps its dims (`x.mean(1, keepdim=True)`,
        `torch.norm(x, dim=d, keepdim=True)`), or a local computed only from those and numbers (or
        from such a tensor and its own keepdim reduction, `gx / (gx.mean(1, keepdim=True) + eps)`),
        scaled by a value known to be a Python number (a literal, a number-annotated parameter or a
        local made of those, a module attribute that is neither a tensor nor a module such as
        `self.scale`, `dim ** 0.5`, `math.pi`) or by a tensor where one of the scale and the smaller
        factor is a module's tensor (or a 0-d one) and the other a keepdim reduction (two broadcast
        tensors, `m[:, :, None] * k[:, None, :]`, may multiply into an outer product as large as the
        result; a per-channel parameter times a per-sample reduction over the other dims stays
        small, though the rule cannot see which dims were reduced): `x * s * g`, `s * x * g`, `x / s
        * g`, `(x * g) * s`, `s * (x * g)`, and `name = x * g` (or `name = x @ self.w`, `self.w`
        possibly transposed) rescaled by a number at the next statement that reads `name`; `x * s *
        g` also where `x` is the output of a norm (`F.normalize`, `F.layer_norm`, a norm module; or
        a local made by one) and `s` a number (`name = name * s`, `name = s * name`), past views
        that rebind it (`name = name.flatten(1)`); `s * self.b(h)`, `self.b(h) / s` and `y =
        self.b(h)` rescaled by the next statement that reads `y` (`y *= s` too), where `self.b` is
        an `nn.Linear(..., bias=False)` and either `h` another Linear's output (`self.a(x)`, or a
        name the statement before that last mentions it sets to one) or the Linear's output features
        a vocabulary (`config.vocab_size`); `(t @ self.emb.weight.t()) * s` and `F.linear(t,
        self.emb.weight) * s`, `self.emb` an `nn.Embedding` (also a member of a same-file member);
        `(x @ self.w) * s` as well as its later form, `self.w` also past views, element-wise ops
        and norms into a local (`w = F.normalize(self.weight, dim=0)`, a cosine-similarity
        projection: a weight does not grow with the batch), in a lambda too (`lambda t: (t @
        self.emb.weight.t()) * s`); `x / g * s`, `x / g / s`, `s * (x / g)` with `g` smaller
        (also a single-position slice of the dividend, `y[:, -1:, :] + eps`, a DETR sine
        embedding's normalisation), as `x / (g / s)` or `x / (g * s)`; a tensor multiplied or
        divided by two or more numbers in a row (`x * a * 2`, `x / w / 2`, `2 * x / a`), as
        `x * (a * 2)`: Python applies each to the whole tensor, one full-size pass each, where the
        folded numbers make one (not where the tensor is small: a range, a reduction's output, a
        module's weight). A config field (`self.config.logit_scale`) is a number. Reported without a fix: the rescale after the `if` whose arm made the product, the
        rescale first in the arm of the next `if` that reads it (a softcap, `if cap is not None:
        logits = logits / cap`), a factor computed in between, the scaled product bound to another
        name or returned (`return emb / math.sqrt(d)`) where the unscaled one is never read again.
        Not flagged: products where no factor is known to be smaller, a scale that is a tensor of
        unknown shape, a Linear's output scaled where that Linear has a bias or its input is not
        another Linear's output (an activation between), a small scale of a product of small tensors
        (`s * (g * h)`: nothing full-size to spare), `x * s` alone, a product read unscaled too, a
        matmul with no module tensor (FL009 reports attention scores).
    """
    use_instead = "Scale the smaller factor: `x * (g * s)`, `emb = t[:, None] * (f * scale)[None, :]`."
    pays_in = (EAGER,)
    yields_to = frozenset({"FL009", "FL013"})  # a matmul's scale, or a sum one fused op does
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix regroups the product so that the number multiplies (or divides) the smaller
        factor, and drops the statement that rescaled a product made before it. It is
        **unsafe**: floating-point products are not associative, so results differ by rounding,
        and the rule judges which factor is smaller without shapes (a module's tensor may be as
        large as the activation, a weight larger than the matmul's output for a few tokens).
    """
    examples = (
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def scale_norm(x: torch.Tensor, g: torch.Tensor, dim: int) -> torch.Tensor:
    return F.normalize(x, dim=-1) * dim**0.5 * g[None, None, :]
""",
            at=((6, 12),),
            fixed="""\
import torch
import torch.nn.functional as F


def scale_norm(x: torch.Tensor, g: torch.Tensor, dim: int) -> torch.Tensor:
    return F.normalize(x, dim=-1) * (g * dim**0.5)[None, None, :]
""",
            call="scale_norm(randn(8, 64, 128), randn(128), 128)",
        ),
        Example(  # the product made first, rescaled by the next statement
            bad="""\
import torch


def timestep_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * freqs[None, :]
    emb = scale * emb
    return torch.cat([emb.sin(), emb.cos()], dim=-1)
""",
            at=((6, 11),),
            fixed="""\
import torch


def timestep_embedding(t: torch.Tensor, freqs: torch.Tensor, scale: float) -> torch.Tensor:
    emb = t[:, None] * (freqs * scale)[None, :]
    return torch.cat([emb.sin(), emb.cos()], dim=-1)
""",
            call="timestep_embedding(randn(256), randn(64), 3.0)",
        ),
        Example(  # the scaled product returned: reported only
            bad="""\
import math

import torch


def positions(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    angles = t[:, None] * freqs[None, :]
    return angles / math.sqrt(dim)
""",
            at=((8, 12),),
            fixed=None,
            good="""\
import math

import torch


def positions(t: torch.Tensor, freqs: torch.Tensor, dim: int) -> torch.Tensor:
    return t[:, None] * (freqs / math.sqrt(dim))[None, :]
""",
            call="positions(randn(256), randn(64), 16)",
        ),
        Example(  # a small tensor scale: a per-channel gain of a per-sample, per-channel ratio
            bad="""\
import torch
from torch import nn


class ResponseNorm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.linspace(-1.0, 1.0, channels))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(-2, -1), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return self.gamma[None, :, None, None] * (x * nx)
""",
            at=((13, 16),),
            fixed="""\
import torch
from torch import nn


class ResponseNorm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.linspace(-1.0, 1.0, channels))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(-2, -1), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return x * (nx * self.gamma[None, :, None, None])
""",
            call="ResponseNorm(16).forward(randn(2, 16, 8, 8))",
        ),
        Example(  # a matmul with a module's buffer, rescaled by the next statement
            bad="""\
import math

import torch
from torch import nn


class RandomFourierEncoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("gaussian", torch.linspace(-0.5, 0.5, 128).reshape(2, 64))

    def forward(self, coords):
        coords = coords @ self.gaussian
        coords = 2 * math.pi * coords
        return torch.cat([coords.sin(), coords.cos()], dim=-1)
""",
            at=((14, 18),),
            fixed="""\
import math

import torch
from torch import nn


class RandomFourierEncoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("gaussian", torch.linspace(-0.5, 0.5, 128).reshape(2, 64))

    def forward(self, coords):
        coords = coords @ (self.gaussian * (2 * math.pi))
        return torch.cat([coords.sin(), coords.cos()], dim=-1)
""",
            call="RandomFourierEncoding().forward(randn(32, 32, 2))",
        ),
        Example(  # a norm's output, scaled, then multiplied by a conditioned gain
            bad="""\
import torch
import torch.nn.functional as F


def adaptive_rms_norm(x: torch.Tensor, condition: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    normed = F.normalize(x, dim=-1)
    gamma = condition @ w.t()
    return normed * scale * (gamma + 1.0)
""",
            at=((8, 12),),
            fixed="""\
import torch
import torch.nn.functional as F


def adaptive_rms_norm(x: torch.Tensor, condition: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    normed = F.normalize(x, dim=-1)
    gamma = condition @ w.t()
    return normed * ((gamma + 1.0) * scale)
""",
            call="adaptive_rms_norm(randn(4, 64, 128), randn(4, 1, 32), randn(128, 32), 11.3)",
        ),
        Example(  # a low-rank adapter's output scaled by a number
            bad="""\
import torch
from torch import nn


class LoRA(nn.Module):
    def __init__(self, down: torch.Tensor, up: torch.Tensor, alpha: float):
        super().__init__()
        self.lora_a = nn.Linear(down.shape[1], down.shape[0], bias=False)
        self.lora_b = nn.Linear(up.shape[1], up.shape[0], bias=False)
        self.lora_a.weight = nn.Parameter(down)
        self.lora_b.weight = nn.Parameter(up)
        self.scaling = alpha / down.shape[0]

    def forward(self, x):
        h = self.lora_a(x)
        return self.scaling * self.lora_b(h)
""",
            at=((16, 16),),
            fixed="""\
import torch
from torch import nn


class LoRA(nn.Module):
    def __init__(self, down: torch.Tensor, up: torch.Tensor, alpha: float):
        super().__init__()
        self.lora_a = nn.Linear(down.shape[1], down.shape[0], bias=False)
        self.lora_b = nn.Linear(up.shape[1], up.shape[0], bias=False)
        self.lora_a.weight = nn.Parameter(down)
        self.lora_b.weight = nn.Parameter(up)
        self.scaling = alpha / down.shape[0]

    def forward(self, x):
        h = self.lora_a(x)
        return self.lora_b(h * self.scaling)
""",
            call="LoRA(randn(8, 64), randn(256, 8), 16.0).forward(randn(4, 32, 64))",
        ),
        Example(  # a vocabulary head's logits scaled by the next statement
            bad="""\
import torch
from torch import nn


class CausalLMHead(nn.Module):
    def __init__(self, embedding: torch.Tensor, logit_scale: float):
        super().__init__()
        vocab_size, hidden_size = embedding.shape
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.lm_head.weight = nn.Parameter(embedding)
        self.logit_scale = logit_scale

    def forward(self, hidden_states):
        logits = self.lm_head(hidden_states)
        logits = logits * self.logit_scale
        return logits
""",
            at=((15, 18),),
            fixed="""\
import torch
from torch import nn


class CausalLMHead(nn.Module):
    def __init__(self, embedding: torch.Tensor, logit_scale: float):
        super().__init__()
        vocab_size, hidden_size = embedding.shape
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.lm_head.weight = nn.Parameter(embedding)
        self.logit_scale = logit_scale

    def forward(self, hidden_states):
        logits = self.lm_head(hidden_states * self.logit_scale)
        return logits
""",
            call="CausalLMHead(randn(1000, 64), 0.0625).forward(randn(2, 16, 64))",
        ),
        Example(  # logits of a tied embedding scaled by a number
            bad="""\
import torch
import torch.nn.functional as F
from torch import nn


class TiedLogits(nn.Module):
    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.emb = nn.Embedding(*table.shape)
        self.emb.weight = nn.Parameter(table)
        self.scale = table.shape[1] ** -0.5

    def forward(self, t):
        return F.linear(t, self.emb.weight) * self.scale
""",
            at=((14, 16),),
            fixed="""\
import torch
import torch.nn.functional as F
from torch import nn


class TiedLogits(nn.Module):
    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.emb = nn.Embedding(*table.shape)
        self.emb.weight = nn.Parameter(table)
        self.scale = table.shape[1] ** -0.5

    def forward(self, t):
        return F.linear(t * self.scale, self.emb.weight)
""",
            call="TiedLogits(randn(1000, 64)).forward(randn(2, 32, 64))",
        ),
        Example(  # a tensor scaled by two numbers in a row
            bad="""\
import torch


def codes(bits: torch.Tensor, scale: float) -> torch.Tensor:
    return bits * scale * 2 - scale
""",
            at=((5, 12),),
            fixed="""\
import torch


def codes(bits: torch.Tensor, scale: float) -> torch.Tensor:
    return bits * (scale * 2) - scale
""",
            call="codes(randn(8, 1024, 16), 0.5)",
        ),
        Example(  # a quotient by a slice of the dividend, then scaled: the scale joins the divisor
            bad="""\
import math

import torch


def normalized_positions(mask: torch.Tensor) -> torch.Tensor:
    y = mask.cumsum(1)
    return y / (y[:, -1:, :] + 1e-6) * (2 * math.pi)
""",
            at=((8, 12),),
            fixed="""\
import math

import torch


def normalized_positions(mask: torch.Tensor) -> torch.Tensor:
    y = mask.cumsum(1)
    return y / ((y[:, -1:, :] + 1e-6) / (2 * math.pi))
""",
            call="normalized_positions(randn(2, 64, 64))",
        ),
        Example(  # a matmul with a normalized copy of the module's weight
            bad="""\
import torch
import torch.nn.functional as F
from torch import nn


class CosineSimLinear(nn.Module):
    def __init__(self, dim_in: int, dim_out: int, scale: float):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.linspace(-1.0, 1.0, dim_in * dim_out).reshape(dim_in, dim_out))

    def forward(self, x):
        x = F.normalize(x, dim=-1)
        w = F.normalize(self.weight, dim=0)
        return (x @ w) * self.scale
""",
            at=((15, 16),),
            fixed="""\
import torch
import torch.nn.functional as F
from torch import nn


class CosineSimLinear(nn.Module):
    def __init__(self, dim_in: int, dim_out: int, scale: float):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.linspace(-1.0, 1.0, dim_in * dim_out).reshape(dim_in, dim_out))

    def forward(self, x):
        x = F.normalize(x, dim=-1)
        w = F.normalize(self.weight, dim=0)
        return x @ (w * self.scale)
""",
            call="CosineSimLinear(64, 16, 0.5).forward(randn(8, 1024, 64))",
        ),
    )
    valid = (
        # no factor known to be smaller; a factor that is a tensor; a scale alone
        """\
import torch


def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, g: torch.Tensor):
    a = x * 2.0 * y
    b = x * w * g[None, :]
    c = x[:, None] * 0.5
    d = x * w * g.mean(-1, keepdim=True)
    e = x * g[:, :, None] * w[:, None, :]  # the masks' product is an outer product, as large as x
    return a, b, c, d, e
""",
        # a second Linear with a bias, or a nonlinearity between the two: no low-rank product to scale
        """\
import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.out = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(self.fc1(x)) * 0.5, self.out(h) * 0.5
""",
        # the unscaled product is read before it is rescaled
        """\
import torch


def f(t: torch.Tensor, freqs: torch.Tensor, scale: float):
    emb = t[:, None] * freqs[None, :]
    raw = emb.sum(-1)
    emb = emb * scale
    return emb, raw
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        # the product and the rescale hold a `*` or `/`; a matmul rescaled below, an `@`
        return re.compile(r"[*/@]")

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        code = code_only(text)  # a path's `/` or a message's `norm` is no product of a small factor
        if _CHAIN_TEXT.search(code):
            return True
        if _SMALL_TEXT.search(code):
            if len(_PRODUCT_TEXT.findall(code)) >= 2:
                return True
            made = _ASSIGNED_PRODUCT.match(code)
            if made is not None and rescaled_below(made.group(1), block, index):  # rescaled a few statements below
                return True
            made = _ASSIGNED_MATMUL.match(code)
            if made is not None and _scaled_soon(made.group(1), block, index):  # `y = x @ self.w`, then `y = s * y`
                return True
            if _SCALED_OUTPUT.search(code):  # `y = self.b(self.a(x)) * self.s`
                return True
        if index == 0 and PLAIN_RESCALE_TEXT.match(text) is not None:  # first in an `if` arm
            return True
        rescaled = RESCALE_TEXT.match(text)
        if rescaled is None:
            return False
        earlier_texts = [block[earlier] for earlier in range(max(0, index - 5), index)]
        if any(earlier.lstrip().startswith("if ") for earlier in earlier_texts):
            return True  # made in the arms of the `if` above
        if not any(rescaled.group(1) in earlier for earlier in earlier_texts):
            return False  # (a substring test first: a pattern per name would be compiled per name)
        made = re.compile(r"\s*%s\s*=[^=](?:.*[*/]|\s*self\.\w+\s*\()" % rescaled.group(1))  # a product, a quotient, a module's output
        return any(made.match(earlier) and _SMALL_TEXT.search(earlier) for earlier in earlier_texts)  # made a few lines above

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            products = [op for part in own_parts(ref.node)
                        for op in operations(part, (cst.Multiply, cst.Divide, cst.MatrixMultiply))]
            reported: set[int] = set()
            for node in products:
                if id(node) in reported:
                    continue
                regrouped = _regrouped(scope, ref, node)
                if regrouped is not None:
                    reported.update(id(n) for n in (node.left, node.right))
                    yield Violation(node, fix=_replace(ref, node, regrouped[0]), message=regrouped[1])
                    continue
                later = rescaled_later(scope, ref, node)
                if later is None or not _number(scope, later.factor) or _smaller_side(scope, node) is None:
                    continue
                scaled = _scaled_product(scope, node, later.operator, later.factor)
                message = (_MATMUL_MESSAGE if isinstance(node.operator, cst.MatrixMultiply)
                           else _DIVISOR_MESSAGE if isinstance(node.operator, cst.Divide) and _smaller_side(scope, node) == "right"
                           else None)
                yield _rescaled_violation(ref, node, scaled, later, message)
            small = ref.simple
            if isinstance(small, cst.Assign) and _narrow_input(scope, small.value, ref) is not None:
                later = rescaled_later(scope, ref, small.value)
                if later is not None and _number(scope, later.factor):
                    scaled = _scaled_input(small.value, later.operator, later.factor)  # type: ignore[arg-type]
                    yield _rescaled_violation(ref, small.value, scaled, later, _NARROW_INPUT_MESSAGE)


def _rescaled_violation(
    ref: StatementRef, value: cst.CSTNode, scaled: cst.BaseExpression, later: Rescale, message: str | None
) -> Violation:
    """The finding at a later rescale of ``value``, fixed (where the rescale can move) by making
    ``value`` as ``scaled`` and dropping the rescale."""
    fix = None
    if later.movable and isinstance(later.statement.node, cst.SimpleStatementLine):
        fix = _replace(ref, value, scaled)
        fix = fix and (*fix, StatementEdit(later.statement.node, ()))
    return Violation(later.node, fix=fix, message=message)



def _scaled_soon(name: str, block: Sequence[str], index: int) -> bool:
    """Does the first of the five statements after ``index`` that reads ``name`` multiply or divide
    something into it or into a returned value, in its text (a wider test than ``rescaled_below``:
    ``name = 2 * math.pi * name``)?"""
    word = re.compile(r"\b%s\b" % name)
    for later in range(index + 1, min(index + 6, len(block))):
        if word.search(block[later]):
            return re.match(r"\s*(?:\w+\s*=[^=]|return\b).*[*/]", block[later]) is not None
    return False


def _regrouped(scope: Scope, ref: StatementRef, node: cst.BinaryOperation) -> tuple[cst.BaseExpression, str | None] | None:
    """``x * s * g`` -> ``x * (g * s)``, ``(x * g) * s`` and ``s * (x * g)`` -> ``x * (g * s)``: the
    product with the scale (a number, or a tensor known smaller) moved onto the smaller factor,
    and the finding's message (None: the rule's own); None when ``node`` is no such product."""
    if isinstance(node.operator, cst.MatrixMultiply):
        return None
    folded = _folded(scope, node)
    if folded is not None:
        return folded, _CHAIN_MESSAGE
    inner, outer = node.left, node.right
    sides = [(inner, outer), (outer, inner)] if isinstance(node.operator, cst.Multiply) else [(inner, outer)]
    for call, factor in sides:  # c * self.b(self.a(x))
        if _narrow_input(scope, call, ref) is not None and _number(scope, factor):
            return _scaled_input(call, node.operator, factor).with_changes(lpar=node.lpar, rpar=node.rpar), _NARROW_INPUT_MESSAGE  # type: ignore[arg-type]
    if (isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, (cst.Multiply, cst.Divide))
            and isinstance(node.operator, cst.Multiply) and scope.is_tensor(outer)):  # x * s * g, s * x * g, x / s * g
        if _scale_of(scope, inner.right, outer) and scope.is_tensor(inner.left):
            large, factor, operator = inner.left, inner.right, inner.operator
        elif isinstance(inner.operator, cst.Multiply) and _scale_of(scope, inner.left, outer) and scope.is_tensor(inner.right):
            large, factor, operator = inner.right, inner.left, inner.operator
        else:
            large = None
        smaller = large is not None and _smaller(scope, outer, set())
        after_norm = large is not None and not smaller and _number(scope, factor) and _normalized(scope, large, set())
        if (smaller or after_norm) and not _smaller(scope, large, set()):
            scaled = _scale(outer, operator, factor)
            regrouped = cst.BinaryOperation(left=large, operator=cst.Multiply(), right=scaled, lpar=node.lpar, rpar=node.rpar)
            return regrouped, _NORM_MESSAGE if after_norm else _message(scope, factor)
    for product, factor in sides:  # (x * g) * s, s * (x * g), (x * g) / s, (x / g) * s; (x @ self.w) * s
        if not (isinstance(product, cst.BinaryOperation)
                and isinstance(product.operator, (cst.Multiply, cst.Divide, cst.MatrixMultiply))):
            continue
        matmul = isinstance(product.operator, cst.MatrixMultiply)
        side = _smaller_side(scope, product)
        large, small = (product.left, product.right) if side == "right" else (product.right, product.left)
        if side is None or not _scale_of(scope, factor, small) or (not _number(scope, factor) and (matmul or _smaller(scope, large, set()))):
            continue
        message = _MATMUL_MESSAGE if matmul else _message(scope, factor)
        if side == "right" and isinstance(product.operator, cst.Divide) and message is None:
            message = _DIVISOR_MESSAGE
        return _scaled_product(scope, product, node.operator, factor).with_changes(lpar=node.lpar, rpar=node.rpar), message
    return None


def _folded(scope: Scope, node: cst.BinaryOperation) -> cst.BaseExpression | None:
    """``x * a * b`` -> ``x * (a * b)``, ``x / a / b`` -> ``x / (a * b)``, ``a * x / b`` -> ``(a / b)
    * x``: a tensor multiplied or divided by two or more numbers one after the other (Python
    applies each to the whole tensor), the numbers folded into one; not a tensor known to be small
    (a module's weight, a range); None for anything else."""
    factors: list[tuple[cst.BaseBinaryOp, cst.BaseExpression]] = []  # (operator, number), last first
    value: cst.BaseExpression = node
    while (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Multiply, cst.Divide))
           and _number(scope, value.right)):
        factors.append((value.operator, value.right))
        value = value.left
    leading = None  # `a * x * b`: the number before the tensor
    if (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)
            and _number(scope, value.left) and scope.is_tensor(value.right)):
        leading, value = value.left, value.right
    if len(factors) + (leading is not None) < 2 or not scope.is_tensor(value) or _number(scope, value):
        return None
    if _maybe_small(scope, value, set()):  # a weight, a range, a broadcast row: no activation-sized pass to spare
        return None
    factors.reverse()
    if leading is not None:  # (a op1 b op2 c) * x
        return cst.BinaryOperation(left=_fold(leading, factors), operator=cst.Multiply(), right=value,
                                   lpar=node.lpar, rpar=node.rpar)
    (first_operator, first), rest = factors[0], factors[1:]
    if isinstance(first_operator, cst.Divide):  # x / a * b == x / (a / b): each later operator inverted
        rest = [(cst.Divide() if isinstance(op, cst.Multiply) else cst.Multiply(), factor) for op, factor in rest]
    return cst.BinaryOperation(left=value, operator=first_operator, right=_fold(first, rest),
                               lpar=node.lpar, rpar=node.rpar)


def _maybe_small(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """Small (``_smaller``), or made from something small: a reduction's output (``torch.argmax(f,
    dim=1)``, ``peaks, _ = f.max(1, keepdim=True)``), a view or element-wise op of a small tensor
    (``torch.arange(n).view(1, -1)``, ``torch.sqrt(torch.tensor(2.0))``), or a local one
    assignment of which is such (``dim_t = torch.arange(d)``, then ``dim_t = t ** (2 * (dim_t //
    2) / d)``, a row of frequencies)."""
    if _smaller(scope, expr, seen):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return any(_maybe_small(scope, side, seen) for side in (expr.left, expr.right) if not _number(scope, side))
    if isinstance(expr, cst.UnaryOperation):
        return _maybe_small(scope, expr.expression, seen)
    if isinstance(expr, (cst.Call, cst.Attribute)):
        if isinstance(expr, cst.Call) and any(arg.keyword is not None and arg.keyword.value == "keepdim" for arg in expr.args):
            return True
        op = scope.op(expr)
        if op is None:
            return False
        if op[0] in _REDUCTIONS or op[0] in _SELECTIONS:
            return True
        return op[1] in (VIEW, ELEMENTWISE) and op[2] is not None and _maybe_small(scope, op[2], seen)
    if isinstance(expr, cst.Name) and expr.value not in seen:
        values = [value for target, value in scope.assignments if _binds(target, expr.value)]
        return any(_maybe_small(scope, value, seen | {expr.value}) for value in values)
    return False


def _binds(target: cst.BaseExpression, name: str) -> bool:
    """Does the assignment target ``target`` bind ``name`` (``name``, ``name, _``)?"""
    if isinstance(target, cst.Name):
        return target.value == name
    return isinstance(target, (cst.Tuple, cst.List)) and any(_binds(element.value, name) for element in target.elements)


def _fold(first: cst.BaseExpression, rest: list[tuple[cst.BaseBinaryOp, cst.BaseExpression]]) -> cst.BaseExpression:
    """``(first op1 a op2 b)``: the numbers as one parenthesized product."""
    folded = first
    for operator, factor in rest:
        if isinstance(factor, cst.BinaryOperation) and not factor.lpar and not isinstance(factor.operator, cst.Power):
            factor = factor.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        folded = cst.BinaryOperation(left=folded, operator=operator, right=factor)
    return folded.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _made_from_own(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """A module's own tensor (``self.w``), or what views and element-wise ops make of it
    (``self.w.t()``, ``F.normalize(self.w, dim=0)``, ``self.w * 2``), or a local every assignment
    of which is one: a weight, whose size does not grow with the batch or the sequence."""
    if _own_tensor(scope, expr):
        return True
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        sides = [side for side in (expr.left, expr.right) if not _number(scope, side)]
        return len(sides) == 1 and _made_from_own(scope, sides[0], seen)
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_made_from_own(scope, value, seen | {expr.value}) for value in values)
    op = scope.op(expr) if isinstance(expr, (cst.Call, cst.Attribute)) else None
    if op is None or op[2] is None or not (op[1] in (VIEW, ELEMENTWISE) or op[0] in _NORMS):
        return False
    return _made_from_own(scope, op[2], seen)


def _normalized(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """The output of a norm (``F.normalize(x)``, ``self.norm(x)``, ``F.layer_norm(...)``), or a
    local every assignment of which is one: an activation at full size, which a factor it is
    multiplied by (a gain, a modulation) is no larger than."""
    if isinstance(expr, cst.Call):
        op = scope.op(expr) or scope.module_op(expr)
        return op is not None and op[0] in _NORMS
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_normalized(scope, value, seen | {expr.value}) for value in values)
    return False


def _scale_of(scope: Scope, expr: cst.BaseExpression, small: cst.BaseExpression) -> bool:
    """Can ``expr`` scale ``small`` instead of the product: a number; or, one a module's tensor
    (or a 0-d one) and the other a keepdim reduction (``gamma`` and ``nx`` of a response norm),
    a tensor that stays smaller once multiplied into ``small`` (two broadcast tensors, such as
    ``m[:, :, None] * k[:, None, :]``, may multiply into an outer product as large as the result)."""
    if _number(scope, expr):
        return True
    return {_kind(scope, expr, set()), _kind(scope, small, set())} == {"fixed", "reduced"}


def _kind(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> str | None:
    """"fixed" for a module's tensor or a 0-d one, "reduced" for a keepdim reduction, or for a
    value made of one of those and numbers (``g / (g.mean(1, keepdim=True) + eps)`` too)."""
    if _own_tensor(scope, expr.value if isinstance(expr, cst.Subscript) else expr) or zero_dim(scope, expr):
        return "fixed"
    if _reduced(scope, expr) is not None:
        return "reduced"
    if isinstance(expr, cst.UnaryOperation):
        return _kind(scope, expr.expression, seen)
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        sides = [side for side in (expr.left, expr.right) if not _number(scope, side)]
        if len(sides) == 2:
            for kept, reducing in (sides, sides[::-1]):
                reduced = _reduced(scope, reducing)
                if reduced is not None and same_expression(reduced, kept):
                    return _kind(scope, kept, seen)
            return None
        return _kind(scope, sides[0], seen) if sides else None
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        kinds = {_kind(scope, value, seen | {expr.value}) for value in values}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _narrow_input(scope: Scope, expr: cst.BaseExpression, ref: StatementRef) -> cst.BaseExpression | None:
    """The input ``h`` of ``self.b(h)``, where ``self.b`` is a Linear without bias whose output is
    wider than ``h``: a head onto the vocabulary (``nn.Linear(dim, vocab_size, bias=False)``), or
    a Linear that reads another Linear's output (``self.a(x)``, or a name the statement before
    ``ref`` that last mentions it sets to one): two linear maps with nothing between are a
    low-rank factorization (a LoRA adapter, a bottleneck), whose middle is narrower than its
    output. Also ``t`` of ``t @ self.emb.weight.t()`` (``F.linear(t, self.emb.weight)``), logits
    over the vocabulary of a tied embedding. A number scaling the output can scale the input."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
        table = _untransposed(expr.right)
        return expr.left if table is not expr.right and _embedding_table(scope, table) else None
    if not (isinstance(expr, cst.Call) and expr.args and all(arg.keyword is None and not arg.star for arg in expr.args)):
        return None
    first = expr.args[0].value
    if len(expr.args) == 2:
        linear = scope.torch_name(expr.func) == "torch.nn.functional.linear"
        return first if linear and _embedding_table(scope, expr.args[1].value) else None
    built = _linear_constructors(scope, expr.func)
    if len(expr.args) != 1 or not built or not all(_without_bias(call) for call in built):
        return None
    return first if all(map(_to_vocabulary, built)) or _linear_output(scope, first, ref) else None


def _embedding_table(scope: Scope, expr: cst.BaseExpression) -> bool:
    """``self.emb.weight``, ``self.token_emb.emb.weight``: the weight of an ``nn.Embedding``
    member (of a same-file module member), one row per token of the vocabulary."""
    if scope.class_name is None or not (isinstance(expr, cst.Attribute) and expr.attr.value == "weight"):
        return False
    path, node = [], expr.value
    while isinstance(node, cst.Attribute):
        path.append(node.attr.value)
        node = node.value
    if not (isinstance(node, cst.Name) and node.value == "self" and path):
        return False
    facts, owner = scope.facts, scope.class_name
    *owners, attr = reversed(path)
    for member in owners:
        owner = facts.module_attr(owner, member) or ""
        if owner not in facts.classes:
            return False
    if facts.nn_class(owner, attr) == "Embedding":
        return True
    kind = facts.module_attr(owner, attr) or ""
    return kind in facts.classes and facts.torch_base(kind) == "Embedding"


def _linear_output(scope: Scope, expr: cst.BaseExpression, ref: StatementRef) -> bool:
    """A Linear's output: ``self.a(x)`` (past a dropout, ``self.drop(self.a(x))``, which a
    number scales through), or a name that the statement before ``ref`` in its block that last
    mentions it sets to one."""
    if isinstance(expr, cst.Call):
        if _dropout(scope, expr.func) and len(expr.args) == 1:
            return _linear_output(scope, expr.args[0].value, ref)
        return bool(_linear_constructors(scope, expr.func))
    if not isinstance(expr, cst.Name):
        return False
    for earlier in ref.earlier():
        if mentions(earlier.node, expr.value):
            small = earlier.simple
            return (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and small.targets[0].target.value == expr.value and _linear_output(scope, small.value, earlier))
    return False


def _dropout(scope: Scope, func: cst.BaseExpression) -> bool:
    return (scope.class_name is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value == "self" and scope.facts.nn_class(scope.class_name, func.attr.value) == "Dropout")


def _linear_constructors(scope: Scope, func: cst.BaseExpression) -> list[ast.Call]:
    """The ``nn.Linear(...)`` calls that build ``self.<attr>`` (empty unless every assignment of
    the member is one)."""
    if scope.class_name is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                        and func.value.value == "self"):
        return []
    attr = func.attr.value
    if scope.facts.nn_class(scope.class_name, attr) != "Linear":
        return []
    calls = [assign.value for assign in scope.facts.member_values(scope.class_name, attr)]
    return calls if all(isinstance(call, ast.Call) for call in calls) else []  # type: ignore[return-value]


def _without_bias(call: ast.Call) -> bool:
    return any(
        keyword.arg == "bias" and isinstance(keyword.value, ast.Constant) and keyword.value.value is False
        for keyword in call.keywords
    )


def _to_vocabulary(call: ast.Call) -> bool:
    """``nn.Linear(dim, config.vocab_size)``: a language model's head, whose output (one logit per
    token of the vocabulary) is far wider than its input."""
    out = next((keyword.value for keyword in call.keywords if keyword.arg == "out_features"), None)
    if out is None and len(call.args) >= 2:
        out = call.args[1]
    name = out.attr if isinstance(out, ast.Attribute) else out.id if isinstance(out, ast.Name) else ""
    return "vocab" in name


def _scaled_input(product: cst.Call | cst.BinaryOperation, operator: cst.BaseBinaryOp,
                  factor: cst.BaseExpression) -> cst.BaseExpression:
    """``self.b(h * factor)``, ``(t * factor) @ w.t()``: ``product`` with its narrow input scaled."""
    if isinstance(factor, cst.BinaryOperation) and not factor.lpar and not isinstance(factor.operator, cst.Power):
        factor = factor.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if isinstance(product, cst.BinaryOperation):
        scaled = cst.BinaryOperation(left=product.left, operator=operator, right=factor,
                                     lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return product.with_changes(left=scaled)
    scaled = cst.BinaryOperation(left=product.args[0].value, operator=operator, right=factor)
    return product.with_changes(args=[product.args[0].with_changes(value=scaled), *product.args[1:]])


_CHAIN_MESSAGE = "a tensor scaled by numbers one after the other: fold the numbers first, one full-size pass fewer"
_DIVISOR_MESSAGE = "a number scales a quotient by a smaller divisor: fold it into the divisor"
_NARROW_INPUT_MESSAGE = "a number scales the output of a Linear wider than its input: scale the input instead"
_NORM_MESSAGE = "a number scales a norm's output before another factor: scale that factor instead"
_MATMUL_MESSAGE = "a number scales a matmul with a module's tensor: scale that tensor instead"


def _message(scope: Scope, factor: cst.BaseExpression) -> str | None:
    """The finding's message where the scale is a tensor (the rule's own one-liner for a number)."""
    if _number(scope, factor):
        return None
    return f"`{code_of(factor)}` scales a product with a larger tensor: scale its smaller factor instead"


def _smaller_side(scope: Scope, product: cst.BinaryOperation) -> str | None:
    """Which factor of the tensor product ``a * b`` is smaller than the product ("right" first);
    of a matmul ``x @ w``, the module's own tensor."""
    if isinstance(product.operator, cst.MatrixMultiply):
        if _made_from_own(scope, product.right, set()):
            return "right"
        return "left" if _made_from_own(scope, product.left, set()) else None
    if not isinstance(product.operator, (cst.Multiply, cst.Divide)):
        return None
    if not (scope.is_tensor(product.left) and scope.is_tensor(product.right)):
        return None
    if _smaller(scope, product.right, set()):
        return "right"
    return "left" if _smaller(scope, product.left, set()) else None


def _scaled_product(
    scope: Scope, product: cst.BinaryOperation, operator: cst.BaseBinaryOp, factor: cst.BaseExpression
) -> cst.BinaryOperation:
    """``a * b`` with ``factor`` applied to its smaller factor: ``a * (b * s)`` or ``(a * s) * b``."""
    right = _smaller_side(scope, product) == "right"
    if right and isinstance(product.operator, cst.Divide):  # x / g * s == x / (g / s)
        operator = cst.Divide() if isinstance(operator, cst.Multiply) else cst.Multiply()
    scaled = _scale(product.right if right else product.left, operator, factor)
    return product.with_changes(right=scaled) if right else product.with_changes(left=scaled)


def _scale(small: cst.BaseExpression, operator: cst.BaseBinaryOp, factor: cst.BaseExpression) -> cst.BaseExpression:
    """``(small * factor)``; for a broadcast ``g[None, :]``, ``(g * factor)[None, :]``: scaled
    before the view, the scale stays in the kernel that reads ``g`` (fusionrt counts no kernel more)."""
    if isinstance(small, cst.Subscript) and _broadcast(small) and isinstance(small.value, (cst.Name, cst.Attribute)):
        return small.with_changes(value=_scale(small.value, operator, factor))
    if isinstance(factor, cst.BinaryOperation) and not factor.lpar and not isinstance(factor.operator, cst.Power):
        factor = factor.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if not isinstance(small, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp)):
        small = small.with_changes(lpar=[], rpar=[])  # a sum keeps its parentheses: `(g + 1.0) * s`
    return cst.BinaryOperation(left=small, operator=operator, right=factor, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _broadcast(subscript: cst.Subscript) -> bool:
    return any(
        isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None"
        for e in subscript.slice
    )


def _smaller(scope: Scope, expr: cst.BaseExpression, seen: set[str]) -> bool:
    """Is ``expr`` a tensor known to be smaller than what it multiplies: broadcast (``g[None, :]``,
    ``g.unsqueeze(0)``), a module's own tensor (``self.g``), a range (``torch.arange(n)``, one
    dim), or a local made only of those and numbers (``gamma = self.g + 1.0``)?"""
    if zero_dim(scope, expr) or _reduced(scope, expr) is not None:
        return True
    if isinstance(expr, cst.Subscript):
        return scope.is_tensor(expr.value) if _broadcast(expr) else _own_tensor(scope, expr.value)
    if isinstance(expr, cst.Call) and scope.torch_name(expr.func) in _RANGES:
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze":
        return scope.is_tensor(expr.func.value)
    if _own_tensor(scope, expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        sides = [side for side in (expr.left, expr.right) if not _number(scope, side)]
        if len(sides) == 2:  # `g / (g.mean(1, keepdim=True) + eps)`: g's shape; an outer product is not
            for kept, reducing in (sides, sides[::-1]):
                reduced = _reduced(scope, reducing)
                if reduced is not None and same_expression(reduced, kept):
                    return _smaller(scope, kept, seen)
            return False
        return len(sides) == 1 and _smaller(scope, sides[0], seen)  # `self.g + 1.0`
    if isinstance(expr, cst.UnaryOperation):
        return _smaller(scope, expr.expression, seen)
    if isinstance(expr, cst.Name) and expr.value in scope.tensors and expr.value not in seen:
        values = [value for target, value in scope.assignments if isinstance(target, cst.Name) and target.value == expr.value]
        return bool(values) and all(_smaller(scope, value, seen | {expr.value}) for value in values)
    return False


def _untransposed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``w`` of ``w.t()``, ``w.T``, ``w.mT``, ``w.transpose(...)``; ``expr`` itself otherwise."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT"):
        return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("t", "transpose"):
        return expr.func.value
    return expr


def _reduced(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor a keepdim reduction (``x.mean(1, keepdim=True)``, ``torch.norm(x, dim=d,
    keepdim=True)``) reduces, past numbers added to or scaling it (``+ eps``)."""
    while isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        if _number(scope, expr.right):
            expr = expr.left
        elif _number(scope, expr.left):
            expr = expr.right
        else:
            return None
    if isinstance(expr, cst.Subscript) and _one_position(expr):  # `y[:, -1:, :]`: y's last row, dims kept
        return expr.value if scope.is_tensor(expr.value) else None
    for op in _REDUCTIONS:
        reduction = keepdim_reduction(scope, expr, op)
        if reduction is not None:
            return reduction.operand if scope.is_tensor(reduction.operand) else None
    return None


def _one_position(subscript: cst.Subscript) -> bool:
    """``y[:, -1:, :]``, ``y[..., :1]``, ``y[:, 0:1]``: slices only, one of them a single position
    (literal bounds), so the result keeps every dim and broadcasts like a keepdim reduction."""
    single = False
    for element in subscript.slice:
        part = element.slice
        if not isinstance(part, cst.Slice):
            if not (isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis)):
                return False
            continue
        if part.step is not None:
            return False
        lower = int_literal(part.lower) if part.lower is not None else 0
        upper = int_literal(part.upper) if part.upper is not None else None
        if part.lower is None and part.upper is None:
            continue
        single = single or (lower == -1 and part.upper is None) or (
            lower is not None and upper is not None and upper - lower == 1 and lower >= 0)
    return single


def _own_tensor(scope: Scope, expr: cst.BaseExpression) -> bool:
    """``self.g``: a tensor the module holds (a parameter or a buffer)."""
    return (
        isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"
        and scope.is_tensor(expr)
    )


def _number(scope: Scope, expr: cst.BaseExpression) -> bool:
    """Surely a Python number: a literal, ``math.sqrt(d)``, a name that holds numbers (``d: int``,
    ``s = d ** -0.5``), a module's attribute that is neither a tensor nor a module
    (``self.scale``), a field of a model's config (``self.config.logit_scale``), arithmetic of
    those."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return not scope.is_tensor(expr) and not scope.typing.is_module(expr)
    if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
        return _number(scope, expr.left) and _number(scope, expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _number(scope, expr.expression)
    if isinstance(expr, cst.Attribute):
        dotted = dotted_name(expr) or ""
        return dotted in _NUMBER_CONSTANTS or dotted.startswith(("config.", "self.config."))  # a config field
    return NumberNames(scope).is_number(expr)


def _replace(ref: StatementRef, node: cst.CSTNode, replacement: cst.BaseExpression) -> tuple[StatementEdit, ...] | None:
    statement = ref.node
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    return (StatementEdit(statement, (replace_nodes(statement, {node: replacement}),)),)
