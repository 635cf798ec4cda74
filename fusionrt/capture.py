"""Dispatch interception: every aten op inside ``fusionrt.lazy`` becomes a graph node.

Each recorded result is a real tensor allocated with eager's shape, strides, dtype and device
(``empty_strided``: no data written) and bound to its node; views run eagerly on those real
tensors, so aliasing is eager's own. Host syncs that never reach dispatch (``tolist``, printing,
``numpy``, ``data_ptr``) are caught by a function mode and flush first.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Iterator, Optional

import torch
from torch._decomp import decomposition_table
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .bounded import LRUCache
from .graph import Leaf, View, view_map
from .kernel_ir import POINTWISE_OPS
from . import shapes

if TYPE_CHECKING:
    from .session import Session

aten = torch.ops.aten
BINDING = "_fusionrt"

REDUCTION_OPS = {"sum", "mean", "amax", "amin", "prod"}
COMPOSITE_OPS = {"_softmax", "_log_softmax", "native_layer_norm", "var", "std", "var_mean",
                 "native_batch_norm", "_native_batch_norm_legit_no_training", "cudnn_batch_norm"}
# What every executor computes (complex and unsigned 16-64 bit types run eagerly).
DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                    torch.float16, torch.bfloat16, torch.float32, torch.float64})
# Ops recorded as their decomposition with or without autograd: it is reductions and element-wise
# ops only, which fuse whole (a vector norm: abs, pow, sum, root), where the op itself would run
# eagerly and flush.
DECOMPOSED_ALWAYS = frozenset({
    torch.ops.aten.linalg_vector_norm.default, torch.ops.aten.logit.default, torch.ops.aten.log_sigmoid_forward.default,
    torch.ops.aten.special_entr.default,
})
EXTERN_KINDS = {"mm": "matmul", "bmm": "matmul", "addmm": "matmul", "baddbmm": "matmul",
                "convolution": "conv", "cat": "copy"}
_MATMULS = {"mm", "bmm", "addmm", "baddbmm"}  # recorded in their out= and in-place forms too
FACTORY_OPS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
               "full", "full_like", "arange", "rand", "rand_like", "randn", "randn_like", "randint",
               "randint_like", "scalar_tensor", "linspace", "eye", "tensor", "lift_fresh",
               "lift_fresh_copy", "normal", "randperm", "new_empty", "new_empty_strided", "new_zeros",
               "new_ones", "new_full"}

# Tensor methods that read data without (only) going through dispatch -> flush reason.
SYNC_METHODS = {
    torch.Tensor.item: "item", torch.Tensor.__bool__: "bool", torch.Tensor.__int__: "item",
    torch.Tensor.__float__: "item", torch.Tensor.__index__: "item", torch.Tensor.tolist: "tolist",
    torch.Tensor.numpy: "numpy", torch.Tensor.__array__: "numpy", torch.Tensor.cpu: "cpu",
    torch.Tensor.__repr__: "print", torch.Tensor.__format__: "print", torch.Tensor.data_ptr: "sync",
    torch.Tensor.__dlpack__: "sync",
}
# Constructors that copy data given as (nested) lists -> the argument holding it. A tensor
# inside such a list is read element by element in C++, without dispatch: a pending one would
# be read before it is computed.
DATA_CONSTRUCTORS = {torch.tensor: 0, torch.as_tensor: 0, torch.asarray: 0, torch.Tensor.new_tensor: 1}
# Tensor methods that reach a tensor's memory without dispatch -> (flush reason, whether they
# only read it). They flush only when that memory is still owed a pending write (or, for those
# that change it, when a pending op still reads it), so code that merely pickles or copies
# concrete tensors inside a block keeps its fusion. A storage's own writes (fill_, copy_,
# item assignment) go through tensor ops, which dispatch.
MEMORY_METHODS = {
    torch.Tensor.untyped_storage: ("storage", True), torch.Tensor.storage: ("storage", True),
    torch.Tensor._typed_storage: ("storage", True), torch.Tensor.share_memory_: ("storage", False),
    torch.Tensor.__reduce_ex__: ("pickle", True), torch.Tensor.__deepcopy__: ("copy", True),
    # ``t.data = other`` swaps t's memory: what was recorded against either must run first, and
    # a leaf remembered for t no longer describes it
    torch.Tensor.data.__set__: ("data", False),
}

# -- source lines ------------------------------------------------------------------------------

_INTERNAL_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules[__package__]))
_INTERNAL_FILES = {contextlib.__file__}
# Keyed by file and code object: code objects of the same text compare equal whatever their file
# (a notebook cell run twice).
_internal_code: dict[tuple[str, Any], bool] = {}
_lines: dict[tuple[str, Any, int], str] = {}  # (file, code, last instruction) -> "file:line"
# Where the op being recorded comes from, when a caller knows better than the Python stack: an
# FX graph's node names the user line it was traced from.
recorded_from: ContextVar[Optional[str]] = ContextVar("fusionrt_recorded_from", default=None)


def user_source(frame: Any = None) -> str:
    """``file:line`` of the first frame outside torch, fusionrt and contextlib (from ``frame``,
    by default the caller's), unless ``recorded_from`` says; cached per code object and
    instruction, since a program records the same lines over and over."""
    known = recorded_from.get()
    if known is not None:
        return known
    frame = frame or sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        internal = _internal_code.get((code.co_filename, code))
        if internal is None:
            name = code.co_filename
            internal = name.startswith(_INTERNAL_DIRS) or name in _INTERNAL_FILES
            _internal_code[(name, code)] = internal
        if not internal:
            key = (code.co_filename, code, frame.f_lasti)
            line = _lines.get(key)
            if line is None:
                line = _lines[key] = f"{code.co_filename}:{frame.f_lineno}"
            return line
        frame = frame.f_back
    return UNKNOWN_SOURCE


UNKNOWN_SOURCE = "<unknown>:0"


# -- the modes ---------------------------------------------------------------------------------

class SyncCapture(TorchFunctionMode):
    """Flushes before a Tensor method that reads data, then runs it on concrete tensors."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        session = self.session
        if session.passthrough:
            return func(*args, **kwargs)
        reason = SYNC_METHODS.get(func)
        if reason is None and func in DATA_CONSTRUCTORS:
            position = DATA_CONSTRUCTORS[func]
            data = args[position] if len(args) > position else kwargs.get("data", kwargs.get("obj"))
            elements = list(_tensors_in_lists(data)) if isinstance(data, (list, tuple)) else []
            if not elements:
                return func(*args, **kwargs)
            with session.lock:
                session.flush("item", user_source(), sync=elements)
                with session.eager():
                    return func(*args, **kwargs)
        if reason is None:
            memory = MEMORY_METHODS.get(func)
            if memory is None:
                return func(*args, **kwargs)
            reason, reads_only = memory
            with session.lock:
                if not session.before_memory_access(reason, args[:2], reads_only):
                    return func(*args, **kwargs)
                with session.eager():
                    return func(*args, **kwargs)
        with session.lock:
            session.flush(reason, user_source(), sync=[a for a in args[:2] if isinstance(a, torch.Tensor)])
            with session.eager():
                return func(*args, **kwargs)


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _data_read_by_factory(name: str, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors whose values a factory reads (``linspace``'s 0-d ends, ``normal``'s means):
    all of its tensor arguments but the one a ``*_like`` or ``new_*`` factory takes its shape from."""
    tensors = _tensors_in(args, kwargs)
    if name.endswith("_like") or name.startswith("new_"):
        tensors = [t for t in tensors if t is not args[0]]
    return tensors


def _tensors_in_lists(data: Any) -> Iterator[torch.Tensor]:
    """The tensors among the items of nested lists and tuples."""
    for item in data:
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (list, tuple)):
            yield from _tensors_in_lists(item)


class SavedForBackward(torch.autograd.graph.saved_tensors_hooks):
    """Tensors autograd saves for backward: a pending one is marked as kept alive for backward
    (written ``saved-for-backward`` while autograd still holds it at a flush).

    Autograd saves a detached alias, so the saved object never holds the output that owns its
    grad_fn (no reference cycle); the detach dispatches through the capture, so the alias is
    bound to the same pending value. Hooks turn off autograd's own check that a saved tensor was
    not modified in place afterwards, so unpacking checks the version counter the same way."""

    def __init__(self, session: Session) -> None:
        super().__init__(self.pack, self.unpack)
        self.session = session

    def pack(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        session = self.session
        with session.lock:
            if session.passthrough or session.binding(t) is None:
                with session.eager():
                    return t.detach(), t._version
            saved = t.detach()
            session.saved_for_backward(saved)
            return saved, t._version

    @staticmethod
    def unpack(packed: tuple[torch.Tensor, int]) -> torch.Tensor:
        saved, version = packed
        if saved._version != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{saved.type()} {list(saved.shape)}] is at version "
                f"{saved._version}; expected version {version} instead.")
        return saved


class DispatchCapture(TorchDispatchMode):
    """Records aten ops as graph nodes instead of running them."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._decomposing: set[Any] = set()  # ops being recorded as their decomposition

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No ``torch._dynamo.disable`` wrapper around every recorded op: it costs a few us per op
        and guards only against compiling inside a lazy block, which fusionrt does not support."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        session = self.session
        if session.passthrough:
            return func(*args, **kwargs)
        with session.lock:
            return self._record(func, args, kwargs)

    def _record(self, func, args: tuple, kwargs: dict) -> Any:
        session = self.session
        if self._decomposing and _implicit(func):
            # Below autograd, an op PyTorch defines by other ops (``to``, ``reshape``) reaches
            # this mode whole; autograd would have split it: split it the same way.
            with self:
                return func.decompose(*args, **kwargs)
        kind, name = _KINDS.get(func) or _classify(func)
        if kind == "view":
            if _strided(args[0]):
                return self.view(func, args, kwargs)
            return func(*args, **kwargs)  # a sparse or nested tensor is never pending
        if kind == "marker":
            return func(*args, **kwargs)  # a profiler range: it touches no tensor
        if kind == "factory":
            if any(session.binding(t) is not None for t in _data_read_by_factory(name, args, kwargs)):
                return self.fallback(func, args, kwargs, user_source(), "reads a pending tensor's values")
            out = func(*args, **kwargs)  # concrete at once; identical in eager (not counted)
            session.ran_eagerly(func, args, kwargs, out, factory=True)
            return out
        source = user_source()
        if source == UNKNOWN_SOURCE:
            source = session.owner_source()
        if kind == "item":
            session.flush("item", source, sync=[args[0]])
            return func(*args, **kwargs)
        tensors = _tensors_in(args, kwargs)
        if session.recorder is not None and torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            session.recorder.refuse("autograd records it (a replay would build no graph)")
        odd = next((t for t in tensors if t.dtype not in DTYPES or not _strided(t)), None)
        if odd is not None:
            why = f"dtype {odd.dtype}" if odd.dtype not in DTYPES else f"layout {odd.layout}"
            return self.fallback(func, args, kwargs, source, why)
        session.refresh(tensors)
        try:
            if kind == "unsupported":
                raise _Unsupported("not supported by fusionrt")
            out = getattr(self, kind)(func, name, args, kwargs, source)
        except _Unsupported as why:
            decomposition = self._decomposition(func, name, tensors)
            out = NotImplemented if decomposition is None else self.decomposed(func, decomposition, args, kwargs)
            if out is NotImplemented:
                return self.fallback(func, args, kwargs, source, str(why))
        session.after_record()
        return out

    def _decomposition(self, func, name: str, tensors: list[torch.Tensor]) -> Optional[Any]:
        """How an op the capture cannot record whole is recorded as simpler ops: a ``_foreach_``
        op (optimizers) per tensor, and PyTorch's decomposition of an op of a backward pass or
        of an op autograd records (training). Code without autograd keeps its fallbacks, but for
        the few ops whose decomposition fuses whole (``DECOMPOSED_ALWAYS``)."""
        if func in self._decomposing:
            return None  # a decomposition that calls its own op
        if torch.Tag.nondeterministic_seeded in func.tags:
            return None  # a decomposition draws other random numbers than eager's kernel
        if name.startswith("_foreach_"):
            from .composites import foreach

            return functools.partial(foreach, func)
        if "scaled_dot_product" in name:
            return None  # attention's decomposition writes the score matrix (and disagrees on logsumexp)
        training = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if "backward" in name or training or func in DECOMPOSED_ALWAYS:
            return decomposition_table.get(func)
        return None

    def decomposed(self, func, decomposition, args: tuple, kwargs: dict) -> Any:
        """Record ``func`` as the ops of its decomposition (this mode sees each of them); eager
        counts ``func`` as one kernel writing its outputs."""
        session = self.session
        self._decomposing.add(func)
        try:
            metas = None
            if not func._overloadpacket.__name__.startswith("_foreach_"):
                with session.eager():
                    metas = _checked_metas(func, decomposition, args, kwargs)
                if metas is None:
                    return NotImplemented  # its results would not be eager's
            with session.decomposition(), self:
                out = decomposition(*args, **kwargs)
                if out is not NotImplemented and metas is not None:
                    out = _in_eager_layout(out, metas)
        except _Unsupported:  # refused before recording anything
            return NotImplemented
        finally:
            self._decomposing.discard(func)
        if out is not NotImplemented:  # the decomposition declined these arguments
            session.count_eager(_tensors_in((out,), {}) if out is not None else _flat(args[0]), func)
        return out

    # -- op classes ----------------------------------------------------------------------------

    def view(self, func, args: tuple, kwargs: dict) -> Any:
        session = self.session
        base = args[0]
        src = session.read(base)  # may flush a stale tensor first
        out = func(*args, **kwargs)
        if isinstance(src, Leaf):
            return out
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if any(t.dtype != base.dtype for t in outs):  # view(dtype): index maps cannot bitcast
            session.view_fallback(func, base, user_source(), "reinterprets a pending tensor's bytes")
            return out
        root = src.root if isinstance(src, View) else src
        for t in outs:
            vmap = view_map(root.shape, root.stride, root.offset, tuple(t.shape), t.stride(), t.storage_offset())
            session.bind(t, View(root, tuple(t.shape), t.stride(), t.storage_offset(), vmap))
        return out

    def pointwise(self, func, name: str, args: tuple, kwargs: dict, source: str,
                  out_meta: Optional[tuple] = None) -> torch.Tensor:
        key = None if out_meta else _signature(func, args, kwargs)
        try:
            checked = _POINTWISE.get(key) if key is not None else None
        except TypeError:  # an unhashable keyword argument
            key = checked = None
        if checked is None:
            checked = self._check_pointwise(func, name, args, kwargs, out_meta)
            if key is not None:
                _POINTWISE.put(key, checked)
        shape, stride, dtype, device, attrs = checked
        use = self.session.use
        node_args = tuple(use(a, shape) if isinstance(a, torch.Tensor) else a for a in args)
        home = torch.empty_strided(shape, stride, dtype=dtype, device=device)
        self.session.node("pointwise", name, node_args, home, source, attrs=attrs, record=name,
                          layout=(shape, stride, 0))
        return home

    @staticmethod
    def _check_pointwise(func, name: str, args: tuple, kwargs: dict, out_meta: Optional[tuple]) -> tuple:
        """(shape, stride, dtype, device, attrs) of a recordable element-wise op, or _Unsupported."""
        if kwargs and any(isinstance(v, torch.Tensor) for v in kwargs.values()):
            raise _Unsupported("tensor keyword argument")
        (shape, stride, dtype), = out_meta or _infer(func, args, kwargs)
        if dtype not in DTYPES:
            raise _Unsupported(f"dtype {dtype}")
        for a in args:
            if not isinstance(a, torch.Tensor):
                _scalar(a)
        device = _device(args)
        if name == "_to_copy" and kwargs.get("device") not in (None, device):
            raise _Unsupported("copy to another device")
        return shape, stride, dtype, device, _attrs(name, kwargs)

    def reduction(self, func, name: str, args: tuple, kwargs: dict, source: str) -> torch.Tensor:
        x = args[0]
        if x.numel() == 0:
            raise _Unsupported("reduction of an empty tensor")
        (shape, stride, dtype), = _infer(func, args, kwargs)
        if dtype not in DTYPES:
            raise _Unsupported(f"dtype {dtype}")
        if kwargs.keys() - {"dtype"}:
            raise _Unsupported("unexpected keyword arguments")
        home = torch.empty_strided(shape, stride, dtype=dtype, device=x.device)
        use = self.session.use(x, tuple(x.shape))
        if x.dim() == 0:  # one element: reducing it is casting it to the result's dtype
            self.session.node("pointwise", "_to_copy", (use,), home, source, attrs=(("dtype", dtype),),
                              record=name)
            return home
        dims = _reduce_dims(x, args[1] if len(args) > 1 else None)
        attrs = (("dtype", kwargs["dtype"]),) if kwargs.get("dtype") is not None else ()
        self.session.node("reduction", name, (use,), home, source, attrs=attrs, dims=dims, record=name)
        return home

    def extern(self, func, name: str, args: tuple, kwargs: dict, source: str) -> torch.Tensor:
        (shape, stride, dtype), = _infer(func, args, kwargs)
        if name == "convolution":
            stride = _conv_layout(args[0], args[1], shape, stride)
        session = self.session

        def arg(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                return session.use(a, tuple(a.shape))
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a

        node_args = arg(args)
        home = torch.empty_strided(shape, stride, dtype=dtype, device=_device(args))
        session.node("extern", name, node_args, home, source, attrs=(("func", func), *kwargs.items()),
                     record=name, kernel_kind=EXTERN_KINDS[name])
        return home

    def inplace(self, func, name: str, args: tuple, kwargs: dict, source: str) -> Any:
        """``t.op_(...)``, ``t.copy_(s)`` and ``op(..., out=t)``: the functional op, homed in t."""
        session = self.session
        target, reads = (kwargs["out"], args) if "out" in kwargs else (args[0], args[1:])
        if isinstance(target, torch.Tensor):
            if torch._debug_has_internal_overlap(target):  # eager decides: an error, or a no-op
                raise _Unsupported("in-place write into overlapping memory")
            if any(_partial_overlap(target, a) for a in _flat(reads) if isinstance(a, torch.Tensor)):
                raise _Unsupported("in-place op reading another view of the memory it writes")
        if "out" in kwargs:
            kwargs = dict(kwargs)  # a fallback still needs the caller's out=
            target = kwargs.pop("out")
            functional = func._overloadpacket
            base = functional.__name__
            if not isinstance(target, torch.Tensor) or base not in POINTWISE_OPS | REDUCTION_OPS | _MATMULS:
                raise _Unsupported("out= of this op")
            if base in _MATMULS and any(_same_storage(target, a) for a in args if isinstance(a, torch.Tensor)):
                raise _Unsupported("product reading the memory it writes")
            (shape, _, dtype), = _infer(functional, args, kwargs)
            if tuple(shape) != tuple(target.shape):
                raise _Unsupported("out= that eager resizes")
            if dtype != target.dtype:  # eager computes in out's dtype, or refuses: it decides
                raise _Unsupported("out= of another dtype")
            record = self.pointwise if base in POINTWISE_OPS else self.reduction if base in REDUCTION_OPS else self.extern
            with self.session.decomposition():  # one op in eager, which writes out= itself
                self.inplace(aten.copy_.default, "copy_", (target, record(functional, base, args, kwargs, source)), {}, source)
            self.session.count_eager([target])
            return target
        base = name[:-1] if name.endswith("_") else name
        if base in _MATMULS:
            return self._update_by_product(base, args, kwargs, target, source)
        if base == "copy":
            src = args[1]
            op, fargs, fkw = ("clone", (src,), {}) if src.dtype == target.dtype else \
                ("_to_copy", (src,), {"dtype": target.dtype})
            if src.device != target.device:
                raise _Unsupported("copy across devices")
        elif base in POINTWISE_OPS:
            functional = getattr(aten, base)
            op, fargs, fkw = base, args, kwargs
            (shape, _, dtype), = _infer(functional, args, kwargs)
            _infer(func, args, kwargs)  # eager's own checks for the in-place form (casting rules)
            if tuple(shape) != tuple(target.shape):
                raise _Unsupported("in-place result does not fit its target")
            if not torch.can_cast(dtype, target.dtype):  # eager raises (meta kernels do not check)
                raise _Unsupported(f"{dtype} result cannot be cast to the target's {target.dtype}")
            if dtype != target.dtype:  # computed in the promoted type, then cast as eager does
                value = self.pointwise(functional, base, args, kwargs, source,
                                       ((tuple(shape), tuple(target.stride()), dtype),))
                op, fargs, fkw = "_to_copy", (value,), {"dtype": target.dtype}
        else:
            raise _Unsupported("in-place op")
        session.before_write(target)
        node_args = tuple(session.use(a, tuple(target.shape)) if isinstance(a, torch.Tensor) else _scalar(a)
                          for a in fargs)
        session.node("pointwise", op, node_args, target, source, attrs=_attrs(op, fkw),
                     record=name, in_place=True)
        return target

    def _update_by_product(self, base: str, args: tuple, kwargs: dict, target: torch.Tensor, source: str) -> torch.Tensor:
        """``w.addmm_(a, b, beta=, alpha=)`` as ``w *= beta; w += alpha * (a @ b)`` (with beta 0, ``w`` is
        not read, as eager ignores its NaNs): the update fuses into the product's epilogue, as
        ``w += a @ b`` does; one op in eager."""
        if any(_same_storage(target, a) for a in args[1:] if isinstance(a, torch.Tensor)):
            raise _Unsupported("product reading the memory it writes")  # eager's result depends on its loop order
        (shape, _, dtype), = _infer(getattr(aten, base).default, args, kwargs)
        if tuple(shape) != tuple(target.shape) or dtype != target.dtype:
            raise _Unsupported("in-place result does not fit its target")
        product = aten.mm.default if base == "addmm" else aten.bmm.default
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        session = self.session
        with session.decomposition():
            value = self.extern(product, product._overloadpacket.__name__, args[1:3], {}, source)
            update = {"alpha": alpha} if alpha != 1 else {}
            if beta == 1:
                self.inplace(aten.add_.Tensor, "add_", (target, value), update, source)
            else:
                if beta == 0:
                    new = self.pointwise(aten.mul, "mul", (value, alpha), {}, source) if alpha != 1 else value
                else:
                    kept = self.pointwise(aten.mul, "mul", (target, beta), {}, source)
                    new = self.pointwise(aten.add, "add", (kept, value), update, source)
                self.inplace(aten.copy_.default, "copy_", (target, new), {}, source)
        session.count_eager([target])
        return target

    def identity(self, func, name: str, args: tuple, kwargs: dict, source: str) -> Any:
        """``conj_physical`` of a real tensor: eager returns the tensor itself."""
        return args[0]

    def composite(self, func, name: str, args: tuple, kwargs: dict, source: str) -> Any:
        from .composites import decompose

        metas = _infer(func, args, kwargs)
        return decompose(self.session, name, args, kwargs, metas, source)

    def fallback(self, func, args: tuple, kwargs: dict, source: str, reason: str) -> Any:
        return self.session.fallback(func, args, kwargs, source, reason)


class _Unsupported(Exception):
    """The op cannot be recorded; it runs eagerly as a fallback."""


_KINDS: dict[Any, tuple[str, str]] = {}
# (op, argument signature) -> what ``pointwise`` checked and inferred once for it. Bounded: a
# signature holds scalar values, and a learning-rate schedule brings a new one every step.
_POINTWISE: LRUCache[tuple] = LRUCache(max_entries=4096)


def _signature(func, args: tuple, kwargs: dict) -> Optional[tuple]:
    """What an element-wise op's checks and metadata depend on: each tensor's layout, dtype and
    device, each scalar's type and value (eager rejects ``int_tensor ** -1`` but not ``** 2``),
    the keyword arguments. None for an argument of another type (it is checked every time)."""
    key: list[Any] = [func]
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.shape, a.stride(), a.dtype, a.device))
        elif a is None or type(a) in (bool, int, float):
            key.append((type(a), a))
        else:
            return None
    if kwargs:
        key.append(tuple(kwargs.items()))
    return tuple(key)
_CPU = torch.device("cpu")


def _classify(func) -> tuple[str, str]:
    """(how the capture handles ``func``, its overload packet's name), once per overload."""
    name = func._overloadpacket.__name__
    if func.namespace == "profiler":  # record_function's ranges (optimizers open one per step)
        kind = "marker"
    elif name == "conj_physical":  # complex tensors fall back before this is consulted
        kind = "identity"
    elif func.is_view or name == "_unsafe_view":  # _unsafe_view aliases too (reshape's tail)
        kind = "view"
    elif name in FACTORY_OPS:
        kind = "factory"
    elif name == "_local_scalar_dense":
        kind = "item"
    elif func._schema.is_mutable:
        kind = "inplace"
    elif name in POINTWISE_OPS:
        kind = "pointwise"
    elif name in REDUCTION_OPS:
        kind = "reduction"
    elif name in COMPOSITE_OPS:
        kind = "composite"
    elif name in EXTERN_KINDS:
        kind = "extern"
    else:
        kind = "unsupported"
    _KINDS[func] = kind, name
    return kind, name


# (op, argument signature) -> eager's result metadata when the op's decomposition agrees with
# it on shapes and dtypes there, else None.
_DECOMPOSABLE: LRUCache[Optional[list]] = LRUCache(max_entries=1024)
_UNCHECKED: Any = object()


def _checked_metas(func, decomposition, args: tuple, kwargs: dict) -> Optional[list[Optional[shapes.Meta]]]:
    """(shape, stride, dtype) of each result eager gives (None where it gives no tensor), when
    ``decomposition`` gives the same shapes and dtypes; None when it does not. Both run on meta
    tensors, once per signature, before anything is recorded: a decomposition that updates
    state in place (training batch norm's running statistics) must not run and then be refused."""
    try:
        key: Optional[tuple] = (func, tuple(map(shapes._key, args)), tuple(map(shapes._key, kwargs.items())))
        hit = _DECOMPOSABLE.get(key, _UNCHECKED)
        if hit is not _UNCHECKED:
            return hit
    except TypeError:  # an unhashable argument: checked every time
        key = None

    def on_meta(fn: Any) -> list:
        out = fn(*shapes._meta(args), **{k: "meta" if k == "device" else shapes._meta(v) for k, v in kwargs.items()})
        return list(out) if isinstance(out, (list, tuple)) else [out]

    try:
        eager, decomposed = on_meta(func), on_meta(decomposition)
    except Exception:  # no meta kernel, or a decomposition that cannot run on metadata
        eager, decomposed = [], None
    metas = [(tuple(o.shape), o.stride(), o.dtype) if isinstance(o, torch.Tensor) else None for o in eager]
    agrees = decomposed is not None and len(decomposed) == len(metas) and all(
        (m is None and not isinstance(d, torch.Tensor))
        or (m is not None and isinstance(d, torch.Tensor) and (tuple(d.shape), d.dtype) == (m[0], m[2]))
        for m, d in zip(metas, decomposed))
    if key is not None:
        _DECOMPOSABLE.put(key, metas if agrees else None)
    return metas if agrees else None


def _in_eager_layout(out: Any, metas: list[Optional[shapes.Meta]]) -> Any:
    """A decomposition's results copied (recorded) into eager's strides where they differ:
    later views depend on them."""
    outs = out if isinstance(out, (list, tuple)) else (out,)
    fixed = []
    for o, meta in zip(outs, metas):
        if meta is not None and any(n > 1 and a != b for n, a, b in zip(meta[0], o.stride(), meta[1])):
            o = torch.empty_strided(meta[0], meta[1], dtype=meta[2], device=o.device).copy_(o)
        fixed.append(o)
    return (list if isinstance(out, list) else tuple)(fixed) if isinstance(out, (list, tuple)) else fixed[0]


@functools.lru_cache(maxsize=None)
def _implicit(func) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")


def _strided(t: torch.Tensor) -> bool:
    """Memory the capture can describe by strides; sparse and nested tensors run eagerly."""
    return t.layout == torch.strided and not t.is_nested


def _tensors_in(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    out = []
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in _flat(a) if isinstance(t, torch.Tensor))
    return out


def _conv_layout(x: torch.Tensor, weight: torch.Tensor, shape: tuple[int, ...],
                 stride: tuple[int, ...]) -> tuple[int, ...]:
    """The strides eager's convolution gives its result: channels-last when the input or the
    weight is (cuDNN and oneDNN both follow either); the meta kernel always answers contiguous."""
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    fmt = formats.get(len(shape))
    if fmt is None or not any(t.dim() == len(shape) and t.is_contiguous(memory_format=fmt) and not t.is_contiguous()
                              for t in (x, weight)):
        return stride
    return torch.empty(shape, device="meta").to(memory_format=fmt).stride()


def _infer(func, args, kwargs):
    try:
        return shapes.infer(func, args, kwargs)
    except Exception as exc:  # no meta kernel, or eager's error: eager decides which
        raise _Unsupported(f"no metadata ({type(exc).__name__})") from exc


def _partial_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``b`` reads memory that ``a`` writes, other than element for element: eager's result then
    depends on its iteration order, so only eager can reproduce it."""
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    if (a.shape, a.stride(), a.storage_offset(), a.dtype) == (b.shape, b.stride(), b.storage_offset(), b.dtype):
        return False
    return _byte_span(a)[0] < _byte_span(b)[1] and _byte_span(b)[0] < _byte_span(a)[1]


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    size = t.element_size()
    lo = hi = t.storage_offset()
    for n, st in zip(t.shape, t.stride()):
        (lo, hi) = (lo + (n - 1) * st, hi) if st < 0 else (lo, hi + (n - 1) * st)
    return lo * size, (hi + 1) * size


def _flat(xs: list | tuple) -> list | tuple:
    if not any(isinstance(x, (list, tuple)) for x in xs):
        return xs
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(x))
        else:
            out.append(x)
    return out


def _device(args: tuple) -> torch.device:
    """Where an op's result lives: with its first tensor that has dims (a 0-d tensor may be a
    CPU scalar next to CUDA tensors)."""
    tensors = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
    return next((t.device for t in tensors if t.dim()), tensors[0].device if tensors else _CPU)


def _scalar(a: Any) -> Any:
    if a is None or isinstance(a, (bool, int, float)):
        return a
    raise _Unsupported(f"argument of type {type(a).__name__}")


def _attrs(name: str, kwargs: dict) -> tuple[tuple[str, Any], ...]:
    if not kwargs:
        return ()
    if name == "_to_copy":
        return (("dtype", kwargs["dtype"]),) if kwargs.get("dtype") is not None else ()
    if name == "clone":
        return ()
    for k, v in kwargs.items():
        if k in ("device", "layout", "pin_memory", "memory_format", "non_blocking"):
            raise _Unsupported(f"keyword {k}")
        if isinstance(v, torch.Tensor):
            raise _Unsupported("tensor keyword argument")
    return tuple(sorted(kwargs.items()))


def _reduce_dims(x: torch.Tensor, dim: Any) -> frozenset[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return frozenset(range(x.dim()))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    return frozenset(d % max(x.dim(), 1) for d in dims)
