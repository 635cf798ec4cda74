"""Output metadata of an aten op without running it: meta tensors once, then a cache.

Running an op on meta tensors costs 90-200 us; a recorded program repeats the same few
signatures, so the answer is cached by (op, shapes, strides, dtypes, scalar arguments) and a
hit costs a dict lookup. The cache keeps the most recently used signatures only: a program whose
shapes or scalars change on every call would otherwise grow it without end.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .bounded import LRUCache

Meta = tuple[tuple[int, ...], tuple[int, ...], torch.dtype]

# Several times the signatures one step of a large model records; about 2 MiB.
_cache: LRUCache[tuple[Meta, ...]] = LRUCache(1024)


def _key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):  # meta kernels answer alike for every device
        return (x.shape, x.stride(), x.dtype)
    if isinstance(x, (bool, int, float)):
        return (type(x), x)  # 1, 1.0 and True promote differently
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(map(_key, x)))
    return x


def _meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_meta(a) for a in x)
    return x


def _describe(out: Any) -> tuple[Meta, ...]:
    outs = out if isinstance(out, (list, tuple)) else (out,)
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise TypeError("op returns non-tensors")
    return tuple((tuple(o.shape), tuple(o.stride()), o.dtype) for o in outs)


def infer(func: Any, args: tuple, kwargs: dict) -> tuple[Meta, ...]:
    """(shape, stride, dtype) of each output of ``func(*args, **kwargs)``; raises what the meta
    kernel raises (the caller then runs the op eagerly, which raises eager's own error)."""
    try:
        key: Optional[Any] = (func, tuple(map(_key, args)),
                              tuple(map(_key, kwargs.items())) if kwargs else ())
        hit = _cache.get(key)
    except TypeError:  # an unhashable argument: infer without caching
        key, hit = None, None
    if hit is not None:
        return hit
    metas = _describe(func(*_meta(args), **{k: "meta" if k == "device" else _meta(v)
                                             for k, v in kwargs.items()}))
    if key is not None:
        _cache.put(key, metas)
    return metas
