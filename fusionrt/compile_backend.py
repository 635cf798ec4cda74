"""fusionrt as a ``torch.compile`` backend: ``torch.compile(model, backend="fusionrt")``.

Dynamo captures the Python (guards, graph breaks, parameters lifted to graph inputs) and
AOTAutograd turns each captured graph into functional aten graphs — a forward, and a backward when
an input requires grad — with PyTorch's own decomposition tables applied. Each aten graph then
runs through ``fusionrt.jit``: its first call is recorded and planned like any lazy block, and
later calls replay the program. So this backend reuses, rather than repeats, what Dynamo and
AOTAutograd already do well; the dispatch-level capture of ``lazy()``/``measure`` stays for
code whose meaning depends on what Python keeps alive.

A graph whose inputs all live on one CUDA device is then replayed through a CUDA graph, as
``torch.compile``'s "reduce-overhead" mode does: one launch instead of one per kernel, which is
what a training step, bound by launching a few hundred small kernels, needs most. How each kind
of graph treats its inputs and results is its ``Graphing``. An inference graph's element-wise
work between two linear layers is first moved onto the first matmul's rows (``sink_views``), so
that it joins the matmul's epilogue.

Options (``torch.compile(..., options={...})``): ``executor`` and ``policy``, as for
``fusionrt.jit``; ``cudagraphs`` (default True).
"""
from __future__ import annotations

import functools
import gc
import logging
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from torch._decomp import core_aten_decompositions, decomposition_table

from .attention import route_attention
from .capture import COMPOSITE_OPS, EXTERN_KINDS, REDUCTION_OPS, recorded_from
from .kernel_ir import POINTWISE_OPS
from .replay import Jitted, global_state, jit
from .sink_views import sink_views

__all__ = ["fusionrt_backend", "decompositions", "compiled_graphs", "cuda_graphed", "CudaGraphed", "Graphing",
           "HeldResults"]

_OPTIONS = ("executor", "policy", "cudagraphs")
log = logging.getLogger("fusionrt.cudagraphs")
aten = torch.ops.aten

# Beyond the core ATen set: ops the capture would otherwise run eagerly that decompose into
# element-wise work and reductions it fuses (training batch norm, group norm, dropout).
_EXTRA = (aten.native_group_norm.default, aten._native_batch_norm_legit_functional.default,
          aten.native_dropout.default)
# A `where(cond)` with one argument is `nonzero`: keep its decomposition although `where` fuses.
_KEEP = (aten.where.default,)


def _kept_whole(name: str) -> bool:
    """Ops recorded as they are: element-wise ops and reductions the capture fuses, and externs
    (matmul, conv) and attention, whose library kernels beat their decompositions (the math
    form of attention would write the whole score matrix)."""
    return (name in POINTWISE_OPS or name in REDUCTION_OPS or name in COMPOSITE_OPS or name in EXTERN_KINDS
            or "scaled_dot_product" in name)


@functools.lru_cache(maxsize=None)
def _table() -> tuple[tuple[Any, Callable[..., Any]], ...]:
    table = {op: fn for op, fn in core_aten_decompositions().items()
             if not _kept_whole(op._overloadpacket.__name__) or op in _KEEP}
    table.update((op, decomposition_table[op]) for op in _EXTRA)
    return tuple(table.items())


def decompositions() -> dict[Any, Callable[..., Any]]:
    """PyTorch's core ATen decompositions, minus those of ops kept whole, plus the few that
    turn an op the capture cannot fuse into ones it can."""
    return dict(_table())


# The jitted aten graphs, oldest first; weak, so a graph Dynamo drops is freed.
_GRAPHS: "list[weakref.ref[Jitted]]" = []
_MAX_GRAPHS = 256


_GRAPHED: "weakref.WeakKeyDictionary[Jitted, CudaGraphed]" = weakref.WeakKeyDictionary()


def cuda_graphed(graph: Jitted) -> Optional[CudaGraphed]:
    """The CUDA-graph replayer of a compiled graph, or None when the graph is not graphed."""
    return _GRAPHED.get(graph)


def compiled_graphs() -> list[Jitted]:
    """The aten graphs this backend compiled that are still in use, oldest first: each a
    ``Jitted`` whose ``report`` is its last call's and whose ``stats`` say how often it replayed."""
    return [g for g in (ref() for ref in _GRAPHS) if g is not None]


def _compiler(executor: str, policy: str, graphed: bool,
              stage: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
    """The compiler of one kind of aten graph: ``stage`` is "inference", "forward" (of
    training) or "backward"."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if stage == "inference":  # measured on training graphs (ViT-B/16): more GPU time and a higher peak
            sink_views(gm)
        jitted = jit(SourcedGraph(gm), executor=executor, policy=policy)
        _GRAPHS[:] = [ref for ref in _GRAPHS[-_MAX_GRAPHS + 1:] if ref() is not None]
        _GRAPHS.append(weakref.ref(jitted))
        graphing = _graphing(stage, gm) if graphed else None
        run: Callable[[list[Any]], Any]
        if graphing is not None:
            run = _GRAPHED[jitted] = CudaGraphed(jitted, graphing)
        else:
            def run(args: list[Any]) -> Any:
                return jitted.call_boxed(args)

        run._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd passes the inputs as one list
        return run

    return compile_graph


class SourcedGraph(torch.fx.Interpreter):
    """An aten graph run node by node, each op recorded as coming from the user line its node
    was traced from (the graph's own code is generated, so a report would name it instead)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self._sources = {node: _traced_from(node) for node in gm.graph.nodes}

    def __call__(self, *args: Any) -> Any:
        try:
            return self.run(*args)
        finally:  # the interpreter would hold the call's values and arguments until its next run
            self.env.clear()
            self.args_iter = iter(())

    def run_node(self, n: torch.fx.Node) -> Any:
        token = recorded_from.set(self._sources[n])
        try:
            return super().run_node(n)
        finally:
            recorded_from.reset(token)


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _traced_from(node: torch.fx.Node) -> Optional[str]:
    """``file:line`` of the innermost frame of the node's stack trace, if it has one."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else None


@dataclass(frozen=True)
class Graphing:
    """How the CUDA graphs of one compiled graph treat its inputs and results.

    ``static``: inputs read in place (parameters and buffers); the others are copied into the
    graph's own buffers. ``reads_handed_out``: also read in place, decided at capture, the
    parameters and what another captured graph handed out — a backward's saved activations,
    which copying would write a second time. ``copied_results``: the first results are always
    copied out (a training forward's outputs, which the caller holds into the next step; the
    values saved for backward that follow are handed out). ``hand_out_graphs``: graphs per
    layout that hand out their memory while earlier results are still held; past them,
    ``copy_when_held`` captures one graph that copies every result out, or else the call runs
    the jitted replay (a forward's activations are too large to copy)."""

    static: frozenset[int] = frozenset()
    reads_handed_out: bool = False
    copied_results: int = 0
    hand_out_graphs: int = 2
    copy_when_held: bool = True


def _graphing(stage: str, gm: torch.fx.GraphModule) -> Optional[Graphing]:
    """The graphing of a graph being compiled, or None where no CUDA graph may replay it: a
    graph that writes into an input it copies (the write would land in the graph's copy; a
    static input, as batch norm's running statistics, is written where it lives)."""
    if stage == "backward":  # AOTAutograd's metadata here is the forward's
        return None if _writes_a_placeholder(gm) else Graphing(reads_handed_out=True, hand_out_graphs=1)
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    infos = getattr(meta, "input_info", None)
    if meta is None or infos is None:
        return None
    static = frozenset(getattr(meta, "static_input_indices", None) or ())
    if any(_mutated_in_graph(info) and i not in static for i, info in enumerate(infos)):
        return None
    if stage == "inference":
        return Graphing(static)
    return Graphing(static, copied_results=meta.num_forward_returns, hand_out_graphs=1, copy_when_held=False)


def _mutated_in_graph(info: Any) -> bool:
    """Whether the graph itself writes the input (a mutation AOTAutograd applies outside the
    graph, from an extra output, does not write it)."""
    kind = getattr(info, "mutation_type", None)
    if kind is None:
        return bool(info.mutates_data or info.mutates_metadata)
    return kind.name != "NOT_MUTATED" and kind.name != "MUTATED_OUT_GRAPH"


def _writes_a_placeholder(gm: torch.fx.GraphModule) -> bool:
    inputs = {n for n in gm.graph.nodes if n.op == "placeholder"}
    return any(n.op == "call_function" and getattr(n.target, "_schema", None) is not None
               and n.target._schema.is_mutable and any(a in inputs for a in n.args)
               for n in gm.graph.nodes)


class CudaGraphed:
    """A jitted graph replayed through CUDA graphs, per input layout.

    A layout's first call records the jitted graph and its second replays it (the warm-up); the
    third captures a replay into a CUDA graph, which later calls launch after copying their
    non-static inputs into the graph's own buffers. A static input (a parameter) is read in
    place; a call where one has moved goes back to the jitted graph. Results are handed out in
    the graph's memory, which a launch overwrites: so a launch whose previous results are still
    held (as in ``y = model(x)`` in a loop) uses another graph of the layout, up to the
    graphing's ``hand_out_graphs``; with all of them held, the layout moves to one graph whose
    results are copied out, or the call runs the jitted replay. A held result is never
    overwritten. A layout that does not replay, or whose capture fails (a step that syncs with
    the host), stays with the jitted graph."""

    MAX_LAYOUTS = 8

    def __init__(self, jitted: Jitted, graphing: Graphing) -> None:
        self.jitted = jitted
        self.graphing = graphing
        self.launches = 0  # calls served by a CUDA graph
        self.held_calls = 0  # calls that ran the jitted replay because every graph's results were held
        self._collected = False
        # layout -> calls so far | "warm" | its captured graphs | None (never graphed)
        self._layouts: dict[tuple, Any] = {}

    def __call__(self, args: list[Any]) -> Any:
        key = self._layout(args)
        if key is None or (key not in self._layouts and len(self._layouts) >= self.MAX_LAYOUTS):
            return self.jitted.call_boxed(args)
        state = self._layouts.get(key, 0)
        if state == "warm" or isinstance(state, list):
            return self._launch(key, [] if state == "warm" else state, args)
        if state is None:
            return self.jitted.call_boxed(args)
        replays = self.jitted.stats.replays
        result = self.jitted.call_boxed(args)
        # the first call records; one that records again is not replayable: never graphed
        self._layouts[key] = "warm" if self.jitted.stats.replays > replays else (None if state else 1)
        if self._layouts[key] is None:
            log.info("no CUDA graph for %s: its second call recorded again (%s)", self.jitted,
                     self.jitted.stats.last_recording)
        return result

    def _launch(self, key: tuple, graphs: list[_Captured], args: list[Any]) -> Any:
        if not all(graph.serves(args) for graph in graphs):  # a parameter moved, or another stream
            return self.jitted.call_boxed(args)
        for graph in graphs:
            result = graph.launch(args)
            if result is not None:
                self.launches += 1
                return result
        graphing = self.graphing
        copies = len(graphs) >= graphing.hand_out_graphs
        if copies and not graphing.copy_when_held:
            if not self._collected and graphs:
                # The step that captured a graph leaves its results in reference cycles (of
                # Dynamo's and AOTAutograd's first calls): one full collection frees them, and
                # later steps leave none behind.
                self._collected = True
                gc.collect()
                return self._launch(key, graphs, args)
            self.held_calls += 1
            return self.jitted.call_boxed(args)
        # every graph's last results are still held: the caller keeps them all; from then on one
        # graph copies its results out (the others go once their results are dropped)
        static = graphing.static | (_read_in_place(args) if graphing.reads_handed_out else frozenset())
        graph = _Captured.capture(self.jitted, args, static, copies, graphing.copied_results)
        if graph is None:
            self._layouts[key] = graphs or None
            return self.jitted.call_boxed(args)
        self._layouts[key] = [graph] if copies else graphs + [graph]
        self.launches += 1
        return graph.launch(args)

    def _layout(self, args: list[Any]) -> Optional[tuple]:
        """What a captured graph depends on, or None where no graph may serve the call (a CPU
        tensor, tensors on two devices, an argument of a type it cannot key). Whether inputs to
        copy share memory is a matter of their layout, so the capture decides it once."""
        parts: list[Any] = [global_state()]
        device = None
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda" or (device is not None and a.device != device):
                    return None
                device = a.device
                parts.append((a.shape, a.stride(), a.storage_offset(), a.dtype))
            elif a is None or type(a) in (bool, int, float):
                parts.append((type(a), a))
            else:
                return None
        return tuple(parts) if device is not None else None


def _read_in_place(args: list[Any]) -> frozenset[int]:
    """The inputs a backward's graph reads where they are: parameters, and what a captured
    graph handed out (the activations its forward's graph saved for it)."""
    handed_out = set().union(*(graph.handed_out for graph in _LIVE))
    return frozenset(i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                     and (isinstance(a, torch.nn.Parameter) or a.untyped_storage().data_ptr() in handed_out))


class HeldResults:
    """Whether results handed out in a graph's memory are still held outside: a storage's use
    count above what the graph's own references make. A view, an alias or the tensor itself
    held anywhere counts; a copy does not."""

    def __init__(self, outputs: Sequence[Any]) -> None:
        storages = {t.untyped_storage()._cdata for t in outputs if isinstance(t, torch.Tensor)}
        self._own = {s: torch._C._storage_Use_Count(s) for s in storages}

    def held(self) -> bool:
        return any(torch._C._storage_Use_Count(s) > own for s, own in self._own.items())


class _Captured:
    """One CUDA graph of a jitted replay and the buffers it reads and writes.

    The buffers are shared by every launch, so launches are serialized: one at a time from
    Python (one lock for every graph, since graphs share scratch buffers), and in order on the
    GPU (only from the stream the graph was captured for; a call on another stream runs the
    jitted replay).

    A result the launch copies out leaves its buffer holding nothing anyone reads until the next
    launch writes it again: ``scratch``. A graph captured later on the same stream copies an
    input of the same layout into that buffer instead of one of its own (a training backward's
    gradient of the logits, in the forward's logits buffer): each launch writes the buffer before
    it reads it, and launches do not interleave."""

    def __init__(self, graph: Any, inputs: list[Any], outputs: Any, copied: list[int],
                 stream: tuple[torch.device, int], copies: bool, copied_results: int) -> None:
        self.graph, self.inputs, self.outputs, self.copied, self.stream = graph, inputs, outputs, copied, stream
        self.pointers = {i: a.data_ptr() for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)}
        buffers = {self.inputs[i].untyped_storage().data_ptr() for i in copied}
        # a result in an input buffer is overwritten by the next call's inputs: that one is copied
        self.copy_out = [isinstance(o, torch.Tensor) and (copies or i < copied_results
                                                           or o.untyped_storage().data_ptr() in buffers)
                         for i, o in enumerate(outputs)]
        # an input read in place (a parameter) is not the graph's to overwrite
        in_place = {a.untyped_storage().data_ptr() for i, a in enumerate(inputs)
                    if isinstance(a, torch.Tensor) and i not in copied}
        # a result that is an input (a weight or an input a forward saves for its backward) is
        # handed back as the call's own argument, as the jitted graph does: a parameter stays one
        self.passed = [next((j for j, a in enumerate(inputs) if a is o), None) if isinstance(o, torch.Tensor) else None
                       for o in outputs]
        # a result the graph returns twice (a forward's output it also saves for backward) is
        # handed out as one object twice, as the jitted graph does: a copied-out result's copy,
        # whose requires_grad the backward's guards then see as they did when it recorded
        self.repeats = [next((k for k in range(i) if outputs[k] is o), None) if isinstance(o, torch.Tensor) else None
                        for i, o in enumerate(outputs)]
        handed_out = [o for o, copy, k in zip(outputs, self.copy_out, self.repeats)
                      if not copy and (k is None or not self.copy_out[k]) and isinstance(o, torch.Tensor)
                      and o.untyped_storage().data_ptr() not in in_place]
        self.results = HeldResults(handed_out)
        self.handed_out = frozenset(o.untyped_storage().data_ptr() for o in handed_out)
        self.scratch = _scratch(outputs, self.copy_out, self.passed, inputs)
        # only the buffers it copies into (detached: a launch writes them under grad mode too);
        # holding an input read in place would keep it alive for the graph's life (``serves``
        # checks addresses)
        self.inputs = [a.detach() if i in copied else None for i, a in enumerate(inputs)]

    @classmethod
    def capture(cls, jitted: Jitted, args: list[Any], static: frozenset[int], copies: bool,
                copied_results: int) -> Optional[_Captured]:
        """A graph of a replay on ``args``; ``copies``: its results are copied out of its memory,
        else only the first ``copied_results``."""
        tensors = {i: a for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        # an input viewing what another reads in place (a weight's transpose) is read in place too
        in_place = {tensors[i].untyped_storage().data_ptr() for i in static if i in tensors}
        copied = [i for i, a in tensors.items() if i not in static and a.untyped_storage().data_ptr() not in in_place]
        storages = [tensors[i].untyped_storage().data_ptr() for i in copied]
        if len(set(storages)) < len(storages) or any(torch._debug_has_internal_overlap(tensors[i]) for i in copied):
            # a copy into a buffer of its own would not share memory as the recorded call's did
            log.info("no CUDA graph for %s: inputs to copy share memory", jitted)
            return None
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        stream = (device, torch.cuda.current_stream(device).cuda_stream)
        inputs = list(args)
        free = [buffer for graph in _LIVE if graph.stream == stream for buffer in graph.scratch]
        for i in copied:  # holding this call's values, as the jitted graph saw them (a guard reads requires_grad)
            a = args[i]
            layout = (a.shape, a.stride(), a.dtype, a.device)
            buffer = next((b for b in free if (b.shape, b.stride(), b.dtype, b.device) == layout), None)
            if buffer is None:
                buffer = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
            else:
                free = [b for b in free if b is not buffer]
                buffer = buffer.detach()
            inputs[i] = buffer.copy_(a).requires_grad_(a.requires_grad)
        graph = torch.cuda.CUDAGraph()
        replays = jitted.stats.replays
        torch.cuda.synchronize()
        try:
            # thread_local: other threads' CUDA work during the capture neither fails nor joins it
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outputs = jitted(*inputs)
        except Exception as e:  # a host sync or a CPU step inside: no graph for this layout
            log.info("no CUDA graph for %s: its capture failed (%s: %s)", jitted, type(e).__name__, e)
            return None
        if jitted.stats.replays != replays + 1:  # it recorded instead: not a pure replay
            log.info("no CUDA graph for %s: the captured call recorded (%s)", jitted, jitted.stats.last_recording)
            return None
        captured = cls(graph, inputs, outputs, copied, stream, copies, copied_results)
        _LIVE.add(captured)
        return captured

    def serves(self, args: list[Any]) -> bool:
        device, handle = self.stream
        if torch.cuda.current_stream(device).cuda_stream != handle:
            return False
        return all(args[i].data_ptr() == ptr for i, ptr in self.pointers.items() if i not in self.copied)

    def launch(self, args: list[Any]) -> Any:
        """The results of a launch, or None when the last launch's are still held."""
        with _LAUNCH_LOCK:
            if self.results.held():
                return None
            for i in self.copied:
                self.inputs[i].copy_(args[i])
            self.graph.replay()
            results: list[Any] = []
            for o, copy, j, k in zip(self.outputs, self.copy_out, self.passed, self.repeats):
                results.append(o if not isinstance(o, torch.Tensor) else results[k] if k is not None else args[j]
                               if j is not None else o.clone() if copy else o.detach())
            return type(self.outputs)(results)


def _scratch(outputs: Sequence[Any], copy_out: list[bool], passed: list[Optional[int]],
             inputs: list[Any]) -> list[torch.Tensor]:
    """The results a launch copies out whose buffers nothing else reads: each alone in its
    storage, filling it, and neither an input nor sharing memory with another result."""
    storages = [o.untyped_storage().data_ptr() for o in outputs if isinstance(o, torch.Tensor)]
    storages += [a.untyped_storage().data_ptr() for a in inputs if isinstance(a, torch.Tensor)]
    return [o for o, copy, j in zip(outputs, copy_out, passed)
            if copy and j is None and storages.count(o.untyped_storage().data_ptr()) == 1
            and o.is_contiguous() and o.storage_offset() == 0
            and o.untyped_storage().nbytes() == o.numel() * o.element_size()]


# Every captured graph still in use, for a backward's graph to know what a forward's handed out.
_LIVE: "weakref.WeakSet[_Captured]" = weakref.WeakSet()
_LAUNCH_LOCK = threading.Lock()


def fusionrt_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, mode: Optional[str] = None,
                     options: Optional[dict[str, Any]] = None) -> Callable[..., Any]:
    """The ``torch.compile`` backend (registered as ``"fusionrt"`` through the
    ``torch_dynamo_backends`` entry point)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"fusionrt backend: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
    if mode not in (None, "default", "reduce-overhead"):  # the latter is what cudagraphs already does
        raise ValueError(f"fusionrt backend: mode {mode!r} is not supported (default, reduce-overhead)")
    executor, policy = options.get("executor", "auto"), options.get("policy", "speed")
    training = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                               for x in example_inputs)
    graphed = bool(options.get("cudagraphs", True))
    if not training:
        route_attention(gm)
    # The min-cut partition saves for backward only what is dearer to recompute than to keep (as
    # Inductor does): element-wise values the backward's kernels recompute from their inputs are
    # not written out and held through the step.
    backend = aot_autograd(fw_compiler=_compiler(executor, policy, graphed, "forward" if training else "inference"),
                           bw_compiler=_compiler(executor, policy, graphed, "backward"), decompositions=decompositions(),
                           partition_fn=min_cut_rematerialization_partition, keep_inference_input_mutations=True)
    return backend(gm, example_inputs)

