"""Backend matching: which library kernel runs a planned kernel better than generated code."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch

from . import cost
from .graph import IndexMap, Node
from .kernel_ir import Input, MatmulKernel, Value
from .plan import FusedLaunch


def cublaslt_activation(planned: FusedLaunch) -> str:
    """"relu" or "gelu" when a matmul kernel is ``act(a @ b + bias)`` as cuBLASLt's fused
    epilogue computes it (torch's ``_addmm_activation``): a plain 2-d product of half or
    bfloat16 operands, a bias vector broadcast over the rows added in the product's dtype or in
    float32 (``addmm``, ``linear``) then rounded, then ReLU or tanh-GELU; else ""."""
    kernel = planned.kernel
    if (not isinstance(kernel, MatmulKernel) or len(kernel.shape) != 2 or len(kernel.outputs) != 1
            or kernel.operand_dtype not in (torch.float16, torch.bfloat16)
            or any(len(p.instrs) != 1 or p.instrs[0].op != "clone" for p in (kernel.a, kernel.b))):
        return ""
    dtype = kernel.operand_dtype
    instrs = kernel.epilogue.instrs
    pattern = [(i.op, i.dtype, i.attrs) for i in instrs]
    add = [("add", dtype, ())] if kernel.product_dtype == dtype else [
        ("add", torch.float32, ()), ("_to_copy", dtype, (("dtype", dtype),))]
    acts = {"relu": ("relu", dtype, ()), "gelu": ("gelu", dtype, (("approximate", "tanh"),))}
    activation = next((name for name, act in acts.items() if pattern == [*add, act]), "")
    chain = all(i.args[0] == (Input(0) if k == 0 else Value(k - 1)) for k, i in enumerate(instrs))
    m, n = kernel.shape
    bias = planned.inputs[-1]
    if (not activation or not chain or instrs[0].args[1] != Input(1) or kernel.outputs != (Value(len(instrs) - 1),)
            or len(planned.inputs) != 3 or bias.view is not None or tuple(bias.src.shape) != (n,)
            or bias.map != IndexMap.broadcast((m, n), (n,)) or kernel.epilogue.input_dtypes[1] != dtype):
        return ""
    return activation


def matmul_backend(planned: FusedLaunch, choice: cost.Choice) -> cost.Choice:
    """The cost model's verdict on a matmul planned as the template, unless cuBLASLt's fused
    epilogue computes the same kernel: at cuBLAS's rate it beats the template."""
    activation = cublaslt_activation(planned)
    return cost.cublaslt(activation, planned.kernel.operand_dtype) if activation else choice


def extern_decision(nodes: Sequence[Node], choice: Optional[cost.Choice]) -> str:
    """Why torch's kernel runs an extern block: the planner fuses only a ReLU after a
    convolution, which cuDNN runs in the convolution's kernel."""
    if len(nodes) > 1:
        return "cuDNN's fused convolution-bias-ReLU kernel"
    return choice.reason if choice else f"{nodes[0].kernel_kind} has no template"
