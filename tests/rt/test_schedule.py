"""The planner alone, on hand-built graphs: no capture, no torch kernels."""
from __future__ import annotations

import torch

from fusionrt.graph import IndexMap, Leaf, Node, Use, View, view_map
from fusionrt.plan import Flags
from fusionrt.schedule import plan

F32 = torch.float32


def leaf(*shape: int) -> Leaf:
    stride = tuple(torch.empty(shape).stride())
    return Leaf(shape, stride, 0, F32, id(shape))


def use(src, shape) -> Use:
    return Use(src, IndexMap.broadcast(shape, src.shape))


class G:
    """A tiny graph builder: nodes in program order."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def pw(self, op, *args, shape=None) -> Node:
        shape = shape or next(a.shape for a in args if not isinstance(a, (int, float)))
        node = Node(len(self.nodes), "pointwise", op,
                    tuple(a if isinstance(a, (int, float)) else use(a, shape) for a in args),
                    shape, F32, f"prog.py:{len(self.nodes) + 1}",
                    stride=tuple(torch.empty(shape).stride()))
        self.nodes.append(node)
        return node

    def sum(self, x, dim: int) -> Node:
        shape = tuple(1 if d == dim else n for d, n in enumerate(x.shape))
        node = Node(len(self.nodes), "reduction", "sum", (use(x, x.shape),), shape, F32,
                    f"prog.py:{len(self.nodes) + 1}", dims=frozenset({dim}),
                    stride=tuple(torch.empty(shape).stride()))
        self.nodes.append(node)
        return node


def reasons(p) -> list[tuple[int, str]]:
    return [(w.node.id, w.reason) for w in p.writes]


def test_clone_pattern_writes_both_values_read_after_the_reduction():
    g = G()
    x, y = leaf(4, 8), leaf(4, 8)
    a = g.pw("mul", x, 2)
    b = g.pw("add", y, 1)
    c = g.pw("clone", a)
    t3 = g.sum(c, 1)
    ab = g.pw("mul", a, b)
    out = g.pw("add", t3, ab, shape=(4, 8))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert [k.kind for k in p.kernels] == ["reduction", "fused"]
    assert reasons(p) == [(a.id, "consumed-later"), (b.id, "consumed-later"),
                          (t3.id, "consumed-later"), (out.id, "output")]


def test_rewrite_writes_only_the_product():
    g = G()
    x, y = leaf(4, 8), leaf(4, 8)
    a = g.pw("mul", x, 2)
    b = g.pw("add", y, 1)
    tmp = g.pw("mul", a, b)
    t3 = g.sum(a, 1)
    out = g.pw("add", t3, tmp, shape=(4, 8))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert reasons(p) == [(tmp.id, "consumed-later"), (t3.id, "consumed-later"), (out.id, "output")]
    assert b.id not in {w.node.id for w in p.writes}


def test_reduced_epilogue_fuses_on_write():
    g = G()
    x = leaf(4, 8)
    s = g.sum(g.pw("exp", x), 1)
    out = g.pw("mul", s, 0.5)  # same shape as the reduction's output: epilogue
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert len(p.kernels) == 1 and p.kernels[0].kernel.reduce_dims == (1,)
    assert reasons(p) == [(out.id, "output")]


def test_dead_values_are_never_written_and_alive_ones_are():
    g = G()
    x = leaf(16)
    a = g.pw("mul", x, 2)
    b = g.pw("add", a, 1)
    c = g.pw("neg", b)
    p = plan(g.nodes, Flags(alive={a: 1, c: 2}))
    assert reasons(p) == [(a.id, "alive"), (c.id, "alive")]
    assert len(p.kernels) == 1 and len(p.kernels[0].kernel.outputs) == 2


def test_non_simple_view_breaks_the_block():
    g = G()
    x = leaf(4, 6)
    a = g.pw("mul", x, 2)
    flat = View(a, (24,), (1,), 0, view_map(a.shape, a.stride, 0, (24,), (1,), 0))
    assert flat.map is None
    out = g.pw("add", flat, 1)
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert len(p.kernels) == 2
    assert reasons(p) == [(a.id, "view-break"), (out.id, "output")]


def test_simple_view_is_absorbed_by_recomputing_its_producer():
    g = G()
    x = leaf(4, 6)
    a = g.pw("mul", x, 2)
    tv = View(a, (6, 4), (1, 6), 0, view_map(a.shape, a.stride, 0, (6, 4), (1, 6), 0))
    out = g.pw("add", tv, 1)
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert len(p.kernels) == 1 and reasons(p) == [(out.id, "output")]
    (inp,) = p.kernels[0].inputs
    assert inp.map.strides(x.stride, 0) == ((1, 6), 0)  # x read transposed, no write of a


def test_sync_and_fallback_reasons_win_over_alive():
    g = G()
    x = leaf(8)
    a = g.pw("mul", x, 2)
    b = g.pw("add", x, 1)
    p = plan(g.nodes, Flags(alive={a: 1, b: 2}, sync=frozenset({a}), fallback_inputs=frozenset({b})))
    assert reasons(p) == [(a.id, "sync"), (b.id, "fallback-input")]


def test_a_later_write_of_the_same_region_hides_the_earlier_one():
    g = G()
    x = leaf(8)
    a = g.pw("mul", x, 2)
    a2 = g.pw("add", a, 1)  # a.add_(1): same home, same region
    p = plan(g.nodes, Flags(alive={a: 7, a2: 7}))
    assert reasons(p) == [(a2.id, "alive")]


def test_view_map_composes_permute_slice_and_select():
    base = torch.empty(4, 6, 5)
    for v in (base.permute(2, 0, 1), base[1:, ::2, 3], base[2], base.unsqueeze(1).expand(4, 3, 6, 5)):
        m = view_map(tuple(base.shape), base.stride(), 0, tuple(v.shape), v.stride(), v.storage_offset())
        assert m is not None
        assert m.strides(base.stride(), 0) == (v.stride(), v.storage_offset())
    flat = base.view(24, 5)
    assert view_map(tuple(base.shape), base.stride(), 0, (24, 5), flat.stride(), 0) is None
    diag = base[0].diagonal()
    assert view_map(tuple(base.shape), base.stride(), 0, tuple(diag.shape), diag.stride(), 0) is None


def test_index_map_compose_matches_torch_views():
    x = torch.arange(24.0).reshape(4, 6)
    t = IndexMap.identity((4, 6))
    tr = IndexMap.make((6, 4), (4, 6), (0, 0), ((0, 1), (1, 0)))
    bc = IndexMap.broadcast((3, 6, 4), (6, 4))
    composed = t.compose(tr).compose(bc)
    strides, off = composed.strides(x.stride(), 0)
    assert torch.equal(x.as_strided((3, 6, 4), strides, off), x.t().expand(3, 6, 4))
