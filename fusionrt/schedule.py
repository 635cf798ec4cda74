"""The ``stream`` planner: pending nodes in program order in, kernels and writes out.

Pure: it reads only the graph and the ``Flags`` taken at the flush, so it is tested on
hand-built graphs. ``docs/semantics.md`` states the policy this implements, rule by rule.
"""
from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import torch

from . import cost
from .graph import IndexMap, Leaf, Node, Use, View, numel
from .kernel_ir import FusedKernel, Input, Instr, MatmulKernel, Value
from .plan import Flags, KernelInput, Plan, PlannedKernel, PlannedWrite

POLICIES = ("stream",)

# First reason wins (docs/semantics.md, section 7).
REASON_ORDER = ("sync", "output", "fallback-input", "view-break", "consumed-later", "alive")


class _Block:
    """An open or closed block: the nodes of one future kernel and where each sits in it."""

    def __init__(self, space: tuple[int, ...], kind: str = "fused") -> None:
        self.space = space
        self.kind = kind  # fused | reduction | matmul | conv | copy
        self.template = False  # a matmul planned as the template: its epilogue may join it
        self.dims: Optional[frozenset[int]] = None
        self.phase = 0
        self.nodes: list[Node] = []
        self.canon: dict[Node, IndexMap] = {}
        self.phase_of: dict[Node, int] = {}
        self.reduced: set[Node] = set()
        # matmul blocks: the element-wise block before it (whose values it computes on read),
        # what each operand computed on read loads (0: left, 1: right), what its epilogue loads
        self.producer: Optional[_Block] = None
        self.prologue_loads: dict[int, list[tuple[Any, IndexMap]]] = {}
        self.epilogue_loads: dict[tuple[int, IndexMap], tuple[Any, IndexMap]] = {}

    @property
    def fusible(self) -> bool:
        return self.kind in ("fused", "reduction") or self.template

    @property
    def real_dims(self) -> frozenset[int]:
        """Reduce dims that have extent: only they make a value 'reduced'."""
        return frozenset(d for d in self.dims or () if self.space[d] != 1)

    def add(self, node: Node, canon: IndexMap, reduced: bool) -> None:
        self.nodes.append(node)
        self.canon[node] = canon
        self.phase_of[node] = self.phase
        if reduced:
            self.reduced.add(node)


def tensor_uses(args: Any) -> Iterator[Use]:
    """Every ``Use`` in an argument tree (extern ops take lists of tensors)."""
    for a in args:
        if isinstance(a, Use):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from tensor_uses(a)


def matmul_operands(node: Node) -> tuple[Optional[Use], Use, Use, Any, Any]:
    """(bias, left, right, beta, alpha) of ``mm``, ``bmm``, ``addmm`` and ``baddbmm``."""
    if node.op in ("mm", "bmm"):
        a, b = node.args[:2]
        return None, a, b, 0, 1
    attrs = dict(node.attrs)
    bias, a, b = node.args[:3]
    return bias, a, b, attrs.get("beta", 1), attrs.get("alpha", 1)


class _Planner:
    def __init__(self, nodes: Sequence[Node], flags: Flags,
                 torch_matmuls: Optional[dict[Node, cost.Choice]] = None) -> None:
        self.nodes = nodes
        self.flags = flags
        self.torch_matmuls = torch_matmuls or {}  # matmuls the cost model sent to torch
        self.blocks: list[_Block] = []
        self.owner: dict[Node, _Block] = {}
        self.needs: dict[Node, str] = {}  # node -> view-break | consumed-later
        self.covered: set[Node] = set()  # alive writes hidden by a later write of the same region
        self.floating: set[Node] = set()  # concrete-data producers each consumer recomputes
        # live storages more than one pending node writes: their writes keep program order. A
        # dead storage is nobody's home: the allocator may have handed its address to a later
        # node (CUDA's caching allocator does so within one recording).
        homes = Counter(ptr for ptr in flags.alive.values() if ptr)
        self.shared_homes = {ptr for ptr, count in homes.items() if count > 1}
        self._reasons: Optional[dict[Node, str]] = None

    @functools.cached_property
    def readers(self) -> Counter:
        """How many uses read each node (through views too): asked only after a convolution."""
        return Counter(u.src.root if isinstance(u.src, View) else u.src for n in self.nodes for u in tensor_uses(n.args))

    # -- building blocks -----------------------------------------------------------------------

    @property
    def open(self) -> Optional[_Block]:
        return self.blocks[-1] if self.blocks and self.blocks[-1].fusible else None

    def new_block(self, space: tuple[int, ...], kind: str = "fused") -> _Block:
        block = _Block(space, kind)
        self.blocks.append(block)
        if kind == "fused":
            self.adopt(block)
        return block

    def adopt(self, block: _Block) -> None:
        """A new block computes the floating producers laid out like its space (so one that must
        be written is written by it, not by a kernel of its own), unless a kernel before it
        already had to read one from memory."""
        for node in self.nodes:
            if node in self.floating and node not in self.owner and node not in self.needs:
                canon = IndexMap.squeeze_fit(block.space, node.shape)
                if canon is not None:
                    block.add(node, canon, False)
                    self.owner[node] = block

    def concrete_chain(self, node: Node) -> bool:
        """``node`` computes from concrete data only, in at most ``MAX_RECOMPUTE_OPS`` ops, into
        storage no other pending op writes (so its write may move ahead of theirs)."""
        if node.storage in self.shared_homes:
            return False
        ops = 0
        stack = [node]
        while stack:
            n = stack.pop()
            ops += 1
            if ops > cost.MAX_RECOMPUTE_OPS:
                return False
            for use in tensor_uses(n.args):
                if isinstance(use.src, View) or (isinstance(use.src, Node) and use.src not in self.floating):
                    return False
                if isinstance(use.src, Node):
                    stack.append(use.src)
        return True

    def readable(self, block: _Block, src: Any, m: IndexMap, phase: int,
                 recompute: bool = False) -> Optional[str]:
        """None when ``block`` can read ``src`` at ``m`` (from its space); else why not:
        'view' when the obstacle was reached through a view, 'value' otherwise."""
        if isinstance(src, View):
            if src.map is None:
                return "view" if self.owner.get(src.root) is block else None
            why = self.readable(block, src.root, src.map.compose(m), phase, recompute)
            return "view" if why else None
        if isinstance(src, Leaf) or src in self.floating or self.owner.get(src) is not block:
            return None
        same_phase = src in block.reduced or block.phase_of[src] == phase
        if m == block.canon[src] and same_phase:
            return None
        # A cast or copy is re-read from its input rather than carried across a reduction.
        free = src.op in ("_to_copy", "clone")
        if src.kind != "pointwise" or not (same_phase or recompute or free):
            return "value"
        for use in tensor_uses(src.args):
            why = self.readable(block, use.src, use.map.compose(m), phase, recompute)
            if why:
                return why
        return None

    def mark(self, block: _Block, src: Any, m: IndexMap, view_broke: bool, via_view: bool = False) -> None:
        """Record that nodes of other kernels read by ``block`` at ``m`` must be written."""
        if isinstance(src, View):
            if src.map is None:
                self.need(src.root, "view-break")
            else:
                self.mark(block, src.root, src.map.compose(m), view_broke, True)
            return
        if isinstance(src, Leaf) or src in self.floating:
            return
        if self.owner.get(src) is not block:
            if via_view and src.kind == "pointwise":  # absorbed: recomputed through the view
                for use in tensor_uses(src.args):
                    self.mark(block, use.src, use.map.compose(m), view_broke, True)
            else:
                self.need(src, "view-break" if view_broke and via_view else "consumed-later")
        elif m != block.canon[src]:
            for use in tensor_uses(src.args):
                self.mark(block, use.src, use.map.compose(m), view_broke, via_view)

    def need(self, node: Node, reason: str) -> None:
        old = self.needs.get(node)
        if old is None or REASON_ORDER.index(reason) < REASON_ORDER.index(old):
            self.needs[node] = reason

    def need_load(self, src: Any) -> None:
        """Torch's kernel (or a template operand loaded as is) reads memory: no recomputing."""
        if isinstance(src, View):
            self.need(src.root, "consumed-later")
        elif isinstance(src, Node):
            self.need(src, "consumed-later")

    def join(self, block: _Block, node: Node, canon: IndexMap, reduced: bool,
             uses: list[tuple[Use, IndexMap]], view_broke: bool) -> None:
        for use, m in uses:
            self.mark(block, use.src, m, view_broke)
        block.add(node, canon, reduced)
        self.owner[node] = block

    def try_join(self, block: Optional[_Block], node: Node, canon: Optional[IndexMap],
                 uses: list[tuple[Use, IndexMap]]) -> tuple[bool, bool]:
        """(joined?, did a view stop it?)"""
        if block is None or canon is None:
            return False, False
        whys = [self.readable(block, u.src, m, block.phase, u.recompute) for u, m in uses]
        if any(whys):
            return False, "view" in whys
        if block.template and not self.epilogue_fits(block, uses):
            return False, False
        return True, False

    def epilogue_fits(self, block: _Block, uses: list[tuple[Use, IndexMap]]) -> bool:
        """The register-pressure proxy of an epilogue: its ops and the tensors it loads."""
        if len(block.nodes) > cost.MAX_EPILOGUE_OPS:
            return False
        loads = dict(block.epilogue_loads)
        for use, m in uses:
            src = use.src.root if isinstance(use.src, View) else use.src
            if self.owner.get(src) is not block:
                loads[(id(use.src), m)] = (use.src, m)
        if len(loads) > cost.MAX_EPILOGUE_LOADS:
            return False
        block.epilogue_loads = loads
        return True

    def conv_epilogue(self, node: Node) -> bool:
        """A ReLU straight after a convolution runs in the convolution's kernel (cuDNN's fused
        convolution-bias-activation), when nothing else reads the convolution's result."""
        block = self.blocks[-1] if self.blocks else None
        if node.op != "relu" or block is None or block.kind != "conv" or len(block.nodes) != 1:
            return False
        conv = block.nodes[0]
        (use,) = tensor_uses(node.args)
        flags = self.flags
        if (use.src is not conv or use.map != IndexMap.identity(conv.shape) or self.readers[conv] != 1
                or conv in flags.alive or conv in flags.outputs or conv in flags.sync
                or conv in flags.fallback_inputs or node.dtype != conv.dtype):
            return False
        block.add(node, IndexMap.identity(node.shape), False)
        self.owner[node] = block
        return True

    def pointwise(self, node: Node) -> None:
        if self.conv_epilogue(node):
            return
        block = self.open
        canon, reduced = None, False
        if block is not None:
            canon = IndexMap.squeeze_fit(block.space, node.shape)
            if canon is None and block.dims is not None:
                canon = IndexMap.squeeze_fit(block.space, node.shape, block.real_dims)
                reduced = True
            if canon is None and self.concrete_chain(node):
                self.floating.add(node)  # does not close the open block: consumers recompute it
                return
        uses = [(u, u.map.compose(canon)) for u in tensor_uses(node.args)] if canon else []
        joined, view_broke = self.try_join(block, node, canon, uses)
        if not joined:
            block = self.new_block(node.shape)
            canon, reduced = IndexMap.identity(node.shape), False
            uses = [(u, u.map) for u in tensor_uses(node.args)]
        self.join(block, node, canon, reduced, uses, view_broke)

    def reduction(self, node: Node) -> None:
        (use,) = node.args
        space = use.map.src
        block = self.open
        fits = (block is not None and not block.template and block.space == space
                and block.dims in (None, node.dims))
        uses = [(use, use.map)]
        joined, view_broke = self.try_join(block if fits else None, node, use.map, uses)
        if not joined:
            block = self.new_block(space)
        block.kind, block.dims = "reduction", node.dims
        canon = IndexMap.squeeze_fit(space, node.shape, block.real_dims)
        assert canon is not None, f"reduction {node.op} output {node.shape} does not fit {space}"
        self.join(block, node, canon, bool(block.real_dims), uses, view_broke)
        block.phase += 1

    def extern(self, node: Node) -> None:
        if node.kernel_kind == "matmul" and node not in self.torch_matmuls:
            self.matmul(node)
            return
        block = self.new_block(node.shape, node.kernel_kind)
        for use in tensor_uses(node.args):
            self.need_load(use.src)
        block.add(node, IndexMap.identity(node.shape), False)
        self.owner[node] = block

    def matmul(self, node: Node) -> None:
        """A template block: operands computed by the element-wise block before it are
        recomputed on read (prologue); element-wise ops after it join it (epilogue)."""
        producer = self.open if self.open is not None and not self.open.template else None
        block = self.new_block(node.shape, "matmul")
        block.template, block.producer = True, producer
        bias, a, b, beta, _ = matmul_operands(node)
        for pos, use in enumerate((a, b)):
            loads = self.prologue(producer, use.src, use.map)
            if loads is None:
                self.need_load(use.src)
                continue
            block.prologue_loads[pos] = loads
            for src, _ in loads:
                self.need_load(src)
        if bias is not None and beta != 0:
            m = bias.map.compose(IndexMap.broadcast(node.shape, bias.map.src))
            self.mark(block, bias.src, m, False)
            block.epilogue_loads[(id(bias.src), m)] = (bias.src, m)
        block.add(node, IndexMap.identity(node.shape), False)
        self.owner[node] = block

    def recomputable(self, node: Node, producer: Optional[_Block]) -> bool:
        return node in self.floating or (
            producer is not None and self.owner.get(node) is producer and node.kind == "pointwise")

    def prologue(self, producer: Optional[_Block], src: Any, m: IndexMap) -> Optional[list[tuple[Any, IndexMap]]]:
        """What an operand computed on read loads, or None when nothing would be computed or
        the prologue is over the cost model's budget."""
        loads: list[tuple[Any, IndexMap]] = []
        ops = 0

        def visit(s: Any, sm: IndexMap) -> None:
            nonlocal ops
            if ops > cost.MAX_PROLOGUE_OPS:
                return
            if isinstance(s, View) and s.map is not None:
                visit(s.root, s.map.compose(sm))
            elif isinstance(s, Node) and self.recomputable(s, producer):
                ops += 1
                for u in tensor_uses(s.args):
                    visit(u.src, u.map.compose(sm))
            else:
                loads.append((s, sm))

        visit(src, m)
        distinct = list({(id(s), sm): (s, sm) for s, sm in loads}.values())
        if ops == 0 or ops > cost.MAX_PROLOGUE_OPS or len(distinct) > cost.MAX_PROLOGUE_LOADS:
            return None
        return distinct

    # -- cost model ----------------------------------------------------------------------------

    def walk(self) -> None:
        for node in self.nodes:
            getattr(self, node.kind)(node)

    def choices(self) -> dict[Node, cost.Choice]:
        """The cost model's verdict on every matmul planned as a template."""
        reasons = self.reasons()
        out = {}
        for block in self.blocks:
            if block.template:
                out[block.nodes[0]] = cost.choose_matmul(self.matmul_work(block, reasons))
        return out

    def matmul_work(self, block: _Block, reasons: dict[Node, str]) -> cost.MatmulWork:
        node = block.nodes[0]
        bias, a, b, beta, _ = matmul_operands(node)
        operands = (a, b)
        k = a.map.src[-1]
        batch = numel(node.shape[:-2])
        operand_bytes = sum(_read_bytes(u.src, u.map) for u in operands)
        template_read = 0
        fused_bytes = 0
        for pos, use in enumerate(operands):
            if pos in block.prologue_loads:
                template_read += sum(_read_bytes(s, m) for s, m in block.prologue_loads[pos])
                fused_bytes += numel(use.map.src) * node.dtype.itemsize
            else:
                template_read += _read_bytes(use.src, use.map)
        extra = sum(_read_bytes(s, m) for s, m in block.epilogue_loads.values())
        outputs = sum(n.nbytes for n in block.nodes if n in reasons)
        return cost.MatmulWork(
            batch=batch, m=node.shape[-2], n=node.shape[-1], k=k, dtype=node.dtype,
            operand_bytes=operand_bytes, template_read_bytes=template_read + extra,
            extra_read_bytes=extra, product_bytes=node.nbytes, output_bytes=outputs,
            fused_operand_bytes=fused_bytes,
            epilogue=any(n in reasons for n in block.nodes[1:]) or (bias is not None and beta != 0),
        )

    # -- writes and kernels --------------------------------------------------------------------

    def reasons(self) -> dict[Node, str]:
        if self._reasons is not None:
            return self._reasons
        flags = self.flags
        last: dict[tuple, Node] = {}
        for node in self.nodes:  # a later write of the same region hides an earlier one
            key = flags.alive.get(node)
            if key is not None:
                region = (key, node.shape, node.stride, node.offset)
                if region in last:
                    self.covered.add(last[region])
                last[region] = node
        out: dict[Node, str] = {}
        for node in self.nodes:
            if node in flags.sync:
                out[node] = "sync"
            elif node in flags.outputs:
                out[node] = "output"
            elif node in flags.fallback_inputs:
                out[node] = "fallback-input"
            elif node in self.needs:
                out[node] = self.needs[node]
            elif node in flags.alive and node not in self.covered:
                out[node] = "alive"
        self._reasons = out
        return out

    def side_blocks(self, reasons: dict[Node, str]) -> list[_Block]:
        """Floating producers that must be written and that no block adopted: one kernel per
        shape, first in the plan (they read concrete data only)."""
        blocks: dict[tuple[int, ...], _Block] = {}
        for node in self.nodes:
            if node in self.floating and node in reasons and node not in self.owner:
                block = blocks.get(node.shape)
                if block is None:
                    block = blocks[node.shape] = _Block(node.shape)
                block.add(node, IndexMap.identity(node.shape), False)
        return list(blocks.values())

    def build(self, choices: dict[Node, cost.Choice]) -> Plan:
        reasons = self.reasons()
        plan = Plan()
        index_of: dict[Node, int] = {}
        reads: list[set[Any]] = []  # per kernel: nodes and leaf storages it reads
        for block in self.side_blocks(reasons) + self.blocks:
            outputs = tuple(n for n in block.nodes if n in reasons)
            if not outputs:
                continue
            if block.template:
                planned = _emit_matmul(self, block, outputs)
                choice = choices[block.nodes[0]]
                planned.backend, planned.decision = choice.backend, choice.reason
                activation = _cublaslt_activation(planned)
                if activation:  # the same kernel at cuBLAS's rate: it beats the template
                    choice = cost.cublaslt(activation, planned.kernel.operand_dtype)
                    planned.backend, planned.decision = choice.backend, choice.reason
                read = {i.src for i in planned.inputs}
            elif block.fusible:
                planned = _emit(self, block, outputs)
                read = {i.src for i in planned.inputs}
            else:
                node = block.nodes[0]
                planned = PlannedKernel(node.kernel_kind, "_".join(n.op for n in block.nodes), tuple(block.nodes),
                                        outputs, extern=node, backend="torch")
                choice = self.torch_matmuls.get(node)
                if len(block.nodes) > 1:
                    planned.decision = "cuDNN's fused convolution-bias-ReLU kernel"
                else:
                    planned.decision = choice.reason if choice else f"{node.kernel_kind} has no template"
                read = {u.src.root if isinstance(u.src, View) else u.src for u in tensor_uses(node.args)}
            reads.append({r.storage if isinstance(r, Leaf) else r for r in read})
            for node in outputs:
                index_of[node] = len(plan.kernels)
            plan.kernels.append(planned)
        home_writes = {n for n in self.nodes
                       if n in reasons and n in self.flags.alive and n not in self.covered}
        late_home: list[Node] = []
        late_keys: set[int] = set()  # storages whose later home writes must wait as well
        for node in self.nodes:
            if node not in reasons:
                continue
            k = index_of[node]
            home = node in home_writes
            if home and (self.flags.alive[node] in late_keys
                         or self._deferred(node, k, index_of, reads, home_writes)):
                late_home.append(node)
                late_keys.add(self.flags.alive[node])
                home = False
            plan.writes.append(PlannedWrite(node, reasons[node], k, home))
        for node in late_home:  # scratch results copied home, in program order, once nothing
            # reads the old data
            plan.writes.append(PlannedWrite(node, "alive", len(plan.kernels), True))
            plan.kernels.append(PlannedKernel("copy", f"copy {node.op} home", (node,), (node,), backend="torch"))
        return plan

    def _deferred(self, node: Node, k: int, index_of: dict[Node, int], reads: list[set[Any]],
                  home_writes: set[Node]) -> bool:
        """Writing home at once would change data a later kernel still reads."""
        later = reads[k + 1:]
        if any(node.storage in r for r in later):
            return True
        key = self.flags.alive[node]
        rewritten = [index_of[m] for m in home_writes
                     if m is not node and self.flags.alive[m] == key and index_of[m] > k]
        return bool(rewritten) and any(node in r for r in reads[min(rewritten) + 1:])


def _read_bytes(src: Any, m: IndexMap) -> int:
    """Distinct bytes a kernel loads reading ``src`` at ``m``: broadcast dims are read once."""
    if isinstance(src, View):
        src = src.root
    n = 1
    for d, size in enumerate(m.dst):
        if any(m.coef[d]):
            n *= size
    if isinstance(src, Leaf):  # a concrete expand has stride 0 where it repeats
        n = 1
        for size, stride in zip(src.shape, src.stride):
            n *= size if stride else 1
    return n * src.dtype.itemsize


class _Lowering:
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


def _emit_in_order(low: _Lowering, block: _Block, nodes: Sequence[Node], outputs: tuple[Node, ...],
                   owner: dict[Node, _Block]) -> list[Any]:
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


def _emit(planner: _Planner, block: _Block, outputs: tuple[Node, ...]) -> PlannedKernel:
    """Lower a fused block to a ``FusedKernel`` computing ``outputs`` from loads."""
    owner, floating = planner.owner, planner.floating

    def inline(src: Node, via_view: bool) -> bool:
        return (owner.get(src) is block or src in floating or (via_view and src.kind == "pointwise"))

    low = _Lowering(block.space, inline, lambda src: owner.get(src) is block, block.real_dims)
    outs = _emit_in_order(low, block, block.nodes, outputs, owner)
    dims = tuple(sorted(block.dims)) if block.dims is not None else ()
    kernel, inputs = low.kernel(outs, dims)
    name = "_".join(dict.fromkeys(n.op for n in block.nodes))
    return PlannedKernel(block.kind, name, tuple(block.nodes), outputs, kernel, tuple(inputs))


def _emit_matmul(planner: _Planner, block: _Block, outputs: tuple[Node, ...]) -> PlannedKernel:
    """Lower a matmul block to a ``MatmulKernel``: two prologues and an epilogue."""
    node = block.nodes[0]
    bias, a, b, beta, alpha = matmul_operands(node)
    owner, floating = planner.owner, planner.floating
    low_precision = node.dtype in (torch.float16, torch.bfloat16)
    product_dtype = torch.float32 if bias is not None and low_precision else node.dtype
    prologues = []
    inputs: list[KernelInput] = []
    for pos, use in enumerate((a, b)):
        fused = pos in block.prologue_loads

        def inline(src: Node, via_view: bool, fused: bool = fused) -> bool:
            return fused and planner.recomputable(src, block.producer)

        low = _Lowering(use.map.src, inline, lambda src: False)
        kernel, ins = low.kernel([low.emit(use.src, use.map)])
        prologues.append(kernel)
        inputs += ins

    def inline_epilogue(src: Node, via_view: bool) -> bool:
        return owner.get(src) is block or src in floating or (via_view and src.kind == "pointwise")

    space = block.space
    low = _Lowering(space, inline_epilogue, lambda src: owner.get(src) is block)
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
    outs = _emit_in_order(low, block, block.nodes[1:], outputs, owner)
    epilogue, ins = low.kernel(outs, keep=frozenset({0}))
    kernel = MatmulKernel(prologues[0], prologues[1], epilogue, product_dtype)
    name = "_".join(dict.fromkeys(n.op for n in block.nodes))
    return PlannedKernel("matmul", name, tuple(block.nodes), outputs, kernel, tuple(inputs + ins[1:]))


def _cublaslt_activation(planned: PlannedKernel) -> str:
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


def plan(nodes: Sequence[Node], flags: Flags, policy: str = "stream") -> Plan:
    """Group pending ``nodes`` (program order) into kernels and decide every write.

    Matmuls are first planned as templates; each one the cost model sends to torch instead is
    planned again as torch's kernel (its neighbours then form blocks of their own), until the
    verdicts agree with the plan."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    to_torch: dict[Node, cost.Choice] = {}
    while True:
        planner = _Planner(nodes, flags, to_torch)
        planner.walk()
        choices = planner.choices()
        rejected = {n: c for n, c in choices.items() if c.backend != "template"}
        if not rejected:
            return planner.build(choices)
        to_torch.update(rejected)
