"""Element-wise work moved above the reshape that follows a matmul, in an aten graph.

A linear layer on a batch of sequences or images reaches fusionrt as ``view -> addmm -> view``:
the matmul runs on rows ``(M, N)`` and its result is viewed back as ``(B, T, N)`` before the
activation. The planner's index maps are affine, so a ``(B, T, N)`` activation cannot be read in
the matmul's ``(M, N)`` space, and the activation became a kernel of its own that reads and
writes the whole (often four times wider) hidden tensor. Computed on the rows and viewed
afterwards, the same ops join the matmul's epilogue.

``f(view(a, s)) == view(f(a), s)`` for element-wise ``f`` when ``a`` is a contiguous ``(M, N)``
value and ``s`` keeps its last dim, provided every other tensor operand is such a view of another
``(M, N)`` value with the same ``s``, or broadcasts along the last dim only (a bias of
shape ``(N,)``, a one-element tensor), or has the viewed shape and is contiguous (a residual),
read through a view as rows too. Results the graph returns keep their form: AOTAutograd decided
from the traced graph which outputs alias what.

Only work whose every result goes back to rows moves: a chain between two linear layers (an
activation, a gated product) whose end is viewed as ``(M, N)`` again for the next matmul. There
the rows value is the one tensor written, where before both the matmul's result and the
activation's were. Work read in the viewed form by anything else (a residual stream that a norm
reads next) stays: moving it would write the rows value for the matmul's epilogue and again
where the other reader needs it.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import fx

from .kernel_ir import POINTWISE_OPS

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)

Rows = tuple[fx.Node, tuple[int, int], tuple[int, ...]]  # the (M, N) value, its shape, the view's shape


def sink_views(gm: fx.GraphModule) -> int:
    """Rewrite ``gm`` in place; the number of element-wise ops moved onto rows."""
    graph = gm.graph
    returned = {a for out in graph.nodes if out.op == "output" for a in _flat(out.args)}
    views: dict[fx.Node, Rows] = {}
    movable: dict[fx.Node, Rows] = {}  # each op that could run on the rows it reads
    readable: dict[fx.Node, Rows] = {}  # both of the above
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in _VIEWS:
            found = _rows_view(node)
            if found is not None:
                views[node] = readable[node] = found
        elif node not in returned and _pointwise(node.target) and _layout_free(node):
            found = _operands(node, readable)
            if found is not None:
                movable[node] = readable[node] = found[2]
    kept = _back_to_rows(movable)
    rows = dict(views)
    viewed_back: list[fx.Node] = []
    for node in list(graph.nodes):
        if node not in kept:
            continue
        found = _operands(node, rows)
        if found is None:
            continue
        args, kwargs, (_, shape, target) = found
        with graph.inserting_before(node):
            args, kwargs = _viewed_as_rows(graph, args, kwargs, shape)
            on_rows = graph.call_function(node.target, args, kwargs)
            viewed = graph.call_function(aten.view.default, (on_rows, list(target)))
        on_rows.meta = {k: v for k, v in node.meta.items() if k != "val"}
        viewed.meta = dict(node.meta)
        node.replace_all_uses_with(viewed)
        graph.erase_node(node)
        rows[viewed] = (on_rows, shape, target)
        viewed_back.append(viewed)
    for node in list(graph.nodes):  # a view of rows viewed back as rows is the rows value
        if node.target in _VIEWS and node.args[0] in rows and _as_rows(node, rows[node.args[0]]):
            node.replace_all_uses_with(rows[node.args[0]][0])
            graph.erase_node(node)
    for view in (*viewed_back, *views):  # views nothing reads any more
        if not view.users:
            graph.erase_node(view)
    if kept:
        graph.lint()
        gm.recompile()
    return len(kept)


def _back_to_rows(movable: dict[fx.Node, Rows]) -> set[fx.Node]:
    """The movable ops whose every user is another of them, or a view back to their rows."""
    kept = set(movable)
    changed = True
    while changed:
        changed = False
        for node in list(kept):
            inputs_kept = all(arg in kept for arg in node.all_input_nodes if arg in movable)
            if not inputs_kept or not all(user in kept or _as_rows(user, movable[node]) for user in node.users):
                kept.discard(node)
                changed = True
    return kept


def _as_rows(node: fx.Node, key: Rows) -> bool:
    """``node`` views its argument back as the ``(M, N)`` rows of ``key``."""
    out = node.meta.get("val")
    return (node.op == "call_function" and node.target in _VIEWS and isinstance(out, torch.Tensor)
            and tuple(out.shape) == key[1])


def _pointwise(target: Any) -> bool:
    packet = getattr(target, "overloadpacket", None)
    return packet is not None and packet.__name__ in POINTWISE_OPS


def _layout_free(node: fx.Node) -> bool:
    """The op's result does not ask for a layout that only the viewed shape has."""
    return node.kwargs.get("memory_format") in (None, torch.preserve_format, torch.contiguous_format)


def _rows_view(node: fx.Node) -> Optional[Rows]:
    """``node`` as a view of a contiguous ``(M, N)`` value into ``(..., N)``, or None."""
    src = node.args[0]
    val, out = _val(src), node.meta.get("val")
    if val is None or out is None or val.dim() != 2 or not val.is_contiguous():
        return None
    shape = tuple(out.shape)
    if not all(isinstance(n, int) for n in (*val.shape, *shape)):
        return None  # symbolic sizes: the sizes are not known to match
    m, n = val.shape
    if len(shape) < 2 or shape[-1] != n or math.prod(shape[:-1]) != m:
        return None
    return src, (m, n), shape


def _operands(node: fx.Node, rows: dict[fx.Node, Rows]) -> Optional[tuple[tuple, dict, Rows]]:
    """``node``'s arguments read on rows, and the rows they share; None if any cannot be."""
    shared: Optional[Rows] = None
    for arg in (*node.args, *node.kwargs.values()):
        if isinstance(arg, fx.Node) and arg in rows:
            key = rows[arg]
            if shared is not None and (shared[1], shared[2]) != (key[1], key[2]):
                return None
            shared = key
    if shared is None:
        return None

    def on_rows(arg: Any) -> Any:
        if isinstance(arg, fx.Node) and arg in rows:
            return rows[arg][0]
        if isinstance(arg, fx.Node) and _laid_out_as(arg, shared[2]):
            return _ToRows(arg)
        if isinstance(arg, fx.Node) and not _along_last_dim(arg, shared[1][1]):
            raise _Unmovable
        if isinstance(arg, (list, tuple)) and any(isinstance(a, fx.Node) for a in arg):
            raise _Unmovable
        return arg

    try:
        args = tuple(on_rows(a) for a in node.args)
        kwargs = {k: on_rows(v) for k, v in node.kwargs.items()}
    except _Unmovable:
        return None
    return args, kwargs, shared


class _Unmovable(Exception):
    """An operand that does not broadcast the same way over rows."""


class _ToRows:
    """An operand of the viewed shape, contiguous: it is read on rows through a view of its own."""

    def __init__(self, node: fx.Node) -> None:
        self.node = node


def _viewed_as_rows(graph: fx.Graph, args: tuple, kwargs: dict, shape: tuple[int, int]) -> tuple[tuple, dict]:
    def place(arg: Any) -> Any:
        if isinstance(arg, _ToRows):
            view = graph.call_function(aten.view.default, (arg.node, list(shape)))
            view.meta = {k: v for k, v in arg.node.meta.items() if k != "val"}
            return view
        return arg

    return tuple(place(a) for a in args), {k: place(v) for k, v in kwargs.items()}


def _laid_out_as(node: fx.Node, shape: tuple[int, ...]) -> bool:
    """A contiguous tensor of exactly the viewed shape (a residual): viewing it as rows is free."""
    val = _val(node)
    return val is not None and tuple(val.shape) == shape and val.is_contiguous()


def _along_last_dim(node: fx.Node, n: int) -> bool:
    """A tensor that broadcasts over rows as over the viewed shape: one element, or ``(N,)``."""
    val = _val(node)
    if val is None:
        return False
    return val.numel() == 1 and val.dim() <= 1 or tuple(val.shape) == (n,)


def _val(node: Any) -> Any:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _flat(args: Any) -> list[Any]:
    if isinstance(args, (list, tuple)):
        return [x for a in args for x in _flat(a)]
    return [args]
