"""Source of a reduction kernel: prologue, reductions and epilogue in one program per row block.

Each program owns ``XBLOCK`` rows (flat kept index ``x``) and walks the reduced elements (flat
``r``) in ``[XBLOCK, RBLOCK]`` tiles; reduced values are ``[XBLOCK, 1]`` and broadcast into full
ones. When a row fits one tile (*single pass*) the instructions are emitted in program order and
every value stays in registers, so softmax or layer_norm read their input once. Otherwise
(*looped*) the reductions are grouped into passes by what they depend on (softmax: max, then the
sum of exponentials, then the output); each pass loops over the row, recomputing the element-wise
prologue it needs from the inputs instead of writing it, and a last loop stores full outputs.
"""
from __future__ import annotations

import torch

from ..kernel_ir import FusedKernel, Value
from .emit import Indexing, element_line, indent, inputs_read, live_instrs, module_source, operands
from .lowering import cast, opmath, tl_type

KERNEL_NAME = "reduction_kernel"

# Only builtins and our own helpers: ``tl.sum``/``tl.max`` are @jit functions whose interpreted-or-
# compiled nature was fixed when triton was imported, so they cannot serve both executors.
_COMBINE = {"sum": "tl.reduce({x}, 1, _add_combine)", "mean": "tl.reduce({x}, 1, _add_combine)",
            "prod": "tl.reduce({x}, 1, _mul_combine)",
            "amax": "tl.reduce({x}, 1, _max_nan)", "amin": "tl.reduce({x}, 1, _min_nan)"}
_UPDATE = {"sum": "{acc} + {x}", "mean": "{acc} + {x}", "prod": "{acc} * {x}",
           "amax": "_max_nan({acc}, {x})", "amin": "_min_nan({acc}, {x})"}


def _accumulator_dtype(op: str, dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool:  # only amax/amin keep bool; compare as bytes
        return torch.int8
    return opmath(dtype)


def _identity(op: str, acc: torch.dtype) -> str:
    """Text of the reduction's neutral element, usable in ``tl.full`` and ``tl.where``."""
    if op in ("sum", "mean"):
        return "0"
    if op == "prod":
        return "1"
    high = op == "amin"
    if acc.is_floating_point:
        return "_INF" if high else "_NINF"
    info = torch.iinfo(acc)
    return str(info.max if high else info.min)


class _Reduction:
    """Text for one reduction instruction: its masked input, its update, its final value."""

    def __init__(self, kernel: FusedKernel, index: int, ix: Indexing) -> None:
        ins = kernel.instrs[index]
        self.index, self.op, self.dtype = index, ins.op, ins.dtype
        self.acc = _accumulator_dtype(ins.op, ins.dtype)
        arg = operands(kernel, index)[0]
        value = cast(arg.expr, arg.dtype, self.acc)
        mask = ix.tile_mask()
        # The value must span the whole tile (one loaded through a stride-0 dim has extent 1
        # there, yet counts once per lane), and lanes past the sizes take the identity.
        if mask != "mask":
            value = f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])"
        self.masked = f"tl.where({mask}, {value}, {_identity(self.op, self.acc)})" if mask else value

    def finish(self, tile: str) -> str:
        value = _COMBINE[self.op].format(x=tile) + "[:, None]"
        if self.op == "mean":
            value = f"({value} / rnumel)"
        return f"v{self.index} = {cast(value, self.acc, self.dtype)}"

    def init(self) -> str:
        return (f"acc{self.index} = tl.full([XBLOCK, RBLOCK], {_identity(self.op, self.acc)}, "
                f"{tl_type(self.acc)})")

    def update(self) -> str:
        new = _UPDATE[self.op].format(acc=f"acc{self.index}", x=self.masked)
        return f"acc{self.index} = ({new}).to({tl_type(self.acc)})"


def generate(kernel: FusedKernel, pattern: tuple, looped: bool, xmask: bool = True,
             rmask: bool = True) -> str:
    """``xmask``/``rmask``: False when XBLOCK/RBLOCK divide the row count/length exactly."""
    ix = Indexing(pattern, len(kernel.input_dtypes), reduction=True, xmask=xmask, rmask=rmask)
    body = ix.x_header("tl.arange(0, XBLOCK)[:, None]")
    body.append("rbase = tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if ix.bits == 64 else ""))
    body += (_looped if looped else _single_pass)(kernel, ix)
    args = ", ".join(ix.args())
    return module_source("\n".join([f"def {KERNEL_NAME}({args}):"] + indent(body, 1)) + "\n")


def _tile_lines(ix: Indexing, rindex: str) -> list[str]:
    lines = [f"rindex = {rindex}"]
    if ix.rmask:
        lines.append("rmask = rindex < rnumel")
    if ix.tile_mask() == "mask":
        lines.append("mask = xmask & rmask")
    return lines + ix.r_lines()


def _stores(kernel: FusedKernel, ix: Indexing, full: bool) -> list[str]:
    return [ix.store(j, f"v{out.index}") for j, out in enumerate(kernel.outputs)
            if kernel.levels[out.index] != full]


def _single_pass(kernel: FusedKernel, ix: Indexing) -> list[str]:
    lines = _tile_lines(ix, "rbase")
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    lines += [f"a{k} = {ix.load(k)}" for k in inputs_read(kernel, live)]
    for i in live:
        if kernel.instrs[i].is_reduction:
            reduction = _Reduction(kernel, i, ix)
            lines.append(reduction.finish(reduction.masked))
        else:
            lines.append(element_line(kernel, i))
    return lines + _stores(kernel, ix, full=True) + _stores(kernel, ix, full=False)


def _passes(kernel: FusedKernel) -> list[int]:
    """Per instruction: the pass after which a reduced value exists (0: before any loop), or for
    a full value the latest pass whose results it reads."""
    passes: list[int] = []
    for ins in kernel.instrs:
        deps = [passes[a.index] for a in ins.args if isinstance(a, Value)]
        passes.append(max(deps, default=0) + (1 if ins.is_reduction else 0))
    return passes


def _full_closure(kernel: FusedKernel, roots: list[int]) -> list[int]:
    """Full-level instructions the roots need, recomputed inside a loop (reduced ones exist)."""
    needed: set[int] = set()
    stack = [r for r in roots if not kernel.levels[r]]
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            stack.extend(a.index for a in kernel.instrs[i].args
                         if isinstance(a, Value) and not kernel.levels[a.index])
    return sorted(needed)


def _full_inputs(kernel: FusedKernel, instrs: list[int]) -> list[int]:
    return [k for k in inputs_read(kernel, instrs) if k not in kernel.reduced_inputs]


def _looped(kernel: FusedKernel, ix: Indexing) -> list[str]:
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    passes = _passes(kernel)
    reduced_live = [i for i in live if kernel.levels[i]]
    lines = [f"a{k} = {ix.load(k)}" for k in inputs_read(kernel, live) if k in kernel.reduced_inputs]
    lines += [element_line(kernel, i) for i in reduced_live if passes[i] == 0]

    def loop(body_instrs: list[int], readers: list[int], tail: list[str]) -> list[str]:
        body = _tile_lines(ix, "roffset + rbase")
        body += [f"a{k} = {ix.load(k)}" for k in _full_inputs(kernel, body_instrs + readers)]
        body += [element_line(kernel, i) for i in body_instrs]
        return ["for roffset in range(0, rnumel, RBLOCK):"] + indent(body + tail, 1)

    for p in range(1, max((passes[i] for i in reduced_live), default=0) + 1):
        reductions = [_Reduction(kernel, i, ix) for i in reduced_live
                      if passes[i] == p and kernel.instrs[i].is_reduction]
        args = [a.index for r in reductions for a in kernel.instrs[r.index].args if isinstance(a, Value)]
        lines += [r.init() for r in reductions]
        lines += loop(_full_closure(kernel, args), [r.index for r in reductions],
                      [r.update() for r in reductions])
        lines += [r.finish(f"acc{r.index}") for r in reductions]
        lines += [element_line(kernel, i) for i in reduced_live
                  if passes[i] == p and not kernel.instrs[i].is_reduction]

    full_outputs = [o.index for o in kernel.outputs if not kernel.levels[o.index]]
    if full_outputs:
        lines += loop(_full_closure(kernel, full_outputs), [], _stores(kernel, ix, full=True))
    return lines + _stores(kernel, ix, full=False)
