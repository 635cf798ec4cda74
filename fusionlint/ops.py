"""The op tables: which PyTorch names are views, element-wise or compute-bound.

One place for every rule. Names are bare op names, matched both as tensor methods
(``x.transpose(1, 2)``) and as functions of ``torch``, ``torch.nn.functional``, ``torch.special``
and ``torch.linalg`` (``torch.transpose(x, 1, 2)``, ``F.linear(x, w)``). The classes follow the
runtime's semantics (docs/semantics.md):

- ``view``: metadata-only reshapes of a tensor (``reshape``/``flatten``/``ravel`` may copy, so
  rules move a view only when its input is never written in place);
- ``elementwise``: one output element from the same-index input elements (with broadcasting);
- ``compute``: matmul-like ops and reductions, the ops that fuse element-wise blocks on read and
  on write and that end a fused block.

Config extends the tables (``[tool.fusionlint] extra-ops = {view = ["my_view"]}``), which the CLI
passes as ``LintOptions.extra_ops``.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

VIEW = "view"
ELEMENTWISE = "elementwise"
COMPUTE = "compute"
OP_CLASSES = (VIEW, ELEMENTWISE, COMPUTE)

_VIEWS = frozenset(
    """view view_as reshape reshape_as transpose swapaxes swapdims permute movedim moveaxis
    unsqueeze squeeze flatten unflatten ravel expand expand_as t narrow select diagonal unfold
    as_strided adjoint""".split()
)
# Views written as attributes (``x.T``), not calls.
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})

_ELEMENTWISE = frozenset(
    """add sub subtract mul multiply div divide true_divide floor_divide remainder fmod pow neg
    negative abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt square reciprocal sign sgn
    sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh erf erfc erfinv
    sigmoid logit relu relu6 gelu silu mish elu selu celu leaky_relu softplus softsign hardtanh
    hardsigmoid hardswish tanhshrink logsigmoid clamp clip clamp_min clamp_max where maximum
    minimum fmax fmin lerp addcmul addcdiv masked_fill floor ceil round trunc frac eq ne lt le
    gt ge logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor
    bitwise_not isnan isinf isfinite nan_to_num to float double half bfloat16 int long bool
    type_as""".split()
)

_COMPUTE = frozenset(
    """matmul mm bmm baddbmm addmm addbmm addmv mv dot vdot inner outer ger einsum tensordot
    linear bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    scaled_dot_product_attention sum nansum mean nanmean amax amin max min prod std var norm
    vector_norm matrix_norm logsumexp softmax log_softmax softmin layer_norm rms_norm group_norm
    batch_norm instance_norm normalize cumsum cumprod argmax argmin all any count_nonzero
    cross_entropy""".split()
)

# The views whose index map is not affine in fusionrt (docs/semantics.md 3.5): they may merge
# dims of their input (``view``/``reshape`` only for some shapes, which the rules judge from the
# arguments) or walk two dims at once. Of a value still being computed they close the block.
MERGING_VIEWS = frozenset({"view", "reshape", "flatten", "ravel", "diagonal"})

# The reductions fusionrt fuses with the element-wise block before them (on read): an input of
# any other compute-bound op is written anyway, so what happens to it before does not matter.
FUSED_REDUCTIONS = frozenset(
    {"sum", "mean", "amax", "amin", "prod", "softmax", "log_softmax", "layer_norm", "var", "std"}
)

# The compute-bound ops fusionrt plans as matmul or convolution kernels, without a flush
# (docs/semantics.md 3.7-3.8); the other compute-bound ops outside FUSED_REDUCTIONS run eagerly
# (fallbacks, which flush). Rules count their inputs as written (a matmul may fuse an operand's
# producer on read; assuming the write errs towards not reporting).
MATMULS = frozenset(
    """matmul mm bmm addmm baddbmm einsum tensordot inner linear conv1d conv2d conv3d conv_transpose1d
    conv_transpose2d conv_transpose3d""".split()
)

# Tensor methods that hand data to the host, and builtins that read a tensor's value there (``bool``
# also via ``if``/``while``/``and``/``not``): each one flushes the lazy stream, and every tensor
# Python still holds is written there. ``.to("cpu")`` is matched separately.
SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
SYNC_BUILTINS = frozenset({"bool", "float", "int", "print"})
# Ops whose result has as many elements as the data says (the places a mask keeps): the host reads
# the data to size the result, a sync like ``.item()``. So do ``torch.where(cond)`` with one argument
# and indexing by a boolean mask (``x[mask]``).
DATA_SHAPED = frozenset({"nonzero", "argwhere", "masked_select"})

# torch.nn modules whose call is one op on its input (``self.softmax(x)``, ``self.fc(x)``): an op of
# the tables, or ``dropout``, which may return its input.
NN_MODULE_OPS = {
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "LayerNorm": "layer_norm", "RMSNorm": "rms_norm",
    "GELU": "gelu", "ReLU": "relu", "SiLU": "silu", "Sigmoid": "sigmoid", "Tanh": "tanh",
    "Linear": "linear", "Conv1d": "conv1d", "Conv2d": "conv2d", "Conv3d": "conv3d", "GroupNorm": "group_norm",
    "BatchNorm1d": "batch_norm", "BatchNorm2d": "batch_norm", "BatchNorm3d": "batch_norm", "Dropout": "dropout",
    "CrossEntropyLoss": "cross_entropy",
}

_DEFAULTS = {VIEW: _VIEWS, ELEMENTWISE: _ELEMENTWISE, COMPUTE: _COMPUTE}


@dataclass(frozen=True)
class OpTables:
    view: frozenset[str]
    elementwise: frozenset[str]
    compute: frozenset[str]

    def op_class(self, name: str) -> str | None:
        """The class of a bare op name; compute wins over the others (``max`` is a reduction)."""
        if name in self.compute:
            return COMPUTE
        if name in self.view:
            return VIEW
        if name in self.elementwise:
            return ELEMENTWISE
        return None


@functools.lru_cache(maxsize=32)
def op_tables(extra_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> OpTables:
    """The default tables extended by ``extra_ops`` ((op class, names) pairs).

    Raises ValueError for an unknown op class: the CLI turns that into a config error.
    """
    tables = {cls: set(names) for cls, names in _DEFAULTS.items()}
    for cls, names in extra_ops:
        if cls not in tables:
            raise ValueError(f"unknown op class {cls!r} in extra-ops (known: {', '.join(OP_CLASSES)})")
        tables[cls].update(names)
    return OpTables(**{cls: frozenset(names) for cls, names in tables.items()})


@functools.lru_cache(maxsize=8)
def compute_call_text(ops: OpTables) -> re.Pattern[str]:
    """A compute-bound op in a statement's text (for ``Rule.may_match``): a call by name, or ``@``."""
    return re.compile(r"@|\b(?:%s)\s*\(" % "|".join(sorted(map(re.escape, ops.compute))))
