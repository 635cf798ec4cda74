"""fusionrt as a ``torch.compile`` backend: ``torch.compile(model, backend="fusionrt")``.

Dynamo captures the Python (guards, graph breaks, parameters lifted to graph inputs) and
AOTAutograd turns each captured graph into functional aten graphs — a forward, and a backward when
an input requires grad — with PyTorch's own decomposition tables applied. Each aten graph then
runs through ``fusionrt.jit``: its first call is recorded and planned like any lazy block, and
later calls replay the program. So this backend reuses, rather than repeats, what Dynamo and
AOTAutograd already do well; the dispatch-level capture of ``lazy()``/``measure`` stays for
code whose meaning depends on what Python keeps alive.

An inference graph whose inputs all live on one CUDA device is then replayed through a CUDA
graph, as ``torch.compile``'s "reduce-overhead" mode does: one launch instead of one per kernel.
An inference graph's element-wise work between two linear layers is first moved onto the first
matmul's rows (``sink_views``), so that it joins the matmul's epilogue.

Training graphs are not graphed: a forward's graph would hand out the values saved for backward,
and on torch 2.11 a finished step's AOTAutograd context sat in a reference cycle that held them
until a full collection (0.4 s on a GPT-2 process), so each launch found them held.

Options (``torch.compile(..., options={...})``): ``executor`` and ``policy``, as for
``fusionrt.jit``; ``cudagraphs`` (default True).
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

import torch
from torch._decomp import core_aten_decompositions, decomposition_table

from .attention import route_attention
from .capture import COMPOSITE_OPS, EXTERN_KINDS, REDUCTION_OPS, recorded_from
from .kernel_ir import POINTWISE_OPS
from .replay import Jitted, global_state, jit
from .sink_views import sink_views

__all__ = ["fusionrt_backend", "decompositions", "compiled_graphs", "cuda_graphed", "CudaGraphed", "HeldResults"]

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
              inference: bool) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if inference:  # measured on training graphs (ViT-B/16): more GPU time and a higher peak
            sink_views(gm)
        jitted = jit(SourcedGraph(gm), executor=executor, policy=policy)
        _GRAPHS[:] = [ref for ref in _GRAPHS[-_MAX_GRAPHS + 1:] if ref() is not None]
        _GRAPHS.append(weakref.ref(jitted))
        static, mutates = _input_facts() if graphed else (frozenset(), True)
        run: Callable[[list[Any]], Any]
        if not mutates:  # a mutated input would be written in the graph's copy of it
            run = _GRAPHED[jitted] = CudaGraphed(jitted, static)
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


def _input_facts() -> tuple[frozenset[int], bool]:
    """From AOTAutograd's metadata of the graph being compiled: which inputs keep their memory
    from call to call (parameters and buffers: a CUDA graph reads them in place, not from a
    copy), and whether the graph writes into an input (unknown counts as yes)."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    if meta is None:
        return frozenset(), True
    static = frozenset(getattr(meta, "static_input_indices", None) or ())
    infos = getattr(meta, "input_info", None)
    mutates = infos is None or any(info.mutates_data or info.mutates_metadata for info in infos)
    return static, mutates


class CudaGraphed:
    """A jitted inference graph replayed through CUDA graphs, per input layout.

    A layout's first call records the jitted graph and its second replays it (the warm-up); the
    third captures a replay into a CUDA graph, which later calls launch after copying their
    inputs into the graph's own buffers. Static inputs (parameters) are read in place; a call
    where one has moved goes back to the jitted graph. Results are handed out in the graph's
    memory, which a launch overwrites: so a launch whose previous results are still held (as in
    ``y = model(x)`` in a loop) uses a second graph of the layout; with both graphs' results
    held (a loop that keeps every result), the layout moves to one graph whose results are
    copied out. A held result is never overwritten. A layout that does not replay, or whose
    capture fails (a step that syncs with the host), stays with the jitted graph."""

    MAX_LAYOUTS = 8
    HAND_OUT_GRAPHS = 2

    def __init__(self, jitted: Jitted, static: frozenset[int]) -> None:
        self.jitted = jitted
        self.static = static
        self.launches = 0  # calls served by a CUDA graph
        # layout -> calls so far | "warm" | its captured graphs | None (never graphed)
        self._layouts: dict[tuple, Any] = {}

    def __call__(self, args: list[Any]) -> Any:
        key = self._layout(args)
        if key is None or (key not in self._layouts and len(self._layouts) >= self.MAX_LAYOUTS):
            return self.jitted(*args)
        state = self._layouts.get(key, 0)
        if state == "warm" or isinstance(state, list):
            return self._launch(key, [] if state == "warm" else state, args)
        if state is None:
            return self.jitted(*args)
        replays = self.jitted.stats.replays
        result = self.jitted(*args)
        # the first call records; one that records again is not replayable: never graphed
        self._layouts[key] = "warm" if self.jitted.stats.replays > replays else (None if state else 1)
        if self._layouts[key] is None:
            log.info("no CUDA graph for %s: its second call recorded again (%s)", self.jitted,
                     self.jitted.stats.last_recording)
        return result

    def _launch(self, key: tuple, graphs: list[_Captured], args: list[Any]) -> Any:
        if not all(graph.serves(args) for graph in graphs):  # a parameter moved, or another stream
            return self.jitted(*args)
        for graph in graphs:
            result = graph.launch(args)
            if result is not None:
                self.launches += 1
                return result
        # every graph's last results are still held; past two, the caller keeps them all: from
        # then on one graph copies its results out (the others go once their results are dropped)
        copies = len(graphs) == self.HAND_OUT_GRAPHS
        graph = _Captured.capture(self.jitted, args, self.static, copies)
        if graph is None:
            self._layouts[key] = graphs or None
            return self.jitted(*args)
        self._layouts[key] = [graph] if copies else graphs + [graph]
        self.launches += 1
        return graph.launch(args)

    def _layout(self, args: list[Any]) -> Optional[tuple]:
        """What a captured graph depends on, or None where no graph may serve the call (a CPU
        tensor; an input to copy whose elements share memory, as an expanded one does, which
        no buffer of its layout can receive)."""
        parts: list[Any] = [global_state()]
        device = None
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda" or (device is not None and a.device != device):
                    return None
                if i not in self.static and torch._debug_has_internal_overlap(a) != 0:
                    return None
                device = a.device
                parts.append((a.shape, a.stride(), a.storage_offset(), a.dtype))
            elif a is None or type(a) in (bool, int, float):
                parts.append((type(a), a))
            else:
                return None
        return tuple(parts) if device is not None else None


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
    Python (a lock), and in order on the GPU (only from the stream the graph was captured for;
    a call on another stream runs the jitted replay)."""

    def __init__(self, graph: Any, inputs: list[Any], outputs: Any, copied: list[int],
                 stream: tuple[torch.device, int], copies: bool) -> None:
        self.graph, self.inputs, self.outputs, self.copied, self.stream = graph, inputs, outputs, copied, stream
        self.pointers = {i: a.data_ptr() for i, a in enumerate(inputs) if isinstance(a, torch.Tensor)}
        buffers = {self.inputs[i].untyped_storage().data_ptr() for i in copied}
        # a result in an input buffer is overwritten by the next call's inputs: that one is copied
        self.copy_out = [isinstance(o, torch.Tensor) and (copies or o.untyped_storage().data_ptr() in buffers)
                         for o in outputs]
        # an input read in place (a parameter) is not the graph's to overwrite
        in_place = {a.untyped_storage().data_ptr() for i, a in enumerate(inputs)
                    if isinstance(a, torch.Tensor) and i not in copied}
        self.results = HeldResults([o for o, copy in zip(outputs, self.copy_out)
                                    if not copy and isinstance(o, torch.Tensor)
                                    and o.untyped_storage().data_ptr() not in in_place])
        # only the buffers it copies into: holding an input read in place would keep it alive
        # for the graph's life (``serves`` checks addresses)
        self.inputs = [a if i in copied else None for i, a in enumerate(inputs)]
        self.lock = threading.Lock()

    @classmethod
    def capture(cls, jitted: Jitted, args: list[Any], static: frozenset[int], copies: bool) -> Optional[_Captured]:
        """A graph of a replay on ``args``; ``copies``: its results are copied out of its memory."""
        copied = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in static]
        inputs = list(args)
        for i in copied:  # holding this call's values, as the jitted graph saw them
            inputs[i] = torch.empty_strided(args[i].shape, args[i].stride(), dtype=args[i].dtype,
                                            device=args[i].device).copy_(args[i])
        graph = torch.cuda.CUDAGraph()
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        stream = (device, torch.cuda.current_stream(device).cuda_stream)
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
        return cls(graph, inputs, outputs, copied, stream, copies)

    def serves(self, args: list[Any]) -> bool:
        device, handle = self.stream
        if torch.cuda.current_stream(device).cuda_stream != handle:
            return False
        return all(args[i].data_ptr() == ptr for i, ptr in self.pointers.items() if i not in self.copied)

    def launch(self, args: list[Any]) -> Any:
        """The results of a launch, or None when the last launch's are still held."""
        with self.lock:
            if self.results.held():
                return None
            for i in self.copied:
                self.inputs[i].copy_(args[i])
            self.graph.replay()
            return type(self.outputs)(
                (o.clone() if copy else o.detach()) if isinstance(o, torch.Tensor) else o
                for o, copy in zip(self.outputs, self.copy_out))


def fusionrt_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, mode: Optional[str] = None,
                     options: Optional[dict[str, Any]] = None) -> Callable[..., Any]:
    """The ``torch.compile`` backend (registered as ``"fusionrt"`` through the
    ``torch_dynamo_backends`` entry point)."""
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"fusionrt backend: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
    if mode not in (None, "default", "reduce-overhead"):  # the latter is what cudagraphs already does
        raise ValueError(f"fusionrt backend: mode {mode!r} is not supported (default, reduce-overhead)")
    executor, policy = options.get("executor", "auto"), options.get("policy", "speed")
    # Training graphs are not graphed (see the module's docstring).
    training = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                               for x in example_inputs)
    graphed = bool(options.get("cudagraphs", True)) and not training
    if not training:
        route_attention(gm)
    backend = aot_autograd(fw_compiler=_compiler(executor, policy, graphed, not training),
                           bw_compiler=_compiler(executor, policy, False, False), decompositions=decompositions(),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)

