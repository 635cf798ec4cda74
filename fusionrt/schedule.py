"""The ``stream`` planner: pending nodes in program order in, kernels and writes out.

Pure: it reads only the graph and the ``Flags`` taken at the flush, so it is tested on
hand-built graphs. ``docs/semantics.md`` states the policy this implements, rule by rule.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Optional

from .graph import IndexMap, Leaf, Node, Use, View
from .kernel_ir import FusedKernel, Input, Instr, Value
from .plan import Flags, KernelInput, Plan, PlannedKernel, PlannedWrite

POLICIES = ("stream",)

# First reason wins (docs/semantics.md, section 7).
REASON_ORDER = ("sync", "output", "fallback-input", "view-break", "consumed-later", "alive")


class _Block:
    """An open or closed block: the nodes of one future kernel and where each sits in it."""

    def __init__(self, space: tuple[int, ...], kind: str = "fused") -> None:
        self.space = space
        self.kind = kind  # fused | reduction | matmul | conv | copy
        self.dims: Optional[frozenset[int]] = None
        self.phase = 0
        self.nodes: list[Node] = []
        self.canon: dict[Node, IndexMap] = {}
        self.phase_of: dict[Node, int] = {}
        self.reduced: set[Node] = set()

    @property
    def fusible(self) -> bool:
        return self.kind in ("fused", "reduction")

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


class _Planner:
    def __init__(self, nodes: Sequence[Node], flags: Flags) -> None:
        self.nodes = nodes
        self.flags = flags
        self.blocks: list[_Block] = []
        self.owner: dict[Node, _Block] = {}
        self.needs: dict[Node, str] = {}  # node -> view-break | consumed-later
        self.covered: set[Node] = set()  # alive writes hidden by a later write of the same region

    # -- building blocks -----------------------------------------------------------------------

    @property
    def open(self) -> Optional[_Block]:
        return self.blocks[-1] if self.blocks and self.blocks[-1].fusible else None

    def new_block(self, space: tuple[int, ...], kind: str = "fused") -> _Block:
        block = _Block(space, kind)
        self.blocks.append(block)
        return block

    def readable(self, block: _Block, src: Any, m: IndexMap, phase: int,
                 recompute: bool = False) -> Optional[str]:
        """None when ``block`` can read ``src`` at ``m`` (from its space); else why not:
        'view' when the obstacle was reached through a view, 'value' otherwise."""
        if isinstance(src, View):
            if src.map is None:
                return "view" if self.owner.get(src.root) is block else None
            why = self.readable(block, src.root, src.map.compose(m), phase, recompute)
            return "view" if why else None
        if isinstance(src, Leaf) or self.owner.get(src) is not block:
            return None
        same_phase = src in block.reduced or block.phase_of[src] == phase
        if m == block.canon[src] and same_phase:
            return None
        if src.kind != "pointwise" or not (same_phase or recompute):
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
        if isinstance(src, Leaf):
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
        return True, False

    def pointwise(self, node: Node) -> None:
        block = self.open
        canon, reduced = None, False
        if block is not None:
            canon = IndexMap.squeeze_fit(block.space, node.shape)
            if canon is None and block.dims is not None:
                canon = IndexMap.squeeze_fit(block.space, node.shape, block.real_dims)
                reduced = True
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
        fits = (block is not None and block.space == space
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
        block = self.new_block(node.shape, node.kernel_kind)
        for use in tensor_uses(node.args):  # torch's kernel reads memory: no recomputing
            src = use.src.root if isinstance(use.src, View) else use.src
            if isinstance(src, Node):
                self.need(src, "consumed-later")
        block.add(node, IndexMap.identity(node.shape), False)
        self.owner[node] = block

    # -- writes and kernels --------------------------------------------------------------------

    def reasons(self) -> dict[Node, str]:
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
        return out

    def build(self) -> Plan:
        for node in self.nodes:
            getattr(self, node.kind)(node)
        reasons = self.reasons()
        plan = Plan()
        index_of: dict[Node, int] = {}
        reads: list[set[Any]] = []  # per kernel: nodes and leaf storages it reads
        for block in self.blocks:
            outputs = tuple(n for n in block.nodes if n in reasons)
            if not outputs:
                continue
            if block.fusible:
                planned = _emit(block, outputs, self.owner)
                read = {i.src for i in planned.inputs}
            else:
                (node,) = block.nodes
                planned = PlannedKernel(node.kernel_kind, node.op, (node,), (node,), extern=node)
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
            plan.kernels.append(PlannedKernel("copy", f"copy {node.op} home", (node,), (node,)))
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


def _emit(block: _Block, outputs: tuple[Node, ...], owner: dict[Node, _Block]) -> PlannedKernel:
    """Lower a fused block to a ``FusedKernel`` computing ``outputs`` from loads."""
    instrs: list[Instr] = []
    inputs: list[KernelInput] = []
    memo: dict[tuple, Any] = {}
    real_dims = block.real_dims
    reduced_values: set[int] = set()

    def is_reduced(ref: Any) -> bool:
        if isinstance(ref, Input):
            return inputs[ref.index].reduced
        return not isinstance(ref, Value) or ref.index in reduced_values

    def load(src: Any, m: IndexMap, view: Optional[View], full: bool) -> Input:
        """An input broadcast along the reduce dims is loaded once per row (reduced), unless
        a reduction must consume it at full size."""
        reduced = not full and bool(real_dims) and m.ignores(real_dims)
        key = ("load", id(view or src), m, reduced)
        if key not in memo:
            memo[key] = Input(len(inputs))
            inputs.append(KernelInput(src, m, view, reduced))
        return memo[key]

    def emit(src: Any, m: IndexMap, via_view: bool = False, full: bool = False) -> Any:
        if isinstance(src, View):
            if src.map is None:
                return load(src.root, m, src, full)
            return emit(src.root, src.map.compose(m), True, full)
        if isinstance(src, Leaf):
            return load(src, m, None, full)
        if owner.get(src) is not block and not (via_view and src.kind == "pointwise"):
            return load(src, m, None, full)
        full = full and src.kind != "reduction"  # a reduction's value is reduced by nature
        plain = memo.get(("value", id(src), m, False))
        if plain is not None and not (full and is_reduced(plain)):
            return plain
        key = ("value", id(src), m, full)
        if key in memo:
            return memo[key]
        if src.kind == "reduction":
            (use,) = src.args
            arg = emit(use.src, use.map)
            if is_reduced(arg):  # its input is constant along the reduce dims: expand it
                arg = emit(use.src, use.map, full=True)
            args: tuple[Any, ...] = (arg,)
        else:
            inner = via_view and owner.get(src) is not block
            args = tuple(emit(a.src, a.map.compose(m), inner, full) if isinstance(a, Use) else a
                         for a in src.args)
        instrs.append(Instr(src.op, args, src.dtype, src.attrs))
        value = Value(len(instrs) - 1)
        if src.kind == "reduction" or all(is_reduced(a) for a in args):
            reduced_values.add(value.index)
        memo[key] = value
        return value

    needed = set(outputs)  # emitted in program order, so recursion stays shallow on long chains
    for node in reversed(block.nodes):
        if node in needed:
            for use in tensor_uses(node.args):
                src = use.src.root if isinstance(use.src, View) else use.src
                if owner.get(src) is block:
                    needed.add(src)
    for node in block.nodes:
        if node in needed:
            emit(node, block.canon[node])
    outs = tuple(emit(n, block.canon[n]) for n in outputs)
    instrs, kept, outs = _prune(instrs, len(inputs), outs)
    inputs = [inputs[i] for i in kept]
    dims = tuple(sorted(block.dims)) if block.dims is not None else ()
    kernel = FusedKernel(
        shape=block.space,
        input_dtypes=tuple(i.src.dtype for i in inputs),
        instrs=tuple(instrs),
        outputs=outs,
        reduce_dims=dims,
        reduced_inputs=frozenset(i for i, inp in enumerate(inputs) if inp.reduced),
    )
    name = "_".join(dict.fromkeys(n.op for n in block.nodes))
    return PlannedKernel(block.kind, name, tuple(block.nodes), outputs, kernel, tuple(inputs))


def _prune(instrs: list[Instr], n_inputs: int,
           outs: tuple[Value, ...]) -> tuple[list[Instr], list[int], tuple[Value, ...]]:
    """Drop instructions and loads no output depends on (a value emitted in program order and
    then needed at another level or map), renumbering the rest: (instrs, kept inputs, outs)."""
    live = {o.index for o in outs}
    for i in reversed(range(len(instrs))):
        if i in live:
            live.update(a.index for a in instrs[i].args if isinstance(a, Value))
    used = sorted({a.index for i in live for a in instrs[i].args if isinstance(a, Input)})
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
    """Group pending ``nodes`` (program order) into kernels and decide every write."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    return _Planner(nodes, flags).build()
