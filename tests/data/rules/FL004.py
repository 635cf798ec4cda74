# FL004 (host-sync-in-tensor-work): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def energy(x: torch.Tensor, y: torch.Tensor) -> float:
    total = 0.0
    for i in range(4):
        h = torch.tanh(x * i + y)
        total += h.sum().item()
    return total

# --- example 2
import torch


def saturate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2 + y
    if (a > 3).any():
        a = a.clamp(max=3)
    return torch.relu(a) * y

# --- example 3
import torch


def decode_step(x: torch.Tensor, y: torch.Tensor) -> list:
    found = []
    for i in range(4):
        h = torch.tanh(x * i + y)
        found.append(h.amax(-1).tolist())
    return found

# --- example 4
import torch


def train_step(x: torch.Tensor, y: torch.Tensor):
    arrays = []
    for i in range(3):
        h = torch.tanh(x * i)
        arrays.append(h.detach().cpu().to(torch.double).numpy())
    return y * 3, arrays

# --- example 5
import torch


def run(x: torch.Tensor, layers: list) -> torch.Tensor:
    for w in layers:
        x = torch.tanh(x @ w)
        print("norm", x.norm())
        while float(x.abs().amax()) > 1e3:
            x = x * 0.5
    return x

# --- look-alike 1
import torch


def loss(x: torch.Tensor, y: torch.Tensor) -> float:
    d = torch.tanh(x) - y
    value = (d * d).mean()
    return value.item()

# --- look-alike 2
import torch


def stats(x: torch.Tensor) -> dict:
    h = torch.relu(x * 2)
    out = h.sum(-1)
    print("done", out.mean())
    return {"mean": float(out.mean()), "peaks": out.tolist()}

# --- look-alike 3
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

# --- look-alike 4
import torch


def forward(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    h = torch.relu(x)
    print(h.shape, h.dtype)
    if mask is not None and x.dim() == 3:
        h = h * mask
    n = int(h.size(0))
    return h[:n] + 1

# --- look-alike 5
import torch


def train(x: torch.Tensor, steps: int) -> torch.Tensor:
    h = x
    for _ in range(steps):
        h = torch.tanh(h * 0.9 + 0.1)
    print("final", h.mean().item())
    return h

# --- look-alike 6
import torch


def check(x: torch.Tensor, limit: float) -> torch.Tensor:
    h = torch.tanh(x * 2)
    if h.shape[0] > 8:
        raise ValueError(f"too many rows: {h.amax(-1).tolist()} above {limit}")
    assert h.dim() == 2, f"expected a matrix, got one summing to {h.sum().item()}"
    return h + 1

# --- look-alike 7
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
    return out + 1

# --- look-alike 8
import torch


def report(x: torch.Tensor) -> list:
    probs = torch.softmax(x, -1)
    rows = []
    for row in probs:
        rows.append(row.max().item())
    return rows

# --- example 6: a loop over a tensor compares each element on the host
import torch


def route(x: torch.Tensor, hits: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros_like(x)
    for e in hits:
        if e == n:
            continue
        out = out + torch.tanh(x * e) @ w
    return out

# --- example 7: an element of a tensor the loop does not change, compared each iteration
import torch


def anneal(x: torch.Tensor, sigmas: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for i in range(sigmas.shape[0]):
        sigma = sigmas[i]
        if sigma > 0.5:
            x = torch.tanh(x @ w)
        x = x * 0.9
    return x

# --- example 8: arithmetic on elements, only to make a host number
import torch


def crops(image: torch.Tensor, boxes: torch.Tensor) -> list:
    out = []
    for i in range(boxes.shape[0]):
        w = int(boxes[i, 2] - boxes[i, 0]) + 1
        h = int(boxes[i, 3] - boxes[i, 1])
        out.append(torch.tanh(image[:h, :w]) * 2)
    return out

# --- look-alike 9: an element read bare as a size, one the loop rewrites, one checked to raise
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

# --- example 10: selections only reduced (a masked loss, a nonzero gathered for a loss, a masked max)
import torch
import torch.nn.functional as F


def losses(logits: torch.Tensor, labels: torch.Tensor, cls_loss: torch.Tensor, scores: torch.Tensor):
    h = torch.tanh(logits * 2)
    label_index = (labels >= 0).nonzero()
    if label_index.size(0) > 0:
        picked = torch.gather(h, 0, label_index.expand(label_index.size(0), h.size(1)))
        kept = torch.gather(labels, 0, label_index.view(-1))
        loss = F.cross_entropy(picked, kept)
    else:
        loss = h.sum() * 0
    foreground = cls_loss > 0
    background = ~foreground
    total = (cls_loss[foreground].sum() + cls_loss[background].sum()) / 4
    best = scores.masked_select(scores > 0.5).amax()
    return loss + total + best

# --- example 11: writes through a mask into values the function computed
import torch


def embed(points: torch.Tensor, labels: torch.Tensor, w: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    point_embedding = torch.tanh(points @ w)
    point_embedding[labels == -1] = 0.0
    point_embedding[labels == 0] += 0.5
    point_embedding[labels == 1] = pad  # one row per hit, or broadcast: not told apart
    return point_embedding * 2

# --- look-alike 12: selections the work needs, a count that sizes new work, masked writes into an argument
import torch


def select(scores: torch.Tensor, boxes: torch.Tensor, target: torch.Tensor, out: torch.Tensor):
    keep = scores > 0.5
    kept = scores[keep]
    top = kept.topk(3).indices
    positions = torch.arange(1, target.shape[0] + 1)[target > 0]
    ranks = (torch.arange(len(positions)) + 1) / positions
    out[scores < 0] = 0.0
    return boxes[keep][top], ranks.mean(), out

# --- example 13: a tensor made from Python values, reduced and read back (a size included)
import torch


def pad_batch(seqs: list, x: torch.Tensor) -> torch.Tensor:
    lengths = torch.tensor([len(s) for s in seqs])
    width = int(lengths.amax().item())
    mask = torch.arange(width)[None] < lengths[:, None]
    return torch.tanh(x[:, :width]) * mask, lengths.tolist()

# --- a forward reads a reduction it computed and computes on with the host number
import torch
from torch import nn


class ClipOutliers(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        spread = h.abs().mean() * 2
        limit = float(spread)
        return torch.tanh(torch.where(h.abs() > limit, 0.0, h)) * 2

# --- a loss branches on a count it computed; arithmetic of tensors read as a number
import torch


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    valid = (labels > 0).float()
    count = valid.sum()
    if count == 0:
        return logits.sum() * 0.0
    return -(torch.log_softmax(logits, -1)[:, 0] * valid).sum() / count


class Scaled(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        n = a * b
        k = float(n)
        return torch.tanh(w * k)

# --- look-alikes: a fast path around selections, an index read once, host arithmetic of unknown type
import torch


class Edges(nn.Module):
    def forward(self, edge_index: torch.Tensor, weight: torch.Tensor, errors: torch.Tensor, thr: float, steps):
        mask = edge_index[0] != edge_index[1]
        if not mask.all():
            edge_index = edge_index[:, mask]
            weight = weight[mask]
        last = int(torch.searchsorted(errors, errors.new_tensor(thr)).item())
        below = torch.cat([errors[:last], weight])
        final = steps - 1
        if final > 0:
            below = below * 2
        return torch.tanh(below), edge_index

# --- several host reads of one tensor's elements (a TorchScript signature comment types it)
import torch
import torch.nn.functional as F


def paste_mask_in_image(mask, box, im_h, im_w):
    # type: (Tensor, Tensor, int, int) -> Tensor
    w = int(box[2] - box[0] + 1)
    h = int(box[3] - box[1] + 1)
    mask = F.interpolate(mask[None, None], size=(h, w), mode="bilinear")
    return mask[0, 0] * 2

# --- look-alikes: one element read outside a loop, and reads that build an error message
import torch


def crop(image: torch.Tensor, box: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    w = int(box[2] - box[0])
    if other.shape[0] != 4:
        raise ValueError(f"bad box {int(other[2] - other[0])} {int(other[3] - other[1])}")
    return torch.tanh(image[:, :w]) * 2

# --- a step function compares an element of a schedule the object keeps
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

# --- look-alikes: the same test outside a step function, one whose arms do no tensor work, a checked element
import torch


class Table:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)

    def scale_at(self, sample: torch.Tensor, i: int) -> torch.Tensor:
        sigma = self.sigmas[i]
        if sigma > 0.5:
            sample = torch.tanh(sample)
        return sample * sigma

    def step(self, sample: torch.Tensor, i: int, log: list) -> torch.Tensor:
        sigma = self.sigmas[i]
        if sigma > 0.5:
            log.append(i)
        if self.sigmas[i + 1] < 0:
            raise ValueError("negative sigma")
        return sample * sigma

# --- look-alike: draws from torch's RNG on the host device; flagged: one on the input's device
import torch
from torch import nn


class Flip(nn.Module):
    def forward(self, waveform: torch.Tensor, p: float) -> torch.Tensor:
        h = waveform * 2
        if torch.rand(1).item() < p:
            return -h
        k = int(torch.empty(1).uniform_(0.0, 4.0).item())
        d = torch.rand(1, device=waveform.device).item()
        return h * k * d

# --- a comprehension over a tensor that tests each element; look-alikes: over a list, over .tolist(), an identity test
import torch


def greedy_decode(emission: torch.Tensor, blank: int, labels: list, seen: list) -> tuple:
    ids = torch.unique_consecutive(torch.argmax(emission, dim=-1))
    kept = [i for i in ids if i != blank]
    host = [i for i in ids.tolist() if i != blank]
    named = [label for label in labels if label != "<pad>"]
    some = [t for t in ids if t is not None]
    return kept, host, named, some

# --- look-alike: a comprehension over a name last bound to a host copy
import torch


def drop_blank(emission: torch.Tensor, blank: int) -> list:
    ids = torch.argmax(emission, dim=-1)
    ids = ids.tolist()
    return [i for i in ids if i != blank]

# --- a step function picks a number by an element of its schedule; look-alike: a description, not a step
import torch


class Euler:
    def __init__(self, steps: int):
        self.sigmas = torch.linspace(1.0, 0.0, steps)

    def step(self, out: torch.Tensor, sample: torch.Tensor, i: int) -> torch.Tensor:
        sample = sample - out * 0.5
        sigma = self.sigmas[i]
        gamma = 0.25 if 0.2 <= sigma <= 0.9 else 0.0
        return sample + out * (sigma * (gamma + 1))

    def describe(self, i: int) -> str:
        sigma = self.sigmas[i]
        return "high" if sigma > 0.5 else "low"

# --- a slice bound written per iteration from a tensor's element; look-alikes: bounds drawn on the host, a row index
import torch


def zero_tails(x: torch.Tensor, lengths: torch.Tensor, cand: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    mask = torch.ones_like(x)
    for i in range(x.shape[1]):
        mask[lengths[i] :, i] = 0
    start = torch.randint(0, 10, (4,))
    for j in range(4):
        mask[start[j] : start[j] + 2, 0] = 0
    for i in range(x.shape[0]):
        mask[i, cand[i]] = v[i]
    return x * mask

# --- per-row work on a tensor made before the loop, read per row; look-alike: a batch's output handed off
import torch


def run_starts(masks: torch.Tensor, model, batches: list) -> tuple:
    flat = masks > 0
    change = (flat[:, 1:] != flat[:, :-1]).nonzero()
    out, preds = [], []
    for i in range(flat.shape[0]):
        starts = change[change[:, 0] == i, 1] + 1
        out.append(starts.cpu().tolist())
    for x in batches:
        preds.extend(model(x * 2).argmax(-1).cpu().tolist())
    return out, preds

# --- a selection per row read only on the host; look-alike: a selection that picks the rows of the work
import torch


def first_stop(scores: torch.Tensor, stop: int, levels: torch.Tensor) -> tuple:
    ids = scores.argmax(-1)
    lengths = [ids.shape[1]] * ids.shape[0]
    for i in range(ids.shape[0]):
        found = (ids[i] == stop).nonzero()
        if len(found) > 0:
            lengths[i] = found[0].item()
    groups = []
    for k in range(4):
        idx = (levels == k).nonzero().flatten()
        groups.append(torch.tanh(scores[idx]) * 2)
    return torch.tensor(lengths), groups
