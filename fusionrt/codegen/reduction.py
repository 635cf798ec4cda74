"""Source of a reduction kernel: prologue, reductions and epilogue in one program per row block.

Each program owns ``XBLOCK`` rows (flat kept index ``x``) and walks the reduced elements (flat
``r``) in ``[XBLOCK, RBLOCK]`` tiles; reduced values are ``[XBLOCK, 1]`` and broadcast into full
ones. When a row fits one tile (*single pass*) the instructions are emitted in program order and
every value stays in registers, so softmax or layer_norm read their input once. Otherwise
(*looped*) the reductions are grouped into passes by what they depend on (softmax: max, then the
sum of exponentials, then the output); each pass loops over the row, recomputing the element-wise
prologue it needs from the inputs instead of writing it, and a last loop stores full outputs.

A *split* reduction (see ``config.Split``) is two kernels over the same arguments plus one
workspace per reduction: ``PARTIAL_NAME`` runs one program per row block and chunk of the rows,
storing full outputs as it goes and each reduction's partial result into its workspace;
``FINISH_NAME`` combines the chunks and computes and stores the reduced outputs. Only a kernel
whose reductions read no other reduction's result and whose full outputs read none (``splittable``)
can be split: anything later would need the whole row's result inside the first kernel.
"""
from __future__ import annotations

import torch

from ..kernel_ir import FusedKernel, Value
from .emit import Indexing, element_line, indent, inputs_read, live_instrs, module_source, operands
from .lowering import cast, opmath, tl_type

KERNEL_NAME = "reduction_kernel"
PARTIAL_NAME = "reduction_partial_kernel"
FINISH_NAME = "reduction_finish_kernel"
# The split kernels' runtime arguments after the strides: the chunk length and the chunk count.
SPLIT_SCALARS = ("rchunk", "nsplit")

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
    body = ix.x_header("tl.arange(0, XBLOCK)[:, None]") + [_rbase(ix)]
    body += (_looped if looped else _single_pass)(kernel, ix)
    return _module(KERNEL_NAME, ix.args(), body)


def splittable(kernel: FusedKernel) -> bool:
    passes = _passes(kernel)
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    return (all(passes[i] <= 1 for i in live if kernel.instrs[i].is_reduction)
            and all(passes[o.index] == 0 for o in kernel.outputs if not kernel.levels[o.index]))


def workspace_dtypes(kernel: FusedKernel) -> list[torch.dtype]:
    """Per reduction of a split kernel, in program order: the dtype its partial results keep."""
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    return [_accumulator_dtype(kernel.instrs[i].op, kernel.instrs[i].dtype)
            for i in live if kernel.instrs[i].is_reduction]


def generate_partial(kernel: FusedKernel, pattern: tuple, xmask: bool = True, rmask: bool = True) -> str:
    """Program (row block, chunk): full outputs of the chunk stored, each reduction's result over
    the chunk stored at ``chunk * xnumel + x`` of its workspace."""
    ix = Indexing(pattern, len(kernel.input_dtypes), reduction=True, xmask=xmask, rmask=rmask)
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    reductions = [_Reduction(kernel, i, ix) for i in live if kernel.instrs[i].is_reduction]
    full_outputs = [o.index for o in kernel.outputs if not kernel.levels[o.index]]
    args = [a.index for r in reductions for a in kernel.instrs[r.index].args if isinstance(a, Value)]
    chunk = "tl.program_id(1)" + (".to(tl.int64)" if ix.bits == 64 else "")
    body = ix.x_header("tl.arange(0, XBLOCK)[:, None]") + [_rbase(ix), f"rstart = {chunk} * rchunk"]
    body += [f"a{k} = {ix.load(k)}" for k in inputs_read(kernel, live) if k in kernel.reduced_inputs]
    passes = _passes(kernel)
    body += [element_line(kernel, i) for i in live if kernel.levels[i] and passes[i] == 0]
    body += [r.init() for r in reductions]
    instrs = _full_closure(kernel, args + full_outputs)
    loop = _tile_lines(ix, "roffset + rbase")
    loop += [f"a{k} = {ix.load(k)}" for k in _full_inputs(kernel, instrs + [r.index for r in reductions])]
    loop += [element_line(kernel, i) for i in instrs] + [r.update() for r in reductions]
    loop += _stores(kernel, ix, full=True)
    body += ["for roffset in range(rstart, tl.minimum(rstart + rchunk, rnumel), RBLOCK):"] + indent(loop, 1)
    store_mask = ", xmask" if ix.xmask else ""
    for k, r in enumerate(reductions):
        body.append(f"tl.store(ws{k} + {chunk} * xnumel + xindex, "
                    f"{_COMBINE[r.op].format(x=f'acc{r.index}')}[:, None]{store_mask})")
    return _module(PARTIAL_NAME, _split_args(ix, len(reductions)), body)


def generate_finish(kernel: FusedKernel, pattern: tuple, xmask: bool = True) -> str:
    """Program (row block): the chunks' partial results combined (``RBLOCK`` chunks wide), then
    the reduced-level epilogue, and the reduced outputs stored."""
    ix = Indexing(pattern, len(kernel.input_dtypes), reduction=True, xmask=xmask, rmask=True)
    live = live_instrs(kernel, [o.index for o in kernel.outputs])
    reduced_live = [i for i in live if kernel.levels[i]]
    body = ix.x_header("tl.arange(0, XBLOCK)[:, None]")
    body += ["sindex = tl.arange(0, RBLOCK)[None, :]", "smask = sindex < nsplit"]
    body += [f"a{k} = {ix.load(k)}" for k in inputs_read(kernel, reduced_live) if k in kernel.reduced_inputs]
    mask = "xmask & smask" if ix.xmask else "smask"
    k = 0
    for i in live:
        if kernel.instrs[i].is_reduction:
            r = _Reduction(kernel, i, ix)
            body.append(f"p{i} = tl.load(ws{k} + sindex * xnumel + xindex, {mask}, "
                        f"other={_identity(r.op, r.acc)})")
            body.append(r.finish(f"p{i}"))
            k += 1
        elif kernel.levels[i]:
            body.append(element_line(kernel, i))
    body += _stores(kernel, ix, full=False)
    return _module(FINISH_NAME, _split_args(ix, k), body)


def _split_args(ix: Indexing, n_workspaces: int) -> list[str]:
    """The plain kernel's parameters with the workspaces after the outputs and the split's
    scalars after the strides: both split kernels take the same arguments."""
    args = ix.args()
    pointers = len(ix.access)
    constexprs = next(j for j, a in enumerate(args) if a.endswith(": tl.constexpr"))
    return (args[:pointers] + [f"ws{k}" for k in range(n_workspaces)] + args[pointers:constexprs]
            + list(SPLIT_SCALARS) + args[constexprs:])


def _rbase(ix: Indexing) -> str:
    return "rbase = tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if ix.bits == 64 else "")


def _module(name: str, args: list[str], body: list[str]) -> str:
    return module_source("\n".join([f"def {name}({', '.join(args)}):"] + indent(body, 1)) + "\n")


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
