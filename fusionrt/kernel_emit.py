"""Kernel-IR emission: a planned block becomes a ``FusedKernel`` or a ``MatmulKernel``.

The planner has decided which nodes each block computes and which of them are written; this
module only turns a block into straight-line instructions over its iteration space, loading what
earlier kernels wrote and recomputing what the block owns.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, Optional

import torch

from .blocks import Block, matmul_operands, tensor_uses
from .graph import IndexMap, Leaf, Node, Use, View
from .kernel_ir import FusedKernel, Input, Instr, MatmulKernel, Value
from .plan import FusedLaunch, KernelInput


class Lowering:
    """Graph values -> the instructions and loads of one ``FusedKernel`` over ``space``.

    ``inline(node, via_view)`` says whether a node is computed here (from its own inputs) or
    loaded from memory, where an earlier kernel wrote it; ``own(node)``, whether it belongs to
    this kernel's block (its inputs are then read as the block reads them, not through a view).
    """

    def __init__(self, space: tuple[int, ...], inline: Callable[[Node, bool], bool],
                 own: Callable[[Node], bool], real_dims: frozenset[int] = frozenset()) -> None:
        self.space = space
        self.inline = inline
        self.own = own
        self.real_dims = real_dims
        self.instrs: list[Instr] = []
        self.inputs: list[KernelInput] = []
        self.dtypes: list[torch.dtype] = []
        self.memo: dict[tuple, Any] = {}
        self.reduced_values: set[int] = set()

    def is_reduced(self, ref: Any) -> bool:
        if isinstance(ref, Input):
            return self.inputs[ref.index].reduced
        return not isinstance(ref, Value) or ref.index in self.reduced_values

    def load(self, src: Any, m: IndexMap, view: Optional[View], full: bool,
             dtype: Optional[torch.dtype] = None) -> Input:
        """An input broadcast along the reduce dims is loaded once per row (reduced), unless
        a reduction must consume it at full size."""
        reduced = not full and bool(self.real_dims) and m.ignores(self.real_dims)
        key = ("load", id(view or src), m, reduced)
        if key not in self.memo:
            self.memo[key] = Input(len(self.inputs))
            self.inputs.append(KernelInput(src, m, view, reduced))
            self.dtypes.append(dtype or src.dtype)
        return self.memo[key]

    def seed(self, node: Node, m: IndexMap, ref: Any) -> None:
        """``node`` read at ``m`` is ``ref`` (the matmul product in an epilogue)."""
        self.memo[("value", id(node), m, False)] = ref

    def add(self, op: str, args: tuple, dtype: torch.dtype, attrs: tuple = ()) -> Value:
        self.instrs.append(Instr(op, args, dtype, attrs))
        return Value(len(self.instrs) - 1)

    def emit(self, src: Any, m: IndexMap, via_view: bool = False, full: bool = False) -> Any:
        if isinstance(src, View):
            if src.map is None:
                return self.load(src.root, m, src, full)
            return self.emit(src.root, src.map.compose(m), True, full)
        if isinstance(src, Leaf):
            return self.load(src, m, None, full)
        memo = self.memo
        plain = memo.get(("value", id(src), m, False))
        if plain is not None and not (full and self.is_reduced(plain)):
            return plain
        if not self.inline(src, via_view):
            return self.load(src, m, None, full)
        full = full and src.kind != "reduction"  # a reduction's value is reduced by nature
        key = ("value", id(src), m, full)
        if key in memo:
            return memo[key]
        if src.kind == "reduction":
            (use,) = src.args
            arg = self.emit(use.src, use.map)
            if self.is_reduced(arg):  # its input is constant along the reduce dims: expand it
                arg = self.emit(use.src, use.map, full=True)
            args: tuple[Any, ...] = (arg,)
        else:
            inner = via_view and not self.own(src)
            args = tuple(self.emit(a.src, a.map.compose(m), inner, full) if isinstance(a, Use) else a
                         for a in src.args)
        value = self.add(src.op, args, src.dtype, src.attrs)
        if src.kind == "reduction" or all(self.is_reduced(a) for a in args):
            self.reduced_values.add(value.index)
        memo[key] = value
        return value

    def kernel(self, outs: Sequence[Any], dims: tuple[int, ...] = (),
               keep: frozenset[int] = frozenset()) -> tuple[FusedKernel, list[KernelInput]]:
        """The kernel computing ``outs`` (an output that is a load is copied), pruned of what
        no output needs; inputs in ``keep`` stay even when unused (the matmul product)."""
        outs = [o if isinstance(o, Value) else self.add("clone", (o,), self.dtypes[o.index]) for o in outs]
        instrs, kept, values = _prune(self.instrs, len(self.inputs), tuple(outs), keep)
        inputs = [self.inputs[i] for i in kept]
        kernel = FusedKernel(
            shape=self.space,
            input_dtypes=tuple(self.dtypes[i] for i in kept),
            instrs=tuple(instrs),
            outputs=values,
            reduce_dims=dims,
            reduced_inputs=frozenset(j for j, inp in enumerate(inputs) if inp.reduced),
        )
        return kernel, inputs


def emit_in_order(low: Lowering, block: Block, nodes: Sequence[Node], outputs: tuple[Node, ...],
                   owner: dict[Node, Block]) -> list[Any]:
    """Emit what ``outputs`` need among ``nodes`` in program order (so recursion stays shallow
    on long chains), then the outputs' references."""
    needed = set(outputs)
    for node in reversed(nodes):
        if node in needed:
            for use in tensor_uses(node.args):
                src = use.src.root if isinstance(use.src, View) else use.src
                if owner.get(src) is block:
                    needed.add(src)
    for node in nodes:
        if node in needed:
            low.emit(node, block.canon[node])
    return [low.emit(n, block.canon[n]) for n in outputs]


def _inline(block: Block, owner: Mapping[Node, Block], floating: Set[Node]) -> Callable[[Node, bool], bool]:
    """What a block computes rather than loads: its own nodes, the floating producers, the
    values of earlier kernels the planner has it recompute, and element-wise values it reads
    through a view (recomputed at the view's indices)."""

    def inline(src: Node, via_view: bool) -> bool:
        return (owner.get(src) is block or src in floating or src in block.recomputes
                or (via_view and src.kind == "pointwise"))

    return inline


def emit_fused(block: Block, outputs: tuple[Node, ...], owner: Mapping[Node, Block],
               floating: Set[Node]) -> FusedLaunch:
    """Lower a fused block to a ``FusedKernel`` computing ``outputs`` from loads."""
    low = Lowering(block.space, _inline(block, owner, floating), lambda src: owner.get(src) is block,
                   block.real_dims)
    outs = emit_in_order(low, block, block.nodes, outputs, owner)
    dims = tuple(sorted(block.dims)) if block.dims is not None else ()
    kernel, inputs = low.kernel(outs, dims)
    name = "_".join(dict.fromkeys(n.op for n in block.nodes))
    return FusedLaunch(kind=block.kind, name=name, nodes=tuple(block.nodes), outputs=outputs, kernel=kernel,
                       inputs=tuple(inputs))


def emit_matmul(block: Block, outputs: tuple[Node, ...], owner: Mapping[Node, Block], floating: Set[Node],
                recomputable: Callable[[Node], bool]) -> FusedLaunch:
    """Lower a matmul block to a ``MatmulKernel``: two prologues (computing on read what
    ``recomputable`` accepts, when the planner fused that operand) and an epilogue."""
    node = block.nodes[0]
    bias, a, b, beta, alpha = matmul_operands(node)
    low_precision = node.dtype in (torch.float16, torch.bfloat16)
    product_dtype = torch.float32 if bias is not None and low_precision else node.dtype
    prologues = []
    inputs: list[KernelInput] = []
    for pos, use in enumerate((a, b)):
        fused = pos in block.prologue_loads

        def inline(src: Node, via_view: bool, fused: bool = fused) -> bool:
            return fused and recomputable(src)

        low = Lowering(use.map.src, inline, lambda src: False)
        kernel, ins = low.kernel([low.emit(use.src, use.map)])
        prologues.append(kernel)
        inputs += ins

    space = block.space
    low = Lowering(space, _inline(block, owner, floating), lambda src: owner.get(src) is block)
    product = low.load(node, IndexMap.identity(space), None, False, product_dtype)
    value: Any = product
    if bias is not None:  # addmm: alpha * (a @ b) + beta * bias, rounded once, as cuBLAS does
        if alpha != 1:
            value = low.add("mul", (value, alpha), product_dtype)
        if beta != 0:
            bias_map = bias.map.compose(IndexMap.broadcast(space, bias.map.src))
            value = low.add("add", (value, low.emit(bias.src, bias_map)), product_dtype,
                            (("alpha", beta),) if beta != 1 else ())
        if product_dtype != node.dtype:
            value = low.add("_to_copy", (value,), node.dtype, (("dtype", node.dtype),))
    low.seed(node, IndexMap.identity(space), value)
    outs = emit_in_order(low, block, block.nodes[1:], outputs, owner)
    epilogue, ins = low.kernel(outs, keep=frozenset({0}))
    kernel = MatmulKernel(prologues[0], prologues[1], epilogue, product_dtype)
    name = "_".join(dict.fromkeys(n.op for n in block.nodes))
    return FusedLaunch(kind="matmul", name=name, nodes=tuple(block.nodes), outputs=outputs, kernel=kernel,
                       inputs=tuple(inputs + ins[1:]))


def _prune(instrs: list[Instr], n_inputs: int, outs: tuple[Value, ...],
           keep: frozenset[int] = frozenset()) -> tuple[list[Instr], list[int], tuple[Value, ...]]:
    """Drop instructions and loads no output depends on (a value emitted in program order and
    then needed at another level or map), renumbering the rest: (instrs, kept inputs, outs)."""
    live = {o.index for o in outs}
    for i in reversed(range(len(instrs))):
        if i in live:
            live.update(a.index for a in instrs[i].args if isinstance(a, Value))
    used = sorted({a.index for i in live for a in instrs[i].args if isinstance(a, Input)} | keep)
    if len(live) == len(instrs) and len(used) == n_inputs:
        return instrs, used, outs
    values = {old: new for new, old in enumerate(sorted(live))}
    loads = {old: new for new, old in enumerate(used)}

    def remap(a: Any) -> Any:
        if isinstance(a, Value):
            return Value(values[a.index])
        return Input(loads[a.index]) if isinstance(a, Input) else a

    kept = [Instr(ins.op, tuple(remap(a) for a in ins.args), ins.dtype, ins.attrs)
            for i, ins in enumerate(instrs) if i in live]
    return kept, used, tuple(remap(o) for o in outs)
