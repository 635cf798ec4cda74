"""The static heuristics the rules stand on: torch imports, tensor names, op classes, liveness."""
from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from fusionlint.analysis import ancestors, collect_scopes, module_facts, reaching_value
from fusionlint.ops import COMPUTE, ELEMENTWISE, FUSED_REDUCTIONS, MERGING_VIEWS, VIEW, op_tables


def scopes(source: str, extra_ops=()):
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    found = collect_scopes(module, module_facts(ast.parse(source)), op_tables(extra_ops))
    return {s.node.name.value if isinstance(s.node, cst.FunctionDef) else "<module>": s for s in found}


def test_torch_aliases_from_imports():
    facts = module_facts(ast.parse(
        "import torch as th\nimport torch.nn.functional as F\nfrom torch import nn, Tensor\n"
        "import numpy as np\ndef f():\n    from torch.nn import functional as G\n"
    ))
    assert facts.canonical("F.linear") == "torch.nn.functional.linear"
    assert facts.canonical("G.softmax") == "torch.nn.functional.softmax"
    assert facts.canonical("th.matmul") == "torch.matmul"
    assert facts.canonical("Tensor") == "torch.Tensor"
    assert facts.canonical("np.matmul") is None
    assert not module_facts(ast.parse("import numpy as np\ntorch = 1\n")).imports_torch


def test_tensor_names():
    found = scopes("""
        import torch
        import numpy as np
        from torch import Tensor
        from typing import Optional
        import torch.nn.functional as F

        class Attn(torch.nn.Module):
            def __init__(self):
                self.w = torch.nn.Parameter(torch.ones(2))
                self.register_buffer("mask", torch.zeros(2))
                self.n = 4

            def forward(self, hidden, mask=None, use_cache: bool = False, k=3, *, bias: Optional[Tensor] = None):
                q = F.linear(hidden, self.w)
                shape = q.shape
                n = q.size(0)
                parts = q.chunk(2)
                a, b = q.chunk(2)
                arr = np.ones(3)
                m = arr.reshape(3, 1)
                y = (q * 2)[0].T
                z = self.w + 1
                s = torch.is_tensor(q)
                lin = torch.nn.Linear(2, 2)
                for item in range(3):
                    acc = item
                return y

        def helper(x: "torch.Tensor", y: torch.FloatTensor | None, z: int, t):
            return x
    """)
    forward = found["forward"]
    assert {"hidden", "mask", "bias", "q", "parts", "a", "b", "y", "z"} <= forward.tensors
    assert not {"use_cache", "k", "shape", "n", "arr", "m", "s", "lin", "item", "acc", "self"} & forward.tensors
    assert found["helper"].tensors == {"x", "y"}


def test_op_classes_and_extra_ops():
    found = scopes("""
        import torch
        import numpy as np

        def f(x: torch.Tensor, w: torch.Tensor, arr):
            x.transpose(0, 1); torch.matmul(x, w); x @ w; x.sum(-1); torch.exp(x); x.T
            arr.reshape(2); np.matmul(arr, arr); arr @ arr; x.my_view(); arr.T
    """, extra_ops=(("view", ("my_view",)),))["f"]
    body = found.node.body.body
    first = [s.value for s in body[0].body]
    second = [s.value for s in body[1].body]
    assert [found.op(e)[1] for e in first] == [VIEW, COMPUTE, COMPUTE, COMPUTE, ELEMENTWISE, VIEW]
    assert [found.op(e) for e in second[:3]] == [None, None, None]
    assert found.op(second[3])[1] == VIEW and found.op(second[4]) is None


def _ref(scope, line_text):
    for site_list in scope.sites.values():
        for site in site_list:
            if cst.Module([]).code_for_node(site.statement.node).strip() == line_text:
                return site.statement
    raise AssertionError(line_text)


@pytest.mark.parametrize(
    "body,live",
    [
        ("h = a.sum()\nreturn h + a", True),
        ("h = a.sum()\na = h * 2\nreturn a", False),
        ("h = a.sum()\nreturn h", False),
        ("h = a.sum()\nif h > 0:\n    h = h + a\nreturn h", True),
        ("for i in range(3):\n    h = a.sum()\nreturn h", True),  # the next iteration reads a
        ("for i in range(3):\n    a = x * i\n    h = a.sum()\nreturn h", False),
        ("try:\n    h = a.sum()\nexcept ValueError:\n    h = a\nreturn h", True),
        ("h = a.sum()\ng = lambda: a\nreturn h", True),  # closure
        ("h = a.sum()\nreturn locals()", True),
    ],
)
def test_liveness_is_conservative(body, live):
    source = "import torch\ndef f(x: torch.Tensor):\n    a = x * 2\n" + textwrap.indent(body, "    ") + "\n"
    scope = scopes(source)["f"]
    assert scope.read_after(_ref(scope, "h = a.sum()"), "a") is live


def test_inplace_and_autograd_markers():
    scope = scopes("""
        import torch
        def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor):
            a.add_(1); b[0] = 1; c += 1; torch.mul(a, 2, out=d)
    """)["f"]
    assert scope.inplace == {"a", "b", "c", "d"} and not scope.autograd
    assert scopes("import torch\ndef f(a: torch.Tensor):\n    a.sum().backward()\n")["f"].autograd


def test_a_detach_cloned_at_once_is_not_autograd():
    assert not scopes("import torch\ndef f(a: torch.Tensor):\n    return a.detach().clone().sum()\n")["f"].autograd
    assert scopes("import torch\ndef f(a: torch.Tensor):\n    b = a.detach()\n    return b.clone()\n")["f"].autograd
    assert scopes("import torch\ndef f(a: torch.Tensor):\n    return a.detach().clone() + a.grad\n")["f"].autograd


@pytest.mark.parametrize(
    "body,value",
    [
        ("h = x * 2\ng = h + 1\ny = h.sum()", "x * 2"),  # the nearest assignment in the block
        ("h = x * 2\nh = torch.relu(h)\ny = h.sum()", "torch.relu(h)"),
        ("h = x * 2\nh += 1\ny = h.sum()", None),  # augmented: not a plain value
        ("h = x * 2\nif x.any():\n    h = x\ny = h.sum()", None),  # a branch between
        ("h, k = x, x\ny = h.sum()", None),
        ("y = h.sum()", None),
    ],
)
def test_reaching_value(body, value):
    scope = scopes("import torch\ndef f(x: torch.Tensor, h=None):\n" + textwrap.indent(body, "    ") + "\n")["f"]
    found = reaching_value(_ref(scope, "y = h.sum()"), "h")
    assert (None if found is None else cst.Module([]).code_for_node(found)) == value


def test_ancestors_nearest_first():
    statement = cst.parse_statement("y = (x * 2).flatten(1) + c\n")
    view = statement.body[0].value.left
    path = ancestors(statement, view)
    assert [type(n).__name__ for n in path] == ["BinaryOperation", "Assign", "SimpleStatementLine"]
    assert ancestors(statement, cst.Name("x")) is None


def test_op_tables_know_every_view_the_rules_name():
    tables = op_tables()
    assert MERGING_VIEWS <= tables.view and "ravel" in tables.view
    assert all(tables.op_class(name) == COMPUTE for name in FUSED_REDUCTIONS)


def test_liveness_stops_at_the_end_of_the_function():
    source = "import torch\ndef f(x: torch.Tensor):\n    a = x * 2\n    h = a.sum()\n    return h\n"
    source += "\n\ndef g(a):\n    return a\n"  # another function reading its own `a`
    scope = scopes(source)["f"]
    assert scope.read_after(_ref(scope, "h = a.sum()"), "a") is False


def test_nn_class_of_a_module_attribute():
    facts = module_facts(ast.parse(textwrap.dedent("""\
        import torch.nn as nn

        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.GELU()
                self.softmax = nn.Softmax(dim=-1)

        class Attention(Base):
            def __init__(self, inner):
                super().__init__()
                self.softmax = inner
                self.norm = nn.LayerNorm(8) if inner else nn.Identity()
        """)))
    assert facts.nn_class("Base", "softmax") == "Softmax"
    assert facts.nn_class("Attention", "act") == "GELU"
    assert facts.nn_class("Attention", "softmax") is None  # reassigned: no longer known
    assert facts.nn_class("Attention", "norm") is None  # one of two classes


def test_only_reads_follows_same_file_callees():
    facts = module_facts(ast.parse(textwrap.dedent("""\
        import torch
        import torch.nn as nn

        def scaled(x, s):
            return (x.type_as(s) * s).type_as(x)

        def passed_on(x):
            return x.float()

        def written(x):
            x[:, 0] = 0
            return x * 2

        class AltUp(nn.Module):
            def forward(self, x):
                return scaled(x, self.scale)

            def scale_output(self, x):
                return self.forward(x)

            def clears(self, x):
                return written(x)

            def kept(self, x):
                self.last = x
                return x + 1
        """)))
    from fusionlint.analysis.purity import only_reads

    assert only_reads(facts, None, "scaled", 0)
    assert only_reads(facts, "AltUp", "scale_output", 0)  # through self.forward and scaled
    assert not only_reads(facts, None, "passed_on", 0)  # hands back a cast that may be its input
    assert not only_reads(facts, "AltUp", "clears", 0)  # a callee writes it in place
    assert not only_reads(facts, "AltUp", "kept", 0)  # stored on the module
    assert not only_reads(facts, None, "missing", 0)


@pytest.mark.parametrize(
    "body,values",
    [
        ("eq = 'b j d'", ["b h i d, b j d -> b h i j"]),
        ("eq = 'b j d' if k.ndim == 3 else 'b h j d'", ["b h i d, b j d -> b h i j", "b h i d, b h j d -> b h i j"]),
        ("eq = 'b j d'\n    eq += ' '", None),  # extended in place: its value is unknown
        ("eq, _ = 'b j d', 1", None),  # unpacked
        ("eq = str(k.ndim)", None),
    ],
)
def test_string_values_of_an_f_string(body, values):
    from fusionlint.analysis.strings import string_values

    equation = "f'b h i d, {eq} -> b h i j'"
    scope = scopes(f"import torch\ndef f(q, k):\n    {body}\n    return torch.einsum({equation}, q, k)\n")["f"]
    call = scope.sites["einsum"][0].node
    assert string_values(scope, call.args[0].value) == values


def test_module_op_of_a_local_bound_to_a_torch_nn_class():
    scope = scopes("""
        import torch
        from torch import nn
        def f(x: torch.Tensor, y: torch.Tensor, flag: bool):
            loss_fct = nn.CrossEntropyLoss(ignore_index=-1)
            act = nn.ReLU(inplace=True)
            other = nn.CrossEntropyLoss() if flag else None
            return loss_fct(x, y), act(x), other(x, y)
    """)["f"]
    returned = scope.node.body.body[-1].body[0].value.elements
    ops = [scope.module_op(element.value) for element in returned]
    assert ops[0][:2] == ("cross_entropy", COMPUTE)
    assert ops[1] is None  # in place: not the op of its class
    assert ops[2] is None  # not surely a module


def test_returns_new_of_same_file_functions():
    facts = module_facts(ast.parse(textwrap.dedent("""\
        import torch
        import torch.nn as nn

        def scores(x, w):
            h = torch.tanh(x)
            return h @ w

        def passthrough(x, flag):
            if flag:
                x = x * 2
            return x

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.1)
                self.out = nn.Linear(8, 2)

            def forward(self, h):
                h = self.drop(h)
                h = self.out(h)
                return h

            def weight_view(self):
                return self.out.weight.t()

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head()

            def logits(self, h):
                return self.head(h).transpose(1, 2)
        """)))
    from fusionlint.analysis.fresh import returns_new

    assert returns_new(facts, None, "scores")
    assert returns_new(facts, "Head", "forward")  # the last value of `h` reaches the return
    assert returns_new(facts, "Model", "logits")  # a view of a same-file module's new output
    assert not returns_new(facts, None, "passthrough")  # may return its parameter
    assert not returns_new(facts, "Head", "weight_view")  # a view of a parameter
