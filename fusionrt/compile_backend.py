"""fusionrt as a ``torch.compile`` backend: ``torch.compile(model, backend="fusionrt")``.

Dynamo captures the Python (guards, graph breaks, parameters lifted to graph inputs) and
AOTAutograd turns each captured graph into functional aten graphs — a forward, and a backward when
an input requires grad — with PyTorch's own decomposition tables applied. Each aten graph then
runs through ``fusionrt.jit``: its first call is recorded and planned like any lazy block, and
later calls replay the program. So this backend reuses, rather than repeats, what Dynamo and
AOTAutograd already do well; the dispatch-level capture of ``lazy()``/``measure`` stays for
code whose meaning depends on what Python keeps alive.

Options (``torch.compile(..., options={...})``): ``executor`` and ``policy``, as for
``fusionrt.jit``.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Optional, Sequence

import torch
from torch._decomp import core_aten_decompositions, decomposition_table

from .capture import COMPOSITE_OPS, EXTERN_KINDS, REDUCTION_OPS
from .kernel_ir import POINTWISE_OPS
from .replay import Jitted, jit

__all__ = ["fusionrt_backend", "decompositions", "compiled_graphs"]

_OPTIONS = ("executor", "policy")
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


def compiled_graphs() -> list[Jitted]:
    """The aten graphs this backend compiled that are still in use, oldest first: each a
    ``Jitted`` whose ``report`` is its last call's and whose ``stats`` say how often it replayed."""
    return [g for g in (ref() for ref in _GRAPHS) if g is not None]


def _compiler(executor: str, policy: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        jitted = jit(gm, executor=executor, policy=policy)
        _GRAPHS[:] = [ref for ref in _GRAPHS[-_MAX_GRAPHS + 1:] if ref() is not None]
        _GRAPHS.append(weakref.ref(jitted))

        def run(args: list[Any]) -> Any:
            return jitted(*args)

        run._boxed_call = True  # AOTAutograd passes the inputs as one list
        run.jitted = jitted  # type: ignore[attr-defined]
        return run

    return compile_graph


def fusionrt_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, mode: Optional[str] = None,
                     options: Optional[dict[str, Any]] = None) -> Callable[..., Any]:
    """The ``torch.compile`` backend (registered as ``"fusionrt"`` through the
    ``torch_dynamo_backends`` entry point)."""
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"fusionrt backend: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
    if mode not in (None, "default"):
        raise ValueError(f"fusionrt backend: mode {mode!r} is not supported (only the default mode)")
    compiler = _compiler(options.get("executor", "auto"), options.get("policy", "stream"))
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler, decompositions=decompositions(),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)

