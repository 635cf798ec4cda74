"""analysis.torch_calls: the operand of a unary torch call and the dim of a keepdim reduction,
spelled as a function or as a method, on real libcst trees."""
from __future__ import annotations

import ast

import libcst as cst

from fusionlint.analysis import Scope, collect_scopes, module_facts
from fusionlint.analysis.nodes import code_of
from fusionlint.analysis.torch_calls import keepdim_reduction, unary_operand
from fusionlint.ops import op_tables

SOURCE = """\
import torch
import numpy as np


def f(x):
    a = torch.exp(x - 1)
    b = (x - 1).exp()
    c = np.exp(x)
    d = torch.exp(x, out=x)
    e = x.mean(-1, keepdim=True)
    g = torch.logsumexp(x, dim=2, keepdim=True, dtype=torch.float32)
    h = x.sum(-1)
    i = torch.var(x, 1, True, keepdim=True)
    return a, b, c, d, e, g, h, i
"""


def _assigned() -> tuple[Scope, dict[str, cst.BaseExpression]]:
    module = cst.parse_module(SOURCE)
    scopes = collect_scopes(module, module_facts(ast.parse(SOURCE)), op_tables())
    scope = next(s for s in scopes if isinstance(s.node, cst.FunctionDef))
    body = scope.node.body.body
    return scope, {line.body[0].targets[0].target.value: line.body[0].value for line in body[:-1]}


def test_unary_operand_of_a_function_or_a_method_of_torch_only():
    scope, values = _assigned()
    assert code_of(unary_operand(scope, values["a"], "exp")) == "x - 1"
    assert code_of(unary_operand(scope, values["b"], "exp")) == "x - 1"
    assert unary_operand(scope, values["c"], "exp") is None  # numpy's
    assert unary_operand(scope, values["d"], "exp") is None  # a second argument
    assert unary_operand(scope, values["a"], "log") is None


def test_keepdim_reduction_reads_the_dim_and_keeps_other_keywords():
    scope, values = _assigned()
    mean = keepdim_reduction(scope, values["e"], "mean")
    assert (code_of(mean.operand), code_of(mean.dim), mean.keywords) == ("x", "-1", {})
    lse = keepdim_reduction(scope, values["g"], "logsumexp")
    assert (code_of(lse.operand), code_of(lse.dim), list(lse.keywords)) == ("x", "2", ["dtype"])
    assert keepdim_reduction(scope, values["h"], "sum") is None  # no keepdim=True
    assert keepdim_reduction(scope, values["i"], "var") is None  # a second positional argument
    assert keepdim_reduction(scope, values["e"], "sum") is None
