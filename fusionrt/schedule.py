"""The planner: pending nodes in program order in, kernels and writes out.

Pure: it reads only the graph and the ``Flags`` taken at the flush, so it is tested on
hand-built graphs. ``docs/semantics.md`` states the ``stream`` policy rule by rule; the
``speed`` policy differs in one rule (an element-wise value is recomputed across a reduction,
or by a later kernel, when that reads fewer bytes than writing it: ``cost.recompute_pays``). It
decides blocks and writes; ``kernel_emit`` turns each block into kernel IR and ``backends``
matches kernels that a library kernel runs better.
"""
from __future__ import annotations

import dataclasses
import functools
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Optional

from . import cost
from .backends import extern_decision, matmul_backend
from .blocks import Block, matmul_operands, tensor_uses
from .graph import IndexMap, Leaf, Node, Use, View, numel
from .kernel_emit import emit_fused, emit_matmul
from .plan import CopyHome, ExternLaunch, Flags, FusedLaunch, Plan, PlannedWrite

# stream: Burn's semantics, what lazy()/measure/%%fuse measure and the linter's contract is
# stated in; speed: Inductor's recomputation, for fusionrt.jit and the torch.compile backend.
POLICIES = ("stream", "speed")

# First reason wins (docs/semantics.md, section 7).
REASON_ORDER = ("sync", "output", "fallback-input", "view-break", "consumed-later", "saved-for-backward", "alive")



class _Planner:
    def __init__(self, nodes: Sequence[Node], flags: Flags,
                 torch_matmuls: Optional[dict[Node, cost.Choice]] = None, policy: str = "stream") -> None:
        self.nodes = nodes
        self.flags = flags
        self.speed = policy == "speed"
        self.torch_matmuls = torch_matmuls or {}  # matmuls the cost model sent to torch
        self.blocks: list[Block] = []
        self.owner: dict[Node, Block] = {}
        self.needs: dict[Node, str] = {}  # node -> view-break | consumed-later
        self.covered: set[Node] = set()  # alive writes hidden by a later write of the same region
        self.floating: set[Node] = set()  # concrete-data producers each consumer recomputes
        self.floats_after: dict[Node, int] = {}  # a floating producer -> the last block it reads (-1: none)
        self.templates: dict[Node, FusedLaunch] = {}  # a template block's kernel, by its matmul
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
    def open(self) -> Optional[Block]:
        return self.blocks[-1] if self.blocks and self.blocks[-1].fusible else None

    def new_block(self, space: tuple[int, ...], kind: str = "fused") -> Block:
        block = Block(space, kind)
        self.blocks.append(block)
        if kind == "fused":
            self.adopt(block)
        return block

    def adopt(self, block: Block) -> None:
        """A new block computes the floating producers laid out like its space (so one that must
        be written is written by it, not by a kernel of its own), unless a kernel before it
        already had to read one from memory."""
        for node in self.nodes:
            if node in self.floating and node not in self.owner and node not in self.needs:
                canon = IndexMap.squeeze_fit(block.space, node.shape)
                if canon is not None:
                    block.add(node, canon, False)
                    self.owner[node] = block

    def floats(self, node: Node) -> Optional[int]:
        """Where ``node`` may float, the index of the last block it reads (-1: none): it
        computes, in at most ``MAX_RECOMPUTE_OPS`` ops, from concrete data and from values of
        blocks closed before the open one (which are then written), into storage no other
        pending op writes (so its write may move ahead of theirs). Each consumer computes it,
        and a kernel of its own writes it, if it must be written, after that block."""
        if node.storage in self.shared_homes:
            return None
        ops, after = 0, -1
        stack = [node]
        earlier: list[Node] = []
        while stack:
            n = stack.pop()
            ops += 1
            if ops > cost.MAX_RECOMPUTE_OPS:
                return None
            for use in tensor_uses(n.args):
                src = use.src
                if isinstance(src, View):
                    return None
                if src in self.floating:
                    after = max(after, self.floats_after[src])
                    stack.append(src)
                elif isinstance(src, Node):
                    owner = self.owner.get(src)
                    if owner is None or owner is self.open:
                        return None
                    after = max(after, self.blocks.index(owner))
                    earlier.append(src)
        for src in earlier:
            self.need(src, "consumed-later")
        return after

    def readable(self, block: Block, src: Any, m: IndexMap, phase: int,
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
        if src.kind != "pointwise" or not (same_phase or recompute or free
                                           or self.recompute_chain(block, src, m, phase) is not None):
            return "value"
        for use in tensor_uses(src.args):
            why = self.readable(block, use.src, use.map.compose(m), phase, recompute)
            if why:
                return why
        return None

    def mark(self, block: Block, src: Any, m: IndexMap, view_broke: bool, via_view: bool = False) -> None:
        """Record that nodes of other kernels read by ``block`` at ``m`` must be written, unless
        the block recomputes them (through a view, or under the speed policy)."""
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
            elif self.recomputes_across(block, src, m):
                for use in tensor_uses(src.args):
                    self.mark(block, use.src, use.map.compose(m), view_broke, via_view)
            else:
                self.need(src, "view-break" if view_broke and via_view else "consumed-later")
        elif m != block.canon[src]:
            for use in tensor_uses(src.args):
                self.mark(block, use.src, use.map.compose(m), view_broke, via_view)

    def recomputes_across(self, block: Block, src: Node, m: IndexMap) -> bool:
        """``block`` computes ``src``, a value of an earlier kernel, from that value's inputs."""
        if src not in block.recomputes and not block.template and src.kind == "pointwise":
            chain = self.recompute_chain(block, src, m, block.phase)
            if chain is not None:
                block.recomputes.update(chain)
        return src in block.recomputes

    def recompute_chain(self, block: Block, src: Node, m: IndexMap, phase: int) -> Optional[set[Node]]:
        """Under the speed policy, when ``block`` reading ``src`` at ``m`` in ``phase`` should
        compute it from its inputs rather than have it written and load it: the values of
        other kernels that computing it takes (empty when all are the block's own)."""
        if not self.speed:
            return None
        found = self.chain_loads(block, src, m, phase, cost.MAX_RECOMPUTE_OPS)
        if found is None:
            return None
        loads, others = found
        extra = sum(_read_bytes(s, sm) + self.write_bytes(s) for key, (s, sm) in loads.items()
                    if key not in block.loads)
        saved = _read_bytes(src, m) + self.write_bytes(src)
        return others if cost.recompute_pays(extra, saved) else None

    def chain_loads(self, block: Block, src: Any, m: IndexMap, phase: int, budget: Optional[int]
                    ) -> Optional[tuple[dict[tuple[int, IndexMap], tuple[Any, IndexMap]], set[Node]]]:
        """What ``block`` loads to have ``src`` at ``m`` in ``phase`` (values in its registers
        cost nothing; element-wise values not written anyway are computed from their inputs),
        and the values of other kernels it computes on the way. None when that takes more than
        ``budget`` ops, or a reduced value of the block is read at another map."""
        loads: dict[tuple[int, IndexMap], tuple[Any, IndexMap]] = {}
        others: set[Node] = set()
        seen: set[tuple[int, IndexMap]] = set()
        ops = 0
        stack = [(src, m)]
        while stack:
            s, sm = stack.pop()
            if (id(s), sm) in seen:
                continue
            seen.add((id(s), sm))
            if isinstance(s, View) and s.map is not None:
                stack.append((s.root, s.map.compose(sm)))
                continue
            if isinstance(s, (Leaf, View)):
                loads[(id(s), sm)] = (s, sm)
                continue
            own = self.owner.get(s) is block
            if own and sm == block.canon[s] and (s in block.reduced or block.phase_of[s] == phase):
                continue
            if own or s in self.floating or s in block.recomputes:
                if s.kind != "pointwise":
                    return None
            elif s.kind == "pointwise" and not block.template and not self.written_anyway(s):
                others.add(s)
            else:
                loads[(id(s), sm)] = (s, sm)
                continue
            ops += 1
            if budget is not None and ops > budget:
                return None
            stack.extend((u.src, u.map.compose(sm)) for u in tensor_uses(s.args))
        return loads, others

    def written_anyway(self, node: Node) -> bool:
        flags = self.flags
        return (node in self.needs or node in flags.alive or node in flags.sync or node in flags.outputs
                or node in flags.fallback_inputs)

    def write_bytes(self, src: Any) -> int:
        """What loading ``src`` adds in writes: a value of another kernel not written anyway."""
        root = src.root if isinstance(src, View) else src
        return root.nbytes if isinstance(root, Node) and not self.written_anyway(root) else 0

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

    def join(self, block: Block, node: Node, canon: IndexMap, reduced: bool,
             uses: list[tuple[Use, IndexMap]], view_broke: bool) -> None:
        for use, m in uses:
            self.mark(block, use.src, m, view_broke)
            if self.speed:
                found = self.chain_loads(block, use.src, m, block.phase, None)
                if found is not None:
                    block.loads.update(found[0])
        block.add(node, canon, reduced)
        self.owner[node] = block

    def try_join(self, block: Optional[Block], node: Node, canon: Optional[IndexMap],
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

    def epilogue_fits(self, block: Block, uses: list[tuple[Use, IndexMap]]) -> bool:
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
            after = self.floats(node) if canon is None else None
            if after is not None:  # does not close the open block: consumers recompute it
                self.floating.add(node)
                self.floats_after[node] = after
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

    def recomputable(self, node: Node, producer: Optional[Block]) -> bool:
        return node in self.floating or (
            producer is not None and self.owner.get(node) is producer and node.kind == "pointwise")

    def prologue(self, producer: Optional[Block], src: Any, m: IndexMap) -> Optional[list[tuple[Any, IndexMap]]]:
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
        """The cost model's verdict on every matmul planned as a template; one whose kernel
        cuBLASLt's fused epilogue computes runs there whatever the template's estimate."""
        reasons = self.reasons()
        out = {}
        for block in self.blocks:
            if block.template:
                choice = cost.choose_matmul(self.matmul_work(block, reasons))
                outputs = tuple(n for n in block.nodes if n in reasons)
                out[block.nodes[0]] = matmul_backend(self.emit_template(block, outputs), choice) if outputs else choice
        return out

    def emit_template(self, block: Block, outputs: tuple[Node, ...]) -> FusedLaunch:
        """Emitted once: the cost model's verdict reads it, and the plan keeps it."""
        planned = self.templates.get(block.nodes[0])
        if planned is None:
            planned = self.templates[block.nodes[0]] = emit_matmul(
                block, outputs, self.owner, self.floating, functools.partial(self.recomputable, producer=block.producer))
        return planned

    def matmul_work(self, block: Block, reasons: dict[Node, str]) -> cost.MatmulWork:
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
                out[node] = "saved-for-backward" if node in flags.saved else "alive"
        self._reasons = out
        return out

    def ordered_blocks(self, reasons: dict[Node, str]) -> list[Block]:
        """The blocks in plan order, with the floating producers that must be written and that
        no block adopted: one kernel per shape and last block they read, right after that
        block (first in the plan for those reading concrete data only)."""
        sides: dict[tuple[tuple[int, ...], int], Block] = {}
        for node in self.nodes:
            if node in self.floating and node in reasons and node not in self.owner:
                key = (node.shape, self.floats_after[node])
                block = sides.get(key)
                if block is None:
                    block = sides[key] = Block(node.shape)
                block.add(node, IndexMap.identity(node.shape), False)
        following: dict[int, list[Block]] = defaultdict(list)
        for (_, after), block in sides.items():
            following[after].append(block)
        ordered = list(following[-1])
        for i, block in enumerate(self.blocks):
            ordered += [block, *following[i]]
        return ordered

    def build(self, choices: dict[Node, cost.Choice]) -> Plan:
        reasons = self.reasons()
        plan = Plan()
        index_of: dict[Node, int] = {}
        reads: list[set[Any]] = []  # per kernel: nodes and leaf storages it reads
        for block in self.ordered_blocks(reasons):
            outputs = tuple(n for n in block.nodes if n in reasons)
            if not outputs:
                continue
            if block.template:
                choice = choices[block.nodes[0]]
                planned = dataclasses.replace(self.emit_template(block, outputs), backend=choice.backend,
                                              decision=choice.reason)
                read = {i.src for i in planned.inputs}
            elif block.fusible:
                planned = emit_fused(block, outputs, self.owner, self.floating)
                read = {i.src for i in planned.inputs}
            else:
                node = block.nodes[0]
                planned = ExternLaunch(kind=node.kernel_kind, name="_".join(n.op for n in block.nodes),
                                       nodes=tuple(block.nodes), outputs=outputs, op=node,
                                       decision=extern_decision(block.nodes, self.torch_matmuls.get(node)))
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
            plan.kernels.append(CopyHome(name=f"copy {node.op} home", nodes=(node,), outputs=(node,)))
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


def plan(nodes: Sequence[Node], flags: Flags, policy: str = "stream") -> Plan:
    """Group pending ``nodes`` (program order) into kernels and decide every write.

    Matmuls are first planned as templates; each one the cost model sends to torch instead is
    planned again as torch's kernel (its neighbours then form blocks of their own), until the
    verdicts agree with the plan."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    to_torch: dict[Node, cost.Choice] = {}
    while True:
        planner = _Planner(nodes, flags, to_torch, policy)
        planner.walk()
        choices = planner.choices()
        rejected = {n: c for n, c in choices.items() if c.backend not in ("template", "cublaslt")}
        if not rejected:
            return planner.build(choices)
        to_torch.update(rejected)
