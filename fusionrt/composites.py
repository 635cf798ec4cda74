"""Softmax, log_softmax, layer_norm, var and std as element-wise ops and reductions; batch norm
in eval mode as element-wise ops over its running statistics; ``_foreach_`` ops (what optimizers
run) as the same op on each tensor.

Each decomposition re-reads its input after every reduction (``Use.recompute``) instead of
keeping a full-size intermediate across it, so the planner keeps the whole composite in one
kernel (docs/semantics.md, rule 3). Low-precision inputs are computed in float32, as eager's
kernels accumulate, and cast back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

from .graph import IndexMap, Node, Use, numel
from .kernel_ir import POINTWISE_OPS

if TYPE_CHECKING:
    from .session import Session

LOW_PRECISION = (torch.float16, torch.bfloat16)


class _Builder:
    """Builds one composite's nodes over the iteration space of its input."""

    def __init__(self, session: Session, x: torch.Tensor, dims: frozenset[int], source: str) -> None:
        from .capture import _Unsupported

        if x.dim() == 0 or x.numel() == 0:
            raise _Unsupported("composite of a 0-d or empty tensor")
        self.session = session
        self.x = x
        self.space = tuple(x.shape)
        self.dims = dims
        self.reduced_shape = tuple(1 if d in dims else n for d, n in enumerate(self.space))
        self.acc = torch.float32 if x.dtype in LOW_PRECISION else x.dtype
        self.source = source

    def use(self, node: Node, shape: Optional[tuple[int, ...]] = None) -> Use:
        return Use(node, IndexMap.broadcast(shape or self.space, node.shape))

    def load(self) -> Any:
        """The input at the accumulation precision, read afresh (recomputed if in-block)."""
        x = self.session.use(self.x, self.space, recompute=True)
        if self.acc == self.x.dtype:
            return x
        return self.use(self.pw("_to_copy", x, attrs=(("dtype", self.acc),)))

    def pw(self, op: str, *args: Any, attrs: tuple = (), reduced: bool = False) -> Node:
        shape = self.reduced_shape if reduced else self.space
        args = tuple(self.use(a, shape) if isinstance(a, Node) else a for a in args)
        dtype = torch.bool if op in ("eq", "ne") else self.acc
        return self.session.internal("pointwise", op, args, shape, dtype, self.source, attrs=attrs)

    def reduce(self, op: str, value: Any) -> Node:
        arg = self.use(value) if isinstance(value, Node) else value
        return self.session.internal("reduction", op, (arg,), self.reduced_shape, self.acc, self.source,
                                     dims=self.dims)

    def finish(self, value: Node, meta: tuple, record: str) -> torch.Tensor:
        """The composite's output tensor: ``value`` cast to eager's dtype, in eager's layout."""
        shape, stride, dtype = meta
        home = torch.empty_strided(shape, stride, dtype=dtype, device=self.x.device)
        fit = IndexMap.squeeze_fit(tuple(shape), value.shape)
        op, attrs = ("clone", ()) if dtype == value.dtype else ("_to_copy", (("dtype", dtype),))
        self.session.node("pointwise", op, (Use(value, fit),), home, self.source, attrs=attrs,
                          record=record, eager=False)
        return home


def decompose(session: Session, name: str, args: tuple, kwargs: dict, metas: tuple,
              source: str) -> Any:
    from .capture import _reduce_dims

    x = args[0]
    if name in BATCH_NORMS:
        return _eval_batch_norm(session, name, args, metas, source)
    if name in ("_softmax", "_log_softmax"):
        b = _Builder(session, x, frozenset({args[1] % max(x.dim(), 1)}), source)
        top = b.reduce("amax", b.load())
        total = b.reduce("sum", b.pw("exp", b.pw("sub", b.load(), top)))
        if name == "_softmax":
            value = b.pw("div", b.pw("exp", b.pw("sub", b.load(), top)), total)
        else:
            value = b.pw("sub", b.pw("sub", b.load(), top), b.pw("log", total, reduced=True))
        outs = [b.finish(value, metas[0], name)]
    elif name == "native_layer_norm":
        _, normalized, weight, bias, eps = args
        dims = frozenset(range(x.dim() - len(normalized), x.dim()))
        b = _Builder(session, x, dims, source)
        mean = b.reduce("mean", b.load())
        centered = b.pw("sub", b.load(), mean)
        var = b.reduce("mean", b.pw("mul", centered, centered))
        rstd = b.pw("rsqrt", b.pw("add", var, eps, reduced=True), reduced=True)
        value = b.pw("mul", b.pw("sub", b.load(), mean), rstd)
        if weight is not None:
            value = b.pw("mul", value, session.use(weight, b.space))
        if bias is not None:
            value = b.pw("add", value, session.use(bias, b.space))
        outs = [b.finish(value, metas[0], name), b.finish(mean, metas[1], name),
                b.finish(rstd, metas[2], name)]
    else:  # var, std, var_mean (correction overloads)
        dims = _reduce_dims(x, args[1] if len(args) > 1 else kwargs.get("dim"))
        correction = kwargs.get("correction")
        correction = 1 if correction is None else correction
        b = _Builder(session, x, dims, source)
        mean = b.reduce("mean", b.load())
        centered = b.pw("sub", b.load(), mean)
        squares = b.reduce("sum", b.pw("mul", centered, centered))
        count = numel(tuple(b.space[d] for d in dims))
        var = b.pw("div", squares, max(count - correction, 0), reduced=True)
        value = b.pw("sqrt", var, reduced=True) if name == "std" else var
        outs = [b.finish(value, metas[0], name)]
        if name == "var_mean":
            outs.append(b.finish(mean, metas[1], name))
    session.count_eager(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)



BATCH_NORMS = ("native_batch_norm", "_native_batch_norm_legit_no_training", "cudnn_batch_norm")


def _eval_batch_norm(session: Session, name: str, args: tuple, metas: tuple, source: str) -> tuple:
    """``(x - running_mean) * rsqrt(running_var + eps) * weight + bias`` per channel (dim 1).
    The saved statistics are what eager returns in eval mode: never written (``native``: empty),
    read only by a backward that inference does not run."""
    from .capture import _Unsupported

    if name == "_native_batch_norm_legit_no_training":
        x, weight, bias, mean, var, _, eps = args
    else:
        x, weight, bias, mean, var, training, _, eps = args
        if training:
            raise _Unsupported("batch norm in training mode")
    if mean is None or var is None or x.dim() < 2:
        raise _Unsupported("batch norm without running statistics")
    b = _Builder(session, x, frozenset(), source)
    per_channel = (x.shape[1],) + (1,) * (x.dim() - 2)

    def channel(p: torch.Tensor) -> Use:
        return session.use(p.view(per_channel), b.space)

    invstd = b.pw("rsqrt", b.pw("add", channel(var), eps))
    value = b.pw("mul", b.pw("sub", b.load(), channel(mean)), invstd)
    if weight is not None:
        value = b.pw("mul", value, channel(weight))
    if bias is not None:
        value = b.pw("add", value, channel(bias))
    out = b.finish(value, metas[0], name)
    session.count_eager([out])
    saved = [torch.empty((0,) if name == "native_batch_norm" else shape, dtype=dtype, device=x.device)
             for shape, _, dtype in metas[1:]]
    return (out, *saved)


def foreach(func, *args: Any, **kwargs: Any) -> Any:
    """``torch._foreach_op(lists...)`` as ``op`` on each position of its lists (a list of
    scalars gives each position its own scalar), recorded op by op under the capture."""
    from .capture import _Unsupported

    name = func._overloadpacket.__name__
    base = name.removeprefix("_foreach_").rstrip("_")
    if base not in POINTWISE_OPS and base != "copy":  # zero_, norm: one fallback, not one per tensor
        raise _Unsupported("foreach op whose per-tensor op is not element-wise")
    if func._overloadname == "Tensor" and base in ("addcmul", "addcdiv"):
        raise _Unsupported("foreach op with its scalars in a tensor")
    op = getattr(torch.ops.aten, name.removeprefix("_foreach_"))
    count = next(len(a) for a in args if isinstance(a, (list, tuple)))
    # A foreach op passes positionally what the per-tensor op takes by keyword (addcmul's value).
    schema = getattr(op, op.overloads()[0])._schema
    positional = sum(not a.kwarg_only for a in schema.arguments)
    keywords = [a.name for a in schema.arguments if a.kwarg_only]
    args, extra = args[:positional], dict(zip(keywords, args[positional:]))

    def at(a: Any, i: int) -> Any:
        return a[i] if isinstance(a, (list, tuple)) else a

    outs = [op(*(at(a, i) for a in args), **{k: at(v, i) for k, v in extra.items()}, **kwargs)
            for i in range(count)]
    return None if func._schema.is_mutable else outs
