"""Tensor inference that reads models: module attributes, same-file functions and the tuples they
return, library calls, names used the way only a tensor is and helpers' parameters that calls pass
tensors, on real libcst and ast trees (and through the engine); each case with what is no tensor."""
from __future__ import annotations

import ast
import textwrap

import libcst as cst

from fusionlint.analysis import collect_scopes, module_facts
from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions
from fusionlint.ops import op_tables


def tensors(source: str) -> dict[str, set[str]]:
    """The tensor names of each function scope, by function name."""
    source = textwrap.dedent(source)
    found = collect_scopes(cst.parse_module(source), module_facts(ast.parse(source)), op_tables())
    return {s.node.name.value: s.tensors for s in found if isinstance(s.node, cst.FunctionDef)}


def test_calls_of_module_attributes_return_tensors():
    found = tensors("""
        import torch
        from torch import nn

        class Gate(nn.Module):
            def forward(self, x):
                return x.sigmoid()

        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)

        class Block(Base):
            def __init__(self, cfg):
                super().__init__()
                self.fc1 = nn.Linear(8, 8)
                self.gate = Gate()
                self.act = torch.nn.GELU() if cfg.gelu else nn.Identity()
                self.name = str(cfg)
                self.helper = make_helper(cfg)
                self.scale = cfg.scale

            def run(self, x, cfg):
                h = self.fc1(x)
                g = self.gate(h)
                n = self.norm(h)
                a = self.act(h)
                w = self.fc1.weight
                label = self.name.upper()
                other = self.helper(x)
                s = self.scale(x)
                c = cfg.encoder(x)
                return h
    """)["run"]
    assert {"h", "g", "n", "a", "w"} <= found
    assert not {"label", "other", "s", "c", "x", "cfg"} & found


def test_a_module_whose_forward_returns_no_tensor():
    found = tensors("""
        from torch import nn

        class Pair(nn.Module):
            def forward(self, x):
                return (x, x)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.pair = Pair()
                self.proj = nn.Linear(2, 2)

            def run(self, x):
                p = self.pair(x)
                y = self.proj(x)
                return y
    """)["run"]
    assert "y" in found and "p" not in found


def test_members_of_module_containers():
    found = tensors("""
        import torch.nn as nn

        class Layer(nn.Module):
            def forward(self, x):
                return x * 2

        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Layer() for _ in range(2)])
                self.seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
                self.heads = nn.ModuleDict({"a": nn.Linear(2, 2)})
                self.names = ["a", "b"]

            def run(self, x, i):
                for blk in self.blocks:
                    a = blk(x)
                for j, layer in enumerate(self.blocks[1:]):
                    b = layer(x)
                c = self.blocks[i](x)
                d = self.seq(x)
                e = self.heads["a"](x)
                first = self.seq[0]
                f = first(x)
                for name in self.names:
                    g = name(x)
                for key in self.heads:
                    k = key(x)
                h = self.blocks(x)
                return a
    """)["run"]
    assert {"a", "b", "c", "d", "e", "f"} <= found
    assert not {"g", "h", "k", "name", "key", "j", "i"} & found


def test_same_file_functions_and_methods_returning_tensors():
    found = tensors("""
        import torch
        from torch import Tensor

        def rotate(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)

        def annotated(x) -> Tensor:
            return helper_from_elsewhere(x)

        def shape_of(x) -> tuple:
            return x.softmax(-1)

        def count(x):
            return len(x)

        def ping(x):
            return pong(x)

        def pong(x):
            return ping(x)

        def nested(x):
            def inner():
                return torch.ones(1)
            return 3

        class Attention(torch.nn.Module):
            def _scores(self, q, k):
                return q @ k.transpose(-1, -2)

            def _shape(self, x):
                return x.size()

            def run(self, x):
                r = rotate(x)
                t = annotated(x)
                s = shape_of(x)
                n = count(x)
                p = ping(x)
                z = nested(x)
                scores = self._scores(x, x)
                size = self._shape(x)
                return r
    """)["run"]
    assert {"r", "t", "scores"} <= found
    assert not {"s", "n", "p", "z", "size"} & found


def test_library_calls():
    found = tensors("""
        import torch
        import torch.nn.functional as F
        from einops import rearrange, repeat
        import einops

        def run(x: torch.Tensor, spec):
            a = rearrange(x, "b n d -> b d n")
            b = einops.reduce(x, "b n d -> b d", "mean")
            c = repeat(spec, "n -> b n", b=2)
            d = F.gelu(x)
            e = torch.randn(2, 3)
            f = torch.cuda.device_count()
            return a
    """)["run"]
    assert {"a", "b", "d", "e"} <= found
    assert not {"c", "f", "spec"} & found


def test_names_used_as_tensors():
    found = tensors("""
        import torch

        def used(x, y, w, m, cfg, n: int, dims=(0, 1)):
            a = x.clone()
            b = torch.matmul(y, w)
            c = m.sum(dim=-1)
            d = cfg.get("k")
            e = n.bit_length()
            return torch.softmax(a, -1)

        def operator(p, q):
            return p @ q

        def transposed(p):
            return p.transpose(0, 1)
    """)
    assert {"x", "y", "w", "m", "a", "b", "c"} <= found["used"]
    assert not {"cfg", "n", "d", "e", "dims"} & found["used"]
    assert found["operator"] == {"p", "q"} and found["transposed"] == {"p"}


def test_numpy_files_keep_the_ambiguous_uses_out():
    found = tensors("""
        import numpy as np
        import torch

        def arrays(p, q, r, s):
            t = p @ q
            u = r.transpose(1, 0)
            v = np.matmul(s, s)
            return s.clone()
    """)["arrays"]
    assert found == {"s"}  # .clone() is a tensor's alone; np is a module, never a tensor


def test_burn_clone_example_without_annotations_is_found():
    source = textwrap.dedent("""\
        import torch


        def g(x, y):
            a = x * 2
            b = y + 1
            t3 = a.clone().sum(-1, keepdim=True)
            out = t3 + a * b
            return out
    """)
    result = lint_source(source, "burn.py", LintOptions(codes=frozenset({"FL002"}), fix=FixMode.OFF))
    assert [(f.code, f.line) for f in result.findings] == [("FL002", 7)]
    plain = source.replace("a.clone()", "a.copy()")
    assert lint_source(plain, "burn.py", LintOptions(codes=frozenset({"FL002"}), fix=FixMode.OFF)).findings == ()


def test_loop_variables_over_tensors_and_tensor_lists():
    found = tensors("""
        import torch
        from typing import List, Optional, Sequence

        def f(xs: List[torch.Tensor], zs: Optional[Sequence[torch.Tensor]], t: torch.Tensor,
              names: list[str], items: list, n: int):
            for x in xs:
                a = x * 2
            for i, y in enumerate(zs):
                b = y
            for u, k in zip(xs, range(n)):
                c = u
            for row in t:
                d = row
            for j in range(n):
                e = j
            for name in names:
                g = name
            for item in items:
                h = item
            for p, q in zip(names, xs):
                r = q
    """)["f"]
    assert {"x", "a", "y", "b", "u", "c", "row", "d", "q", "r"} <= found
    assert not {"i", "k", "j", "e", "name", "g", "item", "h", "p", "xs", "names"} & found


def test_methods_of_same_file_module_attributes():
    found = tensors("""
        import torch
        from torch import nn

        class AltUp(nn.Module):
            def predict(self, x: torch.Tensor) -> torch.Tensor:
                return x * 2

            def correct(self, x, y):
                return x + torch.tanh(y)

            def describe(self, x):
                return f"{x.shape}"

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.altup = AltUp()
                self.fc = nn.Linear(8, 8)

            def run(self, x, cfg):
                p = self.altup.predict(x)
                c = self.altup.correct(p, x)
                s = self.altup.describe(x)
                m = self.altup.missing(x)
                o = cfg.altup.predict(x)
                return c
    """)["run"]
    assert {"p", "c"} <= found
    assert not {"s", "m", "o"} & found


def test_host_reads_tell_a_tensor():
    """``.cpu()``/``.numpy()`` only a tensor has; ``.item()``/``.tolist()`` a NumPy array too, so
    they tell a tensor only in a file that does not import numpy."""
    plain = tensors("""
        import torch

        def f(a, b, c, d):
            return a.cpu(), b.numpy(), c.item(), d.tolist()
    """)["f"]
    assert {"a", "b", "c", "d"} <= plain
    numpy = tensors("""
        import numpy as np
        import torch

        def f(a, b, c, d):
            return a.cpu(), b.numpy(), c.item(), d.tolist()
    """)["f"]
    assert {"a", "b"} <= numpy and not {"c", "d"} & numpy


def test_shape_reads_tell_a_tensor_in_a_file_without_numpy():
    source = """
        import torch

        def rotate_half(x, cfg):
            x1 = x[..., : x.shape[-1] // 2]
            n = x.shape[0]
            rank = x.ndim
            size = cfg.size
            return x1
    """
    found = tensors(source)["rotate_half"]
    assert {"x", "x1"} <= found
    assert not {"n", "rank", "size", "cfg"} & found
    arrays = tensors("import numpy as np\n" + textwrap.dedent(source))["rotate_half"]
    assert not {"x", "x1"} & arrays


def test_tensor_methods_down_a_chain_tell_its_root():
    found = tensors("""
        import torch

        def f(attn_output, x, cfg, shape):
            out = attn_output.reshape(*shape, -1).contiguous()
            var = x.pow(2).mean(-1, keepdim=True)
            value = cfg.get("k").contiguous()
            return out
    """)["f"]
    assert {"attn_output", "out", "x", "var"} <= found
    assert not {"cfg", "shape"} & found


def test_module_instances_bound_to_names():
    found = tensors("""
        import torch
        from torch import nn
        from torch.nn import CrossEntropyLoss

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.scale = 0.5

            def forward(self, x):
                return self.fc(x)

        def run(logits, labels, x):
            loss_fct = CrossEntropyLoss()
            loss = loss_fct(logits, labels)
            y = nn.Linear(4, 4)(x)
            blk = Block()
            z = blk(x)
            h = blk.fc(x)
            s = blk.scale
            maker = make_block()
            m = maker(x)
            return loss
    """)["run"]
    assert {"loss", "y", "z", "h"} <= found
    assert not {"loss_fct", "blk", "s", "maker", "m"} & found


def test_parameters_annotated_with_a_module_class():
    found = tensors("""
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.to_q = nn.Linear(8, 8)
                self.heads = 2

            def prepare(self, mask: torch.Tensor) -> torch.Tensor:
                return mask * 2

        def process(attn: Attention, fc: nn.Linear, any_module: nn.Module, x: torch.Tensor, mask):
            q = attn.to_q(x)
            heads = attn.heads
            prepared = attn.prepare(mask)
            y = fc(x)
            w = fc.weight
            z = any_module(x)
            return q
    """)["process"]
    assert {"q", "prepared", "y", "w"} <= found
    assert not {"attn", "heads", "fc", "any_module", "z"} & found


def test_torch_layer_subclasses_and_super_calls():
    found = tensors("""
        import torch
        from torch import nn

        class Positions(nn.Embedding):
            def embed(self, ids, scale):
                e = super().forward(ids)
                w = self.weight[ids]
                pad = self.padding_idx
                return e * scale

        class Base(nn.Module):
            def pair(self, x: torch.Tensor):
                return x, x

            def double(self, x: torch.Tensor):
                return x * 2

        class Child(Base):
            def run(self, x):
                p = super().pair(x)
                d = super().double(x)
                w = self.weight
                return d
    """)
    assert {"e", "w"} <= found["embed"] and not {"pad", "ids", "scale"} & found["embed"]
    assert "d" in found["run"] and not {"p", "w"} & found["run"]  # nn.Module itself has no weight


def test_elements_of_returned_tuples():
    found = tensors("""
        import torch
        from torch import nn

        def attend(q: torch.Tensor, k: torch.Tensor):
            weights = torch.softmax(q @ k.T, -1)
            return weights @ k, None

        def rope(x: torch.Tensor) -> tuple[torch.Tensor, int]:
            return x, 0

        def loose(x) -> tuple[torch.Tensor]:  # "a tuple of tensors"
            return x, x

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x), x.shape

        class Encoder(nn.Module):
            def forward(self, x):
                return Output(hidden=x)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = Layer()
                self.encoder = Encoder()

            def run(self, q, k, position_embeddings: tuple[torch.Tensor, torch.Tensor]):
                out, attn_weights = attend(q, k)
                result = attend(q, k)
                first, second = result[0], result[1]
                rotated, offset = rope(q)
                a, b = loose(q)
                h, shape = self.layer(q)
                hidden = self.layer(q)[0]
                size = self.layer(q)[1]
                encoded = self.encoder(q)
                main = encoded[0]
                other = encoded[1]
                cos, sin = position_embeddings
                return out
    """)["run"]
    assert {"out", "first", "rotated", "a", "b", "h", "hidden", "main", "cos", "sin"} <= found
    assert not {"attn_weights", "result", "second", "offset", "shape", "size", "encoded", "other",
                "position_embeddings"} & found


def test_modules_deriving_from_an_imported_base():
    """A same-file class with a ``forward`` is a module even when its base is imported
    (``class T5Stack(T5PreTrainedModel)``): the first element of what it returns is a tensor."""
    found = tensors("""
        import torch
        from torch import nn
        from .modeling_utils import PreTrainedModel

        class Stack(PreTrainedModel):
            def forward(self, x):
                return ModelOutput(last_hidden_state=x)

        class Helper(PreTrainedModel):
            def describe(self):
                return "helper"

        class Model(PreTrainedModel):
            def __init__(self, cfg):
                super().__init__(cfg)
                self.encoder = Stack(cfg)
                self.helper = Helper(cfg)

            def run(self, x):
                outputs = self.encoder(x)
                hidden = outputs[0]
                described = self.helper(x)
                return hidden
    """)["run"]
    assert "hidden" in found and not {"outputs", "described"} & found


def test_untyped_parameters_of_helpers_that_calls_pass_tensors():
    found = tensors("""
        import torch
        from torch import nn

        def rotate_half(x):
            x1 = x[..., :4]
            x2 = x[..., 4:]
            return torch.cat((-x2, x1), dim=-1)

        def apply_rotary(q, cos, sin, unsqueeze_dim=1):
            cos = cos.unsqueeze(unsqueeze_dim)
            return (q * cos) + (rotate_half(q) * sin)

        def scaled(x, factor):
            y = x * factor
            return y

        def never_a_tensor(count):
            half = count // 2
            return half

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.q_proj = nn.Linear(8, 8)

            def _norm(self, states):
                centered = states - 1
                return centered

            def forward(self, hidden, cos, sin):
                q = self.q_proj(hidden)
                q = apply_rotary(q, cos, sin)
                y = scaled(factor=2.0, x=q)
                n = never_a_tensor(8)
                return self._norm(q)
    """)
    assert {"x", "x1", "x2"} <= found["rotate_half"]
    assert {"q", "cos", "sin"} <= found["apply_rotary"] and "unsqueeze_dim" not in found["apply_rotary"]
    assert {"x", "y"} <= found["scaled"] and "factor" not in found["scaled"]
    assert not {"count", "half"} & found["never_a_tensor"]
    assert {"states", "centered"} <= found["_norm"]


def test_identity_tests_and_type_queries_are_no_tensors():
    found = tensors("""
        import torch

        def f(x: torch.Tensor, cache, key):
            missing = x is None
            cached = key in cache
            equal = x == 0
            as_float = x.type(torch.float32)
            name = x.type()
            rows = x.size(0)
            count = len(x)
            value = x.sum().item()
            listed = x.tolist()
            return equal
    """)["f"]
    assert {"equal", "as_float"} <= found
    assert not {"missing", "cached", "name", "rows", "count", "value", "listed"} & found


def test_functional_ops_held_as_values():
    found = tensors("""
        import torch
        import torch.nn.functional as F
        from functools import partial
        from torch import nn

        class Gate(nn.Module):
            def __init__(self, kind):
                super().__init__()
                self.act = F.gelu
                self.attn_fn = partial(F.softmax, dim=-1)
                self.dtype_of = torch.float32
                self.custom = kind

            def run(self, x):
                a = self.act(x)
                s = self.attn_fn(x)
                c = self.custom(x)
                fn = F.silu
                f = fn(x)
                return a
    """)["run"]
    assert {"a", "s", "f"} <= found
    assert not {"c", "fn", "x"} & found


def test_helpers_called_with_anything_keep_their_parameters_untyped():
    found = tensors("""
        import torch
        from torch import nn

        def default(val, d):
            return val if val is not None else d

        class Block(nn.Module):
            def forward(self, x):
                y = default(x, x)
                s = default(self.scale, 1.0)
                return y * s
    """)
    assert not {"val", "d"} & found["default"]


def test_a_union_with_a_non_tensor_member_is_no_tensor():
    """``Union[int, Tensor]`` may hold the int (a size given either way): arithmetic on it is
    not tensor work; ``Optional[Tensor]`` and ``Tensor | None`` hold a tensor when they hold one."""
    found = tensors("""
        from typing import Optional, Union
        import torch

        def f(x: torch.Tensor, a: Union[int, torch.Tensor], b: Optional[torch.Tensor],
              c: torch.Tensor | None, d: int | torch.Tensor):
            return x + a * 2, x + b * 2, x + c * 2, x + d * 2
    """)["f"]
    assert {"x", "b", "c"} <= found
    assert not found & {"a", "d"}


def test_layers_built_by_injected_factories():
    """timm's, torchvision's and monai's blocks take their layer classes as constructor
    parameters: the module each builds is a module, whatever the caller passes; a parameter
    whose default is no layer class (a helper, a number, None never replaced) builds nothing known."""
    source = """
        from functools import partial
        from typing import Callable, Optional
        import torch
        from torch import nn

        class Mlp(nn.Module):
            def forward(self, x):
                return x * 2

        class Block(nn.Module):
            def __init__(self, dim, act_layer=nn.GELU, norm_layer: Callable = nn.LayerNorm,
                         ln=partial(nn.LayerNorm, eps=1e-6), bn=None, gn=None, mlp_layer=Mlp,
                         proj: Optional[Callable[..., nn.Module]] = None, helper=make_helper, scale=1.0, maybe=None):
                super().__init__()
                bn = bn or nn.BatchNorm2d
                if gn is None:
                    gn = nn.GroupNorm
                self.act = act_layer()
                self.norm = norm_layer(dim)
                self.ln = ln(dim)
                self.bn = bn(dim)
                self.gn = gn(2, dim) if dim > 2 else nn.Identity()
                self.mlp = mlp_layer()
                self.proj = proj(dim, dim)
                self.blocks = nn.Sequential(*[norm_layer(dim) for _ in range(2)])
                self.helper = helper(dim)
                self.scale = scale(dim)
                self.maybe = maybe(dim)

            def run(self, x: torch.Tensor):
                a, n, l, b, g, m, p = self.act(x), self.norm(x), self.ln(x), self.bn(x), self.gn(x), self.mlp(x), self.proj(x)
                for blk in self.blocks:
                    y = blk(x)
                h, s, q = self.helper(x), self.scale(x), self.maybe(x)
                return a
    """
    assert {"a", "n", "l", "b", "g", "m", "p", "y"} <= tensors(source)["run"]
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert facts.module_attr("Block", "mlp") == "Mlp"
    assert facts.module_attr("Block", "blocks") == "sequential"
    assert facts.nn_class("Block", "norm") is None  # the caller may pass another class
    assert facts.module_attr("Block", "helper") is None


def test_activations_from_registries_and_builders():
    """``ACT2FN[config.hidden_act]`` and ``get_activation(...)`` are modules (the registry named as
    their class); any other table read by key, or an unknown helper's result, is not."""
    source = """
        import torch
        from torch import nn
        from transformers.activations import ACT2FN, get_activation

        class Mlp(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.act = ACT2FN[config.hidden_act]
                self.gelu = ACT2FN["gelu"]
                self.silu = get_activation(config.act_fn)
                self.acts = nn.ModuleDict({"gelu": nn.GELU()})
                self.table = TABLE[config.kind]
                self.other = make_activation(config.act_fn)

            def run(self, x: torch.Tensor, key: str):
                a, g, s = self.act(x), self.gelu(x), self.silu(x)
                d = ACT2FN["relu"](x)
                act = ACT2FN[key]
                b = act(x)
                picked = self.acts[key]
                c = picked(x)
                t, o = self.table(x), self.other(x)
                return a
    """
    found = tensors(source)["run"]
    assert {"a", "g", "s", "d", "b", "c"} <= found
    assert not {"act", "picked", "key"} & found
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert facts.nn_class("Mlp", "act") == "ACT2FN"
    assert facts.module_attr("Mlp", "silu") == "nn" and facts.nn_class("Mlp", "silu") is None
    assert facts.module_attr("Mlp", "table") is None and facts.module_attr("Mlp", "other") is None
    assert facts.module_attr("Mlp", "table") is None


def test_layer_classes_the_file_imports_as_factory_defaults():
    """A library's own layer class, imported, chosen in the constructor (``conv_block or
    ConvNormAct``, ``partial(ConvNormAct, ...)``, ``LayerNorm2d if conv_mlp else LayerNorm``)
    or returned by a layer getter builds a module; an imported constant or function does not."""
    source = """
        from functools import partial
        import torch
        from torch import nn
        from timm.layers import ConvNormAct, LayerNorm, LayerNorm2d, get_norm_act_layer, create_conv2d, make_divisible, DEFAULTS

        class Stem(nn.Module):
            def __init__(self, conv_block=None, norm_layer=None, conv_mlp=False, act=None, width=make_divisible):
                super().__init__()
                conv_block = conv_block or ConvNormAct
                block = partial(ConvNormAct, stride=2)
                if not norm_layer:
                    norm_layer = LayerNorm2d if conv_mlp else LayerNorm
                norm_act = get_norm_act_layer(norm_layer, act)
                table = DEFAULTS
                self.conv = conv_block(3, 8)
                self.down = block(8, 8)
                self.norm = norm_layer(8)
                self.bn = norm_act(8)
                self.dw = create_conv2d(8, 8, 3)
                self.table = table(8)
                self.width = width(8)

            def run(self, x: torch.Tensor):
                c, d, n, b, w = self.conv(x), self.down(x), self.norm(x), self.bn(x), self.dw(x)
                t, v = self.table(x), self.width(x)
                return c
    """
    found = tensors(source)["run"]
    assert {"c", "d", "n", "b", "w"} <= found
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert facts.module_attr("Stem", "table") is None and facts.module_attr("Stem", "width") is None


def test_members_built_by_imported_classes():
    """``self.mlp = Mlp(dim)`` with ``Mlp`` imported from the library's own layers is a module in
    a file using torch; an imported function's or constant's result is not, nor any of it in a
    file that never imports torch."""
    source = """
        import torch
        from torch import nn
        from timm import layers
        from timm.layers import Mlp, build_helper, ACTS

        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.mlp = Mlp(dim)
                self.conv = layers.ConvNormAct(dim, dim)
                self.helper = build_helper(dim)
                self.acts = ACTS(dim)

            def run(self, x: torch.Tensor):
                m, c = self.mlp(x), self.conv(x)
                h, a = self.helper(x), self.acts(x)
                return m
    """
    found = tensors(source)["run"]
    assert {"m", "c"} <= found
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert facts.module_attr("Block", "helper") is None and facts.module_attr("Block", "acts") is None
    without_torch = module_facts(ast.parse(textwrap.dedent(source).replace("import torch\n", "").replace(
        "from torch import nn\n", "")))
    assert without_torch.module_attr("Block", "mlp") is None


def test_members_assigned_a_module_the_constructor_holds():
    """``self.act = activation`` of ``activation=nn.GELU()``, ``self.blocks = blocks`` of a local
    ``nn.ModuleList()`` and ``self.norm = norm`` of ``norm = norm_layer(dim)`` are modules; a
    member assigned a parameter with no module for default, or a number, is not."""
    source = """
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Block(nn.Module):
            def __init__(self, dim, activation=nn.GELU(), gate=F.silu, norm_layer=nn.LayerNorm, kind=None, depth=2):
                super().__init__()
                blocks = nn.ModuleList()
                for _ in range(depth):
                    blocks.append(nn.Linear(dim, dim))
                norm = norm_layer(dim)
                width = dim * 2
                self.act = activation
                self.gate = gate
                self.blocks = blocks
                self.norm = norm
                self.kind = kind
                self.width = width

            def run(self, x: torch.Tensor):
                a, g, n = self.act(x), self.gate(x), self.norm(x)
                for blk in self.blocks:
                    b = blk(x)
                k, w = self.kind(x), self.width(x)
                return a
    """
    found = tensors(source)["run"]
    assert {"a", "g", "n", "b"} <= found
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert facts.module_attr("Block", "blocks") == "list"
    assert facts.module_attr("Block", "kind") is None and facts.module_attr("Block", "width") is None


def test_a_module_unpacked_leads_its_tuple_with_a_tensor():
    """``out, weights = self.attend(q, k, v)`` of a module whose ``forward`` the file does not
    hold: the first element is a tensor, the others (intermediates, a cache, None) need not be."""
    found = tensors("""
        import torch
        from torch import nn
        from .attend import Attend

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.attend = Attend()
                self.lstm = nn.LSTM(8, 8)

            def run(self, q: torch.Tensor):
                out, intermediates = self.attend(q)
                seq, state = self.lstm(q)
                first, second = q.chunk(2)
                return out
    """)["run"]
    assert {"out", "seq", "first", "second"} <= found
    assert not {"intermediates", "state"} & found


def test_a_sequential_unpacked_splits_its_one_tensor():
    """``mean, log_var = self.to_stats(x)`` of an ``nn.Sequential`` unbinds one tensor: both are
    tensors; an LSTM's ``out, state`` is a tuple led by the output."""
    found = tensors("""
        import torch
        from torch import nn

        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.to_stats = nn.Sequential(nn.Linear(8, 16), nn.Unflatten(-1, (2, 8)))
                self.rnn = nn.LSTM(8, 8)

            def forward(self, x):
                mean, log_var = self.to_stats(x).unbind(-2)
                mu, sigma = self.to_stats(x)
                out, state = self.rnn(x)
                return mean, log_var, mu, sigma, out, state
    """)["forward"]
    assert {"mean", "log_var", "mu", "sigma", "out"} <= found
    assert "state" not in found
