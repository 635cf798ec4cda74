"""The planner alone, on hand-built graphs: no capture, no torch kernels."""
from __future__ import annotations

import torch

from fusionrt import cost
from fusionrt.graph import IndexMap, Leaf, Node, Use, View, view_map
from fusionrt.kernel_ir import MatmulKernel, plain_operand
from fusionrt.plan import ExternLaunch, Flags
from fusionrt.schedule import plan

F32 = torch.float32
BF16 = torch.bfloat16


def leaf(*shape: int, dtype: torch.dtype = F32) -> Leaf:
    stride = tuple(torch.empty(shape).stride())
    return Leaf(shape, stride, 0, dtype, id(shape))


def use(src, shape) -> Use:
    return Use(src, IndexMap.broadcast(shape, src.shape))


class G:
    """A tiny graph builder: nodes in program order."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def pw(self, op, *args, shape=None, dtype=None, attrs=()) -> Node:
        shape = shape or next(a.shape for a in args if not isinstance(a, (int, float)))
        dtype = dtype or next((a.root if isinstance(a, View) else a).dtype
                              for a in args if not isinstance(a, (int, float)))
        node = Node(len(self.nodes), "pointwise", op,
                    tuple(a if isinstance(a, (int, float)) else use(a, shape) for a in args),
                    shape, dtype, f"prog.py:{len(self.nodes) + 1}", attrs=attrs,
                    stride=tuple(torch.empty(shape).stride()))
        self.nodes.append(node)
        return node

    def mm(self, a, b) -> Node:
        shape = (a.shape[0], b.shape[1])
        node = Node(len(self.nodes), "extern", "mm", (use(a, a.shape), use(b, b.shape)), shape, a.dtype,
                    f"prog.py:{len(self.nodes) + 1}", attrs=(("func", torch.ops.aten.mm.default),),
                    stride=(shape[1], 1), kernel_kind="matmul")
        self.nodes.append(node)
        return node

    def mean(self, x, dim: int) -> Node:
        node = self.sum(x, dim)
        node.op = "mean"
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


def test_matmul_epilogue_fuses_on_write():
    g = G()
    x, w, b = leaf(64, 32, dtype=BF16), leaf(32, 48, dtype=BF16), leaf(48, dtype=BF16)
    h = g.mm(x, w)
    out = g.pw("relu", g.pw("add", h, b))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    (k,) = p.kernels
    # bias + ReLU is what cuBLASLt's epilogue computes: the same kernel, run by cuBLAS
    assert (k.kind, k.backend) == ("matmul", "cublaslt") and "bias+relu" in k.decision
    assert isinstance(k.kernel, MatmulKernel) and plain_operand(k.kernel.a) and plain_operand(k.kernel.b)
    assert [i.op for i in k.kernel.epilogue.instrs] == ["add", "relu"]
    assert reasons(p) == [(out.id, "output")]


def test_only_bias_then_relu_or_tanh_gelu_of_a_2d_half_product_goes_to_cublaslt():
    def backend(act, dtype=BF16, bias_shape=(48,)):
        g = G()
        x, w, b = leaf(64, 32, dtype=dtype), leaf(32, 48, dtype=dtype), leaf(*bias_shape, dtype=dtype)
        h = g.mm(x, w)
        out = act(g, g.pw("add", h, b))
        (k,) = plan(g.nodes, Flags(outputs=frozenset({out}))).kernels
        return k.backend

    relu = lambda g, v: g.pw("relu", v)  # noqa: E731
    assert backend(relu) == "cublaslt"
    assert backend(lambda g, v: g.pw("gelu", v, attrs=(("approximate", "tanh"),))) == "cublaslt"
    assert backend(lambda g, v: g.pw("gelu", v)) == "template"  # erf GELU: not cuBLASLt's
    assert backend(lambda g, v: g.pw("sigmoid", v)) == "template"
    assert backend(relu, dtype=torch.float32) == "template"
    assert backend(relu, bias_shape=(64, 48)) == "template"  # a full matrix, not a bias vector


def test_element_wise_block_before_a_matmul_fuses_on_read():
    g = G()
    x, w = leaf(64, 32, dtype=BF16), leaf(32, 48, dtype=BF16)
    a = g.pw("mul", x, 2)
    a2 = g.pw("add", a, 1)
    out = g.mm(a2, w)
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    (k,) = p.kernels
    assert [i.op for i in k.kernel.a.instrs] == ["mul", "add"] and plain_operand(k.kernel.b)
    assert reasons(p) == [(out.id, "output")]  # neither a nor a2 is written


def test_an_operand_python_still_holds_is_written_by_its_block_and_recomputed_on_read():
    g = G()
    x, w = leaf(64, 32, dtype=BF16), leaf(32, 48, dtype=BF16)
    a = g.pw("gelu", x)
    out = g.mm(a, w)
    p = plan(g.nodes, Flags(alive={a: 1}, outputs=frozenset({out})))
    assert [k.kind for k in p.kernels] == ["fused", "matmul"]
    assert reasons(p) == [(a.id, "alive"), (out.id, "output")]


def test_a_large_plain_matmul_runs_on_cublas():
    g = G()
    x, w = leaf(4096, 4096, dtype=BF16), leaf(4096, 4096, dtype=BF16)
    out = g.mm(x, w)
    (k,) = plan(g.nodes, Flags(outputs=frozenset({out}))).kernels
    assert (type(k), k.kind, k.backend, k.decision) == (ExternLaunch, "matmul", "torch", "nothing fuses")


def test_when_the_template_loses_the_epilogue_is_a_kernel_of_its_own():
    g = G()  # float32 operands: the template's FMA loop is estimated well below cuBLAS
    x, w, b = leaf(2048, 2048), leaf(2048, 2048), leaf(2048)
    h = g.mm(x, w)
    out = g.pw("relu", g.pw("add", h, b))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert [(k.kind, k.backend) for k in p.kernels] == [("matmul", "torch"), ("fused", "generated")]
    assert "cuBLAS + epilogue" in p.kernels[0].decision
    assert reasons(p) == [(h.id, "consumed-later"), (out.id, "output")]


def test_a_large_linear_layer_runs_on_cublas_with_cublaslt_epilogue_where_it_can():
    """ViT-B/16's MLP at batch 32: the template's measured share of cuBLAS loses; bias + ReLU
    still run in cuBLASLt's epilogue (one kernel, one write), an erf GELU in a kernel of its own."""
    def kernels(act):
        g = G()
        x, w, b = leaf(6304, 768, dtype=BF16), leaf(768, 3072, dtype=BF16), leaf(3072, dtype=BF16)
        out = act(g, g.pw("add", g.mm(x, w), b))
        return [(k.kind, k.backend) for k in plan(g.nodes, Flags(outputs=frozenset({out}))).kernels]

    assert kernels(lambda g, v: g.pw("relu", v)) == [("matmul", "cublaslt")]
    assert kernels(lambda g, v: g.pw("gelu", v)) == [("matmul", "torch"), ("fused", "generated")]


def test_a_reduction_after_a_matmul_opens_its_own_block():
    g = G()
    x, w = leaf(16, 8), leaf(8, 12)
    h = g.mm(x, w)
    e = g.pw("exp", h)
    out = g.sum(e, 1)
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert [k.kind for k in p.kernels] == ["matmul", "reduction"]
    assert reasons(p) == [(e.id, "consumed-later"), (out.id, "output")]


def test_rms_norm_in_fp32_math_is_one_kernel():
    """x.float() is re-read after the reduction instead of written; w.float(), of another shape,
    does not close the block: each consumer recomputes it."""
    g = G()
    x, w = leaf(64, 128, dtype=BF16), leaf(128, dtype=BF16)
    to_f32 = (("dtype", F32),)
    xf = g.pw("_to_copy", x, dtype=F32, attrs=to_f32)
    ms = g.mean(g.pw("pow", xf, 2), 1)
    rstd = g.pw("rsqrt", g.pw("add", ms, 1e-6))
    normed = g.pw("mul", xf, rstd, shape=(64, 128))
    wf = g.pw("_to_copy", w, dtype=F32, attrs=to_f32)
    out = g.pw("_to_copy", g.pw("mul", normed, wf), dtype=BF16, attrs=(("dtype", BF16),))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert [k.kind for k in p.kernels] == ["reduction"]
    assert reasons(p) == [(out.id, "output")]


def test_a_floating_producer_that_must_be_written_gets_a_kernel_first():
    g = G()
    x, w = leaf(4, 8), leaf(8)
    a = g.pw("exp", x)
    wf = g.pw("neg", w)  # does not fit a's block: floats
    out = g.pw("add", a, wf)
    p = plan(g.nodes, Flags(alive={wf: 1}, outputs=frozenset({out})))
    assert [k.name for k in p.kernels] == ["neg", "exp_add"]
    assert reasons(p) == [(wf.id, "alive"), (out.id, "output")]


def test_a_small_value_of_an_earlier_kernel_scaled_mid_reduction_does_not_close_it():
    """F.normalize(x) * (gamma * scale): the scale of gamma, a value the first kernel computes,
    does not fit the reduction's space; it floats (gamma is written) and the reduction's kernel
    computes it in its epilogue, instead of writing the normalized tensor for a third kernel."""
    g = G()
    x, w = leaf(64, 128), leaf(1)
    gamma = g.pw("add", w, 0.0)
    ss = g.sum(g.pw("pow", x, 2), 1)
    normed = g.pw("div", x, g.pw("sqrt", ss), shape=(64, 128))
    scale = g.pw("mul", gamma, 11.3)
    out = g.pw("mul", normed, scale, shape=(64, 128))
    p = plan(g.nodes, Flags(outputs=frozenset({out})))
    assert [k.kind for k in p.kernels] == ["fused", "reduction"]
    assert reasons(p) == [(gamma.id, "consumed-later"), (out.id, "output")]


def test_a_floating_producer_reading_a_computed_value_is_written_after_its_kernel():
    g = G()
    x, w = leaf(4, 8), leaf(8)
    wn = g.pw("neg", w)
    a = g.pw("add", x, wn, shape=(4, 8))  # reads the open block's value at another shape: a new block
    we = g.pw("exp", wn)  # floats: reads wn, of the kernel before a's
    out = g.pw("add", a, we)
    p = plan(g.nodes, Flags(alive={we: 1}, outputs=frozenset({out})))
    assert [k.name for k in p.kernels] == ["neg", "exp", "add"]
    assert reasons(p) == [(wn.id, "consumed-later"), (we.id, "alive"), (out.id, "output")]


def test_cost_model_prefers_the_template_only_when_something_fuses():
    # K of 128: the product's bytes dominate, and fusing the epilogue saves writing and reading them
    work = dict(batch=1, m=16384, n=1024, k=128, dtype=BF16, operand_bytes=8 << 20,
                template_read_bytes=10 << 20, extra_read_bytes=2 << 20, product_bytes=32 << 20,
                output_bytes=32 << 20, fused_operand_bytes=0)
    assert cost.choose_matmul(cost.MatmulWork(**work, epilogue=True)).backend == "template"
    assert cost.choose_matmul(cost.MatmulWork(**work, epilogue=False)) == cost.Choice("torch", "nothing fuses")
    # K of 1024: the flops dominate, and cuBLAS's rate beats the template's (its measured share)
    compute_bound = cost.choose_matmul(cost.MatmulWork(**{**work, "k": 1024, "operand_bytes": 64 << 20,
                                                          "template_read_bytes": 66 << 20}, epilogue=True))
    assert compute_bound.backend == "torch" and "template ~" in compute_bound.reason
    # the same flops as 16 batched products: the template's measured share there is cuBLAS's
    batched = cost.choose_matmul(cost.MatmulWork(**{**work, "batch": 16, "m": 1024, "k": 1024,
                                                    "operand_bytes": 64 << 20, "template_read_bytes": 66 << 20},
                                                 epilogue=True))
    assert batched.backend == "template"
    f64 = cost.choose_matmul(cost.MatmulWork(**{**work, "dtype": torch.float64}, epilogue=True))
    assert f64 == cost.Choice("torch", "no template for float64")
