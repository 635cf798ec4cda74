"""Tensor inference over what a file cannot see and where values travel: members of a module called
on tensors whatever built them (a factory, a constructor argument, another file's class), lists
built of tensors, loops over zipped module containers, members a method assigns a tensor, and
names bound in branches; on real libcst and ast trees (and through the engine), each case with
what is no tensor."""
from __future__ import annotations

import ast
import textwrap

import libcst as cst

from fusionlint.analysis import collect_scopes, module_facts
from fusionlint.analysis.tensors import member_holds_tensor
from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions
from fusionlint.ops import op_tables


def tensors(source: str) -> dict[str, set[str]]:
    """The tensor names of each function scope, by function name."""
    source = textwrap.dedent(source)
    found = collect_scopes(cst.parse_module(source), module_facts(ast.parse(source)), op_tables())
    return {s.node.name.value: s.tensors for s in found if isinstance(s.node, cst.FunctionDef)}


def test_members_of_a_module_called_on_tensors_return_tensors():
    """A module's member that the class assigns, whatever built it (a constructor argument, a
    factory function, a registry read, a class of another file), called on a tensor, returns one;
    an attribute of a module of another file's class (``self.head.fc``) too. Not: a member called
    on no tensor, a member of a class that is no module, a method, nor a member never assigned.
    Members assigned by unpacking count, and a container's named layer (``self.body.fc``) too."""
    found = tensors("""
        import torch
        from torch import nn
        from collections import OrderedDict
        from .layers import make_norm, CONV, create_classifier

        class Block(nn.Module):
            def __init__(self, attn, dim, head):
                super().__init__()
                self.attn = attn
                self.norm = make_norm(dim)
                self.conv = CONV[dim](dim, dim)
                self.head = head
                self.size = make_norm(dim)

            def helper(self, x):
                return len(x)

            def forward(self, x, mask: int):
                a, n, c = self.attn(x), self.norm(x), self.conv(x)
                s = self.size(mask)
                h = self.helper(x)
                u = self.unknown(x)
                return a + n + c

        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.pool, self.fc = create_classifier(dim)
                self.body = nn.Sequential(OrderedDict(fc=nn.Linear(dim, dim)))

            def run(self, x: torch.Tensor):
                p, f, b = self.pool(x), self.fc(x), self.body.fc(x)
                return f

        class Loader:
            def __init__(self, transform):
                self.transform = transform

            def load(self, x: torch.Tensor):
                t = self.transform(x)
                return t
    """)
    assert {"a", "n", "c"} <= found["forward"]
    assert not {"s", "h", "u"} & found["forward"]
    assert "t" not in found["load"]
    assert {"p", "f", "b"} <= found["run"]


def test_a_member_module_unpacked_leads_with_a_tensor():
    found = tensors("""
        import torch
        from torch import nn
        from .attention import build_attention
        from .heads import Head

        class Layer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.attn = build_attention(dim)
                self.body = Head(dim)

            def forward(self, x):
                out, cache = self.attn(x)
                y = self.body.project(out)
                z = self.body.project(3)
                return out, cache
    """)["forward"]
    assert {"out", "y"} <= found
    assert not {"cache", "z"} & found


def test_lists_built_of_tensors():
    """A list appended tensors, a list display or comprehension of tensors, an empty list annotated
    as one of tensors, and a ``list[Tensor]`` parameter: an element is a tensor, and so is what a
    loop takes from it; a slice is a list, and a list of sizes holds no tensor."""
    found = tensors("""
        from typing import List
        import torch
        from torch import Tensor, nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x, xs: List[Tensor]):
                outs = []
                sizes = []
                for blk in self.blocks:
                    x = blk(x)
                    outs.append(x)
                    sizes.append(x.shape[-1])
                last, rest, n = outs[-1], outs[1:], sizes[0]
                feats = [blk(x) for blk in self.blocks]
                first = feats[0]
                pair = (x, last)
                p = pair[1]
                annotated = torch.jit.annotate(List[Tensor], [])
                kept: List[Tensor] = []
                a, k = annotated[0], kept[0]
                for o in outs:
                    y = o * 2
                e = xs[0]
                return last
    """)["forward"]
    assert {"last", "first", "p", "a", "k", "y", "e"} <= found
    assert not {"rest", "n", "outs", "sizes", "feats"} & found


def test_loops_over_zipped_module_containers():
    found = tensors("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
                self.norms = nn.ModuleList([nn.LayerNorm(4) for _ in range(3)])
                self.names = ["a", "b", "c"]

            def run(self, x: torch.Tensor, ys: list):
                for i, (blk, norm) in enumerate(zip(self.blocks, self.norms)):
                    h = norm(blk(x))
                for name, y in zip(self.names, ys):
                    g = name(y)
                return h
    """)["run"]
    assert "h" in found
    assert "g" not in found


def test_members_a_method_assigns_a_tensor():
    """``self.cache = k.detach()`` in one method is a tensor in another; a member assigned a
    count, a module, or only what an unknown helper returns is not; members whose methods read
    each other end the question."""
    source = """
        import torch
        from torch import nn

        class Cache(nn.Module):
            def __init__(self, dim):
                super().__init__()
                freqs = torch.arange(dim).float()
                self.freqs = freqs * 2
                self.steps = dim + 1
                self.proj = nn.Linear(dim, dim)
                self.other = make_table(dim)

            def update(self, k: torch.Tensor):
                self.cache = k.detach()
                self.last = self.prev

            def again(self):
                self.prev = self.last

            def read(self, q: torch.Tensor):
                a = q * 0 + self.cache
                b = self.freqs[0]
                c = self.steps * 2
                d = self.other + 1
                e = self.last + 1
                return a
    """
    found = tensors(source)["read"]
    assert {"a", "b"} <= found
    assert not {"c", "d", "e"} & found
    facts = module_facts(ast.parse(textwrap.dedent(source)))
    assert member_holds_tensor(facts, "Cache", "cache") and member_holds_tensor(facts, "Cache", "freqs")
    assert not member_holds_tensor(facts, "Cache", "proj") and not member_holds_tensor(facts, "Cache", "steps")


def test_names_bound_in_branches_and_tuples_returned():
    """A name a branch binds to a tensor is one after the ``if`` (the other branch binding None
    or nothing); a same-file function's tuple, unpacked in a branch, gives its tensor elements."""
    found = tensors("""
        import torch

        def split(x: torch.Tensor):
            return x[0], x.shape[0]

        def f(x: torch.Tensor, use_bias: bool, n: int):
            if use_bias:
                bias = x.mean(0)
            else:
                bias = None
            if n > 2:
                head, count = split(x)
            else:
                head, count = x, n
            for _ in range(n):
                acc = x * 2 if use_bias else x
            return bias, head, count, acc
    """)["f"]
    assert {"bias", "head", "acc"} <= found
    assert "count" not in found


def test_injected_modules_make_a_finding_through_the_engine():
    """A linear interpolation written out between what two constructor-injected modules return is
    found once their calls are known to return tensors; the same calls of members the class never
    assigns find nothing."""
    source = textwrap.dedent("""
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self, mixer, gate):
                super().__init__()
                self.mixer = mixer
                self.gate = gate

            def forward(self, x, w: float):
                y = self.mixer(x)
                z = self.gate(x)
                return y + w * (z - y)
    """)
    options = LintOptions(codes=frozenset({"FL016"}), fix=FixMode.OFF)
    assert [(f.code, f.line) for f in lint_source(source, "block.py", options).findings] == [("FL016", 14)]
    unassigned = source.replace("self.mixer = mixer", "pass").replace("self.gate = gate", "pass")
    assert lint_source(unassigned, "block.py", options).findings == ()


def test_a_method_only_a_tensor_has_tells_a_tensor():
    """An untyped helper's parameter (one the file never calls, as helpers called from other files
    are) is a tensor when it calls an op that nothing else a model file handles has as a method
    (``x.clamp``, ``t.exp()``); not when the method is also a NumPy array's, a number's, a string's,
    a module's (``layer.to(device)``, ``blk.norm(h)``) or a regex's (``pattern.sub``)."""
    found = tensors("""
        import re
        import torch

        def inverse_sigmoid(x, eps=1e-5):
            x = x.clamp(min=0, max=1)
            return x

        def helpers(t, m, arr, layer, blk, pattern, s, n, h: torch.Tensor, device):
            a = t.exp()
            b = m.unsqueeze(1)
            c = arr.clip(0, 1)
            layer.to(device)
            d = blk.norm(h)
            e = pattern.sub("", s)
            f = s.strip()
            g = n.conjugate()
            return a
    """)
    assert "x" in found["inverse_sigmoid"]
    assert {"t", "m", "a", "b"} <= found["helpers"]
    assert not {"arr", "c", "layer", "blk", "pattern", "e", "s", "f", "n", "g"} & found["helpers"]


def test_helpers_that_pass_on_what_they_are_given():
    """A same-file helper with untyped parameters, given a tensor, returns one when its body makes
    a tensor of them (``x[:, 1:]``, ``t.reshape(...)``), as a method does (``self._pos_embed(x)``);
    not when it returns a test or a size of them, nor when it is given no tensor."""
    found = tensors("""
        import torch
        from torch import nn

        def remove_cls(x):
            return x[:, 1:, :]

        def exists(val):
            return val is not None

        def width(t):
            return t.shape[-1]

        class Net(nn.Module):
            def _pos_embed(self, x, pos):
                return x + pos

            def forward(self, x):
                a = remove_cls(x)
                b = self._pos_embed(x, 1)
                e, w = exists(x), width(x)
                n = remove_cls([1, 2, 3])
                return a
    """)["forward"]
    assert {"a", "b"} <= found
    assert not {"e", "w", "n"} & found


def test_torchscript_type_comments_type_parameters():
    """``# type: (Tensor, Tensor, int) -> Tensor`` under the ``def`` (TorchScript-era code) types
    the parameters as annotations do; a comment whose count differs from the parameters', or
    another comment, types nothing."""
    found = tensors("""
        import torch
        from torch import Tensor

        def keypoints(keypoints, rois, size):
            # type: (Tensor, Tensor, int) -> Tensor
            x = keypoints[..., 0] * size
            return x

        def mismatched(a, b):  # type: (Tensor) -> Tensor
            return a

        def plain(a, b):
            # the type: of a is not said
            return a

        def single(boxes):  # type: (Tensor) -> Tensor
            return boxes
    """)
    assert {"keypoints", "rois", "x"} <= found["keypoints"] and "size" not in found["keypoints"]
    assert not found["mismatched"] and not found["plain"]
    assert "boxes" in found["single"]


def test_einx_calls_of_tensors_return_tensors():
    """``einx.<op>(pattern, *operands)`` returns a tensor when an operand is one; einops' calls as
    before; a call of neither library, or of einx on no tensor, is no tensor."""
    found = tensors("""
        import einx
        import torch
        from einops import rearrange

        def f(x: torch.Tensor, w: torch.Tensor, n: int):
            a = einx.multiply("b n d, d -> b n d", x, w)
            b = einx.sum("b [n] d", a)
            c = rearrange(b, "b d -> d b")
            d = einx.add("a, b -> a b", n, n)
            e = other.combine("b n d, d", x, w)
            return c
    """)["f"]
    assert {"a", "b", "c"} <= found
    assert not {"d", "e"} & found


def test_what_map_lambdas_and_displays_give_of_tensors():
    """``q, k, v = map(lambda t: rearrange(t, ...), qkv)``, ``map(partial(torch.cat, dim=-1), ...)``,
    ``map(l2norm, (q, k))``, ``map(self.norm, ...)``, generators over a display of tensors
    unpacked, ``list(map(...))`` indexed and a loop over ``(q, k)``: tensors. Not: ``map(exists,
    ...)``, a lambda that makes a number, ``map(str, ...)``, ``map(int, ...)``."""
    found = tensors("""
        import torch
        from torch import nn
        from functools import partial
        from einops import rearrange

        def exists(v):
            return v is not None

        def l2norm(t):
            return torch.nn.functional.normalize(t, dim=-1)

        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.to_qkv = nn.Linear(4, 12)
                self.norm = nn.LayerNorm(4)

            def forward(self, x, mask=None):
                qkv = self.to_qkv(x).chunk(3, dim=-1)
                q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=4), qkv)
                a, b = map(partial(torch.cat, dim=-1), ((q, k), (k, v)))
                c, d = map(l2norm, (q, k))
                n1, n2 = map(self.norm, (q, k))
                g, h = (t.float() for t in (q, k))
                normed = list(map(lambda u: u + 1, (q, k)))
                first = normed[0]
                for each in (q, k):
                    pass
                e, f = map(exists, (q, mask))
                s1, s2 = map(lambda w: w.size(0), (q, k))
                names = list(map(str, range(3)))
                i1, i2 = map(int, ("1", "2"))
                return q
    """)["forward"]
    assert {"q", "k", "v", "a", "b", "c", "d", "n1", "n2", "g", "h", "first", "each"} <= found
    assert not {"e", "f", "s1", "s2", "names", "i1", "i2", "normed"} & found


def test_module_containers_unpacked_bind_modules():
    """``for block1, block2 in self.downs`` (a ModuleList of ModuleLists), ``for i, (attn, ff) in
    enumerate(self.layers)`` and ``space, time = self.attn`` bind modules, whose calls return
    tensors; ``Attention.scale(x)``, a static method of a same-file class, too. Not: a loop over
    a ModuleDict (its keys) or over a list of numbers."""
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            @staticmethod
            def scale(x):
                return x * 0.5

            @staticmethod
            def width(x):
                return x.shape[-1]

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.downs = nn.ModuleList([nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])])
                self.layers = nn.ModuleList([nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])])
                self.attn = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
                self.heads = nn.ModuleDict({"a": nn.Linear(4, 4)})

            def forward(self, x, sizes: list[int]):
                for block1, block2 in self.downs:
                    y = block1(x)
                    z = block2(y)
                for i, (attn, ff) in enumerate(self.layers):
                    o = ff(attn(x))
                space, time = self.attn
                s = space(x)
                h = Attention.scale(x)
                w = Attention.width(x)
                for key in self.heads:
                    label = key
                for size, other in zip(sizes, sizes):
                    n = size
                return x
    """
    source = textwrap.dedent(source)
    scopes = collect_scopes(cst.parse_module(source), module_facts(ast.parse(source)), op_tables())
    forward = next(s for s in scopes if isinstance(s.node, cst.FunctionDef) and s.node.name.value == "forward")
    assert {"block1", "block2", "attn", "ff", "space", "time"} <= forward.typing.modules
    assert {"y", "z", "o", "s", "h"} <= forward.tensors
    assert not {"w", "label", "n", "key", "size"} & forward.tensors
    assert not {"key", "size", "other"} & forward.typing.modules


def test_einops_packing_and_properties_that_return_tensors():
    """``x, ps = pack([x, cls], ...)`` and ``unpack`` (also through helpers: ``pack_one``) give
    tensors, not the packed shapes; ``self.mean`` of a ``@property`` returning a tensor is one,
    not a property returning a number."""
    source = """
        import torch
        from einops import pack, unpack

        def pack_one(t, pattern):
            return pack([t], pattern)

        def unpack_one(t, ps, pattern):
            return unpack(t, ps, pattern)[0]

        class Stats(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("total", torch.zeros(4))
                self.count = 0

            @property
            def mean(self):
                return self.total / 4

            @property
            def size(self):
                return self.count + 1

            def forward(self, x, cls):
                y, ps = pack([x, cls], 'b * d')
                a, b = unpack(y, ps, 'b * d')
                z, zps = pack_one(x, 'b * d')
                w = unpack_one(z, zps, 'b * d')
                m = self.mean
                n = self.size
                return w
    """
    found = tensors(source)["forward"]
    assert {"y", "a", "b", "z", "w", "m"} <= found
    assert not {"ps", "zps", "n"} & found


def test_a_helper_given_a_function_that_makes_a_tensor():
    """``noise = default(noise, lambda: torch.randn_like(x))``: a helper given a function of no
    parameters that makes a tensor passes on what it is given; not ``default(size, lambda: 3)``
    nor a helper that tests what it is given."""
    found = tensors("""
        import torch

        def exists(v):
            return v is not None

        def default(val, d):
            return val if exists(val) else (d() if callable(d) else d)

        class Diffusion(torch.nn.Module):
            def p_losses(self, x_start, noise=None, size=None):
                noise = default(noise, lambda: torch.randn_like(x_start))
                size = default(size, lambda: 3)
                given = exists(lambda: torch.randn_like(x_start))
                return x_start * noise
    """)["p_losses"]
    assert "noise" in found
    assert not {"size", "given"} & found


def test_values_and_indices_of_a_reduction_are_tensors():
    """``x.max(dim=-1).values``, ``torch.topk(x, 3).indices``: tensors; ``d.values`` of a dict no."""
    found = tensors("""
        import torch

        def f(x: torch.Tensor, d: dict):
            a = x.max(dim=-1).values
            b = torch.topk(x, 3).indices
            c = d.values
            return a
    """)["f"]
    assert {"a", "b"} <= found and "c" not in found


def test_parameters_a_docstring_gives_a_tensor_type():
    """Untyped parameters whose docstring entry gives a tensor type, in NumPy style (``mean :
    torch.Tensor``, ``, optional``, ``or None``) or Google style (``x (Tensor): ...``,
    ``y (`torch.FloatTensor` of shape `(b, n)`):``), are tensors, in the scope and in what a
    helper returns, and a list of tensors (``feats : list of torch.Tensor``) gives tensors; not a
    union with another type, a prose description, nor a parameter with a number default."""
    source = """
        import torch

        def scale(x, factor=2.0):
            '''Scales.

            Args:
                x (Tensor): the input, of shape (B, T)
                factor (Tensor): by how much
            '''
            return x

        class VAE(torch.nn.Module):
            def reparameterize(self, mean, log_var, lengths=None, n=None, feats=None, w=None, u=None, y=None):
                '''Samples.

                Arguments
                ---------
                mean: torch.Tensor
                    the mean
                log_var : torch.Tensor, optional
                lengths : torch.Tensor or None
                n : int
                feats : list of torch.Tensor
                w (Tensor or int): either
                u: A tensor of means.
                y (`torch.FloatTensor` of shape `(batch_size, sequence_length)`):
                '''
                out = scale(mean)
                for feat in feats:
                    pass
                for i in n:
                    pass
                return mean
    """
    found = tensors(source)
    assert {"mean", "log_var", "lengths", "y", "out", "feat"} <= found["reparameterize"]
    assert not {"n", "feats", "w", "u", "i"} & found["reparameterize"]
    assert "x" in found["scale"] and "factor" not in found["scale"]
    source = textwrap.dedent(source)
    facts = module_facts(ast.parse(source))
    from fusionlint.analysis.tensors import returned
    assert returned(facts, None, "scale") is True
