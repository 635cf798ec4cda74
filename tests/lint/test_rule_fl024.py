"""FL024 beyond its own examples: the shapes real code writes (from metrics, geometry and signal
code), each rewrite measured, and the look-alikes beside them that must stay silent."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

torch = pytest.importorskip("torch")
fusionrt = pytest.importorskip("fusionrt")


def _lines(source: str) -> list[int]:
    result = lint_source(source, "m.py", LintOptions(codes=frozenset({"FL024"})))
    assert not result.errors
    return sorted(finding.line for finding in result.findings)


FLAGGED = """\
import torch


def r2(rss: torch.Tensor, tss: torch.Tensor) -> torch.Tensor:
    cond_rss = ~torch.isclose(rss, torch.zeros_like(rss), atol=1e-4)
    cond_tss = ~torch.isclose(tss, torch.zeros_like(tss), atol=1e-4)
    cond = cond_rss & cond_tss
    raw = torch.ones_like(rss)
    raw[cond] = 1 - (rss[cond] / tss[cond])
    raw[cond_rss & ~cond_tss] = 0.0
    return raw


def ignore(target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    idx = target == ignore_index
    target = target.clone()
    target[idx] = -1
    return target


def halves(x: torch.Tensor) -> torch.Tensor:
    b, l, n = x.shape
    y = torch.zeros((b, l, n * 2), dtype=x.dtype)
    y[..., :n] = x
    y[..., n:] = -1 * torch.flip(x, dims=(-1,))
    return y


def gradient(x: torch.Tensor) -> torch.Tensor:
    b, c, d, h, w = x.shape
    out = torch.empty(b, c, 3, d - 2, h - 2, w - 2)
    out[..., 0, :, :, :] = x[..., 1:-1, 1:-1, 2:] - x[..., 1:-1, 1:-1, :-2]
    out[..., 1, :, :, :] = x[..., 1:-1, 2:, 1:-1] - x[..., 1:-1, :-2, 1:-1]
    out[..., 2, :, :, :] = x[..., 2:, 1:-1, 1:-1] - x[..., :-2, 1:-1, 1:-1]
    return 0.5 * out
"""


def test_masks_and_tiling_pieces_are_flagged():
    assert _lines(FLAGGED) == [8, 16, 23, 31]


SILENT = """\
import torch


def numbers(w: int, h: int) -> torch.Tensor:
    wh = torch.empty(2)
    wh[0] = w
    wh[1] = h
    return wh


def masked_empty(x: torch.Tensor) -> torch.Tensor:
    m = x > 0
    y = torch.empty_like(x)
    y[m] = 1.0
    y[~m] = 0.0
    return y


def strided_in_part(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    y = torch.zeros(x.shape[0], 3)
    y[:, 0::3] = x
    y[:, 1::3] = k
    return y


def under_a_branch(x: torch.Tensor, flag: bool) -> torch.Tensor:
    y = torch.zeros(x.shape + (2,))
    if flag:
        y[..., 0] = x
        y[..., 1] = x * 2
    return y


def read_between(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    m = t > 0
    y = x.clone()
    total = y.sum()
    y[m] = 0.0
    return y + total


def whole_tensor_value(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m = x > 0
    y = torch.zeros_like(x)
    y[m] = v
    return y


def in_a_loop(x: torch.Tensor, n: int) -> torch.Tensor:
    y = torch.zeros(x.shape + (2,))
    for _ in range(n):
        x = x * 2
    y[..., 0] = x
    y[..., 1] = x
    return y
"""


def test_look_alikes_stay_silent():
    """Host numbers (a `torch.tensor`, not a `cat`; kept for ONNX export in real code), an
    uninitialised buffer written through masks, strided pieces that leave a slot, pieces written
    under a branch, a copy read between its making and its write, a masked write of a whole
    tensor, and writes after a loop the rule does not walk."""
    assert _lines(SILENT) == []


COPIES = """\
import torch


def xyxy2xywh(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[..., 0] = (x[..., 0] + x[..., 2]) / 2
    y[..., 1] = (x[..., 1] + x[..., 3]) / 2
    y[..., 2] = x[..., 2] - x[..., 0]
    y[..., 3] = x[..., 3] - x[..., 1]
    return y


def corners(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, 0] = x[:, 0] - x[:, 2] / 2
    y[:, 1] = x[:, 1] - x[:, 3] / 2
    return y


def clip(boxes: torch.Tensor) -> torch.Tensor:
    c = boxes.clone()
    c[..., 0::2].clamp_(0, 40)
    c[..., 1::2].clamp_(0, 30)
    return c
"""

COPIES_SILENT = """\
import torch


def flip(boxes: torch.Tensor, w: int) -> torch.Tensor:
    boxes = boxes.clone()
    boxes[:, 0] = w - boxes[:, 2]
    boxes[:, 2] = w - boxes[:, 0]
    return boxes


def once(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, :2] = x[:, :2] * 2
    return y


def blocks(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:2, 0] = x[:2, 0] * 2
    y[:, 1] = x[:, 1] * 2
    return y


def bounded_by_itself(boxes: torch.Tensor) -> torch.Tensor:
    c = boxes.clone()
    c[:, 0].clamp_(max=c[:, 2])
    c[:, 1].clamp_(max=c[:, 3])
    return c


def read_between(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, 0] = x[:, 0] * 2
    total = y.sum()
    y[:, 1] = x[:, 1] * 2
    return y + total
"""


MASK_TOKEN = """\
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.mask_encoding = nn.Parameter(torch.zeros(d))
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        if mask is None:
            mask_x = x
        else:
            mask_x = x.clone()
            mask_x[mask == 1] = self.mask_encoding
        return self.proj(mask_x)

    def other(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask_x = x.clone()
        mask_x[mask == 1] = self.scale(x)
        return mask_x
"""


def test_a_copy_whose_masked_rows_take_a_module_vector():
    """`torch.where(m[..., None], self.mask_encoding, x)`; not a value computed whole."""
    assert _lines(MASK_TOKEN) == [15]


def test_copies_set_slice_by_slice_from_other_values():
    """Pieces along one dimension from values that do not read the copy (a box format's
    conversion), and in-place element-wise ops on slices (clipping boxes); not: pieces that read
    the copy's other slices (a flip), one write, pieces along two dimensions, bounds read from the
    copy, a read between the writes."""
    assert _lines(COPIES) == [5, 14, 21]
    assert _lines(COPIES_SILENT) == []


MEASURED = [
    (
        FLAGGED.split("\n\n\ndef ignore")[0],
        "r2",
        """\
import torch


def r2(rss, tss):
    cond_rss = ~torch.isclose(rss, torch.zeros_like(rss), atol=1e-4)
    cond_tss = ~torch.isclose(tss, torch.zeros_like(tss), atol=1e-4)
    cond = cond_rss & cond_tss
    raw = torch.where(cond, 1 - rss / tss, 1.0)
    return raw.masked_fill(cond_rss & ~cond_tss, 0.0)
""",
        (64,),
    ),
    (
        "import torch\n\n\ndef gradient" + FLAGGED.split("def gradient")[1],
        "gradient",
        """\
import torch


def gradient(x):
    return 0.5 * torch.stack((
        x[..., 1:-1, 1:-1, 2:] - x[..., 1:-1, 1:-1, :-2],
        x[..., 1:-1, 2:, 1:-1] - x[..., 1:-1, :-2, 1:-1],
        x[..., 2:, 1:-1, 1:-1] - x[..., :-2, 1:-1, 1:-1],
    ), 2)
""",
        (2, 3, 10, 12, 12),
    ),
]


MEASURED += [
    (
        COPIES.split("\n\n\ndef corners")[0],
        "xyxy2xywh",
        """\
import torch


def xyxy2xywh(x):
    return torch.cat(((x[..., :2] + x[..., 2:]) / 2, x[..., 2:] - x[..., :2]), -1)
""",
        (64, 4),
    ),
    (
        "import torch\n\n\ndef clip" + COPIES.split("def clip")[1],
        "clip",
        """\
import torch


def clip(boxes):
    return torch.minimum(boxes.clamp(min=0), torch.tensor([40.0, 30.0, 40.0, 30.0]))
""",
        (64, 4),
    ),
]


@pytest.mark.parametrize("original, name, rewrite, shape", MEASURED,
                         ids=["r2-where", "gradient-stack", "xywh-cat", "clip-broadcast"])
def test_the_rewrites_pay_in_both(original, name, rewrite, shape):
    counts = []
    outputs = []
    for source in (original, rewrite):
        namespace: dict = {}
        exec(compile(source, "<fl024>", "exec"), namespace)
        generator = torch.Generator().manual_seed(0)
        args = [torch.randn(*shape, generator=generator) for _ in range(2 if name == "r2" else 1)]
        output, report = fusionrt.measure(namespace[name], *args, executor="reference")
        outputs.append(output)
        counts.append(report)
    torch.testing.assert_close(outputs[1], outputs[0])
    before, after = counts
    assert after.kernels < before.kernels and after.bytes_written <= before.bytes_written
    assert after.eager_kernels < before.eager_kernels and after.eager_bytes_written <= before.eager_bytes_written
