"""Source of an element-wise kernel: one flat index over the kept dims, 1-D blocks.

All-contiguous inputs collapse to one dim and read at ``xindex`` directly, which Triton can
vectorize; other inputs decompose ``xindex`` into per-dim indices and dot them with their strides.
"""
from __future__ import annotations

from ..kernel_ir import FusedKernel
from .emit import Indexing, element_line, indent, inputs_read, live_instrs, module_source

KERNEL_NAME = "pointwise_kernel"


def generate(kernel: FusedKernel, pattern: tuple, xmask: bool = True) -> str:
    """``xmask``: False when every block is full (XBLOCK divides the element count)."""
    ix = Indexing(pattern, len(kernel.input_dtypes), reduction=False, xmask=xmask)
    body = ix.x_header("tl.arange(0, XBLOCK)")
    needed = live_instrs(kernel, [o.index for o in kernel.outputs])
    body += [f"a{k} = {ix.load(k)}" for k in inputs_read(kernel, needed)]
    body += [element_line(kernel, i) for i in needed]
    for j, out in enumerate(kernel.outputs):
        body.append(ix.store(j, f"v{out.index}"))
    args = ", ".join(ix.args())
    return module_source("\n".join([f"def {KERNEL_NAME}({args}):"] + indent(body, 1)) + "\n")
