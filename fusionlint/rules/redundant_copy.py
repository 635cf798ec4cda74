"""FL007: a copy (``.clone()``, ``.detach().clone()``, ``.contiguous()`` of a transposed view) that
nothing needs: neither the copy nor its source is written in place, and the copy does not escape; a
stack that a reduction over its new dimension alone reads, which adds would do without the copy; and a
repeat of dimensions of size 1 only read, which an expand would do."""
from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope, Site, StatementRef, bound_names, children, is_method_call, names_of, per_scope, reaching_assignment,
    root_name,
)
from fusionlint.analysis.facts import ACTIVATION_REGISTRIES, ModuleFacts, built_in_place
from fusionlint.analysis.fresh import returns_new
from fusionlint.analysis.layout import (
    CHECKPOINT, FAST, FAST_BACK, NEEDS_CONTIGUOUS, READS_INTO_NEW, callee_takes_any_layout, elements_take_any_layout,
    handed_back, reads_strided,
)
from fusionlint.analysis.nodes import node_types
from fusionlint.analysis.numbers import int_literal
from fusionlint.analysis.project import imported_callee, member_class
from fusionlint.analysis.purity import (
    MAY_ALIAS, METADATA, callee_only_reads, may_return_argument, writes_argument,
)
from fusionlint.analysis.views import ast_view, cst_view, dotted_path
from fusionlint.model import EAGER, FUSIONRT, FixSafety
from fusionlint.ops import COMPUTE, ELEMENTWISE, NN_MODULE_OPS, VIEW, VIEW_ATTRIBUTES, OpTables
from fusionlint.rule import Example, Rule, StatementEdit, Violation, replace_nodes

_INITIALIZES = re.compile(r"_?(?:init|initialize)_\w*(?:weights?|buffers?)|reset_parameters")
_SOLE_VALUE = "a copy of a value nothing else holds: whatever is done with the copy can be done with the value"
_STACK_REDUCED = "a stack only reduced over its new dimension: adding the tensors writes the result alone"
_REPEATED = "a repeat of dimensions of size 1 that is only read: an expand reads the same values without the copy"
_STACKED_ALONE = ("a stack of one tensor with itself that is only read: an expand of it unsqueezed "
                  "(`x.unsqueeze(0).expand(n, *x.shape)`) reads the same values without the copies")
_WRITTEN_AT_ONCE = "a copy written in place at once: the op's out-of-place form makes the new tensor without the copy"
# In-place ops whose out-of-place form keeps the tensor's dtype, as the copy's would (no type
# promotion), and the factories that make what a fill of a copy is.
_OUT_OF_PLACE = frozenset({"masked_fill", "index_fill", "index_add", "index_copy", "index_put", "masked_scatter",
                           "scatter", "scatter_add", "scatter_reduce"})
_FILLS = {"fill_": "torch.full_like", "zero_": "torch.zeros_like"}
# Factories that take a tensor's sizes first (``torch.zeros(1, 1, dim)``).
_FACTORIES = frozenset({"zeros", "ones", "randn", "rand", "empty", "full"})
# The statements that may hold a finding: a copy, a repeat of a call's or an index's result, or a
# stack in a statement that sums or averages.
_COPY = re.compile(r"\b(?:clone|contiguous)\s*\(|(?:[)\]]|\bself\.\w+)\s*\.repeat\s*\(")
_STACK, _REDUCTION = re.compile(r"\bstack\s*\("), re.compile(r"\b(?:sum|mean)\s*\(")
_STACK_REPEATED = re.compile(r"\bstack\s*\(\s*\[\s*[\w.]+\s*\]\s*\*")  # `torch.stack([x] * n)`
_NEEDLE = re.compile(r"\b(?:clone|contiguous|stack)\s*\(|\.repeat\s*\(")  # what the file search looks for
# Views that leave a tensor non-contiguous, so that ``.contiguous()`` really copies.
_STRIDED = frozenset({"t", "T", "mT", "H", "mH", "transpose", "swapaxes", "swapdims", "permute", "movedim",
                      "moveaxis", "expand", "expand_as", "narrow", "diagonal", "unfold", "as_strided"})

# Views that keep a strided tensor strided, and ops that cut a tensor into pieces (views).
_KEEP_STRIDES = frozenset({"squeeze", "unsqueeze", "view"})
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split"})
# Views whose elements may share memory, so that only a copy of them can be written per element.
_OVERLAPPING = frozenset({"expand", "expand_as", "broadcast_to", "as_strided", "unfold"})
# Convolutions read a channels-last input as it is (cuDNN, oneDNN), where they copy any other
# strided one themselves; and the layer classes named for one (`Conv`, `ConvNormAct`, `DWConv`,
# `Convolution`), which begin with their convolution.
_CONVOLUTIONS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
_CONV_LAYER = re.compile(r"\w*Conv(?:olution)?(?:[123]d)?(?:(?:Norm|BN|Bn|Act|Block)\w*)?")


class RedundantCopy(Rule):
    code = "FL007"
    name = "redundant-copy"
    message = "a copy that nothing needs: neither it nor its source is written in place, and it does not escape"
    rationale = """
        A copy costs a kernel that reads and writes the whole tensor in eager PyTorch. In a lazy
        fusing backend it is free while it stays inside a fused block, but where the copy and
        its source are both still needed after something that materializes them (a
        reduction, a matmul, a fallback op, a host sync), both are written: fusionrt writes
        4 times instead of 3 for `c = h.clone()` whose `c` feeds a `sum` and is used again with
        `h`. A copy is needed when one of the two is written in place while the other is
        still read, or when the caller may mutate or keep what the function hands out. When
        neither happens, the copy is waste. Eager always saves the copy kernel; fusionrt saves a
        write only where the copy and its source are both materialized (a copy that dies inside
        a fused block costs it nothing), and nothing for `.contiguous()`, whose strided read it
        fuses.

        Flagged: `.clone()`, `.detach().clone()`, `.clone().detach()`, `torch.clone(x)`, and
        `.contiguous()` of a transposed, permuted or expanded view, of a slice past the first
        dimension (`x[:, :n]`) or of a piece of a split along a later one (`start, end =
        logits.split(1, dim=-1)`), squeezed, viewed (a `.view()` that succeeds on a strided
        tensor leaves it strided), cast or detached or not (a cast keeps a dense input's
        strides: `x.t().float().contiguous()`), of a tensor, when every use of the copy
        only reads it (arithmetic, comparisons, a tensor op that is not in place, an activation
        from a registry (`ACT2FN[act](x)`), `torch.cat`,
        metadata, a same-file function or method whose body only reads that parameter and
        hands back a new tensor; a view or a cast of it used the same way), its source is a
        local name or a fresh value that is not written in place while the copy lives (what
        the statements before the copy's own do to it is past, unless they keep a view of it
        under another name and the name is not bound anew to a value the function makes
        since: `residual = h` then `h = self.norm(h)`, or the other name is, only read until
        then: `shifted = x` then `shifted = window_reverse(...)`; what those after the copy's
        last read do cannot reach it: Gemma 3n's `first = corrected[i].clone()`, read by `self.altup.scale_corrected_output`
        and a linear layer before `corrected[1:] += ...`), and the source is only read too (also
        by a same-file function that only reads it, or by a `torch.nn` module the class builds
        only when asked: `self.talking_heads = nn.Conv2d(h, h, 1) if talking_heads else None`). A
        copy that is returned (as it is, through a view, or through its name) is flagged too
        when the function made its source (an op result, the output of a `torch.nn` module
        such as `nn.Linear` or `nn.ConvTranspose1d`, not of one that may hand back its input:
        `nn.Identity`, a dropout, a flatten, also in one branch of `__init__`; of a same-file
        module or function that returns a tensor it made (`super().forward(x)` of a same-file
        base too; a `.contiguous()` of a permuted view, or what each branch binds last, as
        `window_reverse` returns it), a gather, a copy, also when `+=` updated it in place since,
        or a parameter that an assignment surely reaching the copy rebinds to one: `x =
        self.fc(x)`, or a plain statement of the body before it does, branches rebinding it
        after (`x = self.norm1(x)`; reads of the parameter in that value read the caller's
        tensor: `t = t.reshape(...)` is a view of it); not a parameter or an attribute): the caller gets a tensor nobody else holds either way
        (`self.proj(x).transpose(1, 2).contiguous()`: 2 -> 1 writes and kernels, fusionrt and
        eager); so is one handed out in a record of outputs that the function returns (`return
        QAOutput(start_logits=start_logits)`, or its tuple form `(start_logits, end_logits) +
        outputs[1:]`), where no `return` hands out its
        source too (a transformers question-answering head: the squeezed halves of the logits,
        copied only to be returned). And `g =
        g.clone()`, where `g` alone holds a tensor the function made, is flagged whatever is
        done with the copy: once `g` is rebound nothing reaches the original; so is a `.clone()`
        of a value no name holds (`torch.relu(x @ w).clone()`, `(x * 2)[0].clone()`), and a
        `.contiguous()` of one may be written in place (`masked_fill_`, `c[i] = v`) while its
        uses need no layout (DeBERTa's `self.conv(h).permute(0, 2, 1).contiguous()`, filled by
        `masked_fill_`). Not of an expanded view, which only a copy can write per element, nor
        of a tensor over a NumPy array (`torch.from_numpy(a)`), which its array's owner may
        write. Not flagged: a
        copy that is yielded, stored on `self` or in a container, returned in a bare tuple
        with other values (an attention helper's transposed heads, which its caller merges
        with a reshape that copies them anyway),
        passed to a function the rule does not know (it may mutate it) or viewed with
        `.view()`, which needs a contiguous tensor, or `.reshape()`/`.flatten()`, which would
        copy a strided one themselves; a returned copy of a parameter's data, of
        an expanded view (the caller gets memory of its own to write or hand to a kernel), or
        of a channels-last to channels-first permute (`permute(0, 3, 1, 2)`, the layout a
        convolution wants, which copies a strided input itself); a copy or source written in
        place (`add_`, `x[i] = ...`, `+=`, `out=`); `.contiguous()` of a value that already is
        contiguous (eager returns it as is: nothing to save) or that only feeds ops that make
        their input contiguous themselves (`softmax`, norms, `cross_entropy`, convolutions of
        any layout but channels-last: no worse without it, and no better); copies with
        arguments (`memory_format=`); copies in a class's `__init__` or a function that
        initializes weights or buffers (`_init_weights`, `reset_parameters`), which run once
        to build a model (nothing to save per step).

        A `.contiguous()` pays where a use reads the strided view as fast as the copy:
        element-wise ops, reductions, matmuls and linear layers (fusionrt's matmul loads its
        operands through their strides, eager's BLAS reads a transposed matrix, and where it
        cannot it copies the view itself: no worse), data movement (`torch.cat`, `F.pad`,
        `flip`, `index_select`, which copy their input in any layout anyway: a permuted
        attention context concatenated, fusionrt and eager 3 -> 2 writes and kernels), and a
        function or module of the file, or of another file of its package that it imports
        (`analysis.project`) (`self.block(h)`, `self.attn(hidden=h)` by keyword,
        `checkpoint(self.block, h)`; each module of a `ModuleList` called as `self.layers[i](h)`
        or in `for layer in self.layers`, the first of a `Sequential`) whose body reads that
        parameter only with such ops, through views, casts, `rearrange` and names bound to it
        (in a branch too: `if dims == 5: x = rearrange(x, ...)`, its reads followed until the
        name is surely bound anew; a loop over the class's `ModuleList` whose body binds it
        does, a model's stack of layers being never empty), never viewing it with `.view()`,
        writing it in place or storing it, and handing it back (a same-file `DropPath`, the
        identity when not training; `return x.transpose(1, 2)`) only where the call's result is
        read so too (`analysis.layout`; fusionrt 3 -> 1 writes and kernels, eager 4 -> 3, for
        a transposed input to a matmul and an add), or with a convolution that reads the copied
        view as it is (a reassemble stage's 1x1 projection of channels-last tokens permuted
        channels-first). The uses of a copy are those that may run after it: an `if` that
        tests the opposite of the one the copy is made under (`if dims == 3:` after the body of
        `if dims == 2:`, the 2-d and 3-d paths of one module) is not one.

        Also flagged: a `.clone()` written in place at once by an op whose out-of-place form
        keeps the dtype (`x.clone().masked_fill_(m, 0)`, `index_fill_`, `index_add_`,
        `index_copy_`, `index_put_`, `masked_scatter_`, `scatter_`, `scatter_add_`,
        `scatter_reduce_`), or filled (`fill_(v)` of a number, `zero_()`), chained or as the
        statement right after `y = x.clone()` (its arguments not reading `y`): the out-of-place op
        (`x.masked_fill(m, 0)`, `torch.full_like(x, v)`, `torch.zeros_like(x)`) makes the new
        tensor without the copy (a Tacotron decoder's masked outputs: fusionrt 5 -> 4 writes and
        kernels, eager none, whose out-of-place update copies its input as the code did, so such a
        finding says it pays under fusionrt only; a label-smoothing target filled: 3 -> 1 in both).

        Also flagged: a `.contiguous()` of channels-last data permuted channels-first
        (`x.reshape(b, h, w, c).permute(0, 3, 1, 2)`) that only a convolution reads
        (`F.conv2d`, an `nn.Conv2d`, or a layer class named for one, whose first op is its
        convolution: `Conv`, `ConvNormAct`, `DWConv`, `Convolution`, also handed through a
        wrapper: `zero_module(Convolution(...))`), as other uses allow, and tokens `[b, n, c]`
        swapped to `[b, c, n]` (`permute(0, 2, 1)`, `transpose(1, 2)`) that a 1-d convolution
        reads (`F.conv1d`, `nn.Conv1d`), which runs as a channels-last 2-d one: cuDNN and
        oneDNN read that layout as it is (fusionrt and eager: 4 -> 3 writes and kernels for a
        permuted matmul result); a `.clone()` of a module's tensor while nothing but known tensor
        ops runs, none in place, and no attribute or item is assigned, from the copy to its
        last read (Swin's `self.relative_position_index.clone()[:n, :n].reshape(-1)`, read as an
        index in its own statement): no code can write the tensor while the copy lives;
        and a stack only reduced over the dimension it makes (`torch.stack(xs).sum(0)`,
        `torch.mean(torch.stack(xs, -1), dim=-1)`), which copies every tensor for the reduction
        to read them back: adding them writes the result alone (fusionrt: one fused kernel, 4
        -> 1 writes for three computed tensors; eager: fewer bytes, and for more than three
        tensors, or two of a mean, more kernels: n - 1 adds, where the stack and the reduction
        are two). And a `.repeat()` whose counts are 1 but at dimensions of size 1 that an
        `unsqueeze`, a `None` index or the literal 1s of a view just made
        (`mask.unsqueeze(-1).repeat(1, 1, d)`, `torch.arange(n)[None].repeat(b, 1)`,
        `ids.view(1, b, -1).repeat(3, 1, 1)`) or the sizes a module's tensor is built with
        (`self.cls_token.repeat(b, 1, 1)` of `nn.Parameter(torch.zeros(1, 1, dim))`, while only
        known tensor ops run: fusionrt and eager 3 -> 2 writes and kernels before a
        `torch.cat`), of a tensor only read by uses that take any layout, as a `.contiguous()`
        copy's must be (arithmetic, comparisons, `torch.cat`, a
        gather's index): an expand reads the same values without writing them (fusionrt 3 -> 2
        writes and kernels, eager 4 -> 3, for a padding mask repeated over the hidden size).

        A `.clone()` (whose readers may take any layout) is read, and its source too, by a
        module or function call that does not write its argument in place: one of the file or of
        its package whose body writes neither the parameter nor a view of it, nor a container
        holding one (`inputs = [x]; inputs[i] += v` does), nor hands it to code that may, and uses
        it only as a tensor (`signal.audio_data` is an object's); a module the class builds from
        a class the file cannot read (`self.block1 = Conv(...)`, `for block1, attn in self.downs`
        over a `ModuleList`), taken to read its input as a `forward` does, unless built
        `inplace=True` anywhere in its value. Where the callee may hand back what it is given (an
        `nn.Identity` or a dropout in the list, a function returning its parameter or a view of
        it), the call's result is followed as the copy. A U-Net's skip `r = x.clone()` (fusionrt
        and eager 8 -> 7 writes when `x` is a convolution's output; eager only, 14 -> 13, when it
        is element-wise and fuses into the copy) is flagged so: the uses of the source after a
        statement of the body later than the copy binds its name to a new tensor (`x =
        block1(x, t)`, arithmetic, a known op) read that value, not the copied one, and a lambda
        that only reads the name (`default(cond, lambda: torch.zeros_like(x))`) cannot write it,
        nor can a nested helper whose own local has the name (`mean = (m * x).sum(2)` inside it). A
        `torch.zeros_like(x)` reads only its sizes (a mixture of experts' `residual_x =
        x.clone()`), and rows gathered by an index of one dimension or more (a slice of a
        tensor, a mask, `argsort`: `pop[order[:k]].clone()`) are a new tensor no name holds; a
        0-d index (`argmax()`'s) views its row. A `.clone()` stored into a slice of a tensor the
        function made (`shifted[:, 1:] = input_ids[:, :-1].clone()` into `input_ids.new_zeros(...)`,
        the sequence-to-sequence models' `shift_tokens_right`: fusionrt and eager 6 -> 5 and 8 -> 7
        kernels) is not needed either: the store copies the values itself; not where the target
        may overlap a name the copy reads (`t[1:] = t[:-1].clone()`), is a caller's tensor, or is
        no tensor (a dict keeps the copy). And a tensor stacked with itself (`torch.stack([x] *
        n)`) that is only read as a repeat must be (a separator's encoded mixture, stacked per
        speaker only to be multiplied by the masks): an expand of `x.unsqueeze(0)` reads the same
        values without writing `n` copies (no fix: the expand's sizes depend on the rank).
    """
    use_instead = """
        Use the tensor itself (`x`, or `x.detach()` for `x.detach().clone()`).
    """
    pays_in = (FUSIONRT, EAGER)
    yields_to = frozenset({"FL002"})  # a copy feeding a fused reduction: FL002 also moves the later use
    fix_safety = FixSafety.UNSAFE
    fix_notes = """
        The fix drops the copy: `x.clone()` becomes `x`, `x.detach().clone()` and
        `x.clone().detach()` become `x.detach()`, `x.t().contiguous()` becomes `x.t()`, and
        `g = g.clone()` is deleted. It is **unsafe**: the new name is an alias of the source, so
        code the rule cannot see that writes into one (through a view, another alias or a
        callee) now changes the other, and `y is x` tests or `data_ptr()` comparisons change
        their answer; a returned `.contiguous()` copy fails a caller that calls `.view()` on
        the result (`--verify` runs the function, not its callers), and so may a conv layer
        whose code the rule does not read, or a `.view()` of a convolution's output, which is
        channels-last in eager when its input is. `torch.stack([a, b, c]).sum(0)` becomes
        `(a + b + c)` (its mean divided by 3; no fix for a list not written out): the adds
        broadcast where the stack would raise, keep a bool or integer dtype where the sum
        promotes to int64, and round each partial sum in half precision. A repeat becomes an
        expand with -1 for each count of 1 (`.repeat(1, n, 1)` -> `.expand(-1, n, -1)`): the
        counts are read as one per dimension, so where a repeat adds leading dimensions the
        expand raises instead; the expanded tensor shares its elements, so code the rule
        cannot see that writes into it raises too. A copy written in place at once becomes the
        out-of-place op (`x.clone().masked_fill_(m, 0)` -> `x.masked_fill(m, 0)`; `y =
        x.clone()` then `y.fill_(v)` -> `y = torch.full_like(x, v)`): a new tensor with the
        same values and dtype, whose layout may differ from the copy's for a strided `x`.
    """
    training_note = """
        With grad, dropping the copies around a 1-d convolution (the convolution-layer example:
        of its permuted input, and of its permuted output, then written in place) writes more
        under fusionrt: as a training step, every float input requiring grad, 11 -> 14 writes,
        44 -> 56 KiB, 8 -> 11 kernels. The other examples still save in training.
    """
    examples = (
        Example(
            bad="""\
import torch


def centered(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    c = h.clone()
    m = c.sum(-1, keepdim=True)
    return (c - m) * h
""",
            at=((6, 9),),
            fixed="""\
import torch


def centered(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    c = h
    m = c.sum(-1, keepdim=True)
    return (c - m) * h
""",
            call="centered(randn(64, 128), randn(64, 128))",
        ),
        Example(  # `.detach().clone()` keeps `.detach()`
            bad="""\
import torch


def scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    target = h.detach().clone()
    z = torch.relu(target) @ w
    return z + target * h
""",
            at=((6, 14),),
            fixed="""\
import torch


def scores(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    target = h.detach()
    z = torch.relu(target) @ w
    return z + target * h
""",
            call="scores(randn(64, 128), randn(128, 128))",
        ),
        # the unpadded slice of a value the function made, returned: eager saves the copy
        # kernel (3 -> 2 writes and kernels); fusionrt writes the slice either way
        Example(
            bad="""\
import torch


def unpad(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    h = torch.tanh(x @ w)
    return h[:, :, :n].contiguous()
""",
            at=((6, 12),),
            fixed="""\
import torch


def unpad(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    h = torch.tanh(x @ w)
    return h[:, :, :n]
""",
        ),
        # `g` alone holds the gate: writing into it needs no copy (eager: 6 -> 5 kernels)
        Example(
            bad="""\
import torch


def gated(sim: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    gate = torch.relu(sim * 2)
    gate = gate.clone()
    gate[:, 0] = 0.0
    return (gate * sim) @ w
""",
            at=((6, 12),),
            fixed="""\
import torch


def gated(sim: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    gate = torch.relu(sim * 2)
    gate[:, 0] = 0.0
    return (gate * sim) @ w
""",
        ),
        # `.contiguous()` of a transposed view, read by a reduction: no view needs it. It pays in
        # eager only (3 -> 2 writes and kernels): fusionrt reads the transposed input in place and
        # never writes the copy, so it is not a contract pair (the contract checks both places).
        Example(
            bad="""\
import torch


def col_energy(x: torch.Tensor) -> torch.Tensor:
    xt = x.t().contiguous()
    return (xt * xt).sum(-1)
""",
            at=((5, 10),),
            fixed="""\
import torch


def col_energy(x: torch.Tensor) -> torch.Tensor:
    xt = x.t()
    return (xt * xt).sum(-1)
""",
        ),
        # a returned `.contiguous()` of a permuted matmul result that `+=` updated in place: the
        # tensor is still the one the function made (eager: 3 -> 2 writes and kernels; fusionrt
        # writes the permuted sum either way, so it is not a contract pair)
        Example(
            bad="""\
import torch


def predict(h: torch.Tensor, coefs: torch.Tensor) -> torch.Tensor:
    p = torch.matmul(h.permute(1, 2, 0), coefs)
    p = p.permute(2, 0, 1)
    p += h
    return p.contiguous().type_as(h)
""",
            at=((8, 12),),
            fixed="""\
import torch


def predict(h: torch.Tensor, coefs: torch.Tensor) -> torch.Tensor:
    p = torch.matmul(h.permute(1, 2, 0), coefs)
    p = p.permute(2, 0, 1)
    p += h
    return p.type_as(h)
""",
        ),
        # a returned copy of a torch.nn module's output: the module made it (fusionrt and eager: 2 -> 1
        # writes and kernels; not a contract pair: each program would build the module with weights
        # of its own)
        Example(
            bad="""\
import torch


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).transpose(1, 2).contiguous()
""",
            at=((10, 16),),
            fixed="""\
import torch


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).transpose(1, 2)
""",
        ),
        # `.contiguous()` of a transposed view handed to a same-file function that reads it with
        # ops taking any layout (a matmul, an add): fusionrt 3 -> 1 writes and kernels, eager 4 -> 3
        Example(
            bad="""\
import torch


def mixed(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(h @ w) + h


def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.transpose(1, 2).contiguous()
    return mixed(h, w)
""",
            at=((9, 9),),
            fixed="""\
import torch


def mixed(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(h @ w) + h


def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.transpose(1, 2)
    return mixed(h, w)
""",
            call="layer(randn(2, 16, 32), randn(16, 16))",
        ),
        # a copy written in place at once: the out-of-place op makes the new tensor in one kernel
        # (fusionrt: 5 -> 4 writes and kernels for a masked decoder output; eager copies either way)
        Example(
            bad="""\
import torch


def masked(mel: torch.Tensor, w: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = mel @ w
    mask = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    return out.clone().masked_fill_(mask[:, :, None], 0.0) + out
""",
            at=((7, 12),),
            fixed="""\
import torch


def masked(mel: torch.Tensor, w: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = mel @ w
    mask = torch.arange(out.shape[1])[None, :] >= lengths[:, None]
    return out.masked_fill(mask[:, :, None], 0.0) + out
""",
            call="masked(randn(2, 16, 32), randn(32, 32), randn(2).abs() * 16)",
        ),
        # a named copy filled at once: `full_like` writes the value without reading the source
        # (fusionrt and eager: 3 -> 1 writes and kernels)
        Example(
            bad="""\
import torch


def smoothed(logp: torch.Tensor, c: float) -> torch.Tensor:
    target = logp.clone()
    target.fill_(c)
    return target * logp
""",
            at=((5, 14),),
            fixed="""\
import torch


def smoothed(logp: torch.Tensor, c: float) -> torch.Tensor:
    target = torch.full_like(logp, c)
    return target * logp
""",
            call="smoothed(randn(16, 32), 0.1)",
        ),
        # the copy of a conv output that no name holds: written in place, it may be the conv
        # output itself; and the copy of tokens swapped channels-first that the 1-d conv reads as
        # they are (fusionrt 6 -> 4 writes and kernels, eager 7 -> 5)
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def conv_layer(h: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = F.conv1d(h.permute(0, 2, 1).contiguous(), w, padding=1).permute(0, 2, 1).contiguous()
    out.masked_fill_((mask < 0).unsqueeze(-1).expand(out.size()), 0)
    return residual + F.gelu(out)
""",
            at=((6, 11), (6, 20)),
            fixed="""\
import torch
import torch.nn.functional as F


def conv_layer(h: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = F.conv1d(h.permute(0, 2, 1), w, padding=1).permute(0, 2, 1)
    out.masked_fill_((mask < 0).unsqueeze(-1).expand(out.size()), 0)
    return residual + F.gelu(out)
""",
            call="conv_layer(randn(2, 16, 32), randn(2, 16, 32), randn(32, 32, 3), randn(2, 16))",
        ),
        # `.contiguous()` of channels-last tokens permuted channels-first, read by a convolution,
        # which reads that layout as it is (fusionrt and eager: 4 -> 3 writes and kernels)
        Example(
            bad="""\
import torch
import torch.nn.functional as F


def tokens_to_map(h: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    x = (h @ w[:, :, 0, 0]).reshape(2, 8, 8, 16).permute(0, 3, 1, 2).contiguous()
    return F.conv2d(x, w, padding=1) + residual
""",
            at=((6, 9),),
            fixed="""\
import torch
import torch.nn.functional as F


def tokens_to_map(h: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    x = (h @ w[:, :, 0, 0]).reshape(2, 8, 8, 16).permute(0, 3, 1, 2)
    return F.conv2d(x, w, padding=1) + residual
""",
            call="tokens_to_map(randn(2, 64, 16), randn(16, 16, 3, 3), randn(2, 16, 8, 8))",
        ),
        # a stack only summed over its new dimension: the adds fuse into one kernel that writes the
        # sum alone (fusionrt 4 -> 1 writes, 3 -> 1 kernels; eager the same 4 kernels, 4 -> 3 writes)
        Example(
            bad="""\
import torch


def merged(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.tanh(a), b * 2, c]).sum(0)
""",
            at=((5, 12),),
            fixed="""\
import torch


def merged(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (torch.tanh(a) + (b * 2) + c)
""",
            call="merged(randn(64, 128), randn(64, 128), randn(64, 128))",
        ),
        # a padding mask repeated over the hidden size only to be read: an expand does it without
        # a copy (fusionrt 3 -> 2 writes and kernels, eager 4 -> 3)
        Example(
            bad="""\
import torch


def masked(h: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    hidden = h @ w
    m = mask.unsqueeze(-1).repeat(1, 1, hidden.shape[2])
    return hidden * m + m
""",
            at=((6, 9),),
            fixed="""\
import torch


def masked(h: torch.Tensor, w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    hidden = h @ w
    m = mask.unsqueeze(-1).expand(-1, -1, hidden.shape[2])
    return hidden * m + m
""",
            call="masked(randn(2, 16, 32), randn(32, 32), randn(2, 16) > 0)",
        ),
    )
    valid = (
        # the copy protects the source from an in-place write, or the source protects the copy
        """\
import torch


def f(a: torch.Tensor) -> torch.Tensor:
    old = a.clone()
    a.add_(1)
    return old * a


def g(a: torch.Tensor, i: int) -> torch.Tensor:
    b = a.clone()
    b[i] = 0
    return b * 2 + a
""",
        # the copy escapes: returned, stored on self, put in a list, passed to unknown code
        """\
import torch


class Cache(torch.nn.Module):
    def forward(self, x: torch.Tensor, log) -> torch.Tensor:
        self.last = x.clone()
        kept = [x.detach().clone()]
        log(x.clone())
        h = torch.relu(x)
        return h.clone(), kept
""",
        # `.contiguous()` before `.view()`, which needs it; of a value that already is contiguous
        """\
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    xt = x.transpose(1, 2).contiguous()
    flat = xt.view(xt.shape[0], -1)
    h = torch.relu(x).contiguous()
    p = torch.softmax(x.transpose(1, 2).contiguous(), -1)
    return flat * 2, h.sum(-1), p * 2
""",
        # a returned copy of a parameter's data, or of a channels-first permute (a conv's layout);
        # a rebound clone whose original another name still holds
        """\
import torch


def f(x: torch.Tensor, n: int) -> torch.Tensor:
    return x[:, :n].contiguous()


def g(feats: list) -> torch.Tensor:
    return torch.cat(feats, dim=-1).permute(0, 3, 1, 2).contiguous()


def h(sim: torch.Tensor) -> torch.Tensor:
    gate = torch.relu(sim)
    other = gate
    gate = gate.clone()
    gate[0] = 1
    return gate + other
""",
        # a view of the copy kept under another name may be written later; a copy with arguments
        """\
import torch


def f(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    row = y[0]
    row.zero_()
    z = x.clone(memory_format=torch.channels_last)
    return y * 2, z + 1
""",
        # a copy of a value no name holds, still needed: of an expanded view that is written per
        # element; a `.contiguous()` one viewed with `.view()`
        """\
import torch
import torch.nn.functional as F


def f(n: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    ids = torch.arange(n).expand(3, -1).clone()
    ids[0] = 0
    out = F.conv1d(x, w).permute(0, 2, 1).contiguous()
    out.masked_fill_(out > 0, 0)
    return ids, out.view(-1)
""",
        # a same-file callee that views its argument, hands it back, or writes it in place
        """\
import torch


def heads(h: torch.Tensor) -> torch.Tensor:
    return h.view(h.shape[0], -1) * 2


def cleared(h: torch.Tensor) -> torch.Tensor:
    h[0] = 0
    return h


def f(x: torch.Tensor) -> torch.Tensor:
    return heads(x.transpose(1, 2).contiguous()) + cleared(x.transpose(1, 2).contiguous())
""",
        # a copy written in place where the op reads the copy, fills it with a tensor, or has no
        # out-of-place form, or one that promotes the dtype (`add`)
        """\
import torch


def f(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y.masked_fill_(y > 0, 0)
    z = x.clone()
    z.fill_(v)
    return y, z, x.clone().fill_diagonal_(0), x.clone().add_(v)
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        return _COPY.search(text) is not None or _STACK_REPEATED.search(text) is not None \
            or _STACK.search(text) is not None and _REDUCTION.search(text) is not None

    def check(self, scope: Scope) -> Iterator[Violation]:
        if scope.dynamic or _builds_module(scope):
            return
        # `x.clone().detach()` is one copy, reported at the `detach` call that ends it
        inner = {id(site.node.func.value) for site in scope.sites.get("detach", ())}  # type: ignore[attr-defined]
        for key in ("clone", "contiguous", "detach"):
            for site in scope.sites.get(key, ()):
                copy = _copy(scope, site.node, site.statement)
                if copy is None or site.conditional or id(site.node) in inner:
                    continue
                kept, source = copy
                if not scope.is_tensor(source):
                    continue
                written = _written_at_once(scope, site, kept) if key == "clone" else None
                if written is not None:
                    fix, places = written
                    yield Violation(site.node, fix=fix, message=_WRITTEN_AT_ONCE, pays_in=places)
                    continue
                # not `x = x.permute(...).contiguous()` then written in place: that is how index
                # tables are built (a relative position index, from `__init__`), once per model
                rebinds = key != "contiguous" and _rebinds_sole_value(scope, site, source)
                sole = rebinds or _temporary(scope, source)
                if key != "contiguous" and sole:
                    fix = _drop(site) if isinstance(kept, cst.Name) else _fix(site, kept)
                    yield Violation(site.node, fix=fix, message=_SOLE_VALUE)
                    continue
                # not a returned copy of an expanded view: its caller gets memory of its own to
                # write or hand to a kernel (`pos.unsqueeze(0).expand(b, -1).contiguous()`)
                fresh = _fresh(scope, source, site.statement) and not _to_channels_first(scope, source) \
                    and _unviewed(scope, source) is not None
                reading = _Reading(strided=key != "contiguous", returnable=fresh, writable=sole,
                                   convolved=_convolved_as_is(scope, source) if key == "contiguous" else frozenset())
                if not _only_read(scope, site.node, "copy", reading) or not (reading.strided or reading.saves):
                    continue
                if not _source_is_stable(scope, source, site, reading):
                    continue
                if reading.bundled and _lineage_returned(scope, source, site):
                    continue
                yield Violation(site.node, fix=_fix(site, kept), message=_SOLE_VALUE if reading.wrote else None)
        for site in scope.sites.get("repeat", ()):
            expanded = None if site.conditional else _as_expand(scope, site.node)
            if expanded is None:
                continue
            reading = _Reading(strided=False)  # an expanded view: no use may write it or need its layout
            if _only_read(scope, site.node, "copy", reading) and reading.saves \
                    and _source_is_stable(scope, site.node.func.value, site, reading):  # type: ignore[attr-defined]
                yield Violation(site.node, fix=_fix(site, expanded), message=_REPEATED)
        for site in scope.sites.get("stack", ()):
            repeated = None if site.conditional else _stacked_alone(scope, site.node)
            reading = _Reading(strided=False)  # as for a repeat: an expand of it is read instead
            if repeated is not None and _only_read(scope, site.node, "copy", reading) and reading.saves \
                    and _source_is_stable(scope, repeated, site, reading):
                yield Violation(site.node, message=_STACKED_ALONE)
        for site in (*scope.sites.get("sum", ()), *scope.sites.get("mean", ())):
            stack = _stack_reduced_by(scope, site.node)
            if stack is not None:
                yield Violation(stack, fix=_added(site, stack), message=_STACK_REDUCED)


def _written_at_once(
    scope: Scope, site: Site, kept: cst.BaseExpression
) -> tuple[tuple[StatementEdit, ...], tuple[str, ...]] | None:
    """The fix of a copy that an in-place op writes at once, where the op's out-of-place form
    makes the same tensor: ``x.clone().masked_fill_(m, 0)`` becomes ``x.masked_fill(m, 0)``;
    ``y = x.clone()`` followed by ``y.fill_(v)`` becomes ``y = torch.full_like(x, v)``; and where
    it pays. None if the copy is not so written (or the op's arguments read the copy's name).

    Eager runs an out-of-place update as a copy and the update in place, what the code does
    already: that spelling pays under fusionrt only. A fill needs no copy at all."""
    path = _path(scope, site.node)
    if len(path) >= 3 and isinstance(path[0], cst.Attribute) and path[0].value is site.node \
            and isinstance(path[1], cst.Call) and path[1].func is path[0]:
        if isinstance(path[2], cst.Expr):
            return None  # the written copy dropped: dead code rather than a copy to spare
        method = path[0].attr.value
        done = _out_of_place(scope, kept, method, path[1])
        return None if done is None else (_fix(site, done, path[1]), _places(method))
    name = site.statement.name_bound_to(site.node)
    following = next(site.statement.later(), None)
    small = following.simple if following is not None else None
    call = small.value if isinstance(small, cst.Expr) else None
    if name is None or not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                            and isinstance(call.func.value, cst.Name) and call.func.value.value == name):
        return None
    if any(_name_nodes(arg, name) for arg in call.args):
        return None
    method = call.func.attr.value
    done = _out_of_place(scope, kept, method, call)
    statement = site.statement.node
    if done is None or not isinstance(statement, cst.SimpleStatementLine):
        return None
    fix = (StatementEdit(statement, (replace_nodes(statement, {site.node: done}),)),
           StatementEdit(following.node, ()))  # type: ignore[union-attr, arg-type]
    return fix, _places(method)


def _places(method: str) -> tuple[str, ...]:
    """Where dropping the copy before ``method`` pays: a fill's factory needs no copy; an
    update's out-of-place form is a copy and the update in eager, as written."""
    return (FUSIONRT, EAGER) if method in _FILLS else (FUSIONRT,)


def _out_of_place(scope: Scope, tensor: cst.BaseExpression, method: str, call: cst.Call) -> cst.Call | None:
    """What ``<copy of tensor>.<method>(...)`` (``call``) makes, in one op that leaves
    ``tensor`` as it is; None for another method."""
    if method in _FILLS:
        spelling = scope.facts.spelling(_FILLS[method])
        values = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if spelling is None or len(values) != len(call.args) or len(values) != (1 if method == "fill_" else 0) \
                or values and scope.is_tensor(values[0].value):
            return None  # `fill_` of a tensor value: `full_like` takes a number
        return cst.parse_expression(f"{spelling}(x)").with_changes(args=[cst.Arg(tensor), *values])
    if not method.endswith("_") or method[:-1] not in _OUT_OF_PLACE:
        return None
    return call.with_changes(func=cst.Attribute(value=tensor, attr=cst.Name(method[:-1])))


def _as_expand(scope: Scope, call: cst.Call) -> cst.Call | None:
    """``x.unsqueeze(1).expand(-1, n, -1)`` for ``x.unsqueeze(1).repeat(1, n, 1)``: a repeat
    whose counts are literal 1s but at dimensions of size 1 that an ``unsqueeze`` or a ``None``
    index just made, of a tensor; else None. The counts are read as one per dimension; where
    there are more (new leading dimensions), the expand raises rather than differ."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "repeat" or not scope.is_tensor(func.value):
        return None
    counts = [a.value for a in call.args]
    if any(a.keyword is not None or a.star for a in call.args) or not counts:
        return None
    if len(counts) == 1 and isinstance(counts[0], (cst.Tuple, cst.List)):  # `.repeat((1, n, 1))`
        if any(isinstance(e, cst.StarredElement) for e in counts[0].elements):
            return None
        counts = [e.value for e in counts[0].elements]
    units = {d if d >= 0 else len(counts) + d for d in _unit_dims(scope, func.value)}
    sizes = [int_literal(count) for count in counts]
    if not units or any(size != 1 for i, size in enumerate(sizes) if i not in units) \
            or all(sizes[i] == 1 for i in units if i < len(sizes)):
        return None
    args = [cst.Arg(cst.UnaryOperation(cst.Minus(), cst.Integer("1")) if size == 1 else count)
            for size, count in zip(sizes, counts)]
    return call.with_changes(func=func.with_changes(attr=cst.Name("expand")), args=args)


def _unit_dims(scope: Scope, expr: cst.BaseExpression) -> list[int]:
    """The dimensions of size 1 that ``expr`` makes: ``d`` of ``x.unsqueeze(d)``, the places of
    the literal 1s of ``x.view(b, 1, n)`` (or ``reshape``), of the ``None`` entries of
    ``x[:, None]`` (slices and ``None`` only), of the sizes a module's tensor is built with
    (``self.cls_token``); else none."""
    if isinstance(expr, cst.Attribute):
        return _member_unit_dims(scope, expr)
    op = scope.op(expr)
    if op is not None and op[0] == "unsqueeze" and isinstance(expr, cst.Call):
        dims = [a.value for a in expr.args if a.keyword is None or a.keyword.value == "dim"]
        dim = int_literal(dims[-1]) if dims else None
        return [] if dim is None else [dim]
    if op is not None and op[0] in ("view", "reshape") and isinstance(expr, cst.Call) \
            and isinstance(expr.func, cst.Attribute):
        sizes = [a.value for a in expr.args]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [e.value for e in sizes[0].elements]
        return [i for i, size in enumerate(sizes) if int_literal(size) == 1]
    if not isinstance(expr, cst.Subscript) or not scope.is_tensor(expr.value):
        return []
    found = []
    for position, element in enumerate(expr.slice):
        part = element.slice
        if isinstance(part, cst.Index):
            if not (isinstance(part.value, cst.Name) and part.value.value == "None"):
                return []
            found.append(position)
    return found


def _member_unit_dims(scope: Scope, expr: cst.Attribute) -> list[int]:
    """The places of the literal 1s in the sizes that every assignment of ``self.<attr>`` builds
    it with: ``nn.Parameter(torch.zeros(1, 1, dim))``, a factory's sizes (``zeros``, ``randn``,
    ``full``...) or a view's (``torch.linspace(0, 1, d).view(1, 1, d)``); else none."""
    if scope.class_name is None or not (isinstance(expr.value, cst.Name) and expr.value.value == "self"):
        return []
    found: list[int] | None = None
    for assign in scope.facts.member_values(scope.class_name, expr.attr.value):
        dims = _built_unit_dims(scope, assign.value)
        if not dims or found is not None and dims != found:
            return []
        found = dims
    return found or []


def _built_unit_dims(scope: Scope, value: ast.expr) -> list[int] | None:
    """The places of the literal 1s among the sizes ``value`` builds a tensor with (through
    ``nn.Parameter``), None where they are not written out."""
    while isinstance(value, ast.Call) and value.args and scope.facts.canonical(
            dotted_path(ast_view, value.func) or "") in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        value = value.args[0]
    if not isinstance(value, ast.Call) or value.keywords and not all(k.arg in ("dtype", "device", "requires_grad")
                                                                      for k in value.keywords):
        return None
    canonical = scope.facts.canonical(dotted_path(ast_view, value.func) or "") or ""
    if canonical in ("torch.Tensor", "torch.FloatTensor"):  # sizes as arguments; a list is data
        sizes = value.args if all(isinstance(arg, (ast.Constant, ast.Name, ast.Attribute)) for arg in value.args) \
            else []
        return [i for i, size in enumerate(sizes) if isinstance(size, ast.Constant) and size.value == 1] or None
    if canonical.rpartition(".")[0] == "torch" and canonical.rpartition(".")[2] in _FACTORIES:
        sizes = value.args[:1] if canonical == "torch.full" else value.args
    elif isinstance(value.func, ast.Attribute) and value.func.attr in ("view", "reshape"):
        sizes = value.args
    else:
        return None
    if len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)):
        sizes = sizes[0].elts
    if any(isinstance(size, ast.Starred) for size in sizes):
        return None
    return [i for i, size in enumerate(sizes) if isinstance(size, ast.Constant) and size.value == 1]


def _stacked_alone(scope: Scope, call: cst.Call) -> cst.BaseExpression | None:
    """``x`` of ``torch.stack([x] * n)`` (a dimension given or not): one tensor stacked with
    itself, whose copies an expand of ``x.unsqueeze(d)`` reads without writing; else None."""
    if scope.torch_name(call.func) != "torch.stack" or not call.args or call.args[0].keyword is not None:
        return None
    if any(a.star or a.keyword is not None and a.keyword.value not in ("dim",) for a in call.args[1:]):
        return None
    listed = call.args[0].value
    if not (isinstance(listed, cst.BinaryOperation) and isinstance(listed.operator, cst.Multiply)):
        return None
    single = next((side for side in (listed.left, listed.right) if isinstance(side, cst.List)), None)
    count = listed.right if single is listed.left else listed.left
    if single is None or len(single.elements) != 1 or isinstance(single.elements[0], cst.StarredElement) \
            or isinstance(count, cst.List) or scope.is_tensor(count):
        return None
    tensor = single.elements[0].value
    return tensor if scope.is_tensor(tensor) else None


def _stack_reduced_by(scope: Scope, reduction: cst.Call) -> cst.Call | None:
    """The ``torch.stack(xs, d)`` that ``reduction`` alone reads, a ``sum`` or ``mean`` over the
    dimension ``d`` it makes (``torch.stack(xs).sum(0)``, ``torch.mean(torch.stack(xs, -1),
    dim=-1)``) with no other argument; else None. The stack copies every tensor only for the
    reduction to read them back: adding them writes the result alone."""
    op = scope.op(reduction)
    if op is None or op[0] not in ("sum", "mean") or not isinstance(op[2], cst.Call):
        return None
    stack, func = op[2], reduction.func
    rest = list(reduction.args) if isinstance(func, cst.Attribute) and func.value is stack else list(reduction.args[1:])
    if not isinstance(stack.func, cst.Attribute) or scope.torch_name(stack.func) != "torch.stack" or not stack.args:
        return None
    if len(rest) != 1 or rest[0].keyword is not None and rest[0].keyword.value not in ("dim", "axis"):
        return None
    stacked = [a for a in stack.args[1:] if a.keyword is None or a.keyword.value == "dim"]
    if len(stack.args) - 1 != len(stacked) or stack.args[0].keyword is not None or stack.args[0].star:
        return None
    made = int_literal(stacked[0].value) if stacked else 0
    return stack if made is not None and made == int_literal(rest[0].value) else None


def _added(site: Site, stack: cst.Call) -> tuple[StatementEdit, ...] | None:
    """``torch.stack([a, b, c]).sum(0)`` (the reduction at ``site``) becomes ``(a + b + c)``, its
    mean ``(a + b + c) / 3``; none for a list that is not written out."""
    statement, listed, reduction = site.statement.node, stack.args[0].value, site.node
    if not isinstance(statement, cst.SimpleStatementLine) or not isinstance(listed, (cst.List, cst.Tuple)):
        return None
    if not listed.elements or any(isinstance(e, cst.StarredElement) for e in listed.elements):
        return None
    terms = [_operand(e.value) for e in listed.elements]
    total: cst.BaseExpression = terms[0]
    for term in terms[1:]:
        total = cst.BinaryOperation(total, cst.Add(), term)
    name = reduction.func.attr.value if isinstance(reduction.func, cst.Attribute) else ""
    if name == "mean":
        total = cst.BinaryOperation(total.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), cst.Divide(),
                                    cst.Integer(str(len(terms))))
    total = total.with_changes(lpar=[cst.LeftParen(), *reduction.lpar], rpar=[*reduction.rpar, cst.RightParen()])
    return (StatementEdit(statement, (replace_nodes(statement, {reduction: total}),)),)


def _operand(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` as an operand of ``+``: parenthesized unless it binds tighter."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _builds_module(scope: Scope) -> bool:
    """A class's ``__init__``, or a function that initializes weights or buffers
    (``_init_weights``, ``reset_parameters``, ``init_non_persistent_buffers``): it runs once, to
    build a model, so a copy there costs nothing per step."""
    if not isinstance(scope.node, cst.FunctionDef):
        return False
    name = scope.node.name.value
    return name == "__init__" and scope.class_name is not None or _INITIALIZES.fullmatch(name) is not None


def _copy(scope: Scope, call: cst.Call, at: StatementRef) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(what the copy is replaced by, the tensor it copies) for a copy without arguments, in the
    statement ``at``."""
    if call.args and not (scope.torch_name(call.func) == "torch.clone" and len(call.args) == 1):
        return None
    func = call.func
    if scope.torch_name(func) == "torch.clone":
        if call.args[0].keyword is not None or call.args[0].star:
            return None
        return call.args[0].value, call.args[0].value
    if not isinstance(func, cst.Attribute):
        return None
    receiver, name = func.value, func.attr.value
    if name == "detach":  # `x.clone().detach()`
        if not (is_method_call(receiver, "clone") and not receiver.args):  # type: ignore[union-attr]
            return None
        source = receiver.func.value  # type: ignore[union-attr]
        return _detached(source), source
    if name == "clone":
        if is_method_call(receiver, "detach"):  # `x.detach().clone()`
            return receiver, receiver.func.value  # type: ignore[union-attr]
        return receiver, receiver
    if name == "contiguous" and _strided_at(scope, receiver, at):
        return receiver, receiver
    return None


def _strided_at(scope: Scope, expr: cst.BaseExpression, at: StatementRef) -> bool:
    """Is ``expr`` surely strided at ``at``: a strided view, a name holding one, or such a value
    squeezed or unsqueezed (``start.squeeze(-1)`` of a piece of ``logits.split(1, dim=-1)``),
    cast or detached (``x.t().float()``: a cast keeps the strides of a dense input)?"""
    op = scope.op(expr)
    keeps = op is not None and (op[0] in _KEEP_STRIDES or op[0] in MAY_ALIAS and op[0] != "contiguous")
    if keeps and isinstance(expr, cst.Call) and any(a.keyword is not None and a.keyword.value == "memory_format"
                                                     for a in expr.args):
        return False  # `.to(memory_format=...)` sets the layout
    if keeps and op[2] is not None:
        return _strided_at(scope, op[2], at)
    return _strided(scope, expr) or _strided_name(scope, expr, at)


def _strided_name(scope: Scope, expr: cst.BaseExpression, at: StatementRef) -> bool:
    """A name that surely holds a strided view at ``at``: ``p = p.permute(3, 0, 1, 2)`` in a
    statement before it in its block, with only in-place updates of ``p`` between (``p += x``
    keeps the layout)."""
    if not isinstance(expr, cst.Name):
        return False
    for earlier in at.earlier():
        small = earlier.simple
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value == expr.value:
            continue
        if expr.value not in names_of(earlier.node)[1]:
            if not isinstance(earlier.node, cst.SimpleStatementLine):
                return False  # a nested block may rebind it
            continue
        assigned = _target_and_value(small)
        if assigned is None:
            return False
        target, value = assigned
        if isinstance(target, (cst.Tuple, cst.List)):
            return _inner_split(scope, value) is not None
        return isinstance(target, cst.Name) and target.value == expr.value and _strided(scope, value)
    return False


def _inner_split(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor that ``expr`` splits into pieces along a dimension other than the first
    (``x.split(1, dim=-1)``, ``torch.chunk(x, 2, 2)``, ``x.unbind(-1)``), whose pieces are
    strided views of it; else None."""
    op = scope.op(expr)
    if op is None or op[0] not in _SPLITS or op[2] is None or not isinstance(expr, cst.Call):
        return None
    positional = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
    if isinstance(expr.func, cst.Attribute) and expr.func.value is op[2]:
        positional = [op[2], *positional]  # `x.split(...)` as `torch.split(x, ...)`
    dims = [arg.value for arg in expr.args if arg.keyword is not None and arg.keyword.value == "dim"]
    dim_at = 1 if op[0] == "unbind" else 2
    dim = dims[0] if dims else positional[dim_at] if len(positional) > dim_at else None
    if isinstance(dim, cst.UnaryOperation) and isinstance(dim.operator, cst.Minus):
        dim = dim.expression  # a negative dimension counts from the last, never the first of a matrix
    return op[2] if isinstance(dim, cst.Integer) and dim.evaluated_value != 0 else None


def _detached(source: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=source, attr=cst.Name("detach")))


def _strided(scope: Scope, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a view that leaves its tensor non-contiguous (``x.t()``, ``x.permute(...)``, ``x.T``,
    ``x[:, :n]``)?"""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in VIEW_ATTRIBUTES and scope.is_tensor(expr.value)
    if isinstance(expr, cst.Subscript):
        return scope.is_tensor(expr.value) and _narrows_inner_dim(expr)
    op = scope.op(expr)
    return op is not None and op[0] in _STRIDED


def _narrows_inner_dim(subscript: cst.Subscript) -> bool:
    """``x[:, :n]``, ``x[..., 1:]``: a bounded slice past the first dimension (``x[:n]`` stays contiguous)."""
    for position, element in enumerate(subscript.slice):
        part = element.slice
        if isinstance(part, cst.Index):
            if not isinstance(part.value, cst.Ellipsis):
                return False  # an integer or tensor index: not a plain slice
        elif position > 0 and any(bound is not None for bound in (part.lower, part.upper, part.step)):
            return True
    return False


def _fresh(scope: Scope, expr: cst.BaseExpression, at: StatementRef | None) -> bool:
    return _origin(scope, expr, at) == _MADE


_MADE, _SHARED, _INDEX = "made", "shared", "index"
# torch.nn modules that may return their input or a view of it.
_MAY_HAND_BACK = ("Identity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "Flatten", "Unflatten")
# Tensors over memory that something else holds (a NumPy array, a buffer): writes through either show in the other.
_SHARES_MEMORY = frozenset({"from_numpy", "as_tensor", "asarray", "frombuffer", "from_dlpack"})
_INTEGER_TYPES = frozenset({"long", "int", "short", "bool", "int64", "int32", "int16", "int8", "uint8"})


def _origin(scope: Scope, expr: cst.BaseExpression, at: StatementRef | None, seen: frozenset[str] = frozenset()) -> str:
    """Where the tensor that ``expr`` views comes from: made by the function (an op result, a
    torch.nn module's output, a gather, a copy, what a same-file function that makes its result
    returns), so that no caller holds it; shared (a parameter, an attribute, the result of
    an unknown call); or an index tensor (cast to an integer type), whose layout is often what
    its users expect (``edge_index.t().contiguous()``). Data movement keeps its first operand's type."""
    while True:
        if isinstance(expr, cst.Subscript):
            if any(isinstance(e.slice, cst.Index) and scope.is_tensor(e.slice.value) for e in expr.slice):
                return _MADE  # indexing by a tensor gathers into a new tensor
            expr = expr.value
            continue
        if isinstance(expr, cst.Call) and _makes_output(scope, expr):
            return _MADE
        op = scope.op(expr) or _module_op(scope, expr)  # `self.fc(x)` of an `nn.Linear` makes a tensor
        if op is None:
            break
        name, kind, operand = op
        if name in _SHARES_MEMORY:
            return _SHARED
        if name in _INTEGER_TYPES or (name == "to" and _integer_type_argument(expr)):
            return _INDEX
        if name == "contiguous" and operand is not None and _strided(scope, operand):
            return _MADE
        if kind == VIEW or name in MAY_ALIAS:
            if operand is None:
                return _SHARED
            expr = operand
            continue
        if name in READS_INTO_NEW:
            if isinstance(operand, (cst.List, cst.Tuple)):
                operand = operand.elements[0].value if operand.elements else None
            return _INDEX if operand is not None and _origin(scope, operand, at, seen) == _INDEX else _MADE
        if kind is None:
            if not (isinstance(expr, cst.Call) and scope.torch_name(expr.func) and scope.is_tensor(expr)):
                return _SHARED  # a tensor method the tables do not know
            if operand is not None and scope.is_tensor(operand):
                expr = operand  # a torch function the tables do not know may return its input
                continue
        return _SHARED if name.endswith("_") else _MADE
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return _MADE  # `-dist(q, k)`: an operator makes a new value, whatever its operands are
    if isinstance(expr, cst.Call):  # `self.qa_classifier(h)`: a same-file module or function
        callee = scope.facts.callee(scope.class_name, cst_view, expr.func) or _super_callee(scope, expr.func)
        return _MADE if callee is not None and returns_new(scope.facts, *callee) else _SHARED
    if not isinstance(expr, cst.Name):
        return _SHARED
    name = expr.value
    if name in seen:
        return _MADE  # a name met again: its other values decide
    if name in scope.escaped:
        return _SHARED
    # a parameter rebound before `at` (`x = self.fc(x)`) holds what the assignment made
    reaching = reaching_assignment(at, name, out_of_ifs=True) if at is not None else None
    if reaching is not None:  # its value's reads of `name` read what it held before
        return _origin(scope, reaching[1], reaching[0], seen)
    entry = None
    if name in scope.params or name in scope.typed or name in scope.untyped:
        entry = _rebound_on_entry(scope, name, at)
        if entry is None:
            return _SHARED
    values = []
    parents = _index(scope).parents
    for target, value in scope.assignments:
        if entry is not None and (_body_position(scope, value) or 0) <= entry[0]:
            continue  # the parameter's first binding anew is judged below; none before it reaches `at`
        if isinstance(target, cst.Name):
            if target.value == name and not isinstance(parents.get(id(value)), cst.AugAssign):
                values.append(value)  # a tensor's `+=` writes in place: the tensor stays where it came from
        elif name in bound_names(target):
            whole = _split_tensor(scope, value)
            if whole is None:
                return _SHARED  # unpacked: its value is unknown
            values.append(whole)  # a piece of a split is a view of the tensor split
    if not values or any(name in bound_names(target) for target, _ in scope.loops):
        return _SHARED
    origins = {_origin(scope, value, None, seen | {name}) for value in values}
    if entry is not None:  # its reads of `name` read the argument
        origins.add(_origin(scope, entry[1], None, seen))
    return _INDEX if _INDEX in origins else _MADE if origins == {_MADE} else _SHARED


def _makes_output(scope: Scope, call: cst.Call) -> bool:
    """``self.conv(x)`` of an ``nn.ConvTranspose1d``, ``self.embedding(ids)``, ``F.unfold(x, k)``:
    a ``torch.nn`` module or function the op tables do not know, which writes its output anew
    (not an identity, a dropout that is one when not training, or a flatten, which may view
    its input)."""
    if scope.torch_name(call.func) in ("torch.nn.functional.unfold", "torch.nn.functional.fold"):
        return True  # im2col, not the view `Tensor.unfold`
    func = call.func
    if scope.class_name is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                        and func.value.value == "self"):
        return False
    built = scope.facts.member_values(scope.class_name, func.attr.value)
    return bool(built) and all(_builds_new_output(scope, assign.value) for assign in built)


def _builds_new_output(scope: Scope, value: ast.expr) -> bool:
    """Does ``value`` (assigned to a member) build a ``torch.nn`` module whose call writes a new
    tensor (``nn.ConvTranspose1d(...)``; not ``nn.Identity()`` or ``nn.ReLU(inplace=True)``)?"""
    if not isinstance(value, ast.Call) or built_in_place(value):
        return False
    canonical = scope.facts.canonical(dotted_path(ast_view, value.func) or "") or ""
    module, _, name = canonical.rpartition(".")
    return module.startswith("torch.nn") and name[:1].isupper() and not name.endswith(_MAY_HAND_BACK) \
        and name not in ("Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "Buffer")


def _rebound_on_entry(scope: Scope, name: str, at: StatementRef | None
                      ) -> tuple[int, cst.BaseExpression] | None:
    """(its index, the value) of the first plain statement of the function's own body that
    binds the parameter ``name`` anew before the one that holds ``at`` (``x = self.norm1(x)``
    first, then branches that rebind it again); None if there is none. From there on it is a
    local: what the caller passed reaches ``at`` only through that value."""
    position = _body_position(scope, at.node) if at is not None else None
    if position is None:
        return None
    for index, statement in enumerate(scope.node.body.body[:position]):  # type: ignore[union-attr]
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
                and _rebinds(statement.body[0], name):
            return index, _target_and_value(statement.body[0])[1]  # type: ignore[index]
    return None


def _super_callee(scope: Scope, func: cst.BaseExpression) -> tuple[str, str] | None:
    """(class, method) of ``super().forward`` in a method of a class whose same-file base (or
    one of its bases) defines that method."""
    if scope.class_name is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)):
        return None
    inner = func.value
    if not (isinstance(inner.func, cst.Name) and inner.func.value == "super" and not inner.args):
        return None
    method = func.attr.value
    return next(((base, method) for base in scope.facts.same_file_bases(scope.class_name)
                 if scope.facts.has_method(base, method)), None)


def _split_tensor(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``x.split(...)``, ``torch.chunk(x, ...)``, ``x.unbind()``: the tensor whose views the pieces are."""
    op = scope.op(expr)
    return op[2] if op is not None and op[0] in _SPLITS else None


def _lineage_returned(scope: Scope, source: cst.BaseExpression, site: Site) -> bool:
    """Does a ``return`` of the function read a name whose tensor shares memory with the copied
    one (``logits`` for ``start.squeeze(-1)`` of ``start, end = logits.split(1, -1)``)? Then
    dropping a copy handed out in a record would hand out two views of one tensor. Pieces of one
    split are disjoint (``end`` may go out with ``start``); the name the copy's own statement
    rebinds holds the copy from there on."""
    mine = _lineage(scope, source)
    mine.pop(_rebound_name(site) or "", None)
    for statement in _returns(scope):
        for name in _names_read(statement, site.node):
            theirs = _lineage(scope, cst.Name(name))
            for shared, via in theirs.items():
                if shared in mine and (mine[shared] is None or mine[shared] is not via):
                    return True
    return False


def _lineage(scope: Scope, expr: cst.BaseExpression) -> dict[str, cst.CSTNode | None]:
    """The names that hold the tensor ``expr`` views, each with the split whose piece leads to
    it (None: reached whole)."""
    found: dict[str, cst.CSTNode | None] = {}
    todo: list[tuple[cst.BaseExpression, cst.CSTNode | None]] = [(expr, None)]
    while todo:
        expr, via = todo.pop()
        expr = _viewed(scope, expr)
        if not isinstance(expr, cst.Name) or expr.value in found:
            continue
        found[expr.value] = via
        for target, value in scope.assignments:
            if expr.value in bound_names(target):
                whole = None if isinstance(target, cst.Name) else _split_tensor(scope, value)
                todo.append((value, via) if whole is None else (whole, value))
    return found


def _viewed(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` of ``x.t()``, ``x[:, 0]``, ``x.float()``: what a view, an index or a cast may alias."""
    while True:
        op = scope.op(expr)
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif op is not None and op[2] is not None and (op[1] == VIEW or op[0] in MAY_ALIAS):
            expr = op[2]
        else:
            return expr


def _names_read(node: cst.CSTNode, copy: cst.CSTNode) -> Iterator[str]:
    """The names ``node`` reads, outside the copy itself (``return Out(k=k.contiguous())``)."""
    if node is copy or isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
        return
    if isinstance(node, cst.Name):
        yield node.value
    for child in children(node):
        named = isinstance(node, cst.Attribute) and child is node.attr or isinstance(node, cst.Arg) and child is node.keyword
        if not named:
            yield from _names_read(child, copy)


def _rebound_name(site: Site) -> str | None:
    """The one name the copy's statement assigns (``x = x.t().contiguous()``), if any."""
    assigned = _target_and_value(site.statement.simple)
    return assigned[0].value if assigned is not None and isinstance(assigned[0], cst.Name) else None


@per_scope
def _returns(scope: Scope) -> list[cst.Return]:
    found = {id(node): node for node in _index(scope).parents.values() if isinstance(node, cst.Return)}
    return list(found.values())


def _integer_type_argument(call: cst.BaseExpression) -> bool:
    """``x.to(torch.int64)``, ``x.to(dtype=torch.long)``."""
    if not isinstance(call, cst.Call):
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "dtype":
            continue
        if isinstance(arg.value, cst.Attribute) and arg.value.attr.value in _INTEGER_TYPES:
            return True
    return False


def _to_channels_first(scope: Scope, expr: cst.BaseExpression) -> bool:
    """``x.permute(0, 3, 1, 2)``: channels-last to channels-first, the layout a convolution wants.
    Its caller most likely convolves it, and a convolution copies a strided input itself, so a
    returned copy of it is moved by dropping it, not saved."""
    return _channels_first_rank(scope, expr) >= 4


def _convolved_as_is(scope: Scope, expr: cst.BaseExpression) -> frozenset[str]:
    """The convolutions that read the view ``expr`` as it is: any, of channels-last data
    permuted channels-first (cuDNN's and oneDNN's channels_last formats); a 1-d one, of
    tokens ``[b, n, c]`` swapped to ``[b, c, n]`` (``permute(0, 2, 1)``, ``transpose(1, 2)``),
    which it runs as a channels-last 2-d convolution."""
    rank = _channels_first_rank(scope, expr)
    if rank >= 4:
        return _CONVOLUTIONS
    op = scope.op(expr)
    if rank == 3 or op is not None and op[0] == "transpose" and _dims(scope, expr) in ([1, 2], [2, 1]):
        return frozenset({"conv1d", "conv_transpose1d"})
    return frozenset()


def _channels_first_rank(scope: Scope, expr: cst.BaseExpression) -> int:
    """n for ``x.permute(0, n - 1, 1, ..., n - 2)``, channels-last to channels-first; else 0."""
    op = scope.op(expr)
    if op is None or op[0] != "permute":
        return 0
    dims = _dims(scope, expr)
    n = len(dims)
    return n if n >= 3 and dims == [0, n - 1, *range(1, n - 1)] else 0


def _dims(scope: Scope, call: cst.BaseExpression) -> list[int | None]:
    """The literal dimensions a ``permute`` or ``transpose`` call names (None where not literal)."""
    if not isinstance(call, cst.Call):
        return []
    args = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if len(args) == 1 and isinstance(args[0], (cst.Tuple, cst.List)):
        args = [element.value for element in args[0].elements]
    if isinstance(call.func, cst.Name) or scope.torch_name(call.func) is not None:
        args = args[1:]  # `torch.permute(x, dims)`
    return [int_literal(arg) for arg in args]


def _unviewed(scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor that ``expr`` views or casts (``x`` of ``x.t()[0].float()``), itself if none
    or where indexing by a tensor gathers anew (``pop[order[:k]]``); None where a view on the way
    makes elements share memory (``expand``: a copy of it may be written per element, the view
    may not)."""
    while True:
        op = scope.op(expr)
        if isinstance(expr, cst.Subscript):
            if any(isinstance(e.slice, cst.Index) and _gathers(scope, e.slice.value) for e in expr.slice):
                return expr
            expr = expr.value
        elif op is not None and op[2] is not None and (op[1] == VIEW or op[0] in MAY_ALIAS):
            if op[0] in _OVERLAPPING:
                return None
            expr = op[2]
        else:
            return expr


def _gathers(scope: Scope, index: cst.BaseExpression) -> bool:
    """Is ``index`` surely a tensor of one dimension or more, so that indexing by it gathers into a
    new tensor: a slice of a tensor (``order[:k]``), a comparison (a mask), ``argsort``,
    ``randperm``, ``arange`` or ``nonzero``? A 0-d index (``argmax()``'s) views its row instead."""
    if isinstance(index, cst.Comparison):
        return True
    if isinstance(index, cst.Subscript):
        return scope.is_tensor(index.value) and any(isinstance(e.slice, cst.Slice) for e in index.slice)
    op = scope.op(index)
    name = op[0] if op is not None else (scope.torch_name(index.func) or "").rpartition(".")[2] \
        if isinstance(index, cst.Call) else ""
    return name in ("argsort", "randperm", "arange", "nonzero")


def _temporary(scope: Scope, source: cst.BaseExpression) -> bool:
    """Does no name hold the copied tensor: a value the copy's own expression makes
    (``self.conv(x).permute(0, 2, 1)``, ``(a + b)[:, 0]``)? Whatever is done with the copy may
    then be done with it."""
    root = _unviewed(scope, source)
    return root is not None and not isinstance(root, (cst.Name, cst.Attribute)) and _origin(scope, root, None) == _MADE


def _rebinds_sole_value(scope: Scope, site: Site, source: cst.BaseExpression) -> bool:
    """``g = g.clone()``, ``g = g.t().clone()``, where ``g`` alone holds a tensor the function
    made: once ``g`` is rebound, nothing else reaches the original, so whatever is done with the
    copy may be done with it."""
    assigned = _target_and_value(site.statement.simple)
    if assigned is None or assigned[1] is not site.node:
        return False
    target, root = assigned[0], _unviewed(scope, source)
    if not (isinstance(root, cst.Name) and isinstance(target, cst.Name) and target.value == root.value):
        return False
    if scope.dynamic or root.value in scope.escaped:
        return False
    reaching = reaching_assignment(site.statement, root.value, out_of_ifs=True, unread=True)
    return reaching is not None and _fresh(scope, reaching[1], reaching[0])


def _source_is_stable(scope: Scope, source: cst.BaseExpression, site: Site, reading: _Reading) -> bool:
    """Is the copied tensor a fresh value, or a local name only read in the function while the
    copy lives? A name of a module attribute (``self.x``) may be written by other code: not
    stable. What a statement of the function's body before the copy's own does with the name
    cannot write the copied value after it is copied, unless it keeps it under another name;
    what one does after the copy's last read cannot change what the copy was used for."""
    root = _viewed(scope, source)  # `x` of `x.t()`: written in place while the copy lives, no stable source
    name = root_name(root)
    if name is None:
        return not isinstance(root, cst.Attribute)
    if name == "self":  # no code but known tensor ops runs while the copy lives: none can write it
        if not reading.named:
            return _only_tensor_ops(scope, site.statement.node)
        start, end = _body_position(scope, site.node), reading.dead_after
        return start is not None and end is not None and all(
            _only_tensor_ops(scope, statement) for statement in scope.node.body.body[start:end + 1])  # type: ignore[union-attr]
    if name in scope.escaped and _captured_to_write(scope, name):
        return False
    copied_at = _body_position(scope, site.node)
    # `x = x.t().contiguous()` in the function's own body: from there on `x` holds the copy,
    # whose uses are the copy's to judge
    rebound = _rebound_name(site) == name
    last = copied_at if copied_at is not None and rebound else None
    if last is None and copied_at is not None:
        last = reading.dead_after if reading.named else copied_at
    # in a nested block too (a loop's body), the statements after the copy's own read the copy
    # under the name, or a later value
    holding_copy = {id(node) for later in site.statement.later() for node in _name_nodes(later.node, name)} \
        if rebound else set()
    for use in _uses(scope, name):
        position = _body_position(scope, use)
        if last is not None and position is not None and position > last or site.node in _path(scope, use) \
                or id(use) in holding_copy or _bound_anew_before(scope, name, use, copied_at):
            continue  # after the copy's life, the copy itself, or a later value of the name
        earlier = copied_at is not None and position is not None and position < copied_at
        if earlier and (not _aliased(scope, use) or _made_anew_between(scope, name, position, copied_at)
                        or _alias_dies(scope, use, position, copied_at)):
            continue
        if not _only_read(scope, use, "source"):
            return False
    if any(_called_while_copy_lives(scope, owner, copied_at, last) for owner in _owners(scope, name)):
        return False
    return name not in scope.inplace or _written_only_before(scope, name, copied_at, last)


def _bound_anew_before(scope: Scope, name: str, use: cst.Name, copied_at: int | None) -> bool:
    """Does a statement ``name = <new tensor>`` (an op's result, arithmetic, a module that makes
    its output: ``x = block1(x, t)``) run before ``use`` and after the copy's statement of the
    function's body (``copied_at``): earlier in ``use``'s own block or one around it, within a
    later statement of the body? Then ``use`` reads that value, not the copied one (a U-Net's
    ``r = x.clone()``, then ``x`` rebound in a loop over its blocks and appended to a list)."""
    if copied_at is None:
        return False
    parents = _index(scope).parents
    node: cst.CSTNode = use
    while id(node) in parents:
        parent = parents[id(node)]
        if isinstance(parent, cst.IndentedBlock) and node in parent.body:
            for statement in parent.body[:parent.body.index(node)]:  # type: ignore[arg-type]
                small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) \
                    and len(statement.body) == 1 else None
                if _rebinds(small, name) and (_body_position(scope, statement) or -1) > copied_at \
                        and _new_value(scope, small.value):  # type: ignore[union-attr]
                    return True
        node = parent
    return False


def _new_value(scope: Scope, value: cst.BaseExpression) -> bool:
    """Is ``value`` a tensor made anew: arithmetic, a known op that is no view or cast, a module
    or function that makes its output (``_hands_back_new``)?"""
    if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    op = scope.op(value) or _module_op(scope, value)
    if op is not None:
        return op[1] is not None and op[1] != VIEW and op[0] not in MAY_ALIAS and not op[0].endswith("_")
    return isinstance(value, cst.Call) and all(_hands_back_new(scope, value, arg) for arg in value.args)


def _captured_to_write(scope: Scope, name: str) -> bool:
    """May code other than the function's own statements write the tensor ``name`` holds: a
    nested function or class that reads the name, a ``global``/``nonlocal`` one, or a lambda that
    does more with it than read it (``lambda: torch.zeros_like(x)``, a default's factory, only
    reads)?"""
    todo: list[cst.CSTNode] = list(children(scope.node.body))  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.FunctionDef) and _binds_locally(node, name):
            continue  # `mean = ...` in a nested helper: a name of its own
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Global, cst.Nonlocal)):
            if any(isinstance(inner, cst.Name) and inner.value == name for inner in _walk(node)):
                return True
            continue
        if isinstance(node, cst.Lambda):
            parents = {id(child): parent for parent in _walk(node.body) for child in children(parent)}
            if any(not _read_in_lambda(scope, use, parents) for use in _name_nodes(node.body, name)):
                return True
            continue
        todo += children(node)
    return False


def _binds_locally(function: cst.FunctionDef, name: str) -> bool:
    """Is ``name`` a local of ``function`` (a parameter, or bound in its own body, neither
    ``global`` nor ``nonlocal``), so that its uses there are not the enclosing function's?"""
    params = function.params
    if name in {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}:
        return True
    bound = False
    for node in _walk(function.body):
        if isinstance(node, (cst.Global, cst.Nonlocal)) and any(item.name.value == name for item in node.names):
            return False
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        bound |= isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.For, cst.AugAssign)) and name in bound_names(
            node.target)
    return bound


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        todo += children(node)


def _read_in_lambda(scope: Scope, use: cst.Name, parents: dict[int, cst.CSTNode]) -> bool:
    """Is ``use`` (in a lambda, whose nodes' parents are ``parents``) only read: metadata,
    arithmetic, or the operand of a known op that is not in place?"""
    parent = parents.get(id(use))
    if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget)):
        return True
    if isinstance(parent, cst.Attribute) and parent.value is use:
        return parent.attr.value in METADATA
    call = parents.get(id(parent)) if isinstance(parent, cst.Arg) else None
    if not isinstance(call, cst.Call) or any(a.keyword is not None and a.keyword.value == "out" for a in call.args):
        return False
    if _like_factory(scope, call):
        return True  # `torch.zeros_like(x)`: its sizes, dtype and device only
    op = scope.op(call)
    return op is not None and op[1] is not None and not op[0].endswith("_")


def _like_factory(scope: Scope, call: cst.Call) -> bool:
    """``torch.zeros_like(x)``, ``torch.randn_like(x)``: a new tensor shaped like its first
    argument, whose values it never reads."""
    name = scope.torch_name(call.func) or ""
    return name.startswith("torch.") and name.endswith("_like") and name.count(".") == 1


def _only_tensor_ops(scope: Scope, statement: cst.CSTNode) -> bool:
    """Does ``statement`` call nothing but tensor ops the tables know, none in place, and assign
    no attribute or item? Then no other code runs while a copy that lives through it lives (a
    buffer's ``self.index.clone()[:n, :n]`` read as an index), and nothing can write the
    module's tensor it copied."""
    todo = [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Call) and (scope.op(node) is None or scope.op(node)[0].endswith("_")):  # type: ignore[index]
            return False
        if isinstance(node, (cst.AssignTarget, cst.AugAssign)) and not isinstance(node.target, cst.Name):
            return False
        todo += children(node)
    return True


def _alias_dies(scope: Scope, use: cst.Name, start: int | None, end: int | None) -> bool:
    """``shifted = x`` in a branch, then ``shifted = window_reverse(...)`` before the copy: is
    the other name that ``use`` binds the tensor to bound anew by a plain statement of the
    function's body after ``start`` and before ``end``, and only read until then? Then nothing
    holds the tensor under that name while the copy lives."""
    path = _path(scope, use)
    assign = next((node for node in path if isinstance(node, (cst.Assign, cst.AnnAssign))), None)
    assigned = _target_and_value(assign)
    if start is None or end is None or assigned is None or not isinstance(assigned[0], cst.Name):
        return False
    alias = assigned[0].value
    if alias in scope.escaped:
        return False
    for position, statement in enumerate(scope.node.body.body[start + 1:end], start + 1):  # type: ignore[union-attr]
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if _rebinds(small, alias):
            reads = [other for other in _uses(scope, alias) if start <= (_body_position(scope, other) or -1) <= position]
            return all(_only_read(scope, other, "source") for other in reads)
    return False


def _made_anew_between(scope: Scope, name: str, start: int | None, end: int | None) -> bool:
    """Does a statement of the function's body after ``start`` and before ``end`` bind ``name``
    to a value the function makes (``h = self.norm(h)``)? A name bound to its value before
    (``residual = h``) then holds another tensor than the one copied at ``end``."""
    if start is None or end is None:
        return False
    for statement in scope.node.body.body[start + 1:end]:  # type: ignore[union-attr]
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if _rebinds(small, name) and _makes_new(scope, small.value):  # type: ignore[union-attr]
            return True
    return False


def _makes_new(scope: Scope, value: cst.BaseExpression) -> bool:
    """Is ``value`` a new tensor the function makes: not a view, an index or an op that may hand
    back its input (``self.dropout(h)`` is ``h`` in eval mode, ``h.float()`` may be ``h``)?"""
    op = scope.op(value) or _module_op(scope, value)
    if isinstance(value, cst.Subscript) or op is not None and (op[1] == VIEW or op[0] in MAY_ALIAS):
        return False
    return _fresh(scope, value, None)


def _owners(scope: Scope, name: str) -> set[str]:
    """The objects ``name``'s tensor was taken from (``cache`` of ``ctx = cache.get_state(i)``,
    ``ctx = cache.state`` or ``ctx = state["h"]``): they still hold it, and a method of theirs,
    or a function handed them, may write it in place (a cache's ``update``)."""
    found: set[str] = set()
    for target, value in scope.assignments:
        if not (isinstance(target, cst.Name) and target.value == name):
            continue
        todo = [value]
        while todo:
            expr = todo.pop()
            if isinstance(expr, cst.IfExp):
                todo += [expr.body, expr.orelse]
                continue
            taken = expr.func if isinstance(expr, cst.Call) else expr
            if not isinstance(taken, (cst.Attribute, cst.Subscript)) or scope.is_tensor(taken.value):
                continue  # a tensor's own views and methods: its uses decide
            owner = root_name(taken.value)
            if owner == "self" and taken is not expr:
                continue  # the module's own computation (`self.norm(h)`, `self.altup.correct(p)`)
            if owner is not None and owner not in scope.facts.imported:
                found.add(owner)
    return found


def _called_while_copy_lives(scope: Scope, owner: str, copied_at: int | None, last: int | None) -> bool:
    """Is a method of ``owner`` called, or ``owner`` handed to a call, after the copy's statement
    (``copied_at``) and up to its last use (``last``)?"""
    for use in _uses(scope, owner):
        position = _body_position(scope, use)
        if position is not None and (copied_at is not None and position <= copied_at or last is not None and position > last):
            continue
        path = _path(scope, use)
        parent, above = (path + [None, None])[:2]
        if isinstance(parent, cst.Arg) or isinstance(parent, cst.Attribute) and isinstance(above, cst.Call) and above.func is parent:
            return True
    return False


def _body_position(scope: Scope, node: cst.CSTNode) -> int | None:
    """The index of the statement of the function's own body that holds ``node``."""
    body = scope.node.body
    if not isinstance(scope.node, cst.FunctionDef) or not isinstance(body, cst.IndentedBlock):
        return None
    parents = _index(scope).parents
    while id(node) in parents:
        parent = parents[id(node)]
        if parent is body:
            return body.body.index(node)  # type: ignore[arg-type]
        node = parent
    return None


def _aliased(scope: Scope, use: cst.Name) -> bool:
    """Does ``use`` bind its tensor, or a view of it, to another name (``row = x[0]``)?"""
    below: cst.CSTNode = use
    for parent in _path(scope, use):
        if _assigned_from(parent, below):
            return not _rebinds(parent, use.value)
        if isinstance(parent, (cst.Subscript, cst.Attribute)) and parent.value is below or isinstance(parent, cst.Arg):
            below = parent
            continue
        if isinstance(parent, cst.Call):
            op = scope.op(parent)
            alias = op is not None and (op[1] == VIEW or op[0] in MAY_ALIAS)
            if not alias or not (parent.func is below or (isinstance(below, cst.Arg) and below.value is op[2])):
                return False  # a new tensor (or an unknown callee's result, taken as one)
            below = parent
            continue
        return not isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.Expr, cst.If,
                                       cst.AssignTarget, cst.AugAssign))  # a new value, or a write
    return True


def _written_only_before(scope: Scope, name: str, copied_at: int | None, last: int | None = None) -> bool:
    """Are all in-place writes of ``name`` (``name.add_()``, ``name[i] = v``, ``name += v``) in
    statements of the function's body before the copy's own (or after ``last``, where the name
    holds another value)?"""
    if copied_at is None:
        return False
    for use in _uses(scope, name):
        position = _body_position(scope, use)
        if last is not None and position is not None and position > last:
            continue
        if position is None or position >= copied_at:
            if _writes_in_place(scope, use) and not _bound_anew_before(scope, name, use, copied_at):
                return False
    return True


def _writes_in_place(scope: Scope, use: cst.Name) -> bool:
    """Is ``use`` the receiver of an in-place method, the target of ``+=`` or of an item write?"""
    path = _path(scope, use)
    parent = path[0] if path else None
    if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value.endswith("_"):
        return True
    if isinstance(parent, cst.AugAssign) and parent.target is use:
        return True
    if isinstance(parent, cst.Subscript) and parent.value is use and len(path) > 1:
        return isinstance(path[1], (cst.AssignTarget, cst.AugAssign))
    return any(isinstance(p, cst.Arg) and p.keyword is not None and p.keyword.value == "out" for p in path[:1])


@dataclass
class _Reading:
    """How the uses of a copy are judged, and what they were found to do. ``strided``: may a use
    read a strided tensor (not so for ``.contiguous()``, whose users must not need its layout)?
    ``returnable``: the copy is of a tensor the function made, so handing it out hands out a
    tensor no one else holds, as the copy would (a caller that needs a contiguous layout is the
    fix's risk). ``saves``: some use reads the strided tensor as fast as the copy, or hands it
    out, so dropping a ``.contiguous()`` saves its kernel (a ``softmax`` or ``conv2d`` copies a
    strided input itself: no worse, no better). ``bundled``: the copy is handed out in a
    container with other values. ``writable``: nothing but the copy holds its source, so the
    copy may be written in place (``masked_fill_``, ``c[i] = v``) as its source would be;
    ``wrote``: a use does.
    ``named``: the copy is bound to a name; ``dead_after``: the statement of the function's
    body after which nothing holds it (the name's last read), None if unknown.
    ``convolved``: the convolutions that read the copied view as it is (channels-last data
    permuted channels-first)."""

    strided: bool = True
    returnable: bool = False
    writable: bool = False
    wrote: bool = False
    saves: bool = False
    bundled: bool = False
    named: bool = False
    dead_after: int | None = None
    convolved: frozenset[str] = frozenset()

    def read(self, fast: bool = True) -> bool:
        self.saves |= fast
        return True


def _only_read(scope: Scope, node: cst.CSTNode, role: str, reading: _Reading | None = None) -> bool:
    """Is the value of ``node`` only read: used by tensor arithmetic, as an index, or by a tensor
    op that is not in place (through views and casts, which may alias it, used the same way)?
    ``role``: "copy" may be assigned to a name only read in turn, "alias" (a read of that name)
    may not, and neither may be handed out unless ``reading.returnable``; "source" may be
    returned, once the copy is dead."""
    reading = reading or _Reading()
    path = _path(scope, node)
    below: cst.CSTNode = node
    for i, parent in enumerate(path):
        if parent is below:
            continue  # the call of a method whose attribute was seen
        after = path[i + 1] if i + 1 < len(path) else None
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget)):
            return reading.read()
        if isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
            return reading.read(fast=False)  # used as an index
        if isinstance(parent, cst.Element) and isinstance(after, (cst.List, cst.Tuple)) and isinstance(
            path[i + 2] if i + 2 < len(path) else None, cst.Arg
        ):
            below = after  # an operand listed for an op (`torch.cat([a, b])`): the op decides
            continue
        if isinstance(parent, cst.Subscript) and parent.value is below:
            below = parent  # basic indexing is a view
            continue
        if isinstance(parent, cst.Attribute) and parent.value is below:
            name = parent.attr.value
            if name in METADATA or name == "clone":
                return reading.read(fast=False)
            if name in VIEW_ATTRIBUTES:
                below = parent
                continue
            if not (isinstance(after, cst.Call) and after.func is parent):
                return False
            if name.endswith("_"):
                if not reading.writable:
                    return False
                reading.wrote = reading.read()
                below = after  # the copy itself, written in place: its own uses decide
                continue
            if not reading.strided and name in NEEDS_CONTIGUOUS:
                return False
            if name in MAY_ALIAS or scope.ops.op_class(name) == VIEW:
                below = after  # an alias: its own uses decide
                continue
            known = scope.ops.op_class(name) is not None or name in READS_INTO_NEW
            return known and reading.read(fast=reads_strided(name, scope.ops))
        if isinstance(parent, cst.Arg) and isinstance(after, cst.Call) and reading.strided \
                and parent is after.args[0] and parent.keyword is None and _like_factory(scope, after):
            return reading.read(fast=False)  # `torch.zeros_like(x)`: its sizes, dtype, device and strides
        if isinstance(parent, cst.Arg) and isinstance(after, cst.Call) and reading.strided \
                and _module_reads(scope, after, parent):
            if _hands_back_new(scope, after, parent):
                return reading.read()
            below = after  # it may hand back what it is given: the call's uses decide too
            continue
        if isinstance(parent, cst.Arg) and isinstance(after, cst.Call) and parent.keyword is not None \
                and parent.keyword.value != "out" and role != "source" and not reading.strided \
                and scope.op(after) is None and _module_op(scope, after) is None:
            layout = _same_file_callee_layout(scope, after, parent, reading.convolved)  # `self.attn(hidden=x)`
            if layout is None:
                return _handed_out(scope, parent, role, reading)
            reading.read(fast=layout in (FAST, FAST_BACK))
            if not handed_back(layout):
                return True
            below = after  # the callee may return it: the call's uses decide too
            continue
        if isinstance(parent, cst.Arg) and isinstance(after, cst.Call) and parent.keyword is None:
            if any(a.keyword is not None and a.keyword.value == "out" for a in after.args):
                return False
            op = scope.op(after) or _module_op(scope, after)
            if op is None and "conv2d" in reading.convolved and _conv_layer(scope, after, parent):
                op = ("conv2d", COMPUTE, parent.value)
            if op is None and _registry_activation(after, parent):
                op = ("activation", ELEMENTWISE, parent.value)
            if op is None and reading.strided and _read_by_same_file_callee(scope, after, parent):
                return reading.read()
            layout = _same_file_callee_layout(scope, after, parent, reading.convolved) \
                if op is None and role != "source" else None
            if layout is not None and not reading.strided:
                reading.read(fast=layout in (FAST, FAST_BACK))
                if not handed_back(layout):
                    return True
                below = after  # the callee may return it: the call's uses decide too
                continue
            if op is None or op[0].endswith("_"):
                return _handed_out(scope, parent, role, reading)
            if not reading.strided and op[0] in NEEDS_CONTIGUOUS:
                return False
            if op[1] == VIEW or op[0] in MAY_ALIAS:
                below = after
                continue
            if op[1] is None and op[0] not in READS_INTO_NEW:
                return False
            fast = op[1] == ELEMENTWISE or reads_strided(op[0], scope.ops) or op[0] in reading.convolved
            return reading.read(fast=fast)
        if role == "copy" and reading.strided and _stored_into_fresh(scope, parent, below, node):
            return reading.read()  # `shifted[:, 1:] = ids[:, :-1].clone()`: the store copies
        if role == "copy" and _assigned_from(parent, below):
            return _only_read_name(scope, parent, reading)
        if role == "source" and _assigned_from(parent, below):
            return _rebinds(parent, root_name(node))  # `x = x.view(...)`: the name's other uses decide
        if isinstance(parent, (cst.Return, cst.Expr)) and role == "source":
            return True  # the source handed out or dropped: the copy is dead by then
        if isinstance(parent, cst.Expr):
            return True  # dropped
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and isinstance(below, cst.Subscript):
            reading.wrote = reading.writable and parent.target is below  # `c[i] = v`
            return reading.wrote
        if isinstance(parent, cst.Return) and reading.returnable:
            return reading.read()
        return _handed_out(scope, parent, role, reading)
    return False


def _stored_into_fresh(scope: Scope, assign: cst.CSTNode, value: cst.CSTNode, copy: cst.CSTNode) -> bool:
    """``t[:, 1:] = ids[:, :-1].clone()`` (``assign``, ``value`` its value holding ``copy``): an
    item store, which copies the values itself, into a tensor the function made (a
    ``new_zeros`` buffer: no caller's tensor may overlap it) that shares memory with no name the
    copy reads (``v = t[0]`` then ``t[1] = v.clone()`` overlaps)."""
    if not (isinstance(assign, cst.Assign) and assign.value is value and len(assign.targets) == 1):
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Subscript) or not scope.is_tensor(target.value):
        return False
    held = _viewed(scope, target.value)
    if not isinstance(held, cst.Name) or held.value in scope.params or not all(
            _made_anew(scope, value) for bound, value in scope.assignments
            if isinstance(bound, cst.Name) and bound.value == held.value):
        return False
    stored = set(_lineage(scope, held))
    return not any(stored & set(_lineage(scope, read)) for read in _walk(copy) if isinstance(read, cst.Name))


def _made_anew(scope: Scope, value: cst.BaseExpression) -> bool:
    """A factory's new tensor (``ids.new_zeros(...)``, ``torch.zeros(...)``, ``torch.full_like(x,
    v)``) or a value the function makes (``_fresh``)."""
    func = value.func if isinstance(value, cst.Call) else None
    if isinstance(func, cst.Attribute) and func.attr.value in ("new_zeros", "new_ones", "new_empty", "new_full") \
            and scope.is_tensor(func.value):
        return True
    name = scope.torch_name(func) if func is not None else None
    if name is not None and name.count(".") == 1 and name.startswith("torch.") \
            and (name[6:] in _FACTORIES or _like_factory(scope, value)):  # type: ignore[arg-type]
        return True
    return _fresh(scope, value, None)


def _module_op(scope: Scope, call: cst.CSTNode) -> tuple[str, str | None, cst.BaseExpression | None] | None:
    """``scope.module_op``, where for a member every value the class assigns it builds a
    ``torch.nn`` class whose op is known (``self.proj = nn.Identity()`` in one branch of
    ``__init__`` and ``nn.Linear(d, d)`` in the other is no op; ``nn.Linear`` or ``nn.Conv2d``
    is the convolution, the slower reader of the two), or such a module only when asked and None
    otherwise (``self.talking_heads = nn.Conv2d(h, h, 1) if talking_heads else None``, called
    under ``if exists(self.talking_heads):``): where it is called, it is that module."""
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    if scope.class_name is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                        and func.value.value == "self"):
        return scope.module_op(call)
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    classes = set()
    for assign in scope.facts.member_values(scope.class_name, func.attr.value):
        value = assign.value
        if isinstance(value, ast.IfExp):
            branches = [b for b in (value.body, value.orelse) if not (isinstance(b, ast.Constant) and b.value is None)]
            value = branches[0] if len(branches) == 1 else value
        if not isinstance(value, ast.Call) or built_in_place(value):
            return None
        classes.add(scope.facts.canonical(dotted_path(ast_view, value.func) or ""))
    names = [NN_MODULE_OPS.get(c.rpartition(".")[2]) if c and c.startswith("torch.nn.") else None for c in classes]
    if not names or None in names:
        return None
    # built as one class or another (`nn.Linear` or `nn.Conv2d` by a flag): the one that reads a
    # strided input the slowest stands for both
    name = min(sorted(names), key=lambda op: reads_strided(op, scope.ops))  # type: ignore[arg-type]
    return name, scope.ops.op_class(name), call.args[0].value  # type: ignore[return-value]


def _module_reads(scope: Scope, call: cst.Call, arg: cst.Arg) -> bool:
    """Does ``call`` run a module, or a function of the package, that reads ``arg`` without
    writing it in place: ``self.block(x)``, ``self.layers[i](x)``, ``block(x, t)`` in ``for
    block, attn in self.downs``, a same-file or imported function or module class whose body
    writes neither the parameter nor a view of it (``analysis.purity.writes_argument``)? A
    module's ``forward`` reads its input: a module class the file cannot see is taken to do so,
    unless the class builds it ``inplace=True`` (an ``nn.ReLU(inplace=True)``, in a
    ``Sequential`` too). Not an op the tables know (the caller judges those), nor a call with
    ``*args`` or ``out=``."""
    if scope.op(call) is not None or _module_op(scope, call) is not None or any(
            a.star or a.keyword is not None and a.keyword.value in ("out", "inplace") for a in call.args):
        return False
    called = _called(scope, call, arg)
    if called is None:
        return False
    func, position = called
    found = scope.facts.callee(scope.class_name, cst_view, func)
    if found is not None:
        return not writes_argument(scope.facts, *found, position)
    other = _imported_callee(scope, func)
    if other is not None:
        return not writes_argument(*other, position)
    members = _module_members(scope, func)
    return bool(members) and not any(
        built_in_place(node) for member in members
        for assign in scope.facts.member_values(scope.class_name, member)  # type: ignore[arg-type]
        for node in ast.walk(assign.value) if isinstance(node, ast.Call))


def _imported_callee(scope: Scope, func: cst.BaseExpression) -> tuple[ModuleFacts, str | None, str] | None:
    """``project.imported_callee``, and the ``forward`` of the class of another file of the
    package that ``self.attr`` holds, whatever its name (``_ConvNormAct``)."""
    other = imported_callee(scope.facts, scope.class_name, cst_view, func)
    if other is not None or scope.class_name is None or not (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return other
    held = member_class(scope.facts, scope.class_name, func.attr.value)
    return (held[0], held[1], "forward") if held is not None and held[0].has_method(held[1], "forward") else None


def _module_members(scope: Scope, func: cst.BaseExpression) -> list[str]:
    """``attr`` of a call of ``self.attr``, ``self.attr[i]``, or of a name only bound by loops
    over such members (``for block, attn in self.downs``, through ``enumerate`` or ``zip``), where
    the class holds a module (or a container of them) there; empty for any other callee."""
    if scope.class_name is None:
        return []
    if isinstance(func, cst.Name):
        if any(func.value in bound_names(target) for target, _ in scope.assignments):
            return []
        found = []
        for target, iterable in scope.loops:
            if func.value not in bound_names(target):
                continue
            if isinstance(iterable, cst.Call) and getattr(iterable.func, "value", None) in ("enumerate", "zip", "reversed"):
                iterables = [a.value for a in iterable.args if not isinstance(a.value, cst.Name)]
            else:
                iterables = [iterable]
            members = [member for each in iterables for member in _module_members(scope, each)]
            if not members:
                return []
            found += members
        return found
    if isinstance(func, cst.Subscript):
        func = func.value
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return []
    attr = func.attr.value
    return [attr] if scope.facts.module_attr(scope.class_name, attr) not in (None, "op") else []


def _hands_back_new(scope: Scope, call: cst.Call, arg: cst.Arg) -> bool:
    """Does ``call`` (a module's or a function's) hand back something other than ``arg``'s tensor
    or a view of it: not a module of a class that may be the identity (``nn.Identity``, a
    dropout, a flatten), nor a same-file or imported callee whose body may return what it was
    given (``analysis.purity.may_return_argument``)? A module class the file cannot see is taken
    to make its output."""
    called = _called(scope, call, arg)
    position = called[1] if called is not None else None
    found = scope.facts.callee(scope.class_name, cst_view, call.func)
    callee = (scope.facts, *found) if found is not None else _imported_callee(scope, call.func)
    if callee is not None:
        return isinstance(position, int) and not may_return_argument(*callee, position)  # type: ignore[arg-type]
    return _layers_made(scope, _module_members(scope, call.func))


def _layers_made(scope: Scope, members: list[str]) -> bool:
    """Do the class's ``members`` hold modules that make their output: not an ``nn.Identity``, a
    dropout or a flatten anywhere in their values (a list may hold one)?"""
    return bool(members) and not any(
        isinstance(node, ast.Call) and (dotted_path(ast_view, node.func) or "").rpartition(".")[2].endswith(_MAY_HAND_BACK)
        for member in members for assign in scope.facts.member_values(scope.class_name, member)  # type: ignore[arg-type]
        for node in ast.walk(assign.value))


def _registry_activation(call: cst.Call, arg: cst.Arg) -> bool:
    """``ACT2FN[config.hidden_act](x)``: an activation module from a registry, element-wise and
    not in place, called on its one argument."""
    func = call.func
    return isinstance(func, cst.Subscript) and len(call.args) == 1 and call.args[0] is arg and (
        dotted_path(cst_view, func.value) or "").rpartition(".")[2] in ACTIVATION_REGISTRIES


def _conv_layer(scope: Scope, call: cst.Call, arg: cst.Arg) -> bool:
    """``self.pe(v)``, ``v`` its first argument, where every assignment of ``self.pe`` in the
    class's ``__init__`` builds a layer class named for a convolution (``Conv(...)``, also
    through a function handed the layer: ``zero_module(Convolution(...))``)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return False
    if scope.class_name is None or not call.args or call.args[0] is not arg:
        return False
    built = [
        node.value for init in scope.facts.methods(scope.class_name, "__init__") for node in ast.walk(init)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == func.attr.value and isinstance(t.value, ast.Name)
            and t.value.id == "self" for t in node.targets
        )
    ]
    return bool(built) and all(_builds_conv_layer(value) for value in built)


def _builds_conv_layer(value: ast.expr | None) -> bool:
    """Does ``value`` (in ``__init__``) build a layer class named for a convolution?"""
    if isinstance(value, ast.IfExp):  # `nn.Conv2d(...) if dims == 2 else nn.Conv3d(...)`
        return _builds_conv_layer(value.body) and _builds_conv_layer(value.orelse)
    while isinstance(value, ast.Call):
        name = (dotted_path(ast_view, value.func) or "").rpartition(".")[2]
        if name[:1].isupper():
            return _CONV_LAYER.fullmatch(name) is not None
        value = value.args[0] if value.args else None  # `zero_module(Conv(...))`
    return False


def _read_by_same_file_callee(scope: Scope, call: cst.Call, arg: cst.Arg) -> bool:
    """``self.altup.scale_corrected_output(copy)``: a same-file function that only reads the
    argument and hands back a new tensor (``analysis.purity``). Not for a ``.contiguous()``
    copy: the callee may need the layout."""
    called = _called(scope, call, arg)
    return called is not None and isinstance(called[1], int) \
        and callee_only_reads(scope.facts, scope.class_name, cst_view, *called)  # type: ignore[arg-type]


def _same_file_callee_layout(scope: Scope, call: cst.Call, arg: cst.Arg, fast: frozenset[str]) -> str | None:
    """``self.block(x)``, ``self.layers[i](x)``, ``layer(x)`` in ``for layer in self.layers``: a
    same-file module or function (or each module of a ``ModuleList``, the first of a
    ``Sequential``) that takes the argument in any layout (``analysis.layout``): FAST or SLOW,
    as its uses read a strided tensor (the convolutions of ``fast`` read it as it is); None if
    one needs the layout or the callee is not known."""
    called = _called(scope, call, arg)
    if called is None:
        return None
    func, position = called
    member = _container_member(scope, func)
    if member is not None:
        return elements_take_any_layout(scope.facts, scope.class_name, member, position, fast)  # type: ignore[arg-type]
    return callee_takes_any_layout(scope.facts, scope.class_name, cst_view, func, position, fast)


def _container_member(scope: Scope, func: cst.BaseExpression) -> str | None:
    """``layers`` of a call of ``self.layers[i]`` or of ``layer`` bound only by ``for layer in
    self.layers`` (``enumerate(self.layers)``, ``self.layers[:n]``), ``self.layers`` a
    ``ModuleList``; or of ``self.layers`` itself, a ``Sequential``."""
    if scope.class_name is None:
        return None
    if isinstance(func, cst.Name):
        bound = [iterable for target, iterable in scope.loops if func.value in bound_names(target)]
        if len(bound) != 1 or any(func.value in bound_names(target) for target, _ in scope.assignments):
            return None
        target = next(target for target, iterable in scope.loops if iterable is bound[0])
        iterable = bound[0]
        if isinstance(iterable, cst.Call) and getattr(iterable.func, "value", None) == "enumerate" \
                and len(iterable.args) == 1 and isinstance(target, cst.Tuple) and len(target.elements) == 2 \
                and isinstance(target.elements[1].value, cst.Name) and target.elements[1].value.value == func.value:
            iterable = iterable.args[0].value
        elif not (isinstance(target, cst.Name) and target.value == func.value):
            return None
        return _self_member(scope, iterable.value if isinstance(iterable, cst.Subscript) else iterable, "list")
    if isinstance(func, cst.Subscript):
        return _self_member(scope, func.value, "list")
    return _self_member(scope, func, "sequential")


def _self_member(scope: Scope, expr: cst.BaseExpression, kind: str) -> str | None:
    """``attr`` of ``self.attr`` where the class holds a container of that kind there."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"):
        return None
    attr = expr.attr.value
    return attr if scope.facts.module_attr(scope.class_name, attr) == kind else None  # type: ignore[arg-type]


def _called(scope: Scope, call: cst.Call, arg: cst.Arg) -> tuple[cst.BaseExpression, int | str] | None:
    """(the callee, the index of ``arg`` among its positional arguments, or its keyword) of
    ``call``; for ``checkpoint(self.block, x)``, which runs ``self.block(x)``, the function it
    is handed. None after a ``*args`` or with a ``**kwargs``, or for the function a checkpoint
    is handed."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args):
        return None
    if arg.keyword is not None:
        func = positional[0].value if positional and scope.torch_name(call.func) == CHECKPOINT else call.func
        return func, arg.keyword.value
    if arg not in positional:
        return None
    position = positional.index(arg)
    if scope.torch_name(call.func) != CHECKPOINT:
        return call.func, position
    return (positional[0].value, position - 1) if position > 0 else None


def _handed_out(scope: Scope, parent: cst.CSTNode, role: str, reading: _Reading) -> bool:
    """Is the copy (``parent`` holds it) handed out in a record of outputs that the function
    returns: an argument of a class's constructor (``QuestionAnsweringModelOutput(start_logits=
    start_logits)``), or a tuple extended with an inner model's outputs (``(start_logits,
    end_logits) + outputs[2:]``, the same record as a tuple)? A record goes to the model's user,
    and a copy of a tensor the function made, handed out so, is a tensor no one else holds, as
    long as its source is not handed out too. A bare tuple goes back to a caller that may need
    the layout (the transposed heads of an attention helper, merged by its caller's reshape,
    which copies them anyway)."""
    if role == "source" or not reading.returnable or not _returned_in_record(scope, parent, False, 2):
        return False
    reading.bundled = True
    return reading.read()


def _returned_in_record(scope: Scope, node: cst.CSTNode, recorded: bool, names: int) -> bool:
    """Does ``node`` reach a ``return`` through containers, constructor arguments, tuple
    concatenations, conditional expressions and up to ``names`` names assigned once, passing a
    record of outputs on the way?"""
    for above in _path(scope, node):
        if isinstance(above, cst.Return):
            return recorded
        if isinstance(above, cst.Call):
            if not (isinstance(node, cst.Arg) and _constructor(scope, above)):
                return False
            recorded = True
        elif isinstance(above, cst.BinaryOperation):
            if not (isinstance(above.operator, cst.Add) and cst.Tuple in (type(above.left), type(above.right))):
                return False
            recorded = True  # outputs extended with an inner model's
        elif isinstance(above, cst.Assign):
            target = above.targets[0].target if len(above.targets) == 1 else None
            if names == 0 or not isinstance(target, cst.Name) or not _assigned_once(scope, target.value):
                return False
            uses = _uses(scope, target.value)
            return bool(uses) and all(_returned_in_record(scope, use, recorded, names - 1) for use in uses)
        elif not isinstance(above, (cst.Element, cst.DictElement, cst.Arg, cst.Tuple, cst.List, cst.Dict, cst.IfExp)):
            return False
        node = above
    return False


def _constructor(scope: Scope, call: cst.Call) -> bool:
    """``ModelOutput(...)``, ``outputs.Result(...)``: the call of a class (a CapWords name) that
    is no torch or same-file module class; it keeps what it is given, as a container does."""
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", "")
    if not (isinstance(name, str) and name[:1].isupper() and not name.isupper()):
        return False
    return scope.torch_name(call.func) is None and not scope.facts.is_module_class(name)


def _target_and_value(node: cst.CSTNode | None) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(target, value) of an assignment to one target: ``x = v``, or ``x: T = v``."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        return node.targets[0].target, node.value
    if isinstance(node, cst.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None


def _assigned_from(node: cst.CSTNode, value: cst.CSTNode) -> bool:
    """Is ``node`` an assignment (of one target or more) of ``value``?"""
    return isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is value


def _rebinds(assign: cst.CSTNode | None, name: str | None) -> bool:
    assigned = _target_and_value(assign)
    return assigned is not None and isinstance(assigned[0], cst.Name) and assigned[0].value == name


def _only_read_name(scope: Scope, assign: cst.Assign | cst.AnnAssign, reading: _Reading) -> bool:
    """``y = <copy>``: is ``y`` a plain local, assigned once, read at least once, only read?"""
    assigned = _target_and_value(assign)
    if assigned is None or not isinstance(assigned[0], cst.Name):
        return False
    name = assigned[0].value
    if name in scope.escaped and _captured_to_write(scope, name):
        return False
    if _assigned_once(scope, name) and name not in scope.params:  # a parameter is bound on entry
        if name in scope.inplace and not reading.writable:
            return False
        uses = _uses(scope, name)
    else:  # an in-place write of the copy before it is rebound is a use that is not a read
        uses = _uses_until_rebound(scope, assign, name)
    positions = [_body_position(scope, use) for use in uses]
    reading.named = True
    reading.dead_after = None if None in positions or not positions else max(positions)  # type: ignore[type-var]
    return bool(uses) and all(_only_read(scope, use, "alias", reading) for use in uses)


def _uses_until_rebound(scope: Scope, assign: cst.Assign, name: str) -> list[cst.Name]:
    """The reads of ``name`` after ``assign``, up to the next statement that assigns it (not in
    a nested block) in the same block or one around it: an ``if`` or ``with`` block goes on
    with the statements after it, where the copy may still be there. None if ``assign`` sits in
    a loop, which may come back to it, or in a ``try``, whose handlers may read it. An ``if``
    whose test says the opposite of one around ``assign`` (``if dims == 3:`` after the body of
    ``if dims == 2:``) does not run: its reads are not counted."""
    if not isinstance(scope.node, cst.FunctionDef):
        return []
    parents = _index(scope).parents
    reads = {id(use) for use in _uses(scope, name)}
    found: list[cst.Name] = []
    holding: list[cst.BaseExpression] = []  # the tests of the if bodies around `assign`
    statement = parents.get(id(assign))
    while True:
        block = parents.get(id(statement))
        if not isinstance(block, cst.IndentedBlock):
            return []
        for later in block.body[block.body.index(statement) + 1:]:  # type: ignore[arg-type]
            if isinstance(later, cst.If) and later.orelse is None and any(
                    _excludes(scope, test, later.test) for test in holding):
                continue
            found += [node for node in _name_nodes(later, name) if id(node) in reads]
            if name in names_of(later)[1] or _layers_rebind(scope, later, name):
                return found
        if block is scope.node.body:
            return found
        statement = parents.get(id(block))
        if isinstance(statement, cst.If):
            holding.append(statement.test)
        while not isinstance(parents.get(id(statement)), cst.IndentedBlock):
            if not isinstance(statement, (cst.If, cst.Else, cst.With)):
                return []
            statement = parents.get(id(statement))
        if not isinstance(statement, (cst.If, cst.With)):
            return []


def _layers_rebind(scope: Scope, statement: cst.CSTNode, name: str) -> bool:
    """``for layer in self.layers: x = layer(x)``: a loop over the modules of a ``ModuleList``
    or ``Sequential`` whose body binds ``name`` on every path (an ``if`` and its ``else`` both
    do). A model's stack of layers is not empty, so after the loop ``name`` holds a value
    the loop made."""
    if not (isinstance(statement, cst.For) and statement.orelse is None) or scope.class_name is None:
        return False
    loop = statement.iter.value if isinstance(statement.iter, cst.Subscript) else statement.iter
    if _self_member(scope, loop, "list") is None and _self_member(scope, loop, "sequential") is None:
        return False
    return _binds_surely(statement.body, name)


def _binds_surely(block: cst.BaseSuite, name: str) -> bool:
    """Does every path through ``block`` bind ``name`` (a plain statement of it, or an ``if``
    whose every branch does)?"""
    for statement in getattr(block, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine) and name in names_of(statement)[1]:
            return True
        if isinstance(statement, cst.If) and _branches_bind(statement, name):
            return True
    return False


def _branches_bind(statement: cst.If, name: str) -> bool:
    orelse = statement.orelse
    return _binds_surely(statement.body, name) and (
        isinstance(orelse, cst.Else) and _binds_surely(orelse.body, name)
        or isinstance(orelse, cst.If) and _branches_bind(orelse, name))


def _excludes(scope: Scope, held: cst.BaseExpression, test: cst.BaseExpression) -> bool:
    """Are ``held`` and ``test`` ``a == x`` and ``a == y`` for one ``a`` (a name or an attribute
    of ``self`` that the function never assigns) and two different literals?"""
    sides = [_compared(scope, t) for t in (held, test)]
    if sides[0] is None or sides[1] is None:
        return False
    (left, value), (other_left, other_value) = sides
    return left.deep_equals(other_left) and value != other_value


def _compared(scope: Scope, test: cst.BaseExpression) -> tuple[cst.BaseExpression, int | str] | None:
    """(a, x) of a test ``a == x``, ``a`` a name or ``self.<attr>`` the function never assigns
    (a method it calls could, which the rule does not follow), ``x`` the value of an integer or
    string literal; else None."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return None
    left, right = test.left, test.comparisons[0].comparator
    if not isinstance(right, (cst.Integer, cst.SimpleString)):
        return None
    owner = left.value if isinstance(left, cst.Attribute) else None
    if not (isinstance(left, cst.Name) or isinstance(owner, cst.Name) and owner.value == "self"):
        return None
    written = (node.target for node in _index(scope).parents.values()
               if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)))
    if any(target.deep_equals(left) for target in written):
        return None
    return left, right.evaluated_value  # type: ignore[return-value]


def _name_nodes(root: cst.CSTNode, name: str) -> list[cst.Name]:
    if isinstance(root, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return []
    found = [root] if isinstance(root, cst.Name) and root.value == name else []
    for child in children(root):
        found += _name_nodes(child, name)
    return found


@dataclass
class _Index:
    """One walk of a scope: each node's parent, the reads of each name, the assignments of each."""

    parents: dict[int, cst.CSTNode] = field(default_factory=dict)
    reads: dict[str, list[cst.Name]] = field(default_factory=lambda: defaultdict(list))
    stores: Counter = field(default_factory=Counter)


@per_scope
def _index(scope: Scope) -> _Index:
    index = _Index()
    _add_to_index(index, scope.node, scope.node, True, set())
    return index


_DEFINITIONS = node_types(cst.FunctionDef, cst.ClassDef, cst.Lambda)
_BINDINGS = node_types(cst.AssignTarget, cst.For, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.AsName)


def _add_to_index(index: _Index, root: cst.CSTNode, node: cst.CSTNode, reading: bool, unpacked: set[int]) -> None:
    """Index ``node`` and what is under it; ``unpacked``: the names of ``a, b = ...`` met so far
    (bound, not read)."""
    kind = type(node)
    if kind in _DEFINITIONS and node is not root:
        return  # a closure's reads make the name `escaped`
    if kind in _BINDINGS:
        target = node.name if kind is cst.AsName else node.target
        index.stores.update(bound_names(target))
        if kind is cst.AssignTarget:
            unpacked.update(map(id, _unpacked_names(target)))
    if kind is cst.Name and reading and id(node) not in unpacked:
        index.reads[node.value].append(node)
    for child in children(node):
        index.parents[id(child)] = node
        # not reads: a plain assignment target, a loop's target, an attribute's name, a keyword, a parameter
        _add_to_index(index, root, child, reading and not (
            kind is cst.AssignTarget and type(child) is cst.Name
            or kind is cst.For and child is node.target
            or kind is cst.AnnAssign and child is node.target and type(child) is cst.Name
            or kind is cst.Attribute and child is node.attr
            or kind is cst.Arg and child is node.keyword
            or kind is cst.Param
        ), unpacked)


def _unpacked_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a tuple or list target binds (``a, (b, *c) = ...``)."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return []
    found: list[cst.Name] = []
    for element in target.elements:
        value = element.value.value if isinstance(element.value, cst.StarredElement) else element.value
        found += [value] if isinstance(value, cst.Name) else _unpacked_names(value)
    return found


def _path(scope: Scope, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from ``node``'s parent up to the scope, nearest first."""
    parents = _index(scope).parents
    path = []
    while id(node) in parents:
        node = parents[id(node)]
        path.append(node)
    return path


def _uses(scope: Scope, name: str) -> list[cst.Name]:
    return _index(scope).reads.get(name, [])


def _assigned_once(scope: Scope, name: str) -> bool:
    return _index(scope).stores[name] == 1


def _fix(site: Site, kept: cst.BaseExpression, call: cst.Call | None = None) -> tuple[StatementEdit, ...] | None:
    """``call`` (the copy, unless named) becomes ``kept`` in the copy's statement."""
    statement = site.statement.node
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    call = call or site.node
    replacement = kept.with_changes(lpar=call.lpar, rpar=call.rpar) if isinstance(kept, cst.Call) else kept
    return (StatementEdit(statement, (replace_nodes(statement, {call: replacement}),)),)


def _drop(site: Site) -> tuple[StatementEdit, ...] | None:
    """``g = g.clone()`` goes away, where its block keeps another statement."""
    statement = site.statement.node
    if not isinstance(statement, cst.SimpleStatementLine) or len(site.statement.block.statements) < 2:
        return None
    return (StatementEdit(statement, ()),)
