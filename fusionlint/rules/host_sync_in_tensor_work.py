"""FL004: a host sync (``.item()``, ``if t.any():``, ...) between tensor work, or inside a loop."""
from __future__ import annotations

import functools
import re
from typing import Callable, Iterator, Sequence

import libcst as cst

from fusionlint.analysis import (
    Scope,
    Site,
    StatementRef,
    ancestors,
    bound_names,
    children,
    names_of,
    inner_blocks,
    own_parts,
    per_scope,
    reaching_assignment,
    reaching_value,
    scope_statements,
    statements_after,
    statements_before,
)
from fusionlint.analysis.nodes import node_types
from fusionlint.model import FUSIONRT
from fusionlint.ops import DATA_SHAPED, ELEMENTWISE, SYNC_BUILTINS, SYNC_METHODS, VIEW, OpTables
from fusionlint.rule import Example, Rule, Violation

_ADVICE = {
    "item": "keep the value on the device (accumulate into a tensor) and read it once after the work, "
    "or before the work starts if it decides a shape",
    "tolist": "keep the value on the device and convert it once after the work, or before the work starts if it "
    "decides a shape",
    "cpu": "move the result to the host once, after the work",
    "numpy": "convert to NumPy once, after the work",
    "bool": "use `torch.where` (or an unconditional op) instead of branching on a tensor's value",
    "branch": "use `torch.where` (or an unconditional op) instead of branching on a tensor's value",
    "float": "keep the value on the device as a 0-d tensor and read it once after the work",
    "int": "keep the value on the device as a 0-d tensor and read it once after the work, or before the work "
    "starts if it decides a shape",
    "print": "print after the work",
    "element": "read the tensor once with `.tolist()` before the loop (one sync) and compare host numbers",
    "arithmetic": "read the tensor once with `.tolist()` before the loop (one sync) and do the arithmetic on the host",
    "elements": "read the tensor once with `.tolist()` (one sync) and do the arithmetic on the host",
}
# Why a sync costs where it is (the keys are _where's answers).
_COST = {
    "inside a loop that does tensor work": "every iteration flushes the lazy stream, so no iteration's work fuses "
    "across it and every live intermediate is written, once per iteration",
    "between tensor work": "it flushes the lazy stream, so the work before it cannot fuse with the work after it "
    "and every live intermediate is written, on every call",
}
_SELECT_MESSAGE = (
    "a selection by the data (`x[mask]`, `nonzero`, `masked_select`) whose value is only reduced: the host "
    "reads the mask to size it, which flushes the lazy stream, and the selection runs eagerly; reduce under the "
    "mask instead (`(x * mask).sum()`, `torch.where(mask, x, 0)`, a loss's `ignore_index`, or `reduction=\"none\"` "
    "times the mask): the same value at a fixed shape, with no sync"
)
_MASKED_WRITE_MESSAGE = (
    "a write through a boolean mask (`x[mask] = v`) into a tensor this function computed: the host reads "
    "the mask to find the places, which flushes the lazy stream, and the write runs eagerly; "
    "`x = torch.where(mask, v, x)` (`x = x + torch.where(mask, v, 0)` for `+=`) gives the same values with no "
    "sync and fuses"
)
_READ_BACK_MESSAGE = (
    "a host sync that reads back what the host had: the tensor was made here from Python values "
    "(`torch.tensor(lengths)`), so the reduction launches a kernel and the read waits for the device; "
    "compute it on the host values (`max(lengths)`)"
)
_ELEMENT_WRITE_MESSAGE = (
    "a write in a loop whose slice bound is an element of a tensor (`mask[lengths[i]:, i] = 0`): Python reads each 0-d tensor on the host (`__index__`), a sync per iteration "
    "that flushes the lazy stream, and each write is a kernel of its own; make the whole write at once "
    "(`torch.where` on a comparison of `torch.arange` with the bounds), or "
    "read the tensor once with `.tolist()` before the loop"
)
_ROW_READ_MESSAGE = (
    "per-row work on a tensor the loop does not change, read on the host in every iteration: each "
    "iteration launches the row's kernels and syncs (flushing the lazy stream); do the work for every row at "
    "once before the loop and read it with one `.tolist()` (one sync), then take each row's values on the host"
)
_FILTER_MESSAGE = (
    "a comprehension over a tensor that compares each element (`[i for i in ids if i != blank]`): every "
    "comparison launches a kernel on a 0-d tensor and is a host sync; iterate `ids.tolist()` (one sync, no "
    "kernels), or select with a mask (`ids[ids != blank]`)"
)
_METHOD_SYNC = re.compile(r"\.\s*(?:item|tolist|cpu|numpy)\s*\(|\.\s*to\s*\([^)]*['\"]cpu")
# `if idx == self.num_experts:`: a bare name compared for equality with a name, not a constant
_COMPARING_TEST = re.compile(r"\s*(?:el)?if\s+\w+\s*(?:==|!=)\s*(?![\d'\"-]|None\b|True\b|False\b)[\w.]+\s*:")
# where Python takes a value's truth or a builtin makes a host value of it; `.float()` is a tensor method
_VALUE_SYNC = re.compile(r"\b(?:if|elif|while|assert|not|and|or)\b|(?<!\.)\b(?:bool|float|int|print)\b")
# in every statement the text test passes on: a sync method (`.to(` for `.to("cpu")`), or a word all of its
# other tests need (`if`/`elif` to start a test, `bool`/`float`/`int` before a `(`), each word an alternative
# of its own (the engine searches for each alone, skipping from one to the next)
_NEEDLE = re.compile(
    r"\.\s*(?:item|tolist|cpu|numpy|to)\s*\(|"
    + "|".join(rf"\b{word}\b" for word in "if elif while assert not and or bool float int print".split())
    + r"|\b(?:nonzero|argwhere|masked_select|where)\s*\(|\[\s*(?:~|\(|[A-Za-z_]\w*\s*(?:\]|[<>!=]=?))"
)
# a selection whose size is the data's: `nonzero(`, `masked_select(`, `where(cond)` with one argument
_SELECT_CALL = re.compile(r"\b(?:nonzero|argwhere|masked_select)\s*\(|\bwhere\s*\([^,()]*\)")
# `x[mask]`, `x[~keep]`, `x[(a > 0) & b]`, `x[a > 0]`: indexing that may be by a boolean mask
_MASK_INDEX = re.compile(r"\w\[\s*([~(])?\s*([A-Za-z_]\w*)\s*(\]|[<>]=?|[!=]=)")
# what makes a mask, in the text of the statement that assigns one
_MASK_TEXT = re.compile(r"[<>]=?|[!=]=|~|\b(?:isnan|isinf|isfinite|isin|logical_\w+|bool|eq|ne|lt|le|gt|ge)\s*\(")
# where a selection's value can go on to a reduction: one in the statement, or a name it is assigned to
_REDUCING_TEXT = re.compile(
    r"\b(?:sum|nansum|mean|nanmean|amax|amin|max|min|prod|std|var|norm|logsumexp|count_nonzero)\s*\(|loss|cross_entropy"
)
_NAME_ASSIGNMENT = re.compile(r"\s*(\w+(?:\s*,\s*\w+)*)\s*(?::[^=]*)?=[^=]")
_STRING_STATEMENT = re.compile(r"\s*(?:\w+\s*=\s*)?[rRbBuUfF]{0,2}['\"]")
_COMPOUND = re.compile(r"\s*(?:if|elif|for|while|with|try)\b")
# `x[...] = v`, `x[...] += v`: a write through an index into the name `x`
_INDEX_WRITE = re.compile(r"\s*(\w+)\s*\[.*\]\s*[-+*/]?=(?!=)")
# `mask[lengths[i] :, i] = 0`: a write through a slice bounded by an element
_SLICED_WRITE = re.compile(r"\s*\w+\s*\[[^=]*(?:\]\s*:|:\s*[A-Za-z_]\w*\[)[^=]*\]\s*[-+*/]?=(?!=)")
# `if denom > 0:` or `float(denom)` on a name a few lines above computed
_NAME_READ = re.compile(r"\s*(?:(?:el)?if\s+(?:not\s+)?|.*\b(?:bool|float|int)\s*\(\s*)(\w+)\b")
# `x = x @ w if flag else x`: a conditional expression's test, a name a few lines above computed
_CONDITIONAL_READ = re.compile(r".*\bif\s+(?:not\s+)?(\w+)\s+else\b")
# `[i for i in ids if i != blank]`: a comprehension that tests its element
_FILTER_TEXT = re.compile(r"\bfor\s+(\w+)\s+in\s+[\w.]+\s+if\s+(?:not\s+)?\1\b")
# the test of a conditional expression that compares (`a if lo <= sigma <= hi else b`)
_CHOICE_TEST = re.compile(r"\bif\s+([^:]*?(?:[<>]=?|[!=]=)[^:]*?)\s+else\b")
# `sigma = sigmas[i]`: a name given one element
_ELEMENT_ASSIGNMENT = re.compile(r"\s*(\w+)\s*=\s*[\w.]+\[[^\]:]*\]\s*$")
# a word _NAME_READ and _CONDITIONAL_READ need: searched first, it spares most statements their backtracking `.*`
_NAME_READ_WORD = re.compile(r"(?:if|bool|float|int)\b")
# `n = a * b`, `total = n * 2`: arithmetic, which a tensor operand makes a tensor
_ARITHMETIC_TEXT = re.compile(r"=[^=].*[\w)\]]\s*[-+*/]\s*[\w(]")
# `if sigmas[i] > 0:`, `int(boxes[i, 2] - boxes[i, 0])`: an element compared or computed with
_OPERATOR = r"(?:[<>=!]=|[-<>+*/%])"
_ELEMENT_WORK = re.compile(
    r"\b(?:if|int|float|bool)\b.*(?:\w\[[^\]]*\]\s*" + _OPERATOR + "|" + _OPERATOR + r"\s*\w+\[)"
)


class HostSyncInTensorWork(Rule):
    code = "FL004"
    name = "host-sync-in-tensor-work"
    message = "host sync in the middle of tensor work: the lazy stream is flushed and every live intermediate written"
    pays_in = (FUSIONRT,)
    rationale = """
        A lazy fusing backend records tensor ops and runs them only when it must. Reading a
        tensor's value on the host (`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `bool(t)`,
        `if t.any():`, `while ...:` on a tensor, `float(t)`, `int(t)`, `print(t)`) is such a
        moment: the pending ops are planned and run at once, and every intermediate that
        Python still holds (each local variable of the function) must be written to global
        memory, because the code after the sync may read it. The work after the sync starts a
        new kernel instead of fusing with the work before. Inside a loop this happens once per
        iteration: fusionrt measures a four-iteration `total += h.sum().item()` loop at 8 writes
        in 4 kernels, against 2 writes in 1 kernel when the sum is accumulated on the device.

        Flagged: a sync whose operand is a tensor, when it sits in a loop whose body does tensor
        work, or when tensor work runs both before and after it and it is a branch whose arms
        do tensor work (`torch.where` can replace it), a scalar read in a step function
        (`forward`, `*step`, `train*`, `fit`, `update`, a loss), or a value that goes back into
        tensor work (`x / float(x.max())`) or decides such a branch (`found = m.any(-1).tolist()`,
        then `if found[0]:`-style flags), and, in a working loop, a comparison of an element of
        a tensor the loop does not change (`for i in hits: if i == n:`, `sigma = sigmas[i]; if
        sigma > 0:`) or arithmetic on such elements made a host number (`int(boxes[i, 2] -
        boxes[i, 0])`): each iteration launches a kernel on 0-d tensors only to make a host value
        and syncs, where one `.tolist()` before the loop syncs once and launches nothing
        (torchvision's `paste_mask_in_image` does this per box: one `.tolist()` measured 50 -> 8
        eager kernels for three boxes). Outside a loop the same holds where a function makes
        host numbers of one tensor's elements more than once (`w = int(box[2] - box[0])`,
        `h = int(box[3] - box[1])`: fusionrt 3 -> 1 kernels with one `box.tolist()`), and where a
        step function, called once per iteration of its caller's loop, branches around tensor
        work on an element of a tensor it does not change (a scheduler's `sigma =
        self.sigmas[i]; if sigma > 0.5:`: a host copy made once where the schedule is made
        measured 3 -> 1 fusionrt writes), or picks a number by one that goes on into tensor work
        (`gamma = g if lo <= sigma <= hi else 0.0`: 5 -> 1 writes; in a working loop such a
        choice syncs per iteration wherever it goes). A comprehension over a tensor that tests
        each element (`[i for i in ids if i != blank]`, a greedy CTC decoder) launches a kernel
        and syncs per element wherever it is: iterating `ids.tolist()` measured 49 -> 3 fusionrt
        kernels for 50 frames.

        Per-row loops over a tensor made before the loop sync once per row where one read
        before the loop syncs once: a write whose slice bound is an element of a tensor
        (`mask[lengths[i]:, i] = 0`: Python reads the 0-d tensor with `__index__`, and each
        write is a kernel; a comparison of `torch.arange` with the bounds measured 5 -> 1
        fusionrt kernels for four rows), unless the written value does work of its own (which
        the bound sizes) or the bounds were drawn on the host; and a hand-off (`.cpu()`,
        `.tolist()`, `.numpy()`) or a selection by the data (`nonzero`) read only on the host
        (`len(found)`, `found[0].item()`) whose value the iteration computes by tensor ops from
        the rows of tensors the loop does not change and the loop's index alone (`cur =
        idx[idx[:, 0] == i, 1] + 1`, then `cur.cpu().tolist()`: sam2's run-length encoding, one
        `.tolist()` before the loop measured 12 -> 3 kernels for three masks). A value the
        iteration gets from its data (a loader's batch, a module's output) is not such a row.

        For `bool`, `float`, `int`, `print` and conditions, the operand must itself compute
        with a torch op (`x.sum()`, `(a > 0).any()`), or, in a loop that does tensor work, be a
        local name that such ops compute (`denom = m.sum()`, then `if denom > 0:`) or the
        element a `for` takes from a tensor (`for sigma in sigmas: s = float(sigma)`), so a bare
        argument of unknown type is never taken for a tensor. A step function counts as a
        working loop for names (`spread = h.abs().mean()`, then `limit = float(spread)` in a
        `forward`; `count = valid.sum()`, then `if count == 0:` in a loss: fusionrt 4 -> 3 and
        5 -> 4 writes with the value kept on the device), and arithmetic on a parameter
        annotated as a tensor computes one (`n = a * b`). Its caller has work pending when it
        is called, so a sync there flushes that work too, even with no tensor work above it in
        the function. `int(...)` made an index or a slice bound decides a shape (below).

        Selections by the data sync too: `nonzero`, `masked_select`, `torch.where(cond)` with one
        argument and indexing by a boolean mask (`x[mask]`, the mask a comparison, a view or a slice
        of a mask, `mask[:, k].view(-1)`, a name every assignment of which is one, or a name that
        says it is one, `loss_mask`, an argument included, unless the function tests its dtype or
        rebinds it to something else: a tensor indexes another only if it is boolean or integer, and
        integer indices are named for positions or ids) make a result as long as the mask has hits,
        so the host reads the mask first, and the selection runs eagerly; in a loop, once per
        iteration (a per-codebook cross-entropy over masked rows: 36 -> 28 fusionrt writes for four
        codebooks with `reduction="none"` times the mask). Flagged where that buys nothing: a
        selection whose value only feeds reductions (through element-wise ops, views, gathers and
        the names it is assigned to: `err[keep].mean()`, deberta's `(labels >= 0).nonzero()`
        gathered for a cross-entropy), which a reduction under the mask, `nanmean` or a loss's
        `ignore_index` computes at a fixed shape; and a write through a mask into a tensor the
        function computed (`h = x @ w; h[m] = 0.0`, `x = x.clone(); x[m] = v`), which
        `torch.where` writes with no sync and fuses (the masked mean measured 4 -> 3 fusionrt
        writes, the write 4 -> 1; a forward's `h[mask] = self.mask_emb` under `if mask is not
        None:` 4 -> 3). A selection returned, stored, sorted, sized by its count
        (`torch.arange(len(kept))`) or used to route rows (`index_add_`) is the point, and so is
        a selection whose mask also makes one of those (`logits = self.head(h[m])` beside
        `labels[m]` for the loss: the host reads the mask anyway), one handed to a method of the
        model named as a loss (`self.mask_loss(p[m])`: its work on the selected rows is unknown),
        a per-group mean over the selected rows (`data[labels == k].mean(dim=0)`: under the mask
        it needs a count per column, and measured no cheaper), a write into an argument or a view
        (others see it), one an `if m.any():` around it skips or has read the mask for, and one
        whose value reads a local tensor or is sized by the hits (`x[m] = y[k]`, `x[m] =
        torch.rand(n) < p`: one value per hit, a masked scatter that `torch.where` cannot do).

        A scalar read of a tensor the function made from Python values (`lengths =
        torch.tensor([len(s) for s in seqs])`, then `int(lengths.amax().item())`) is flagged
        wherever it is, a size included: the host had the values, and the round trip launches a
        reduction and waits for it (monai's NaViT: 2 -> 1 kernels with `max(lengths)`).

        Not flagged, because the host needs the value once and reading it is the point: a sync after
        all the work (`return out.item()`); validation (`assert`, a `*check*(...)` or
        `*assert*(...)` call, a statement of an arm that ends by raising, a branch whose arm raises
        or warns, or does no tensor work outside a loop that does: in such a loop a test that picks
        host work, `if best.item() != blank: hyp.append(...)`, syncs on every iteration and is
        flagged unless its arm `continue`s or returns); a loop exit (a `while` test, an arm ending
        in `break`, or a name one of them reads: `changed = bool(...)`); a fast path that skips a
        masked write nothing may match (`if m.any(): x[m] = v`) or selections that would keep
        every row (`if not m.all(): x = x[m]`: each selection syncs on the mask anyway); a value
        that decides a shape (passed to `torch.zeros`, `range`, `split`, `view`..., or assigned to
        a `*size*`/`num_*` name, or a `scale_factor`, or outside a working loop made an index or
        a slice bound: `last = int(...)`, then `x[:last]`); a scalar read for host arithmetic
        after `.backward()` in the same loop iteration (autograd ran the step's work: nothing is
        left to fuse); a hand-off to host code (`.cpu()`, `.numpy()`, `.tolist()`) outside a
        step function's loop (unless per-row work, above); code that runs once or offline (`__init__`, `process*`, `plot*`,
        `visualize*`, (de)serialization, `read_*`, `download*`); a number drawn from torch's RNG
        on the host device (`torch.rand(1).item() < p`: no device work feeds it); an element
        read bare as a size (`x[i, : int(lengths[i])]`: no kernel to save, and the work it sizes
        is written anyway). NumPy arrays, Python numbers,
        `print(x.shape)` and identity tests (`if mask is None:`) are not syncs.
    """
    use_instead = """
        Keep values on the device until the work is done: accumulate into a tensor
        (`total = total + h.sum()`) and call `.item()` once at the end; replace a branch on a
        tensor's value by `torch.where(cond, a, b)` or by an op that needs no branch
        (`a.clamp(max=3)` instead of `if (a > 3).any(): a = a.clamp(max=3)`); read the elements a
        loop compares or computes with once, `rows = boxes.tolist()` before it; print or log after
        the computation, or every N steps outside the hot loop; reduce under a mask
        (`(x * m).sum() / m.sum()`, `torch.where(m, x, 0)`, `ignore_index`) instead of selecting
        first, and write through one with `torch.where(m, v, x)`.
    """
    fix_notes = """
        No fix: moving a sync changes when Python sees the value, and a branch on it changes
        which ops run; only the author can say whether the value is needed earlier. `.tolist()`
        also detaches: where an element feeds work whose gradient is needed as well as a test,
        test the host copy and keep the tensor's element for the math.
    """
    examples = (
        Example(
            bad="""\
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = 0.0
    for i in range(4):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total
""",
            at=((8, 18),),
            fixed=None,
            call="energy(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = torch.zeros(())
    for i in range(4):
        h = torch.tanh(x * i + y)
        total = total + h.sum()
    return total.item()
""",
        ),
        Example(
            bad="""\
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    if (a > 3).any():
        a = a.clamp(max=3)
    return torch.relu(a) * y
""",
            at=((6, 8),),
            fixed=None,
            call="saturate(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    a = torch.where(a > 3, 3.0, a)
    return torch.relu(a) * y
""",
        ),
        Example(
            bad="""\
import torch


def decode_step(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1).tolist())
    return found
""",
            at=((8, 22),),
            fixed=None,
            call="decode_step(randn(64, 128), randn(64, 128))",
            good="""\
import torch


def decode_step(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1))
    return [p.tolist() for p in found]
""",
        ),
        Example(  # a chain of syncs with a cast between them is one sync, reported at the first
            bad="""\
import torch


def train_step(x: torch.Tensor, y: torch.Tensor):
    arrays = []
    for i in range(3):
        h = torch.tanh(x * i)
        arrays.append(h.detach().cpu().to(torch.double).numpy())
    return y * 3, arrays
""",
            at=((8, 23),),
            fixed=None,
        ),
        Example(  # a loop over a tensor yields 0-d tensors: each comparison syncs
            bad="""\
import torch


def route(x: torch.Tensor, hits: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros_like(x)
    for e in hits:
        if e == n:
            continue
        out = out + torch.tanh(x * e) @ w
    return out
""",
            at=((7, 12),),
            fixed=None,
        ),
        Example(  # an element of a tensor the loop does not change, compared on the host each iteration
            bad="""\
import torch


def anneal(x: torch.Tensor, sigmas: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for i in range(sigmas.shape[0]):
        sigma = sigmas[i]
        if sigma > 0.5:
            x = torch.tanh(x @ w)
        x = x * 0.9
    return x
""",
            at=((7, 12),),
            fixed=None,
            call="anneal(randn(16, 32), randn(6).abs(), randn(32, 32) * 0.2)",
            good="""\
import torch


def anneal(x: torch.Tensor, sigmas: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for sigma in sigmas.tolist():
        if sigma > 0.5:
            x = torch.tanh(x @ w)
        x = x * 0.9
    return x
""",
        ),
        Example(  # arithmetic on elements only to make a host number: kernels on 0-d tensors, then a sync
            bad="""\
import torch


def crops(image: torch.Tensor, boxes: torch.Tensor) -> list:
    out = []
    for i in range(boxes.shape[0]):
        w = int(boxes[i, 2] - boxes[i, 0]) + 1
        out.append(torch.tanh(image[:, :w]) * 2)
    return out
""",
            at=((7, 13),),
            fixed=None,
            call="crops(randn(8, 64), (randn(4, 4).abs() * 8).cumsum(1))",
            good="""\
import torch


def crops(image: torch.Tensor, boxes: torch.Tensor) -> list:
    out = []
    rows = boxes.tolist()
    for i in range(boxes.shape[0]):
        w = int(rows[i][2] - rows[i][0]) + 1
        out.append(torch.tanh(image[:, :w]) * 2)
    return out
""",
        ),
        Example(  # several host reads of one tensor's elements, outside a loop: each a kernel and a sync
            bad="""\
import torch


def paste(mask: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
    w = int(box[2] - box[0]) + 1
    h = int(box[3] - box[1]) + 1
    return torch.tanh(mask[:h, :w]) * 2
""",
            at=((5, 9), (6, 9)),
            fixed=None,
            call="paste(randn(64, 64), (randn(4).abs() * 8).cumsum(0))",
            good="""\
import torch


def paste(mask: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
    x0, y0, x1, y1 = box.tolist()
    w = int(x1 - x0) + 1
    h = int(y1 - y0) + 1
    return torch.tanh(mask[:h, :w]) * 2
""",
        ),
        Example(  # a step function compares an element of a schedule the object keeps: a kernel and a sync per call
            bad="""\
import torch


class Schedule:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)

    def step(self, out: torch.Tensor, sample: torch.Tensor, i: int) -> torch.Tensor:
        sample = sample - out * 0.5
        sigma = self.sigmas[i]
        if sigma > 0.5:
            sample = torch.tanh(sample)
        return sample + out * sigma
""",
            at=((11, 12),),
            fixed=None,
            call="Schedule(10).step(randn(16, 64), randn(16, 64), 2)",
            good="""\
import torch


class Schedule:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)
        self.host_sigmas = self.sigmas.tolist()

    def step(self, out: torch.Tensor, sample: torch.Tensor, i: int) -> torch.Tensor:
        sample = sample - out * 0.5
        sigma = self.sigmas[i]
        if self.host_sigmas[i] > 0.5:
            sample = torch.tanh(sample)
        return sample + out * sigma
""",
        ),
        Example(  # a step function chooses a host number by an element of its schedule, and computes on with it
            bad="""\
import torch


class Euler:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)

    def step(self, out: torch.Tensor, sample: torch.Tensor, i: int) -> torch.Tensor:
        sample = sample - out * 0.5
        sigma = self.sigmas[i]
        gamma = 0.25 if 0.2 <= sigma <= 0.9 else 0.0
        return sample + out * (sigma * (gamma + 1))
""",
            at=((11, 25),),
            fixed=None,
            call="Euler(10).step(randn(16, 64), randn(16, 64), 2)",
            good="""\
import torch


class Euler:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)
        self.host_sigmas = self.sigmas.tolist()

    def step(self, out: torch.Tensor, sample: torch.Tensor, i: int) -> torch.Tensor:
        sample = sample - out * 0.5
        sigma = self.sigmas[i]
        gamma = 0.25 if 0.2 <= self.host_sigmas[i] <= 0.9 else 0.0
        return sample + out * (sigma * (gamma + 1))
""",
        ),
        Example(  # a comprehension over a tensor that tests each element: a kernel and a sync per element
            bad="""\
import torch


def greedy_decode(emission: torch.Tensor, blank: int) -> tuple:
    ids = torch.unique_consecutive(torch.argmax(emission, dim=-1))
    kept = [i for i in ids if i != blank]
    return torch.stack(kept), torch.log_softmax(emission, -1)
""",
            at=((6, 31),),
            fixed=None,
            call="greedy_decode(randn(50, 8), 0)",
            good="""\
import torch


def greedy_decode(emission: torch.Tensor, blank: int) -> tuple:
    ids = torch.unique_consecutive(torch.argmax(emission, dim=-1))
    kept = [i for i in ids.tolist() if i != blank]
    return torch.tensor(kept), torch.log_softmax(emission, -1)
""",
        ),
        Example(  # debugging output in a loop: reported, not runnable as a contract pair (it prints)
            bad="""\
import torch


def run(x: torch.Tensor, layers: list) -> torch.Tensor:
    for w in layers:
        x = torch.tanh(x @ w)
        print("norm", x.norm())
    return x
""",
            at=((7, 9),),
            fixed=None,
        ),
        Example(  # a selection by a mask, only to reduce it: the host reads the mask to size the selection
            bad="""\
import torch


def masked_mse(pred: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    err = (pred - target) ** 2
    keep = lengths > 0
    return err[keep].mean()
""",
            at=((7, 12),),
            fixed=None,
            call="masked_mse(randn(16, 64), randn(16, 64), randn(16, 64))",
            good="""\
import torch


def masked_mse(pred: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    err = (pred - target) ** 2
    keep = lengths > 0
    return (err * keep).sum() / keep.sum()
""",
        ),
        Example(  # a write through a mask into a value the function computed: a sync and an eager write
            bad="""\
import torch


def embed(x: torch.Tensor, labels: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w + 1
    h[labels < 0] = 0.0
    return torch.tanh(h) * 2
""",
            at=((6, 5),),
            fixed=None,
            call="embed(randn(16, 32), randn(16, 64), randn(32, 64))",
            good="""\
import torch


def embed(x: torch.Tensor, labels: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w + 1
    h = torch.where(labels < 0, 0.0, h)
    return torch.tanh(h) * 2
""",
        ),
        Example(  # selections by slices of a mask argument, in a loop: the host reads the mask every iteration
            bad="""\
import torch
import torch.nn.functional as F


def codebook_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(())
    for k in range(targets.shape[1]):
        mask_k = mask[:, k].reshape(-1)
        logits_k = logits[:, k].reshape(-1, logits.shape[-1])
        targets_k = targets[:, k].reshape(-1)
        total = total + F.cross_entropy(logits_k[mask_k], targets_k[mask_k])
    return total / targets.shape[1]
""",
            at=((11, 41), (11, 59)),
            fixed=None,
            call="codebook_loss(randn(2, 4, 16, 8), (randn(2, 4, 16).abs() * 3).long().clamp(max=7), "
            "randn(2, 4, 16) > -0.5)",
            good="""\
import torch
import torch.nn.functional as F


def codebook_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(())
    for k in range(targets.shape[1]):
        mask_k = mask[:, k].reshape(-1)
        logits_k = logits[:, k].reshape(-1, logits.shape[-1])
        targets_k = targets[:, k].reshape(-1)
        loss_k = F.cross_entropy(logits_k, targets_k, reduction="none")
        total = total + (loss_k * mask_k).sum() / mask_k.sum()
    return total / targets.shape[1]
""",
        ),
        Example(  # a forward writes through the mask it is given, into a value it computed
            bad="""\
import torch
from torch import nn


class MaskFrames(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.mask_emb = nn.Parameter(torch.linspace(-1.0, 1.0, dim))

    def forward(self, x: torch.Tensor, w: torch.Tensor, mask=None) -> torch.Tensor:
        h = x @ w
        if mask is not None:
            h[mask] = self.mask_emb
        return torch.tanh(h) * 2
""",
            at=((13, 13),),
            fixed=None,
            call="MaskFrames(32)(randn(4, 16, 32), randn(32, 32), randn(4, 16) > 0)",
            good="""\
import torch
from torch import nn


class MaskFrames(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.mask_emb = nn.Parameter(torch.linspace(-1.0, 1.0, dim))

    def forward(self, x: torch.Tensor, w: torch.Tensor, mask=None) -> torch.Tensor:
        h = x @ w
        if mask is not None:
            h = torch.where(mask[..., None], self.mask_emb, h)
        return torch.tanh(h) * 2
""",
        ),
        Example(  # a round trip: a tensor made from Python values, reduced and read back
            bad="""\
import torch


def pad_batch(seqs: list, x: torch.Tensor) -> torch.Tensor:
    lengths = torch.tensor([len(s) for s in seqs])
    width = int(lengths.amax().item())
    return torch.tanh(x[:, :width]) * 2
""",
            at=((6, 17),),
            fixed=None,
            call="pad_batch([[1, 2], [3, 4, 5], [6]], randn(8, 16))",
            good="""\
import torch


def pad_batch(seqs: list, x: torch.Tensor) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    return torch.tanh(x[:, :width]) * 2
""",
        ),
        Example(  # a module's forward reads a number it computed, and goes on computing with it
            bad="""\
import torch
from torch import nn


class ClipOutliers(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        spread = h.abs().mean() * 2
        limit = float(spread)
        return torch.tanh(torch.where(h.abs() > limit, 0.0, h)) * 2
""",
            at=((9, 17),),
            fixed=None,
            call="ClipOutliers()(randn(16, 32), randn(32, 64))",
            good="""\
import torch
from torch import nn


class ClipOutliers(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        spread = h.abs().mean() * 2
        return torch.tanh(torch.where(h.abs() > spread, 0.0, h)) * 2
""",
        ),
        Example(  # a loss branches on a count it computed: the caller's work and its own are flushed apart
            bad="""\
import torch


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    valid = (labels > 0).float()
    count = valid.sum()
    if count == 0:
        return logits.sum() * 0.0
    return -(torch.log_softmax(logits, -1)[:, 0] * valid).sum() / count
""",
            at=((7, 8),),
            fixed=None,
            call="token_loss(randn(64, 16), randn(64))",
            good="""\
import torch


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    valid = (labels > 0).float()
    count = valid.sum()
    return -(torch.log_softmax(logits, -1)[:, 0] * valid).sum() / count.clamp(min=1)
""",
        ),
        Example(  # a slice bound read per iteration from a tensor (speechbrain's get_mask): one comparison instead
            bad="""\
import torch


def zero_tails(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    mask = torch.ones_like(x)
    for i in range(x.shape[1]):
        mask[lengths[i] :, i] = 0
    return x * mask
""",
            at=((7, 14),),
            fixed=None,
            call="zero_tails(randn(16, 4), (randn(4).abs() * 8).long())",
            good="""\
import torch


def zero_tails(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    keep = torch.arange(x.shape[0])[:, None] < lengths[None, :]
    return x * keep
""",
        ),
        Example(  # per-row work on a tensor made before the loop, handed to the host per row (sam2's mask_to_rle)
            bad="""\
import torch


def run_starts(masks: torch.Tensor) -> list:
    flat = masks > 0
    change = (flat[:, 1:] != flat[:, :-1]).nonzero()
    out = []
    for i in range(flat.shape[0]):
        starts = change[change[:, 0] == i, 1] + 1
        out.append(starts.cpu().tolist())
    return out
""",
            at=((10, 20),),
            fixed=None,
            call="run_starts(randn(3, 30))",
            good="""\
import torch


def run_starts(masks: torch.Tensor) -> list:
    flat = masks > 0
    change = (flat[:, 1:] != flat[:, :-1]).nonzero().tolist()
    out = [[] for _ in range(flat.shape[0])]
    for row, col in change:
        out[row].append(col + 1)
    return out
""",
        ),
        Example(  # a selection per row read only for its length and first element (a greedy searcher's stop)
            bad="""\
import torch


def first_stop(scores: torch.Tensor, stop: int) -> torch.Tensor:
    ids = scores.argmax(-1)
    lengths = [ids.shape[1]] * ids.shape[0]
    for i in range(ids.shape[0]):
        found = (ids[i] == stop).nonzero()
        if len(found) > 0:
            lengths[i] = found[0].item()
    return scores.mean((1, 2)) * torch.tensor(lengths)
""",
            at=((8, 17), (10, 26)),
            fixed=None,
            call="first_stop(randn(6, 12, 4), 0)",
            good="""\
import torch


def first_stop(scores: torch.Tensor, stop: int) -> torch.Tensor:
    ids = scores.argmax(-1)
    hit, first = (ids == stop).max(dim=1)
    return scores.mean((1, 2)) * torch.where(hit, first, ids.shape[1])
""",
        ),
    )
    valid = (
        # the sync comes after all the work
        """\
import torch


def loss(x: torch.Tensor, y: torch.Tensor) -> float:
    d = torch.tanh(x) - y
    value = (d * d).mean()
    return value.item()
""",
        """\
import torch


def stats(x: torch.Tensor) -> dict:
    h = torch.relu(x * 2)
    out = h.sum(-1)
    print("done", out.mean())
    return {"mean": float(out.mean()), "peaks": out.tolist()}
""",
        # NumPy arrays and Python numbers
        """\
import numpy as np
import torch


def f(arr: np.ndarray, x: torch.Tensor, n: int, scale):
    y = x * 2
    total = arr.sum().item()
    bins = arr.tolist()
    k = int(n * 0.5)
    s = float(scale)
    if n > 3:
        y = y + 1
    return y * total + k + s + len(bins)
""",
        # metadata and identity tests are not syncs
        """\
import torch


def forward(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    h = torch.relu(x)
    print(h.shape, h.dtype)
    if mask is not None and x.dim() == 3:
        h = h * mask
    n = int(h.size(0))
    return h[:n] + 1
""",
        # logging outside the hot loop
        """\
import torch


def train(x: torch.Tensor, steps: int) -> torch.Tensor:
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 0.9 + 0.1)
    print("final", h.mean().item())
    return h
""",
        # an exception's message is built on the way out: no tensor work follows
        """\
import torch


def check(x: torch.Tensor, limit: float) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if h.shape[0] > 8:
        raise ValueError(f"too many rows: {h.amax(-1).tolist()} above {limit}")
    assert h.dim() == 2, f"expected a matrix, got one summing to {h.sum().item()}"
    return h + 1
""",
        # validation, a shape decision and a loop exit: the host needs these values
        """\
import warnings

import torch


def clean(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if torch.isnan(h).any():
        warnings.warn("nan in the input")
        h = torch.nan_to_num(h)
    out = torch.zeros(int(idx.max()) + 1, h.shape[-1])
    out = out.index_add(0, idx, h)
    for _ in range(10):
        out = out * 0.5
        if (out.abs() < 1).all():
            break
    while float(out.abs().amax()) > 1e3:
        out = out * 0.5
    return out + 1
""",
        # a scalar read after backward (autograd ran the step's work already); a scale factor
        # that decides interpolate's output size
        """\
import torch
import torch.nn.functional as F


def train(model, batches, optimizer) -> float:
    running = 0.0
    for x, y in batches:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        running = 0.9 * running + 0.1 * loss.item()
    return running


def resize(image: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    shape = torch.tensor(image.shape[-2:], dtype=torch.float32)
    scale = torch.min(lo / shape.min(), hi / shape.max())
    scale_factor = scale.item()
    out = F.interpolate(image[None], scale_factor=scale_factor, mode="bilinear")
    return out[0] * 2
""",
        # a fast path: the masked write is skipped when nothing matches (wav2vec2's negatives)
        """\
import torch


def contrastive(q: torch.Tensor, negatives: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    same = (q == negatives).all(-1)
    if same.any():
        logits[1:][same] = float("-inf")
    return torch.log_softmax(logits * 2, -1)
""",
        # an element read as a size, with no arithmetic on it (the per-roi sizes of torchvision's
        # heatmaps_to_keypoints: one .tolist() before the loop measured paying nowhere); an element
        # of a tensor the loop rewrites; an element checked to raise
        """\
import torch


def pad_each(x: torch.Tensor, lengths: torch.Tensor, steps: torch.Tensor) -> list:
    out = []
    for i in range(x.shape[0]):
        if lengths[i] > x.shape[1]:
            raise ValueError("length beyond the padded size")
        out.append(torch.tanh(x[i, : int(lengths[i])] * 2))
    for i in range(steps.shape[0]):
        if steps[i] > 0:
            steps = steps - 1
        x = torch.tanh(x * 2)
    return out + [x]
""",
        # a draw from torch's RNG on the host device: no device work feeds the read (LayerDrop, a coin flip)
        """\
import torch
from torch import nn


class Flip(nn.Module):
    def forward(self, waveform: torch.Tensor, layers: list, p: float) -> torch.Tensor:
        h = waveform * 2
        for w in layers:
            if torch.rand(1).item() < p:
                continue
            h = torch.tanh(h @ w)
        if torch.rand([]).item() < p:
            return -h
        return h * 2
""",
        # a loop that does no tensor work (it only reads results)
        """\
import torch


def report(x: torch.Tensor) -> list:
    probs = torch.softmax(x, -1)
    rows = []
    for row in probs:
        rows.append(row.max().item())
    return rows
""",
        # selections the work needs: the kept scores size a top-k, the indices route rows; a masked
        # write into a parameter (the caller's tensor) and one that nothing matching skips
        """\
import torch


def keep_top(scores: torch.Tensor, boxes: torch.Tensor, x: torch.Tensor, route: torch.Tensor, w: torch.Tensor):
    keep = scores > 0.5
    kept = scores[keep]
    top = kept.topk(3).indices
    out = torch.zeros_like(x)
    for e in range(4):
        rows = torch.where(route == e)[0]
        out.index_add_(0, rows, torch.tanh(x[rows] @ w))
    x[scores < 0] = 0.0
    h = out * 2
    same = h > 3
    if same.any():
        h[same] = 3.0
    return boxes[keep][top], h + x
""",
    )

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str]:
        return _NEEDLE

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        text = block[index]
        if _METHOD_SYNC.search(text) or _selects_text(block, index):
            return True
        if ":" in text and "[" in text and "=" in text and _SLICED_WRITE.match(text):
            return True  # a slice bound written per iteration
        if ("nonzero" in text or "where" in text or "masked_select" in text) and _SELECT_CALL.search(text):
            return True  # a selection per iteration (`argwhere` holds `where`)
        if _op_call_text(ops).search(text) is not None and _VALUE_SYNC.search(text) is not None:
            return True  # (the op first: fewer statements call one)
        # `if i == n:` on a loop's element, before the tensor work it guards
        if _COMPARING_TEST.match(text) is not None and any(
            _op_call_text(ops).search(block[later]) for later in range(index + 1, min(index + 4, len(block)))
        ):
            return True
        if not _NAME_READ_WORD.search(text):
            return False
        if "for" in text and _FILTER_TEXT.search(text):
            return True
        choice = _CHOICE_TEST.search(text) if "else" in text else None
        if choice is not None:
            if "[" in choice.group(1):
                return True  # `g if lo <= sigmas[i] <= hi else 0.0`
            elements = (_ELEMENT_ASSIGNMENT.match(block[earlier]) for earlier in range(max(0, index - 4), index))
            if any(found and re.search(rf"\b{found.group(1)}\b", choice.group(1)) for found in elements):
                return True  # `sigma = sigmas[i]` above it
        if "[" in text and _ELEMENT_WORK.search(text):
            return True
        read = _NAME_READ.match(text) or _CONDITIONAL_READ.match(text)
        if read is None:
            return False
        if index == 0 and not text.lstrip().startswith(("if", "elif")):
            return True  # `float(t)` first in a block: `t` may be what a `for` above it takes from a tensor
        name = read.group(1)
        element = _element_assignment_of(name)
        calls = _op_call_text(ops)
        return any(
            (_assigns(block[earlier], name) and (calls.search(block[earlier]) or _ARITHMETIC_TEXT.search(block[earlier])))
            or element.match(block[earlier])
            for earlier in range(max(0, index - 4), index)
        )

    def check(self, scope: Scope) -> Iterator[Violation]:
        for ref in scope_statements(scope):
            statement = ref.node
            small = statement.body[0] if statement.__class__ is cst.SimpleStatementLine else None
            if small.__class__ is cst.Assign and small.targets[0].target.__class__ is cst.Subscript or \
                    small.__class__ is cst.AugAssign and small.target.__class__ is cst.Subscript:  # (no call: cheap)
                bound = _element_indexed_write(scope, ref)
                if bound is not None:
                    yield Violation(bound, message=_ELEMENT_WRITE_MESSAGE)
            loop = _enclosing_loop(ref) if _in_working_loop(scope, ref) and not _runs_once(scope) else None
            for part in own_parts(statement):
                test = isinstance(statement, (cst.If, cst.While)) and part is statement.test
                if test and isinstance(statement, cst.If) and loop is None and isinstance(part, cst.Comparison) \
                        and _hot(scope) and _tests_tensor_element(scope, scope.node, statement) \
                        and _branch_works(scope, statement) and not _needed_branch(scope, statement, ref):
                    yield Violation(part, message="a branch on an element of a tensor a step function does not "
                                    "change: each call launches a kernel and is a host sync that flushes the lazy "
                                    "stream; read the tensor once with `.tolist()` where it is made and compare "
                                    "host numbers")
                    continue
                if test and isinstance(statement, cst.If) and _tests_tensor_element(scope, loop, statement):
                    yield Violation(part, message=f"{_describe('element')}, in a loop that does tensor work: each "
                                    f"test launches a kernel and is a host sync that flushes the lazy stream, once "
                                    f"per iteration; {_ADVICE['element']}")
                    continue
                if test and isinstance(statement, cst.While):
                    continue  # a loop's exit condition
                rows: list[cst.Call] = []
                if loop is not None:
                    casts = [] if _in_failing_arm(ref) else list(_element_casts(scope, loop, part))
                    rows = [] if _in_failing_arm(ref) else list(_row_reads(scope, loop, ref, part))
                    casts = [cast for cast in casts if not any(cast is row for row in rows)]
                else:
                    casts = [cast for cast in _repeated_element_casts(scope).get(id(statement), ()) if part is statement
                             or ancestors(part, cast) is not None]
                syncs = _syncs(scope, part, test, by_name=loop is not None or _hot(scope), loop=loop)
                if casts or rows:
                    syncs = [(node, kind) for node, kind in syncs if not any(node is cast for cast in (*casts, *rows))]
                if test and (casts or syncs) and _needed_branch(scope, statement, ref):
                    continue  # validation, a loop exit: asked only of a test that syncs (it reads both arms)
                if loop is not None:
                    where, advice = "in a loop that does tensor work: each iteration launches", _ADVICE["arithmetic"]
                else:
                    where, advice = "one of several reads of the same tensor's elements: each launches", \
                        _ADVICE["elements"]
                for row in rows:
                    yield Violation(row, message=f"{_describe(_callee(row))} of a reduction of one row of a tensor "
                                    "the loop does not change, in a loop that does tensor work: each iteration "
                                    "launches the reduction and syncs; reduce every row at once before the loop "
                                    "and read them with one `.tolist()`")
                for cast in casts:
                    yield Violation(cast, message=f"{_describe(_callee(cast))} of arithmetic on a tensor's "
                                    f"elements, {where} kernels on 0-d tensors only to make a host number, and "
                                    f"syncs; {advice}")
                for node, kind in syncs:
                    if kind == "element":
                        if _element_choice_costs(scope, ref, node, loop):
                            where = "the loop does not change, in a loop that does tensor work" if loop else \
                                "a step function does not change"
                            yield Violation(node.test, message=f"a choice on an element of a tensor {where}: "
                                            "each test launches a kernel and is a host sync that flushes the lazy "
                                            "stream; read the tensor once with `.tolist()` (before the loop, or "
                                            "where it is made) and compare host numbers")
                        continue
                    if kind == "filter":
                        if not (_runs_once(scope) or _in_failing_arm(ref)) and _iterates_tensor(scope, ref, node):
                            yield Violation(node, message=_FILTER_MESSAGE)
                        continue
                    if kind == "select":
                        if _runs_once(scope) or _in_failing_arm(ref):
                            continue
                        if _writes_computed_value(scope, ref, node):
                            yield Violation(node, message=_MASKED_WRITE_MESSAGE)
                        elif _only_reduced(scope, ref, node) and not _mask_selects_elsewhere(scope, node):
                            yield Violation(node, message=_SELECT_MESSAGE)
                        elif isinstance(node, cst.Call) and _only_read_on_host(ref, node) and \
                                _reads_invariant_rows(scope, ref, node):
                            yield Violation(node, message=_ROW_READ_MESSAGE)
                        continue
                    if kind in _SCALAR_READS | _HAND_OFFS and not _runs_once(scope) and _reads_back(scope, ref, node):
                        yield Violation(node, message=_READ_BACK_MESSAGE)
                        continue
                    if _host_draw(scope, node):
                        continue
                    where = _where(scope, ref)
                    if kind in _HAND_OFFS and _reads_invariant_rows(scope, ref, node):
                        yield Violation(node, message=_ROW_READ_MESSAGE)
                        continue
                    if where is None or _needed_once(scope, ref, node, kind, where, branch=test):
                        continue
                    yield Violation(node, message=f"{_describe(kind)} {where}: {_COST[where]}; {_ADVICE[kind]}")


def _selects_text(block: Sequence[str], index: int) -> bool:
    """Can the statement select by the data where the check reports it: a write through a mask into a
    name an earlier statement of its block assigns, or a selection reduced in the statement or
    assigned to names a later statement reduces (a value returned or stored as it is needs the
    selection)? An index by a name the block does not assign may be a mask only where the statement
    reduces or computes a loss."""
    text = block[index]
    if "[" not in text and "where" not in text and "nonzero" not in text and "masked_select" not in text:
        return False  # `argwhere` holds `where`
    if _SELECT_CALL.search(text) is None and _MASK_INDEX.search(text) is None:
        return False  # neither a selection nor an index by a mask, which the tests below end with
    if _STRING_STATEMENT.match(text):
        return False  # a docstring, or a string assigned
    write = _INDEX_WRITE.match(text)
    reduces = _REDUCING_TEXT.search(text) is not None
    if write is not None:
        if not any(_assigns(block[earlier], write.group(1)) for earlier in range(index)) and index > 0:
            return False  # first in its block (an `if` body), the name may be computed above the block
    elif not reduces:
        assignment = _NAME_ASSIGNMENT.match(text)
        if assignment is None or not _reduced_later_text(block, index, assignment.group(1)):
            return False
    if _SELECT_CALL.search(text) is not None:
        return True
    mask = _mask_index_text(block, index)
    return mask == "mask" or (mask == "maybe" and reduces and write is None)


def _reduced_later_text(block: Sequence[str], index: int, targets: str) -> bool:
    """Does a later statement of the block read one of ``targets`` (``a, b``) where a reduction may
    follow: with a reduction or a loss in its text, or as a compound statement's header (its body
    is a block of its own)?"""
    reads = _reads_of(tuple(re.split(r"\s*,\s*", targets.strip())))
    return any(
        reads.search(block[later]) and (_REDUCING_TEXT.search(block[later]) or _COMPOUND.match(block[later]))
        for later in range(index + 1, len(block))
    )


@functools.lru_cache(maxsize=1024)
def _reads_of(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(names) + r")\b")


def _mask_index_text(block: Sequence[str], index: int) -> str | None:
    """How the statement indexes a tensor: by a mask ("mask": a comparison, an inverted mask, a name
    the nearest earlier assignment of its block makes a mask, ``keep = scores > t`` ... ``boxes[keep]``),
    maybe by one ("maybe": a name its block does not assign), or by no mask (None)."""
    text = block[index]
    found_maybe = False
    for found in _MASK_INDEX.finditer(text):
        if found.group(1) or found.group(3) != "]" or _says_mask(found.group(2)):
            return "mask"
        nearest = next((block[earlier] for earlier in range(index - 1, -1, -1) if _assigns(block[earlier], found.group(2))), None)
        if nearest is not None and _MASK_TEXT.search(nearest):
            return "mask"
        found_maybe = found_maybe or nearest is None
    return "maybe" if found_maybe else None


# words of a name that says it holds positions or ids, not a mask (`mask_idx`, `mask_token_id`)
_INDEX_WORDS = frozenset({"idx", "idxs", "ids", "id", "index", "indices", "ind", "inds", "pos", "position", "positions",
                          "token", "tokens"})


@functools.lru_cache(maxsize=1024)
def _says_mask(name: str) -> bool:
    """Does the name say it holds a boolean mask (`mask`, `loss_mask`, `mask_k`)? A tensor indexes
    another only if it is boolean or integer, and an integer index is named for positions or ids,
    so such a name indexing a tensor selects by the data."""
    words = name.lower().split("_")
    return any(word in ("mask", "masks") for word in words) and not any(word in _INDEX_WORDS for word in words)


def _assigns(line: str, name: str) -> bool:
    """Is ``line`` the text of an assignment of ``name`` (``name = ...``)? One shared pattern: the
    names asked about are many, and a pattern per name would be compiled per name."""
    found = _ASSIGNED.match(line)
    return found is not None and found.group(1) == name


_ASSIGNED = re.compile(r"\s*(\w+)\s*=[^=]")


@functools.lru_cache(maxsize=4096)
def _element_assignment_of(name: str) -> re.Pattern[str]:
    """The text of an assignment of an element to ``name`` (``sigma = sigmas[i]``, in a tuple too)."""
    return re.compile(r"[\w\s,]*\b" + name + r"\b[\w\s,]*=[^=].*\w\[")


@functools.lru_cache(maxsize=32)
def _op_call_text(ops: OpTables) -> re.Pattern[str]:
    names = sorted(ops.compute | ops.elementwise)
    return re.compile(r"\.\s*(?:" + "|".join(map(re.escape, names)) + r")\s*\(")


# --------------------------------------------------------------------------- finding syncs


def _syncs(
    scope: Scope, part: cst.CSTNode, test: bool, by_name: bool, loop: cst.CSTNode | None = None
) -> list[tuple[cst.CSTNode, str]]:
    """(node, kind) of each host sync evaluated by ``part`` (not inside lambdas or definitions);
    ``test``: ``part`` is the test of an ``if``/``elif``/``while``, whose truth value Python takes;
    ``by_name``: a local name that tensor ops computed counts as a computed tensor (in a working
    loop, where each iteration makes it anew); ``loop``: the working loop around ``part``, whose
    elements are compared per iteration when it does not change their tensor."""
    found = list(_branch_syncs(scope, part, by_name)) if test else []  # type: ignore[arg-type]
    _add_syncs(scope, part, by_name, found, loop)
    return found


_NOT_EVALUATED_HERE = node_types(cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Raise, cst.Assert)


def _add_syncs(
    scope: Scope, node: cst.CSTNode, by_name: bool, found: list[tuple[cst.CSTNode, str]], loop: cst.CSTNode | None = None
) -> None:
    """Add ``_syncs``' finds under ``node`` to ``found`` (a walk of every node of a statement: a list
    filled in place costs less than a generator per node)."""
    # The value is needed on the host once, not in the middle of work: an exception's message
    # (`raise E(f"{t.tolist()}")`) is built on the way out; an assertion or a `*check*(...)` call
    # validates the input; a conditional expression whose arms do no tensor work only picks a
    # host value.
    kind = type(node)
    if kind in _NOT_EVALUATED_HERE or kind is cst.Call and _is_check(node):
        return
    tests: list[cst.BaseExpression] = []
    if kind is cst.IfExp:
        if by_name and _compares_element(scope, node.test, loop or scope.node):
            found.append((node, "element"))  # `gamma = g if lo <= sigmas[i] <= hi else 0.0`
        if not (_does_work(scope, node.body) or _does_work(scope, node.orelse)):
            _add_syncs(scope, node.body, by_name, found, loop)
            _add_syncs(scope, node.orelse, by_name, found, loop)
            return
        tests.append(node.test)
    elif kind is cst.UnaryOperation and isinstance(node.operator, cst.Not):
        tests.append(node.expression)
    elif kind is cst.BooleanOperation:
        tests += [node.left, node.right]
    elif kind is cst.Call:
        sync = _call_sync(scope, node, by_name)
        if sync is not None and not _after_sync(scope, node):
            found.append((node, sync))  # in `x.cpu().to(torch.double).numpy()` only the first sync is reported
        elif sync is None and _data_shaped_call(scope, node):
            found.append((node, "select"))
    elif kind is cst.Subscript and _selects_by_mask(scope, node):
        found.append((node, "select"))
    elif kind is cst.CompFor:
        found.extend((test, "filter") for test in _element_filters(scope, node))
    for test in tests:
        found.extend(_branch_syncs(scope, test, by_name))
    for child in children(node):
        _add_syncs(scope, child, by_name, found, loop)


def _is_check(node: cst.CSTNode) -> bool:
    """A call to a validation helper (`KORNIA_CHECK(...)`, `check_shape(...)`, `torch._assert(...)`)."""
    return isinstance(node, cst.Call) and any(word in _callee(node).lower() for word in ("check", "assert"))


def _after_sync(scope: Scope, call: cst.Call) -> bool:
    """Has the receiver chain of ``call`` synced already (``x.cpu()`` in ``x.cpu().to(d).numpy()``)?"""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    while isinstance(receiver, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(receiver, cst.Call):
            if _call_sync(scope, receiver):
                return True
            receiver = receiver.func
        else:
            receiver = receiver.value
    return False


def _branch_syncs(scope: Scope, test: cst.BaseExpression, by_name: bool) -> Iterator[tuple[cst.CSTNode, str]]:
    """``test`` itself, when Python takes the truth value of a computed tensor there. The operands
    of ``and``/``or``/``not`` are tested when those nodes are visited."""
    if isinstance(test, cst.BooleanOperation):
        return
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return
    if _computes_tensor(scope, test, by_name):
        yield test, "branch"


def _describe(kind: str) -> str:
    if kind == "branch":
        return "a branch on a tensor's value"
    if kind == "element":
        return "a branch on an element of a tensor the loop does not change"
    return f"`.{kind}()`" if kind in SYNC_METHODS else f"`{kind}(...)`"


def _call_sync(scope: Scope, call: cst.Call, by_name: bool = False) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        if name not in SYNC_METHODS and name != "to" or not scope.is_tensor(func.value):
            return None
        if name in SYNC_METHODS:
            return name
        if any(_is_cpu(arg) for arg in call.args):
            return "cpu"
        return None
    if isinstance(func, cst.Name) and func.value in SYNC_BUILTINS and func.value not in scope.facts.aliases:
        values = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if func.value != "print":
            values = values[:1]
        for value in values:
            if _computes_tensor(scope, value, by_name) or any(_computes_tensor(scope, e, by_name) for e in _formatted(value)):
                return func.value
    return None


def _is_cpu(arg: cst.Arg) -> bool:
    if arg.keyword is not None and arg.keyword.value != "device":
        return False
    value = arg.value
    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("cpu", b"cpu")


def _formatted(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.FormattedString):
        return [p.expression for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
    return []


def _computes_tensor(scope: Scope, expr: cst.BaseExpression, by_name: bool = False) -> bool:
    """A tensor-valued expression that itself calls a tensor op of the tables (``x.sum()``,
    ``(a > 0).any()``), or with ``by_name`` reads a local name that each of its assignments
    computes so (``denom = m.sum()``, then ``if denom > 0:``): strong evidence of a tensor,
    unlike a bare name of unknown type."""
    if isinstance(expr, cst.Comparison) and any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons
    ):
        return False
    return scope.is_tensor(expr) and _has_table_op_call(scope, expr, frozenset() if by_name else None)


def _has_table_op_call(scope: Scope, node: cst.CSTNode, seen: frozenset[str] | None) -> bool:
    """Does ``node`` run a tensor op, itself or (``seen`` not None) through the assignments of the
    local names it reads (``seen``: the names followed already)? A method of the tables counts
    (``x.sum()``), and so does arithmetic on a parameter annotated as a tensor (``a * b``): each
    launches a kernel whose result the host then waits for."""
    if isinstance(node, (cst.Lambda, cst.FunctionDef)):
        return False
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if scope.ops.op_class(node.func.attr.value) is not None and scope.is_tensor(node):
            return True
    if isinstance(node, cst.BinaryOperation) and any(
        isinstance(operand, cst.Name) and operand.value in _annotated_tensors(scope)
        for operand in (node.left, node.right)
    ):
        return True
    if isinstance(node, cst.Name) and seen is not None and node.value not in seen:
        return _computed_name(scope, node.value, seen | {node.value})
    return any(_has_table_op_call(scope, child, seen) for child in children(node))


@per_scope
def _annotated_tensors(scope: Scope) -> frozenset[str]:
    """The parameters annotated as tensors: surely tensors, unlike a parameter taken for one by its use."""
    if not isinstance(scope.node, cst.FunctionDef):
        return frozenset()
    params = scope.node.params
    return frozenset(
        param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)
        if param.annotation is not None and scope.is_tensor_annotation(param.annotation.annotation)
    )


def _computed_name(scope: Scope, name: str, seen: frozenset[str]) -> bool:
    """Is ``name`` a local tensor that every assignment of it computes with a tensor op, or the
    element a ``for`` takes from a tensor (``for t in timesteps``: a 0-d tensor each time)?"""
    if name not in scope.tensors or name in scope.params:
        return False
    values = []
    for target, value in scope.assignments:
        if isinstance(target, cst.Name):
            if target.value == name:
                values.append(value)
        elif any(isinstance(e, cst.Name) and e.value == name for e in _target_elements(target)):
            return False  # unpacked: its value is unknown
    for target, iterable in scope.loops:
        element = _loop_element(target, iterable)
        if element is not None and element[0] == name:
            if not scope.is_tensor(element[1]):
                return False
            values.append(None)
        elif any(isinstance(e, cst.Name) and e.value == name for e in _target_elements(target)):
            return False
    return bool(values) and all(
        v is None or (scope.is_tensor(v) and _has_table_op_call(scope, v, seen)) for v in values
    )


def _loop_element(target: cst.BaseExpression, iterable: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """(name, what it iterates) of ``for name in it`` or ``for i, name in enumerate(it)``."""
    if isinstance(target, cst.Name):
        if isinstance(iterable, cst.Call) and _callee(iterable) in ("enumerate", "zip"):
            return None
        return target.value, iterable
    if (
        isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name)
        and isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"
        and len(iterable.args) == 1
    ):
        return target.elements[1].value.value, iterable.args[0].value
    return None


def _iterates_tensor(scope: Scope, ref: StatementRef, test: cst.CSTNode) -> bool:
    """Does the comprehension holding ``test`` iterate what surely is a tensor at ``ref``: not a name
    last bound to a host copy of one (``ids = t.tolist()``)?"""
    comp = next((n for n in ancestors(ref.node, test) or [] if isinstance(n, cst.CompFor)), None)
    if comp is None or not isinstance(comp.iter, cst.Name):
        return True
    name = comp.iter.value
    value = reaching_value(ref, name)
    values = [value] if value is not None else list(_assigned_values(scope, name))
    return all(v is not None and scope.is_tensor(v) and not _synced(scope, v) for v in values)


def _synced(scope: Scope, value: cst.BaseExpression) -> bool:
    """``t.tolist()``, ``t.cpu().numpy()``: a host value, whatever the name held before."""
    return isinstance(value, cst.Call) and (_call_sync(scope, value) is not None or _after_sync(scope, value))


def _compares_element(scope: Scope, test: cst.BaseExpression, within: cst.CSTNode) -> bool:
    """A comparison of an element of a tensor ``within`` (the function, or the loop around the
    test) never changes (``lo <= sigmas[i] <= hi``, ``tensor[i, 0] == 0``)."""
    return isinstance(test, cst.Comparison) and not any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons
    ) and _element_work(scope, within, test)


def _element_choice_costs(scope: Scope, ref: StatementRef, choice: cst.IfExp, loop: cst.CSTNode | None) -> bool:
    """Does a conditional expression testing an element sync where it costs: in a working loop (once
    per iteration), or in a step function when its value goes on into tensor work? A value that
    decides a shape or a loop exit, and an error's message, are needed on the host."""
    if _runs_once(scope) or _in_failing_arm(ref) or _decides_exit(ref, choice):
        return False
    if _decides_shape(scope, ref, choice, "branch"):
        return False
    return loop is not None or (_hot(scope) and _flows_back(scope, ref, choice))


def _element_filters(scope: Scope, comp: cst.CompFor) -> Iterator[cst.BaseExpression]:
    """The ``if`` tests of a comprehension over a tensor that compare its element itself
    (``for i in ids if i != blank``): one 0-d kernel and one sync per element."""
    if not isinstance(comp.target, cst.Name) or not scope.is_tensor(comp.iter):
        return
    for condition in comp.ifs:
        test = condition.test
        if not isinstance(test, cst.Comparison) or any(
            isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons
        ):
            continue
        if any(_element_value(operand, comp.target.value) for operand in (test.left, *(c.comparator for c in test.comparisons))):
            yield test


def _tests_tensor_element(scope: Scope, loop: cst.CSTNode | None, statement: cst.If) -> bool:
    """``for e in hits: if e == n:`` or ``sigma = sigmas[i]; if sigma > 0:`` in a loop that does
    tensor work (``loop``): each comparison of an element launches a 0-d kernel and syncs, once per
    iteration, where one ``.tolist()`` before the loop syncs once. Validation (an arm that raises)
    is left alone."""
    test = statement.test
    if loop is None or not isinstance(test, cst.Comparison):
        return False
    if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
        return False
    operands = [test.left, *(c.comparator for c in test.comparisons)]
    element = isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and scope.is_tensor(loop.iter) \
        and any(_element_value(operand, loop.target.value) for operand in operands)
    return (element or _element_work(scope, loop, test)) and not _raises_or_warns(statement)


def _element_casts(scope: Scope, loop: cst.CSTNode, part: cst.CSTNode) -> Iterator[cst.Call]:
    """``int(boxes[i, 2] - boxes[i, 0])`` under ``part``: a host number made by arithmetic on
    elements of a tensor the loop does not change (a cast that computes with a tensor op is one
    of _syncs')."""
    if isinstance(part, (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Raise, cst.Assert)) or _is_check(part):
        return
    if _element_cast(scope, loop, part):
        yield part  # type: ignore[misc]
    for child in children(part):
        yield from _element_casts(scope, loop, child)


def _row_reads(scope: Scope, loop: cst.CSTNode, ref: StatementRef, part: cst.CSTNode) -> Iterator[cst.Call]:
    """``mask.sum().item()``, ``int(counts[i].sum())`` under ``part``: a host number read from a
    reduction of one row of a tensor the loop does not change (the element a ``for`` takes from it,
    not rebound above in the iteration, or ``c[i]``), whatever it goes on to size: each iteration
    launches the reduction and syncs, where one reduction over every row before the loop and one
    ``.tolist()`` read every number (vector-quantize's dead-code count per codebook: 18 -> 10
    kernels)."""
    for call in _scalar_reads(scope).get(id(ref.node), ()):
        read = _scalar_read_of(call)
        if read is None or not _row_reduction(scope, loop, ref, read):
            continue
        chain = ancestors(part, call)
        if chain is not None and not any(
            isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Raise, cst.Assert)) or _is_check(node)
            for node in chain
        ):
            yield call


@per_scope
def _scalar_reads(scope: Scope) -> dict[int, list[cst.Call]]:
    """The calls ``.item()``, ``int(...)``, ``float(...)`` of the scope, by the id of their statement."""
    found: dict[int, list[cst.Call]] = {}
    for key in ("item", "int", "float"):
        for site in scope.sites.get(key, ()):
            found.setdefault(id(site.statement.node), []).append(site.node)  # type: ignore[arg-type]
    return found


def _scalar_read_of(call: cst.Call) -> cst.BaseExpression | None:
    """``x`` of ``x.item()``, ``int(x)``, ``float(x)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not call.args:
        return func.value
    if isinstance(func, cst.Name) and func.value in ("int", "float") and len(call.args) == 1 \
            and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return None


def _row_reduction(scope: Scope, loop: cst.CSTNode, ref: StatementRef, expr: cst.BaseExpression) -> bool:
    """A full reduction (``sum``, ``amax``, ``count_nonzero``...) of one row of a tensor ``loop`` does
    not change."""
    op = scope.op(expr) if isinstance(expr, cst.Call) else None
    if op is None or op[0] not in _REDUCING or op[2] is None or not scope.is_tensor(op[2]):
        return False
    reduces_all = not any(arg.keyword is None or arg.keyword.value in ("dim", "axis") for arg in expr.args[  # type: ignore[attr-defined]
        (1 if scope.torch_name(expr.func) is not None else 0):])  # type: ignore[attr-defined]
    row = op[2]
    if not reduces_all or not _invariant_container_element(scope, loop, row):
        return False
    return not (isinstance(row, cst.Name) and _rebound_earlier(ref, loop, row.value))


def _rebound_earlier(ref: StatementRef, loop: cst.CSTNode, name: str) -> bool:
    """Is ``name`` written in the loop's body before ``ref`` (so the loop's element may not reach it)?"""
    while True:
        if any(_writes_name(earlier.node, name) for earlier in ref.earlier()):
            return True
        parent = ref.block.parent
        if parent is None or parent.node is loop:
            return False
        ref = parent


def _element_cast(scope: Scope, loop: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` ``int(...)``/``float(...)``/``bool(...)`` of arithmetic on elements of a tensor ``loop``
    does not change?"""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)) or node.func.value not in ("int", "float", "bool"):
        return False
    values = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
    if not values or node.func.value in scope.facts.aliases:
        return False
    if isinstance(values[0], cst.BinaryOperation) and _element_work(scope, loop, values[0]):
        return not _computes_tensor(scope, values[0], by_name=True)
    return _element_op(scope, loop, values[0])


# Element-wise ops that only change a value's type: on a host number's way they launch nothing new.
_CASTS = frozenset({"to", "float", "double", "half", "bfloat16", "int", "long", "bool", "type_as"})


def _element_op(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """An element-wise torch function of arithmetic on elements the loop does not change
    (``torch.round(lengths[i] * T)``, ``torch.ceil(seq_len * n)`` for the ``seq_len`` a ``for``
    takes from ``zip(x, seq_lens)``): each iteration launches kernels on 0-d tensors, where one
    op on the whole tensor before the loop and one ``.tolist()`` make every value. A torch op's
    operand is a tensor, so the elements are 0-d tensors whatever the container's type says."""
    op = scope.op(expr) if isinstance(expr, cst.Call) and scope.torch_name(expr.func) is not None else None
    if op is None or op[1] != ELEMENTWISE or op[0] in _CASTS or op[2] is None or len(expr.args) != 1:  # type: ignore[attr-defined]
        return False
    operand = op[2]
    return _element_op(scope, loop, operand) or _loop_arithmetic(scope, loop, operand)


def _loop_arithmetic(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """Arithmetic on at least one element the loop does not change (``lengths[i] * x.shape[1]``),
    the other operands numbers, sizes or such elements (no tensor of its own)."""
    if not isinstance(expr, cst.BinaryOperation):
        return False
    kinds = [_operand_kind(scope, loop, operand) for operand in (expr.left, expr.right)]
    return None not in kinds and "element" in kinds


def _operand_kind(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> str | None:
    """"element" (of a container ``loop`` does not change), "host" (a number, a size, a name that
    is no tensor), or None."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return "host"
    if isinstance(expr, cst.BinaryOperation):
        return "element" if _loop_arithmetic(scope, loop, expr) else None
    if _invariant_container_element(scope, loop, expr):
        return "element"
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return "host"
    if isinstance(expr, cst.Name) and not scope.is_tensor(expr):
        return "host"
    return None


def _invariant_container_element(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """``c[i]`` of a name ``c`` the loop does not write (an index, not a slice), or the element a
    ``for`` takes from such a name (``for x, n in zip(xs, lengths)``: ``n``)."""
    if isinstance(expr, cst.Subscript):
        return isinstance(expr.value, cst.Name) and all(isinstance(e.slice, cst.Index) for e in expr.slice) \
            and not _writes_name(loop, expr.value.value)
    if not (isinstance(expr, cst.Name) and isinstance(loop, cst.For)):
        return False
    container = _iterated_for(loop.target, loop.iter, expr.value)
    return isinstance(container, cst.Name) and not _writes_name(loop.body, container.value)


def _iterated_for(target: cst.BaseExpression, iterable: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """What ``name`` is an element of in ``for target in iterable`` (directly, through ``enumerate``
    or by its place in ``zip``), or None."""
    if isinstance(target, cst.Name):
        return iterable if target.value == name and not isinstance(iterable, cst.Call) else None
    if not (isinstance(target, cst.Tuple) and isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name)):
        return None
    args = [arg.value for arg in iterable.args if arg.keyword is None and not arg.star]
    if iterable.func.value == "enumerate" and len(target.elements) == 2 and len(args) == 1:
        return _iterated_for(target.elements[1].value, args[0], name)
    if iterable.func.value == "zip" and len(args) == len(target.elements):
        for element, arg in zip(target.elements, args):
            found = _iterated_for(element.value, arg, name)
            if found is not None:
                return found
    return None


@per_scope
def _repeated_element_casts(scope: Scope) -> dict[int, list[cst.Call]]:
    """Outside working loops, the element casts of a tensor the function reads so more than once
    (``w = int(box[2] - box[0])``, ``h = int(box[3] - box[1])``), by the id of their statement: each
    launches kernels on 0-d tensors and syncs, where one ``box.tolist()`` syncs once and launches
    nothing. Setup code and error messages are left alone."""
    if not isinstance(scope.node, cst.FunctionDef) or _runs_once(scope):
        return {}
    by_tensor: dict[str, list[Site]] = {}
    for site in (*scope.sites.get("int", ()), *scope.sites.get("float", ())):
        if _in_working_loop(scope, site.statement) or _in_failing_arm(site.statement):
            continue
        if _element_cast(scope, scope.node, site.node):
            for name in _element_tensors(site.node.args[0].value):  # type: ignore[attr-defined]
                by_tensor.setdefault(name, []).append(site)
    found: dict[int, list[cst.Call]] = {}
    for sites in by_tensor.values():
        if len(sites) > 1:
            for site in sites:
                found.setdefault(id(site.statement.node), []).append(site.node)  # type: ignore[arg-type]
    return found


def _element_tensors(expr: cst.BaseExpression) -> set[str]:
    """The names whose elements ``expr`` reads (``box`` of ``box[2] - box[0]``)."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
        return {expr.value.value}
    if isinstance(expr, cst.BinaryOperation):
        return _element_tensors(expr.left) | _element_tensors(expr.right)
    return set()


def _element_work(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` arithmetic or a comparison on elements of a tensor that ``loop`` does not change
    (``sigmas[i] > 0``, ``boxes[i, 2] - boxes[i, 0]``)?"""
    if isinstance(expr, cst.Comparison):
        operands = [expr.left, *(c.comparator for c in expr.comparisons)]
    elif isinstance(expr, cst.BinaryOperation):
        operands = [expr.left, expr.right]
    else:
        return False
    if any(isinstance(operand, cst.BaseString) for operand in operands):
        return False  # `names[i] == "skip"`: no tensor holds strings
    return any(_invariant_element(scope, loop, operand) or _element_work(scope, loop, operand) for operand in operands)


def _invariant_element(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """An element of a tensor name that ``loop`` never rebinds or writes (``sigmas[i]``), or a local
    name every assignment of which is such an element (``sigma = sigmas[i]``)."""
    if isinstance(expr, cst.Name):
        values = list(_assigned_values(scope, expr.value))
        return bool(values) and all(isinstance(v, cst.Subscript) and _invariant_element(scope, loop, v) for v in values)
    if not (isinstance(expr, cst.Subscript) and scope.is_tensor(expr.value)):
        return False
    if not all(isinstance(element.slice, cst.Index) for element in expr.slice):
        return False  # a slice is a tensor of its own, not an element
    owner = expr.value
    if isinstance(owner, cst.Attribute) and isinstance(owner.value, cst.Name) and owner.value.value == "self":
        return not _writes_member(loop, owner.attr.value)  # `self.sigmas[i]`: a schedule the object keeps
    return isinstance(owner, cst.Name) and not _writes_name(loop, owner.value)


def _writes_member(node: cst.CSTNode, member: str) -> bool:
    """Does ``node`` assign ``self.<member>`` (or into it), or call an in-place method on it?"""
    if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            for element in _target_elements(target):
                while isinstance(element, cst.Subscript):
                    element = element.value
                if isinstance(element, cst.Attribute) and element.attr.value == member:
                    return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value.endswith("_"):
        receiver = node.func.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == member:
            return True
    return any(_writes_member(child, member) for child in children(node))


def _assigned_values(scope: Scope, name: str) -> Iterator[cst.BaseExpression | None]:
    """The values the scope assigns to ``name``, pairing tuples (``a, b = x[i], x[i + 1]``);
    None for one that cannot be told (an unpacked call)."""
    for target, value in scope.assignments:
        if isinstance(target, cst.Name):
            if target.value == name:
                yield value
            continue
        targets, values = _target_elements(target), _target_elements(value)
        for i, element in enumerate(targets):
            if isinstance(element, cst.Name) and element.value == name:
                yield values[i] if len(values) == len(targets) and isinstance(value, (cst.Tuple, cst.List)) else None


def _writes_name(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` bind ``name``, assign into it (``name[i] = v``) or call an in-place method on it?"""
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, (cst.For, cst.CompFor)):
        targets = [node.target]
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value.endswith("_"):
        targets = [node.func.value]
    for target in targets:
        for element in _target_elements(target):
            while isinstance(element, (cst.Subscript, cst.Attribute)):
                element = element.value
            if isinstance(element, cst.Name) and element.value == name:
                return True
    return any(_writes_name(child, name) for child in children(node))


def _element_value(operand: cst.BaseExpression, element: str) -> bool:
    """Is ``operand`` the element itself or an item of it (``e``, ``e[0]``), not its metadata
    (``e.ndim``, ``e.shape[0]``)?"""
    while isinstance(operand, cst.Subscript):
        operand = operand.value
    return isinstance(operand, cst.Name) and operand.value == element


def _assigned_target(small: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The one target of ``t = v`` or ``t += v``; None for any other statement."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.targets[0].target
    if isinstance(small, cst.AugAssign):
        return small.target
    return None


def _element_indexed_write(scope: Scope, ref: StatementRef) -> cst.BaseExpression | None:
    """The slice bound of a write into a tensor in a ``for`` loop that is an element of a tensor the
    loop does not change (``mask[lengths[i]:, i] = 0``), when the written value does no tensor work of its own:
    each iteration reads the 0-d tensor on the host to index with and writes with a kernel of its
    own, where the whole loop is one ``torch.where`` or scatter. A value computed per row (sized by
    the bound) is left alone: the work it sizes is written anyway."""
    small = ref.simple
    target = _assigned_target(small)
    if not isinstance(target, cst.Subscript) or not scope.is_tensor(target.value) or _runs_once(scope):
        return None
    loop = _enclosing_loop(ref)
    if not isinstance(loop, cst.For) or _does_work(scope, small.value) or _in_failing_arm(ref):
        return None
    for element in target.slice:
        part = element.slice
        if isinstance(part, cst.Slice):  # (an index may be a row of a 2-d tensor: a scatter, no sync)
            for bound in (part.lower, part.upper, part.step):
                if bound is not None and _host_indexed_element(scope, loop, bound):
                    return bound
    return None


def _host_indexed_element(scope: Scope, loop: cst.CSTNode, expr: cst.BaseExpression) -> bool:
    """An element of a tensor ``loop`` does not change, taken by a host index (``t[i]``, not a
    gather ``t[idx]`` by a tensor): a 0-d tensor, or a row, which as a slice bound raises."""
    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)):
        return False
    index = expr.slice[0].slice.value  # type: ignore[union-attr]
    if not isinstance(index, cst.Name) or scope.is_tensor(index):
        return False
    owner = expr.value
    return _invariant_element(scope, loop, expr) and not (isinstance(owner, cst.Name) and _host_made(scope, owner.value))


_HOST_FACTORIES = frozenset({
    "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.arange", "torch.linspace", "torch.tensor",
    "torch.as_tensor", "torch.zeros", "torch.ones", "torch.full", "torch.empty",
})


def _host_made(scope: Scope, name: str, depth: int = 0) -> bool:
    """Is every value of ``name`` made on the host here: a factory with no ``device`` (``torch.randint(...)``,
    ``torch.linspace(...)``), or arithmetic on such names and numbers (``end = start + length``)? Its
    elements are read without waiting for the device."""
    values = list(_assigned_values(scope, name))
    return bool(values) and depth < 4 and all(_host_value(scope, value, depth) for value in values)


def _host_value(scope: Scope, value: cst.BaseExpression | None, depth: int) -> bool:
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.Name):
        return _host_made(scope, value.value, depth + 1)
    if isinstance(value, cst.BinaryOperation):
        return _host_value(scope, value.left, depth) and _host_value(scope, value.right, depth)
    if not isinstance(value, cst.Call):
        return False
    made = scope.torch_name(value.func)
    if made in _HOST_FACTORIES:  # (`torch.as_tensor(t)` keeps the device of a tensor `t`)
        return not any(arg.keyword is not None and arg.keyword.value == "device" for arg in value.args) and not (
            made in ("torch.tensor", "torch.as_tensor") and any(scope.is_tensor(arg.value) for arg in value.args)
        )
    return False


def _reads_invariant_rows(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is the synced value (a hand-off, ``x.cpu().tolist()``, or a selection by the data, ``nonzero``)
    computed in a ``for`` loop's iteration, by tensor work, from the rows of tensors the loop does not
    change (``cur = idx[idx[:, 0] == i, 1]``, ``pred = hyps[i]``), the loop's index and numbers alone?
    Then the work of every row runs once before the loop and one read syncs once. A value the loop
    gets from its data (a batch of a loader, a module's output) is left alone."""
    loop = _enclosing_loop(ref)
    if not isinstance(loop, cst.For) or _runs_once(scope) or _in_failing_arm(ref):
        return False
    value: cst.CSTNode = node
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            value = func.value
        elif node.args:
            value = node.args[0].value
    trace = _RowTrace(scope, loop)
    return trace.follow(ref, value) and trace.rows and trace.works and trace.invariant


def _only_read_on_host(ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is the selection, through the names it is assigned to, only read on the host: its length
    (``len(found)``, ``found.numel()``) or its elements (``found[0].item()``, ``found.tolist()``), not
    fed to tensor work or used to index (where the selection sizes the work that follows)?"""
    names = _assigned_names(ref, node)
    if not names:
        return False
    used = False
    for later in statements_after(ref):
        if later.node is ref.node:
            break  # the next iteration, back to the selection
        for name in names:
            for use in _name_nodes(later.node, name):
                if not _host_read(ancestors(later.node, use) or []):
                    return False
                used = True
        if names & names_of(later.node)[1]:
            break
    return used


_HOST_READS = frozenset({"item", "tolist", "numel", "shape", "size", "dim", "ndim", "cpu", "numpy"})


def _host_read(path: list[cst.CSTNode]) -> bool:
    """Does the use whose parents ``path`` lists (nearest first) read its value on the host:
    ``len(x)``, ``x.numel()``, ``x.tolist()``, ``x[0].item()``, ``int(x[0])``?"""
    if path and isinstance(path[0], cst.Subscript) and all(isinstance(e.slice, cst.Index) for e in path[0].slice):
        path = path[1:]  # an element of it
    if len(path) >= 2 and isinstance(path[0], cst.Arg) and isinstance(path[1], cst.Call):
        callee = path[1].func
        return isinstance(callee, cst.Name) and callee.value in ("len", "int", "float", "bool")
    return bool(path) and isinstance(path[0], cst.Attribute) and path[0].attr.value in _HOST_READS


class _RowTrace:
    """Follows a value back through the assignments of a loop's iteration to what it is made of."""

    def __init__(self, scope: Scope, loop: cst.For) -> None:
        self.scope, self.loop = scope, loop
        self.rows = False  # indexes by the loop's index, or takes the rows a ``for`` takes from a tensor
        self.works = False  # runs a tensor op
        self.invariant = False  # reads a tensor made before the loop
        self.steps = 0

    def follow(self, ref: StatementRef, node: cst.CSTNode) -> bool:
        self.steps += 1
        if self.steps > 200:
            return False
        scope = self.scope
        if isinstance(node, (cst.Integer, cst.Float, cst.BaseString)):
            return True
        if isinstance(node, cst.Name):
            return self._name(ref, node.value)
        if isinstance(node, cst.Attribute):
            if node.attr.value in _METADATA:
                return True
            chain = node
            while isinstance(chain, cst.Attribute):
                chain = chain.value
            return isinstance(chain, cst.Name) and chain.value in ("self", "torch") or self.follow(ref, node.value)
        if isinstance(node, cst.Comparison) and scope.is_tensor(node) or \
                isinstance(node, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) and _does_work(scope, node):
            self.works = True  # (a comparison of tensors launches a kernel too)
        if isinstance(node, cst.Call):
            method = isinstance(node.func, cst.Attribute) and scope.is_tensor(node.func.value)
            if not method and scope.op(node) is None and not (scope.torch_name(node.func) or "").startswith("torch."):
                return False  # a call of unknown work: a module, a helper
            parts: list[cst.CSTNode] = [arg.value for arg in node.args]
            if isinstance(node.func, cst.Attribute) and scope.torch_name(node.func) is None:
                parts.append(node.func.value)
            return all(self.follow(ref, part) for part in parts)
        if isinstance(node, cst.Subscript):
            if any(isinstance(e.slice, cst.Index) and scope.is_tensor(e.slice.value) for e in node.slice):
                self.works = True  # a gather or a selection
            parts = [node.value]
            for element in node.slice:
                part = element.slice
                parts += [part.value] if isinstance(part, cst.Index) else [b for b in (part.lower, part.upper, part.step) if b]
            if isinstance(node.value, cst.Name) and isinstance(self.loop.target, cst.Name) and any(
                _name_nodes(part, self.loop.target.value) for part in parts[1:]
            ):
                self.rows = True  # `hyps[i]`, `idx[idx[:, 0] == i, 1]`: the rows of the loop's index (if invariant)
            return all(self.follow(ref, part) for part in parts)
        if isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation, cst.List, cst.Tuple)):
            return all(self.follow(ref, child) for child in children(node) if isinstance(child, cst.BaseExpression)
                       or isinstance(child, (cst.Element, cst.ComparisonTarget)))
        if isinstance(node, cst.Element):
            return self.follow(ref, node.value)
        if isinstance(node, cst.ComparisonTarget):
            return self.follow(ref, node.comparator)
        return False

    def _name(self, ref: StatementRef, name: str) -> bool:
        found = reaching_assignment(ref, name, out_of_ifs=True)
        if found is not None:
            return self.follow(found[0], found[1])
        loop = self.loop
        target = loop.target
        if isinstance(target, cst.Name) and target.value == name:  # `for i in range(n)`, `for row in t`
            if isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "range":
                return True
            if isinstance(loop.iter, cst.Name) and self.scope.is_tensor(loop.iter) and not _writes_name(loop.body, loop.iter.value):
                self.rows = self.invariant = True
                return True
            return False
        if _writes_name(loop, name):
            return False  # made by the loop's data, or by an earlier iteration
        self.invariant = self.invariant or name in self.scope.tensors
        return True


def _enclosing_loop(ref: StatementRef) -> cst.For | cst.While | None:
    while ref.block.parent is not None:
        owner = ref.block.parent.node
        if isinstance(owner, (cst.For, cst.While)) and ref.block.node is owner.body:
            return owner
        ref = ref.block.parent
    return None


# --------------------------------------------------------------------------- selections only reduced

# Reductions that erase the shape of what they reduce (without a dim): under a mask they give the same value.
_REDUCING = frozenset({
    "sum", "nansum", "mean", "nanmean", "amax", "amin", "max", "min", "prod", "std", "var", "norm", "vector_norm",
    "logsumexp", "count_nonzero",
})
# Ops that carry selected rows along, besides element-wise ops and views.
_CARRYING = frozenset({"gather", "index_select", "take", "take_along_dim", "detach", "contiguous", "clone"})
# A value's metadata: reading it reads no element.
_METADATA = frozenset({"shape", "size", "numel", "dim", "ndim", "device", "dtype"})
_MASK_OPS = frozenset({
    "bool", "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isin", "logical_and", "logical_or", "logical_not",
    "logical_xor", "eq", "ne", "lt", "le", "gt", "ge",
})
# Calls that give a mask's elements in another shape, a view or a copy (`repeat` and `rearrange` as einops' too).
_MASK_VIEWS = frozenset({
    "view", "reshape", "flatten", "contiguous", "unsqueeze", "squeeze", "expand", "expand_as", "transpose", "permute",
    "repeat", "detach", "clone", "t", "rearrange",
})
_EINOPS = frozenset({"repeat", "rearrange"})
_PASSING = node_types(
    cst.Attribute, cst.Arg, cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget,
    cst.Subscript, cst.SubscriptElement, cst.Index,
)
_REDUCED, _SHAPE_READ, _REBOUND, _ESCAPES = "reduced", "shape read", "rebound", "escapes"


def _writes_computed_value(scope: Scope, ref: StatementRef, subscript: cst.CSTNode) -> bool:
    """Is ``subscript`` the target of ``x[mask] = v`` or ``x[mask] += v``, where ``x`` holds what a tensor op of
    this function computed (no parameter, attribute or view that others may share), outside an
    ``if mask.any():`` that skips the write when nothing matches?"""
    small = ref.simple
    target = _assigned_target(small)
    if target is not subscript or not isinstance(subscript, cst.Subscript) or not isinstance(subscript.value, cst.Name):
        return False
    if any(not isinstance(element.slice, cst.Slice) for element in subscript.slice[1:]):
        return False  # `x[mask, cls] = 1`: a scatter, not a masked fill
    owner = ref.block.parent
    if owner is not None and isinstance(owner.node, cst.If) and _skips_empty_masked_write(owner.node):
        return False
    while owner is not None:
        if isinstance(owner.node, cst.If) and _mask_tested(owner.node.test, subscript):
            return False
        owner = owner.block.parent
    if any(name.value in scope.tensors for name in _names_in(small.value)) or any(
        _callee(call) in _SIZE_CALLS for call in _calls_in(small.value)
    ):
        return False  # `x[m] = y[k]`, `x[m] = torch.rand(n) < p`: values packed one per hit, a masked scatter
    found = reaching_assignment(ref, subscript.value.value, out_of_ifs=True)
    value = found[1] if found else None
    if not isinstance(value, (cst.Call, cst.BinaryOperation)) or not scope.is_tensor(value):
        return False
    op = scope.op(value)
    return op is None or op[1] != VIEW


def _mask_tested(test: cst.BaseExpression, subscript: cst.Subscript) -> bool:
    """Does the test of an ``if`` around a masked write read the mask on the host already
    (``if m is not None and m.any():``)? The write finds its places without another flush."""
    return any(
        _callee(call) in ("any", "all") and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
        and any(_name_nodes(element, call.func.value.value) for element in subscript.slice)
        for call in _calls_in(test)
    )


def _names_in(node: cst.CSTNode) -> Iterator[cst.Name]:
    """The variables whose values ``node`` reads (not attribute names: ``self.embed.weight`` reads
    ``self``; nor a tensor whose metadata only is read: ``len(t)``, ``t.shape``, ``t is None``)."""
    if isinstance(node, cst.Name):
        yield node
    elif isinstance(node, cst.Attribute):
        if node.attr.value not in _METADATA:
            yield from _names_in(node.value)
    elif not (_reads_no_value(node) or (isinstance(node, cst.Call) and _callee(node) == "len")):
        for child in children(node):
            yield from _names_in(child)


def _data_shaped_call(scope: Scope, call: cst.Call) -> bool:
    """``m.nonzero()``, ``x.masked_select(m)``, ``torch.where(m)`` (one argument: ``nonzero``)."""
    name = _callee(call)
    if name not in DATA_SHAPED and not (name == "where" and len(call.args) == 1 and call.args[0].keyword is None):
        return False
    op = scope.op(call)
    return op is not None and op[0] == name


def _selects_by_mask(scope: Scope, subscript: cst.Subscript) -> bool:
    """``x[mask]``, ``x[mask, 0]``: a tensor indexed by a boolean tensor."""
    return any(
        isinstance(element.slice, cst.Index) and _is_mask(scope, element.slice.value, frozenset())
        for element in subscript.slice
    ) and scope.is_tensor(subscript.value)


def _is_mask(scope: Scope, expr: cst.BaseExpression, seen: frozenset[str]) -> bool:
    """Is ``expr`` surely a boolean tensor: a comparison of tensors, a test op (``isnan``, ``eq``...),
    ``~``/``&``/``|`` of masks, a view or a slice of a mask (``mask[:, k].view(-1)``), a parameter
    named as one (``loss_mask``), or a local name every assignment of which is one?"""
    kind = type(expr)
    if kind is cst.Subscript:
        return all(
            isinstance(element.slice, cst.Slice) or _is_plain_index(element.slice.value)  # type: ignore[union-attr]
            for element in expr.slice
        ) and _is_mask(scope, expr.value, seen)
    if kind is cst.Call and _callee(expr) in _MASK_VIEWS:
        func = expr.func
        if isinstance(func, cst.Attribute):  # `mask.view(-1)`
            return _is_mask(scope, func.value, seen)
        args = expr.args  # einops' `repeat(mask, "b n -> (b h) n", h=h)`
        return _callee(expr) in _EINOPS and bool(args) and args[0].keyword is None and _is_mask(scope, args[0].value, seen)
    if kind is cst.Comparison:
        return scope.is_tensor(expr) and not any(
            isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons
        )
    if kind is cst.UnaryOperation:
        return isinstance(expr.operator, cst.BitInvert) and _is_mask(scope, expr.expression, seen)
    if kind is cst.BinaryOperation:
        return isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) and (
            _is_mask(scope, expr.left, seen) or _is_mask(scope, expr.right, seen)
        )
    if kind is cst.Call:
        if _callee(expr) not in _MASK_OPS:
            return False
        op = scope.op(expr)
        return op is not None and op[0] in _MASK_OPS
    if kind is not cst.Name or expr.value in seen:
        return False
    if _says_mask(expr.value) and expr.value in _dtype_tested(scope):
        return False  # `if mask.dtype == torch.bool`: the name may hold indices too
    if (expr.value in scope.params or expr.value in scope.untyped) and not any(
        expr.value in bound_names(target) for target, _ in scope.assignments
    ):
        return _says_mask(expr.value)  # an argument never rebound (`fg_mask = fg_mask.nonzero()` is one)
    if expr.value in scope.tensors or _says_mask(expr.value):
        masks = _mask_names(scope)
        if expr.value not in masks:
            masks[expr.value] = _assigned_masks(scope, expr.value, seen | {expr.value})
        return masks[expr.value]
    return False


def _assigned_masks(scope: Scope, name: str, seen: frozenset[str]) -> bool:
    """Is every value the scope gives ``name`` a mask (never a ``for`` target)? A name that says it is
    one may also take what a call the tables do not know returns (``keep_mask = self.select(...)``),
    unpacked or not."""
    if any(name in bound_names(target) for target, _ in scope.loops):
        return False
    values = list(_assigned_values(scope, name))
    if _says_mask(name):
        return bool(values) and all(v is None or _is_mask(scope, v, seen) or _unknown_call(scope, v) for v in values)
    return bool(values) and all(v is not None and _is_mask(scope, v, seen) for v in values)


@per_scope
def _dtype_tested(scope: Scope) -> frozenset[str]:
    """The names whose ``.dtype`` the scope reads (asked only about a name that says it is a mask)."""
    found: set[str] = set()

    def walk(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Attribute) and node.attr.value == "dtype" and isinstance(node.value, cst.Name):
            found.add(node.value.value)
        for child in children(node):
            walk(child)

    walk(scope.node)
    return frozenset(found)


def _unknown_call(scope: Scope, value: cst.BaseExpression) -> bool:
    """A call of a function or module that is no op of the tables: its result's dtype is unknown."""
    return isinstance(value, cst.Call) and scope.op(value) is None and scope.module_op(value) is None


def _is_plain_index(expr: cst.BaseExpression) -> bool:
    """An index that picks along a dim without reading a tensor: a number, a name, ``...``, ``None``."""
    return isinstance(expr, (cst.Integer, cst.Ellipsis)) or isinstance(expr, cst.Name) and expr.value not in (
        "True", "False"
    ) or isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, cst.Integer)


@per_scope
def _mask_names(scope: Scope) -> dict[str, bool]:
    """Whether each local name asked about so far holds a mask."""
    return {}


def _only_reduced(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Does the selected value only feed reductions, through element-wise ops, views, gathers and the
    names it is assigned to? Then a reduction under the mask gives the same value at a fixed shape.
    Reading its shape is neutral; any other use (returned, stored, sizing further work) needs the
    selection itself."""
    statements = _statement_refs(scope)
    pending = [(ref, node)]
    reduced = False
    followed: set[int] = set()  # the assignments whose names were followed
    while pending:
        ref, node = pending.pop()
        fate = _fate(scope, ref.node, node)
        if fate == _ESCAPES:
            return False
        if fate == _REDUCED:
            reduced = True
        if fate in (_REDUCED, _SHAPE_READ, _REBOUND) or id(ref.node) in followed:
            continue
        followed.add(id(ref.node))
        if len(followed) > 8:
            return False
        names = set(fate)
        for later in statements_after(ref):
            for name in names:
                for use in _name_nodes(later.node, name):
                    pending.append((_holding_statement(statements, later, use), use))
            names -= names_of(later.node)[1]
            if not names:
                break
    return reduced


def _mask_selects_elsewhere(scope: Scope, node: cst.CSTNode) -> bool:
    """Does the mask of the selection ``x[m]`` also select a value the function needs as it is
    (``logits = h[m]`` for a head that runs on the selected rows only, beside ``labels[m]`` reduced
    by the loss)? The host reads the mask for that one anyway: reducing under it saves no sync."""
    if not isinstance(node, cst.Subscript):
        return False
    masks = {element.slice.value.value for element in node.slice
             if isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Name)}
    if not masks:
        return False
    for ref in scope_statements(scope):
        if not isinstance(ref.node, cst.SimpleStatementLine):
            continue
        for other in _subscripts_in(ref.node):
            if other is node or not any(
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name) and e.slice.value.value in masks
                for e in other.slice
            ):
                continue
            if not _is_write_target(ref.node, other) and not _into_helper(scope, ref.node, other) \
                    and not _only_reduced(scope, ref, other):
                return True
    return False


def _into_helper(scope: Scope, root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` handed (through element-wise ops) to a plain function of no table
    (``_safe_divide(w[m], ...)``, ``bbox_iou(p[m], t[m])``)? What it does with the rows is unknown:
    not a sign that the selection is needed."""
    for parent in ancestors(root, node) or []:
        if isinstance(parent, cst.Call):
            op = scope.op(parent)
            if op is not None and op[1] in (ELEMENTWISE, VIEW):
                continue
            return isinstance(parent.func, cst.Name) and op is None and scope.module_op(parent) is None
        if type(parent) not in _PASSING:
            return False
    return False


def _subscripts_in(node: cst.CSTNode) -> Iterator[cst.Subscript]:
    if isinstance(node, cst.Subscript):
        yield node
    for child in children(node):
        yield from _subscripts_in(child)


def _is_write_target(line: cst.SimpleStatementLine, subscript: cst.Subscript) -> bool:
    return any(
        isinstance(small, cst.Assign) and any(t.target is subscript for t in small.targets)
        or isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.target is subscript
        for small in line.body
    )


def _fate(scope: Scope, root: cst.CSTNode, node: cst.CSTNode) -> str | frozenset[str]:
    """Where the value of ``node`` goes in the statement ``root``: into a reduction, into a read of
    its shape only, nowhere (the name is bound anew: the next iteration of a loop), out of reach,
    or into the names an assignment binds."""
    below: cst.CSTNode = node
    for parent in ancestors(root, node) or []:
        kind = type(parent)
        if kind is cst.AssignTarget and below is parent.target:
            return _REBOUND
        if kind is cst.Attribute and parent.attr.value in _METADATA and below is parent.value:
            return _ESCAPES if _sizes_other_work(root, parent, node) else _SHAPE_READ
        if kind is cst.Call:
            name = _callee(parent)
            if name == "len":
                return _ESCAPES if _sizes_other_work(root, parent, node) else _SHAPE_READ
            op = scope.op(parent) or scope.module_op(parent)
            reduces = _reduces(parent, op[0] if op else name, op[2] if op else None)
            if reduces and op is None and _method_of_self(parent):
                return _ESCAPES  # `self.mask_loss(p[m], ...)`: the model's own code, work on the selected rows
            if reduces:
                return _REDUCED
            if reduces is False and _averages_selected_rows(parent, op[0] if op else name, op[2] if op else None):
                return _ESCAPES
            if reduces is None and not ((op and op[1] in (ELEMENTWISE, VIEW)) or name in _CARRYING):
                return _ESCAPES
        elif kind in (cst.Assign, cst.AugAssign, cst.AnnAssign):
            targets = [t.target for t in parent.targets] if kind is cst.Assign else [parent.target]  # type: ignore[attr-defined]
            names = [e.value for t in targets for e in _target_elements(t) if isinstance(e, cst.Name)]
            return frozenset(names) if len(names) == sum(len(_target_elements(t)) for t in targets) else _ESCAPES
        elif kind not in _PASSING:
            return _ESCAPES
        below = parent
    return _ESCAPES


def _sizes_other_work(root: cst.CSTNode, read: cst.CSTNode, value: cst.CSTNode) -> bool:
    """Does the shape ``read`` of ``value`` size work other than ``value`` itself (``torch.arange(len(sel))``,
    ``range(sel.size(0))``, not ``sel.expand(sel.size(0), d)``)? Then the count itself is needed."""
    for parent in ancestors(root, read) or []:
        if isinstance(parent, cst.Call) and _callee(parent) in _SIZE_CALLS:
            receiver = parent.func.value if isinstance(parent.func, cst.Attribute) else None
            return not (isinstance(receiver, cst.Name) and isinstance(value, cst.Name) and receiver.value == value.value)
    return False


def _reduces(call: cst.Call, name: str, operand: cst.BaseExpression | None) -> bool | None:
    """True for a loss or a reduction over every element; False for one that keeps elements apart
    (``reduction="none"``, a reduction over a dim: the value goes on through it); None for other calls."""
    if "loss" in name or "cross_entropy" in name:
        return not any(
            arg.keyword is not None and arg.keyword.value == "reduction"
            and isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value == "none"
            for arg in call.args
        )
    if name in _REDUCING:
        return not any(
            arg.value is not operand and (arg.keyword is None or arg.keyword.value in ("dim", "axis"))
            for arg in call.args
        )
    return None


def _method_of_self(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _averages_selected_rows(call: cst.Call, name: str, operand: cst.BaseExpression | None) -> bool:
    """A mean or spread over dim 0, the dim a selection packs its rows along (``data[m].mean(dim=0)``,
    a per-cluster mean): under the mask it needs a count of its own per column, and measured no
    cheaper."""
    return name in ("mean", "nanmean", "std", "var") and any(
        arg.value is not operand and (arg.keyword is None or arg.keyword.value in ("dim", "axis"))
        and isinstance(arg.value, cst.Integer) and arg.value.value == "0"
        for arg in call.args
    )


@per_scope
def _statement_refs(scope: Scope) -> dict[int, StatementRef]:
    """Each statement of the scope by its node's id."""
    return {id(ref.node): ref for ref in scope_statements(scope)}


def _holding_statement(statements: dict[int, StatementRef], outer: StatementRef, node: cst.CSTNode) -> StatementRef:
    """The innermost statement of ``outer`` that holds ``node``."""
    for parent in ancestors(outer.node, node) or []:
        inner = statements.get(id(parent))
        if inner is not None:
            return inner
    return outer


# --------------------------------------------------------------------------- tensor work around a sync


def _where(scope: Scope, ref: StatementRef) -> str | None:
    """Where the sync interrupts fusable work ("inside a loop ...", "between tensor work"), or None."""
    if _in_working_loop(scope, ref):
        return "inside a loop that does tensor work"
    after = any(_does_work(scope, block) for block in inner_blocks(ref.node)) or any(
        _does_work(scope, later.node) for later in statements_after(ref)
    )
    if not after:
        return None
    # a step function's caller has work pending when it calls: the sync flushes that too
    before = _hot(scope) or any(_does_work(scope, earlier.node) for earlier in statements_before(ref))
    return "between tensor work" if before else None


def _in_working_loop(scope: Scope, ref: StatementRef) -> bool:
    loop = _enclosing_loop(ref)
    if loop is None:
        return False
    working = _working_loops(scope)
    if id(loop) not in working:
        working[id(loop)] = _does_work(scope, loop.body)
    return working[id(loop)]


@per_scope
def _working_loops(scope: Scope) -> dict[int, bool]:
    """Whether each loop met so far does tensor work, by the loop's id: each statement in its
    body asks, and the answer is a walk of the whole body."""
    return {}


_NOT_RUN_HERE = node_types(cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.Raise)
_OPERATIONS = node_types(cst.Call, cst.BinaryOperation, cst.UnaryOperation)


def _does_work(scope: Scope, node: cst.CSTNode) -> bool:
    """Does ``node`` run a tensor op that a lazy backend records and keeps on the device (not a
    view; not the operand of a sync, which only reads a result: ``float(out.mean())``)?"""
    kind = type(node)
    if kind in _NOT_RUN_HERE:
        return False
    if kind is cst.Call and _call_sync(scope, node) is not None:
        return False
    if kind in _OPERATIONS and scope.is_tensor(node):
        op = scope.op(node)
        if op is None or (op[0] not in SYNC_METHODS and op[1] != VIEW):
            return True
    if kind is cst.Subscript and scope.is_tensor(node.value):
        if any(isinstance(s.slice, cst.Index) and scope.is_tensor(s.slice.value) for s in node.slice):
            return True  # indexing by a tensor gathers
    return any(_does_work(scope, child) for child in children(node))


def _needed_branch(scope: Scope, statement: cst.If, ref: StatementRef) -> bool:
    """A branch the host must take: validation (an arm raises or warns, or, outside a loop that
    does tensor work, no arm does tensor work) or a loop exit (an arm ends in ``break``). In a
    working loop a test that only picks host work still syncs on every iteration, unless it
    skips the iteration's work (``continue``) or leaves (``return``)."""
    if _skips_empty_masked_write(statement) or _skips_full_selection(statement):
        return True
    if _raises_or_warns(statement) or _breaks(statement.body):
        return True
    if _branch_works(scope, statement):
        return False
    return not _in_working_loop(scope, ref) or _breaks(statement.body, (cst.Continue, cst.Return))


def _skips_empty_masked_write(statement: cst.If) -> bool:
    """``if m.any(): x[m] = v``: a fast path that skips a write the mask would leave empty. The
    unconditional write costs a pass every time; the sync costs one where nothing matches."""
    test = statement.test
    while isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and _reads_no_value(test.left):
        test = test.right  # `if m is not None and m.any():`
    if statement.orelse is not None or not (isinstance(test, cst.Call) and not test.args):
        return False
    func = test.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "any" and isinstance(func.value, cst.Name)):
        return False
    mask = func.value.value
    body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    smalls = [small for line in body if isinstance(line, cst.SimpleStatementLine) for small in line.body]
    return len(smalls) == len(body) and all(_writes_through_mask(small, mask) for small in smalls)


def _skips_full_selection(statement: cst.If) -> bool:
    """``if not m.all(): x = x[m]``: a fast path that skips selections that would keep every row.
    Each selection reads the mask on the host anyway, so the test adds no sync where it runs
    them, and saves their copies where it does not."""
    test = statement.test
    if statement.orelse is not None or not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    call = test.expression
    if not (isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute)):
        return False
    if call.func.attr.value != "all" or not isinstance(call.func.value, cst.Name):
        return False
    mask = call.func.value.value
    body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    smalls = [small for line in body if isinstance(line, cst.SimpleStatementLine) for small in line.body]
    return len(smalls) == len(body) and all(
        isinstance(small, cst.Assign) and isinstance(small.value, cst.Subscript)
        and any(_name_nodes(element, mask) for element in small.value.slice)
        for small in smalls
    )


def _writes_through_mask(small: cst.BaseSmallStatement, mask: str) -> bool:
    """``x[m] = v``, ``x[1:][m] = v`` or ``x.masked_fill_(m, v)``."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Subscript):
        return any(_name_nodes(element, mask) for element in small.targets[0].target.slice)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and _callee(small.value) == "masked_fill_":
        args = small.value.args
        return bool(args) and isinstance(args[0].value, cst.Name) and args[0].value.value == mask
    return False


_DEFINITIONS = node_types(cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _raises_or_warns(node: cst.CSTNode) -> bool:
    kind = type(node)
    if kind is cst.Raise or (kind is cst.Call and "warn" in _callee(node).lower()):
        return True
    if kind is cst.Call and "assert" in _callee(node).lower():
        return True  # `torch._assert(False, ...)`: it raises
    if kind in _DEFINITIONS:
        return False
    return any(_raises_or_warns(child) for child in children(node))


def _breaks(suite: cst.BaseSuite, leaving: tuple[type, ...] = (cst.Break,)) -> bool:
    """Does the block end by leaving the loop (``break``, or another of ``leaving``; also as the
    last statement of a nested ``if``)?"""
    last = suite.body[-1] if isinstance(suite, cst.IndentedBlock) else suite
    if isinstance(last, cst.If):
        return _breaks(last.body, leaving)
    small = last.body[-1] if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else None
    return isinstance(small, leaving)


def _branch_works(scope: Scope, statement: cst.If) -> bool:
    """Does either arm of the ``if`` do tensor work? If not, it only raises, warns or logs. The
    tests of nested branches only read values: they are not work."""
    arms: list[cst.CSTNode] = [statement.body]
    if isinstance(statement.orelse, cst.If):
        arms.append(cst.IndentedBlock(body=[statement.orelse]))
    elif statement.orelse is not None:
        arms.append(statement.orelse.body)
    for arm in arms:
        for part in arm.body if isinstance(arm, cst.IndentedBlock) else [arm]:
            if isinstance(part, cst.If) and _branch_works(scope, part):
                return True
            if not isinstance(part, cst.If) and _does_work(scope, part):
                return True
    return False


# --------------------------------------------------------------------------- values the host needs once

# Functions that run once, offline, or outside the computation: setup, dataset processing, plots.
_OFFLINE = re.compile(r"^(?:__init__|__repr__|extra_repr|_?process\w*|_?plot\w*|_?visuali[sz]e\w*|_?(?:de)?serialize"
                      r"|read_\w*|_?download\w*)$")
# Functions where each call is a step of the computation, where a transfer to the host costs every time.
_HOT = re.compile(r"^(?:forward|__call__|\w*step|_?train\w*|fit|_?update\w*|\w*loss\w*|criterion)$")
_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy"})
_SCALAR_READS = frozenset({"item", "float", "int"})
# Syncs that hand data to host code on purpose: the list or array is what the code wants.
_HAND_OFFS = frozenset({"cpu", "numpy", "tolist"})
# Callees whose integer arguments are sizes: a host value is needed to build the shape.
_SIZE_CALLS = frozenset({
    "range", "zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn", "randint", "randperm",
    "new_zeros", "new_ones", "new_empty", "new_full", "split", "split_with_sizes", "tensor_split", "view",
    "reshape", "expand", "repeat", "narrow", "unflatten", "bincount",
})


def _needed_once(scope: Scope, ref: StatementRef, node: cst.CSTNode, kind: str, where: str, branch: bool) -> bool:
    """Is the value one the host needs anyway, so the sync is not worth a finding? Code that runs
    once (setup, dataset processing, plotting), a value that decides a shape or a loop exit, and
    outside a step function's loop a deliberate hand-off to host code (``.cpu()``, ``.numpy()``,
    ``.tolist()``) or a scalar read between work, unless the value goes back into tensor work or
    decides a branch that does tensor work."""
    if _runs_once(scope):
        return True
    function = scope.node.name.value if isinstance(scope.node, cst.FunctionDef) else None
    if _decides_shape(scope, ref, node, kind) or _decides_exit(ref, node) or _in_failing_arm(ref):
        return True
    if _decides_check(ref, node):
        return True
    if kind in _SCALAR_READS and not branch and _after_backward(ref):
        if not (_flows_back(scope, ref, node) or _decides_branch(scope, ref, node)):
            return True
    hot = _hot(scope)
    if kind in _HAND_OFFS:
        once = not (hot and where.startswith("inside a loop"))
    elif not branch and kind != "branch" and where == "between tensor work":
        once = not hot and not _flows_back(scope, ref, node)
    else:
        return False
    return once and not _decides_branch(scope, ref, node)


def _hot(scope: Scope) -> bool:
    """A step function (``forward``, ``*step``, a loss): it runs on every step, between the
    caller's tensor work and its own."""
    return isinstance(scope.node, cst.FunctionDef) and _HOT.match(scope.node.name.value) is not None


def _reads_back(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Does the sync read a tensor (or a reduction of one) that this function made from Python
    values a few statements above (``t = torch.tensor([s.shape[0] for s in seqs])``, then
    ``int(t.amax().item())``)? The host had the values: the round trip buys a kernel and a wait."""
    receiver = node.args[0].value if _callee(node) in _SCALAR_READS and not isinstance(node.func, cst.Attribute) \
        and node.args else node
    while isinstance(receiver, (cst.Call, cst.Attribute, cst.Subscript)):
        receiver = receiver.func if isinstance(receiver, cst.Call) else receiver.value
    if not isinstance(receiver, cst.Name):
        return False
    value = reaching_value(ref, receiver.value)
    if not (isinstance(value, cst.Call) and value.args and value.args[0].keyword is None):
        return False
    made = scope.torch_name(value.func)
    return made in ("torch.tensor", "torch.as_tensor") and not scope.is_tensor(value.args[0].value) and not _has_table_op_call(
        scope, value.args[0].value, None
    )


_DRAWS = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.empty"})


def _host_draw(scope: Scope, node: cst.CSTNode) -> bool:
    """Does the sync read a number drawn from torch's RNG here, on the default (host) device, from
    no tensor (``torch.rand(1).item() < p``, ``torch.empty(1).uniform_(0, n).item()``)? No device
    work feeds it: the read waits for nothing."""
    value: cst.CSTNode = node
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            value = func.value
        elif node.args:
            value = node.args[0].value
    draws = [call for call in _calls_in(value) if scope.torch_name(call.func) in _DRAWS]
    return bool(draws) and not any(
        arg.keyword is not None and arg.keyword.value == "device" for call in draws for arg in call.args
    ) and not any(name.value in scope.tensors for name in _names_in(value))


def _calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    if isinstance(node, cst.Call):
        yield node
    for child in children(node):
        yield from _calls_in(child)


def _runs_once(scope: Scope) -> bool:
    """Setup, dataset processing, plotting: code that runs once or offline."""
    return isinstance(scope.node, cst.FunctionDef) and _OFFLINE.match(scope.node.name.value) is not None


def _in_failing_arm(ref: StatementRef) -> bool:
    """Is the statement in a block that ends by failing (``raise``, ``torch._assert(False, ...)``):
    it builds the error's message on the way out."""
    while ref.block.parent is not None:
        last = ref.block.statements[-1] if ref.block.statements else None
        small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) else None
        if isinstance(small, cst.Raise) or (
            isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and "assert" in _callee(small.value).lower()
        ):
            return True
        ref = ref.block.parent
    return False


def _after_backward(ref: StatementRef) -> bool:
    """Is the sync in a loop body, after a ``.backward()`` of the same iteration? Autograd runs
    the pending work there, so the iteration is written out anyway: reading a scalar after it
    for host arithmetic (``running += loss.item()``, not a branch) costs no write."""
    while ref.block.parent is not None:
        if any(_calls_backward(earlier.node) for earlier in ref.earlier()):
            return True
        owner = ref.block.parent.node
        if isinstance(owner, (cst.For, cst.While)) and ref.block.node is owner.body:
            return False
        ref = ref.block.parent
    return False


def _calls_backward(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return False
    if isinstance(node, cst.Call) and _callee(node) == "backward":
        return True
    return any(_calls_backward(child) for child in children(node))


def _decides_shape(scope: Scope, ref: StatementRef, node: cst.CSTNode, kind: str) -> bool:
    """Is the synced value a size: passed to a shape-taking call (``torch.zeros(int(n.max()) + 1)``),
    directly or through the name it is assigned to, stored as a ``*size*``/``num_*`` attribute, or,
    outside a working loop, an index or a slice bound (``last = int(...)``, then ``x[:last]``)?"""
    if _in_size_argument(ref.node, node) or (kind == "int" and _is_index(ref.node, node)):
        return True
    targets = _assigned_names(ref, node)
    if targets is None or (kind != "branch" and any(_is_size_name(name) for name in targets)):
        return True
    if _in_working_loop(scope, ref):  # each iteration syncs: one `.tolist()` before the loop reads every index
        return _used_later(ref, targets, _in_size_argument)
    return _used_later(ref, targets, lambda root, use: _in_size_argument(root, use) or _is_index(root, use))


def _decides_branch(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Does the synced value, through the names it is assigned or unpacked to, decide a branch
    whose arms do tensor work (``found = flags.any(-1).tolist(); a, b = found; if a: ...``)?"""
    names = _assigned_names(ref, node) or set()
    for later in statements_after(ref):
        if not names:
            return False
        statement = later.node
        if isinstance(statement, cst.If) and _branch_works(scope, statement):
            if any(_name_nodes(statement.test, name) for name in names):
                return True
        small = later.simple
        defs = names_of(statement)[1] if isinstance(statement, cst.SimpleStatementLine) else frozenset()
        if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value in names:
            names = names | (_assigned_names(later, small.value) or set())  # unpacked or renamed
        else:
            names = names - defs
    return False


def _decides_exit(ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is the synced value, through the name it is assigned to, a loop's exit condition (a
    ``while`` test, or the test of an ``if`` that ends in ``break``)?"""

    def in_exit_test(root: cst.CSTNode, use: cst.CSTNode) -> bool:
        if isinstance(root, cst.While) or (isinstance(root, cst.If) and _breaks(root.body)):
            return ancestors(root.test, use) is not None
        return False

    names = _assigned_names(ref, node) or set()
    outer = ref.block.parent
    while outer is not None:  # `while changed:` around `changed = bool(...)`
        if isinstance(outer.node, cst.While) and any(_name_nodes(outer.node.test, name) for name in names):
            return True
        outer = outer.block.parent
    return _used_later(ref, names, in_exit_test)


def _decides_check(ref: StatementRef, node: cst.CSTNode) -> bool:
    """Is the synced value, through the name it is assigned to, the test of a later branch that raises or
    warns (``bad = (d <= 0).any() or ...``, then ``if bad: raise``): validation, read once?"""

    def in_check_test(root: cst.CSTNode, use: cst.CSTNode) -> bool:
        if not isinstance(root, cst.If):
            return False
        path = ancestors(root.test, use)
        return path is not None and not any(map(_reads_no_value, path)) and _raises_or_warns(root.body)

    return _used_later(ref, _assigned_names(ref, node) or set(), in_check_test)


def _reads_no_value(node: cst.CSTNode) -> bool:
    """An identity or type test (``x is None``, ``isinstance(x, T)``): it reads no element."""
    if isinstance(node, cst.Comparison):
        return any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons)
    return isinstance(node, cst.Call) and _callee(node) in ("isinstance", "callable")


def _assigned_names(ref: StatementRef, node: cst.CSTNode) -> set[str] | None:
    """The plain names the statement holding ``node`` assigns its value to; None if an attribute
    named like a size (``data.num_nodes = int(...)``) is assigned."""
    names: set[str] = set()
    smalls = ref.node.body if isinstance(ref.node, cst.SimpleStatementLine) else ()
    for small in smalls:
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and ancestors(small, node) is not None:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            for target in targets:
                for element in _target_elements(target):
                    if isinstance(element, cst.Name):
                        names.add(element.value)
                    elif isinstance(element, cst.Attribute) and _is_size_name(element.attr.value):
                        return None
    return names


def _flows_back(scope: Scope, ref: StatementRef, node: cst.CSTNode) -> bool:
    """Does the synced value go back into tensor work: in its own statement (``x / float(x.max())``)
    or through the name it is assigned to?"""
    if _in_tensor_work(scope, ref.node, node):
        return True
    targets = _assigned_names(ref, node) or set()
    return _used_later(ref, targets, lambda root, use: _in_tensor_work(scope, root, use))


def _used_later(ref: StatementRef, names: set[str], how: Callable[[cst.CSTNode, cst.CSTNode], bool]) -> bool:
    """Is one of ``names`` read ``how`` by a later statement, before it is assigned again?"""
    if not names:
        return False
    for later in statements_after(ref):
        if any(how(later.node, use) for name in names for use in _name_nodes(later.node, name)):
            return True
        if names & names_of(later.node)[1]:
            return False
    return False


def _in_tensor_work(scope: Scope, root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` an operand of tensor arithmetic or of a tensor op (not of a factory that only
    packs host values into a new tensor, ``torch.tensor([a, b])``)?"""
    for parent in ancestors(root, node) or []:
        if isinstance(parent, (cst.BinaryOperation, cst.Call)) and scope.is_tensor(parent):
            if isinstance(parent, cst.Call) and (_call_sync(scope, parent) or _callee(parent) in _FACTORIES):
                return False
            return True
    return False


def _callee(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""


def _target_elements(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [element.value for element in target.elements]
    return [target]


def _is_size_name(name: str) -> bool:
    """A size, or a scale factor that decides one (``interpolate(x, scale_factor=...)``)."""
    return "size" in name or "num_" in name or name.startswith("n_") or name in ("N", "n", "scale_factor")


def _name_nodes(root: cst.CSTNode, name: str) -> list[cst.Name]:
    found: list[cst.Name] = []
    _add_name_nodes(root, name, found)
    return found


def _add_name_nodes(node: cst.CSTNode, name: str, found: list[cst.Name]) -> None:
    if isinstance(node, cst.Name) and node.value == name:
        found.append(node)
    for child in children(node):
        _add_name_nodes(child, name, found)


def _is_index(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` an index or a slice bound itself (``x[: int(n)]``)?"""
    path = ancestors(root, node) or []
    return bool(path) and isinstance(path[0], (cst.Index, cst.Slice))


def _in_size_argument(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` (part of) an argument of a shape-taking call, or of a ``*size*``/``num_*`` keyword?"""
    path = ancestors(root, node) or []
    below: cst.CSTNode = node
    for parent in path:
        if isinstance(parent, cst.Arg) and parent.keyword is not None and _is_size_name(parent.keyword.value):
            return True
        if isinstance(parent, cst.Call) and below is not parent.func:
            if _callee(parent) in _SIZE_CALLS:
                return True
        below = parent
    return False
