"""FL004 beyond its own examples: where a sync counts as inside tensor work, and where not."""
from __future__ import annotations

import pytest

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL004"}))


def positions(source: str) -> list[tuple[int, int]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.column) for f in result.findings]


FLAGGED = {
    "a nonzero gathered for a loss (deberta's classification head)": """\
import torch
from torch.nn import CrossEntropyLoss

class Head(torch.nn.Module):
    def forward(self, logits: torch.Tensor, labels: torch.Tensor):
        label_index = (labels >= 0).nonzero()
        labels = labels.long()
        if label_index.size(0) > 0:
            picked = torch.gather(logits, 0, label_index.expand(label_index.size(0), logits.size(1)))
            labels = torch.gather(labels, 0, label_index.view(-1))
            loss_fct = CrossEntropyLoss()
            loss = loss_fct(picked.view(-1, 4).float(), labels.view(-1))
        else:
            loss = torch.tensor(0).to(logits)
        return loss
""",
    "masked selections reduced through names, a one-argument where, a masked mean": """\
import torch
import torch.nn.functional as F

def loss(logits: torch.Tensor, target: torch.Tensor, v: torch.Tensor, err: torch.Tensor):
    valid = torch.where(v > 0)[0]
    kp = F.cross_entropy(logits[valid], target[valid])
    keep = err > 0
    kept = err[keep] * 2
    return kp + kept.abs().sum() + torch.mean(err[~keep])
""",
    "masks by name and by view: an argument, its slices, einops' repeat, a name a helper returns": """\
import torch
import torch.nn.functional as F
from einops import repeat

def losses(q: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, heads: int, pick):
    loss = F.mse_loss(q, x, reduction="none")
    loss_mask = repeat(mask, "b n -> (b h) n", h=heads)
    total = loss[loss_mask].mean()
    for k in range(q.shape[1]):
        mask_k = mask[:, k].contiguous().view(-1)
        err = loss[:, k].reshape(-1)
        kept = err[mask_k]
        total = total + kept.sum()
    _, keep_mask = pick(loss)
    return total + loss[keep_mask].sum()
""",
    "a mask argument rebound to indices: its nonzero is the selection, the gathers are not": """\
import torch

def bbox_loss(pred: torch.Tensor, target: torch.Tensor, fg_mask: torch.Tensor):
    fg_mask = fg_mask.nonzero(as_tuple=True)
    return (pred[fg_mask] - target[fg_mask]).abs().sum()
""",
    "the branch on m.any() around an if holding a masked write: the branch, not the write": """\
import torch

def dice(denom: torch.Tensor, score: torch.Tensor, per_class: bool):
    score = score * 2
    zeros = denom == 0
    if zeros.any():
        if per_class:
            score[zeros] = 1.0
    return score.mean()
""",
    "a write through a mask argument into a value computed above the if holding it": """\
import torch

def forward(x: torch.Tensor, w: torch.Tensor, mask=None):
    h = torch.tanh(x @ w)
    if mask is not None:
        h[mask] = 0.0
    return h * 2
""",
    "a write through a mask into a clone, and an in-place add through a mask": """\
import torch

def fmt(preds: torch.Tensor, target: torch.Tensor, w: torch.Tensor):
    preds = preds.clone()
    preds[target == -1] = -1
    h = torch.tanh(preds @ w)
    h[target > 0] += 1.0
    return h
""",
    "a conditional expression on a tensor's truth, in a loop that does tensor work": """\
import torch


def f(x: torch.Tensor, w: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        flag = (x.sum() > 0)
        x = x @ w if flag else x
    return x
""",
    "to-cpu in a training step's loop": """\
import torch

def train_step(x: torch.Tensor, host: list):
    for _ in range(3):
        x = torch.relu(x * 2)
        host.append(x.to("cpu"))
    return x
""",
    "a scalar read in forward, between work": """\
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        h = torch.relu(x)
        stats = {"peak": h.amax().item()}
        return h * 2, stats
""",
    "a scalar that goes back into tensor work": """\
import torch

def normalize(x: torch.Tensor):
    dist = torch.relu(x) * 2
    peak = float(dist.max())
    return dist / peak
""",
    "guard nested in a branch, and-ed with a flag": """\
import torch

def f(x: torch.Tensor, training: bool):
    h = x * 2 + 1
    if training:
        if training and not torch.isfinite(h).all():
            h = h.clamp(-1, 1)
    return h + 1
""",
    "f-string print in a loop at module level (a notebook cell)": """\
import torch

h = torch.randn(8)
for step in range(3):
    h = torch.tanh(h * 2)
    print(f"step {step}: {h.abs().mean()}")
""",
    "a chain of syncs is one finding": """\
import torch

def forward(x: torch.Tensor, arrays: list):
    for _ in range(3):
        x = torch.relu(x)
        arrays.append((x * 2).cpu().numpy())
    return x + 1
""",
    "a list of flags that decide branches doing tensor work": """\
import torch

def solve(a: torch.Tensor, c: torch.Tensor, compiling: bool):
    m1 = torch.sigmoid(a) > 0.5
    if compiling:
        has_one, has_two = True, True
    else:
        found = torch.stack([m1, a < -1]).any(-1).tolist()
        has_one, has_two = found
    if has_one:
        c = torch.where(m1, c * 2, c)
    return c + 1
""",
    "a comparison of a tensor's element, rebound by indexing, in an expert loop": """\
import torch

def experts(x: torch.Tensor, hits: torch.Tensor, w: torch.Tensor, n: int):
    out = torch.zeros_like(x)
    for idx in hits:
        idx = idx[0]
        if idx == n:
            continue
        out = out + torch.tanh(x * idx) @ w
    return out
""",
    "a branch on a scalar read after backward still decides tensor work": """\
import torch

def fit(model, x: torch.Tensor, lam: torch.Tensor, steps: int):
    for _ in range(steps):
        loss = model(x).sum() * lam
        loss.backward()
        if lam.item() < -2:
            lam.data = torch.full_like(lam.data, -2)
    return lam
""",
    "a scalar read in a working loop's test whose arm only does host work (greedy decoding)": """\
import torch

def greedy(emissions: torch.Tensor, blank: int):
    hyp = []
    for t in range(emissions.shape[0]):
        best = emissions[t].log_softmax(-1).argmax(-1)
        if best.item() != blank:
            hyp.append(int(best))
    return hyp
""",
    "a branch in a working loop on a name the loop computes": """\
import torch

def masked_means(x: torch.Tensor, masks: torch.Tensor):
    out = []
    for i in range(masks.shape[0]):
        denom = masks[i].sum()
        if denom > 0:
            out.append((x * masks[i]).sum() / denom)
    return out
""",
    "a scalar read of the element a working loop takes from a tensor": """\
import torch

def denoise(x: torch.Tensor, sigmas: torch.Tensor, w: torch.Tensor):
    for i, sigma in enumerate(sigmas):
        s = float(sigma)
        x = torch.tanh(x @ w) * s + x
    return x
""",
    "a scalar read whose receiver only .item() tells a tensor (a file without numpy)": """\
import torch


def sample(model, scheduler, latents, guidance: float):
    values = []
    for t in scheduler.timesteps:
        pair = torch.cat([latents] * 2)
        noise = model(pair, t)
        values.append(t.item())
        latents = scheduler.step(noise, t, latents)
    return latents, values
""",
    "a diffusion sampler's noise scale read by index and compared each step": """\
import torch

def sample(model, x: torch.Tensor, sigmas: torch.Tensor):
    for i in range(len(sigmas) - 1):
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        if sigma_next == 0:
            x = model(x, sigma)
        else:
            x = x + (sigma_next - sigma) * model(x, sigma)
    return x
""",
    "an element compared in a test whose arm only skips the iteration": """\
import torch

def pool(x: torch.Tensor, counts: torch.Tensor):
    out = []
    for i in range(counts.shape[0]):
        if counts[i] <= 0:
            continue
        out.append(torch.tanh(x[i]).sum())
    return out
""",
    "box sizes made by arithmetic on a box tensor's elements, in a loop": """\
import torch
import torch.nn.functional as F

def paste(masks: torch.Tensor, boxes: torch.Tensor):
    out = []
    for i in range(boxes.shape[0]):
        w = float(boxes[i, 2] - boxes[i, 0]) * 0.5
        h = int((boxes[i, 3] - boxes[i, 1]) / 2)
        out.append(F.interpolate(masks[i][None], size=(h, int(w))))
    return out
""",
    "a count a loss computed, read by name in a branch whose arms do tensor work": """\
import torch

def masked_loss(err: torch.Tensor, target: torch.Tensor):
    n = (target > 0).sum()
    total = n * 2
    if total > 0:
        return err.sum() / total
    return err.mean()
""",
    "arithmetic on tensor parameters read as a host number in forward": """\
import torch

class Scale(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor):
        n = a * b
        k = float(n)
        return torch.tanh(w * k)
""",
    "a step function's sync with no work above it: the caller's work is pending": """\
import torch

class Sched:
    def step(self, out: torch.Tensor, sample: torch.Tensor):
        peak = float(out.abs().amax())
        return sample - out / peak
""",
    "a scheduler's choice on an element of its schedule in a loop": """\
import torch

def sample(x: torch.Tensor, sigmas: torch.Tensor, w: torch.Tensor):
    for i in range(4):
        x = torch.tanh(x @ w)
        gamma = 0.5 if sigmas[i] > 0.2 else 0.0
        x = x * (1 + gamma)
    return x
""",
    "a size rounded from a length element per utterance (speechbrain's statistics pooling)": """\
import torch

class Pooling(torch.nn.Module):
    def forward(self, x, lengths=None):
        mean = []
        for snt_id in range(x.shape[0]):
            actual_size = int(torch.round(lengths[snt_id] * x.shape[1]))
            mean.append(torch.mean(x[snt_id, 0:actual_size, ...], dim=0))
        return torch.stack(mean)
""",
    "a size rounded from the element a loop takes from zip (a greedy CTC decoder)": """\
import torch

def ctc_greedy_decode(probabilities, seq_lens):
    batch_max_len = probabilities.shape[1]
    outputs = []
    for seq, seq_len in zip(probabilities, seq_lens):
        actual_size = int(torch.round(seq_len * batch_max_len))
        outputs.append(torch.max(seq.narrow(0, 0, actual_size), dim=1)[1])
    return outputs
""",
    "a choice on an element of a tensor the function rebinds before the loop, not in it": """\
import torch

def runs(tensor: torch.Tensor, change: torch.Tensor):
    tensor = tensor.flatten(1)
    out = []
    for i in range(tensor.shape[0]):
        idx = change[change[:, 0] == i, 1]
        counts = [] if tensor[i, 0] == 0 else [0]
        out.append((counts, idx[1:] - idx[:-1]))
    return out
""",
    "a count read from one row of a mask per codebook (vector-quantize's dead-code replacement)": """\
import torch

class Codebook(torch.nn.Module):
    def replace(self, batch_samples, batch_mask):
        for ind, (samples, mask) in enumerate(zip(batch_samples, batch_mask)):
            num_samples = samples.shape[0]
            num_dead = mask.sum().item()
            if num_dead > num_samples:
                mask = torch.zeros_like(mask)
            sampled = samples[torch.randperm(num_samples)[:num_dead]] * 2
            self.embed.data[ind][mask] = sampled
""",
    "a size cast from the sum of one row of an unchanged tensor": """\
import torch

def crops(x: torch.Tensor, m: torch.Tensor):
    out = []
    for i in range(m.shape[0]):
        n = int(m[i].sum())
        out.append(torch.tanh(x[i, :n]))
    return out
""",
    "per-row work on a tensor the loop does not change read per row, a slice bound written per row": """\
import torch

class Decoder(torch.nn.Module):
    def forward(self, scores: torch.Tensor, lengths: torch.Tensor):
        spans = []
        for row in scores:
            spans.append((row > self.threshold).nonzero().tolist())
        mask = torch.ones_like(scores)
        for i in range(scores.shape[0]):
            mask[i, lengths[i] :] = 0.0
        return spans, scores * mask
""",
}
EXPECTED = {
    "a count a loss computed, read by name in a branch whose arms do tensor work": [(6, 8)],
    "arithmetic on tensor parameters read as a host number in forward": [(6, 13)],
    "a step function's sync with no work above it: the caller's work is pending": [(5, 16)],
    "a scheduler's choice on an element of its schedule in a loop": [(6, 24)],
    "a size rounded from a length element per utterance (speechbrain's statistics pooling)": [(7, 27)],
    "a size rounded from the element a loop takes from zip (a greedy CTC decoder)": [(7, 23)],
    "a choice on an element of a tensor the function rebinds before the loop, not in it": [(8, 24)],
    "a count read from one row of a mask per codebook (vector-quantize's dead-code replacement)": [(7, 24)],
    "a size cast from the sum of one row of an unchanged tensor": [(6, 13)],
    "a diffusion sampler's noise scale read by index and compared each step": [(6, 12)],
    "an element compared in a test whose arm only skips the iteration": [(6, 12)],
    "box sizes made by arithmetic on a box tensor's elements, in a loop": [(7, 13), (8, 13)],
    "a scalar read whose receiver only .item() tells a tensor (a file without numpy)": [(9, 23)],
    "a scalar read of the element a working loop takes from a tensor": [(5, 13)],
    "a scalar read in a working loop's test whose arm only does host work (greedy decoding)": [(7, 12), (8, 24)],
    "a branch in a working loop on a name the loop computes": [(7, 12)],
    "a comparison of a tensor's element, rebound by indexing, in an expert loop": [(7, 12)],
    "a branch on a scalar read after backward still decides tensor work": [(7, 12)],
    "a list of flags that decide branches doing tensor work": [(8, 17)],
    "a conditional expression on a tensor's truth, in a loop that does tensor work": [(7, 22)],
    "to-cpu in a training step's loop": [(6, 21)],
    "a scalar read in forward, between work": [(6, 26)],
    "a scalar that goes back into tensor work": [(5, 12)],
    "guard nested in a branch, and-ed with a flag": [(6, 29)],
    "f-string print in a loop at module level (a notebook cell)": [(6, 5)],
    "a chain of syncs is one finding": [(6, 23)],
    "a nonzero gathered for a loss (deberta's classification head)": [(6, 23)],
    "masked selections reduced through names, a one-argument where, a masked mean": [(5, 13), (8, 12), (9, 47)],
    "a write through a mask into a clone, and an in-place add through a mask": [(5, 5), (7, 5)],
    "masks by name and by view: an argument, its slices, einops' repeat, a name a helper returns":
        [(8, 13), (12, 16), (15, 20)],
    "a write through a mask argument into a value computed above the if holding it": [(6, 9)],
    "a mask argument rebound to indices: its nonzero is the selection, the gathers are not": [(4, 15)],
    "the branch on m.any() around an if holding a masked write: the branch, not the write": [(6, 8)],
    "per-row work on a tensor the loop does not change read per row, a slice bound written per row": [(7, 26), (10, 21)],
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    assert positions(FLAGGED[name]) == EXPECTED[name]


SILENT = {
    "a mask also read by a needed selection, a loss method of the model, a rebound mask argument": """\
import torch
import torch.nn.functional as F

class Heads(torch.nn.Module):
    def forward(self, h: torch.Tensor, labels: torch.Tensor, emb: torch.Tensor, mask: torch.Tensor):
        masked_tokens = labels >= 0
        picked = labels[masked_tokens]
        logits = self.head(h[masked_tokens, :])
        loss = F.cross_entropy(logits, picked)
        reg = self.sigreg_loss(emb[mask])
        return loss + reg
""",
    "names that say mask but may hold indices, packed per-hit values, per-cluster means, a tested mask": """\
import torch

def smooth(error: torch.Tensor, mask: torch.Tensor, mask_idx: torch.Tensor, y: torch.Tensor):
    numel = int(mask.sum()) if mask.dtype == torch.bool else mask.size(0)
    sigma = error[mask].abs().sum() / numel
    picked = y[mask_idx].sum()
    return sigma + picked


def ratio_mask(mask: torch.Tensor, ratio: float):
    n = int(mask.sum())
    out = mask.clone()
    out[mask] = torch.rand(n) < ratio
    return out


def dispersion(data: torch.Tensor, labels: torch.Tensor):
    total = torch.zeros(())
    for k in range(4):
        cluster_k = data[labels == k, :]
        mean_k = cluster_k.mean(dim=0)
        total = total + ((cluster_k - mean_k) ** 2).sum()
    return total


def forward(x: torch.Tensor, w: torch.Tensor, padding_mask=None):
    logits = x @ w
    if padding_mask is not None and padding_mask.any():
        logits[padding_mask] = 0
    return logits.sum(dim=1)
""",
    "selections the work needs: returned, sized by their count, routed by index, sorted": """\
import torch

def post(scores: torch.Tensor, boxes: torch.Tensor, x: torch.Tensor, route: torch.Tensor, w: torch.Tensor):
    keep = scores > 0.5
    kept = scores[keep]
    ranks = torch.arange(len(kept)) + 1
    out = torch.zeros_like(x)
    for e in range(4):
        rows = torch.where(route == e)[0]
        out.index_add_(0, rows, torch.tanh(x[rows] @ w))
    order = scores[scores > 0].sort().values
    return boxes[keep], ranks, out, order
""",
    "masked writes into an argument, a view, a fast path, and values another selection packs": """\
import torch

def writes(x: torch.Tensor, labels: torch.Tensor, ids: torch.Tensor, codes: torch.Tensor):
    x[labels < 0] = 0.0
    v = x.view(-1)
    v[v > 3] = 3.0
    h = x * 2
    same = h > 1
    if same.any():
        h[same] = 1.0
    out = ids.unsqueeze(-1) * 3
    out[labels > 0] = codes[codes > 0]
    return h, out
""",
    "a selection in a function that runs once, and one in an error message": """\
import torch

class M(torch.nn.Module):
    def __init__(self, w: torch.Tensor):
        super().__init__()
        self.scale = w[w > 0].mean()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * 2
        if h.shape[0] > 8:
            raise ValueError(f"too large: {h[h > 0].sum()}")
        return h
""",
    "a check's result named, then raised on": """\
import torch

def crop(x: torch.Tensor, d: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    h = torch.relu(x * 2)
    bad = (d <= 0).any() or (e <= 0).any()
    if bad:
        raise ValueError("size exceeds the input")
    return h * 3
""",
    "sync in a nested function is that function's business": """\
import torch

def f(x: torch.Tensor):
    h = torch.relu(x)

    def peak() -> float:
        return h.amax().item()

    return h * 2, peak
""",
    "a check before any work": """\
import torch

def f(x: torch.Tensor):
    if torch.isnan(x).any():
        raise ValueError("nan input")
    return torch.relu(x) * 2
""",
    "a bare flag of unknown type is not a tensor": """\
import torch

def forward(x, use_cache=None):
    h = torch.relu(x)
    if use_cache:
        h = h + 1
    return h * 2
""",
    "a list handed to Python once, outside a step loop": """\
import torch

def f(x: torch.Tensor, sizes: torch.Tensor):
    h = torch.sigmoid(x)
    for n in sizes.cumsum(0).tolist():
        h = h + n
    host = h.to("cpu")
    return h * 2, host
""",
    "an assertion, a check call, a branch that only warns": """\
import torch

def f(x: torch.Tensor, log):
    h = torch.relu(x)
    assert (h >= 0).all()
    KORNIA_CHECK(bool(h.isfinite().all()), "not finite")
    if h.sum() == 0:
        log.warning("all zero")
    return h * 2
""",
    "validation whose arm does work but also raises": """\
import torch

def f(x: torch.Tensor, strategy: str):
    h = torch.relu(x)
    nans = torch.isnan(h)
    if nans.any():
        if strategy == "error":
            raise ValueError("nan")
        h = h[~nans]
    return h * 2
""",
    "a value that decides a shape, directly or through a size name": """\
import torch

def f(x: torch.Tensor, batch: torch.Tensor):
    h = torch.relu(x)
    batch_size = int(batch.max()) + 1
    n = batch.bincount().amax().item()
    out = h.new_zeros(batch_size, h.shape[-1])
    return out.index_add(0, batch, h) * 2, torch.arange(n) * 2
""",
    "a scalar read once, outside a step function, that stays on the host": """\
import torch

def evaluate(logits: torch.Tensor, y: torch.Tensor):
    mask = logits.argmax(-1) == y
    hits = mask.sum().item() / y.size(0)
    return torch.softmax(logits, -1) * 2, hits
""",
    "a loop exit": """\
import torch

def generate(x: torch.Tensor, eos: int):
    out = x
    for _ in range(8):
        out = torch.cat([out, out[:, -1:] + 1], dim=1)
        if (out[:, -1] == eos).all():
            out = out * 1
            break
    return out
""",
    "code that runs once: setup and dataset processing": """\
import torch

class Data:
    def __init__(self, edge_index: torch.Tensor):
        self.degree = torch.bincount(edge_index[0]) * 1.0
        self.mean_degree = float(self.degree.mean())
        self.scaled = self.degree / 2

    def process(self, edge_index: torch.Tensor):
        for graph in range(3):
            h = edge_index * graph
            print(h.max().item())
""",
    "loop exits: a while test, a flag the while reads, a value an if-break reads": """\
import torch

def refine(x: torch.Tensor, opt, tol: float):
    changed = True
    while changed:
        prev = x
        x = torch.relu(x - 0.1)
        changed = bool((x != prev).any())
    while float(x.abs().amax()) > 1e3:
        x = x * 0.5
    prev_loss = None
    for _ in range(10):
        loss = (x * x).sum()
        current = loss.item()
        if prev_loss is not None and abs(current - prev_loss) < tol:
            break
        prev_loss = current
        x = x * 0.9
    return x
""",
    "only syncs after the work, in a loop that only reads": """\
import torch

def f(x: torch.Tensor):
    probs = torch.softmax(x, -1)
    out = []
    while len(out) < 3:
        out.append(float(probs[len(out)].sum()))
    return out
""",
    "a loss read after backward for a running average on the host": """\
import torch

def fit(model, x: torch.Tensor, steps: int) -> float:
    running = 0.0
    for _ in range(steps):
        loss = (model(x) * 2).sum()
        loss.backward()
        running = 0.9 * running + 0.1 * loss.item()
    return running
""",
    "a scale factor read once to size an interpolation": """\
import torch
import torch.nn.functional as F

def resize(image: torch.Tensor, limit: float):
    scale = torch.min(limit / image.amax(), torch.tensor(2.0))
    if image.dim() == 3:
        scale_factor = scale.item()
    else:
        scale_factor = 1.0
    out = F.interpolate(image[None], scale_factor=scale_factor)
    return out[0] * 2
""",
    "a loop over a tensor whose comparison only picks host values": """\
import torch

def names(labels: torch.Tensor, x: torch.Tensor):
    y = torch.relu(x)
    found = []
    for label in labels:
        if label == 0:
            found.append("background")
    return y * 2, found
""",
    "a working loop's test that skips the iteration (`continue`)": """\
import torch

def per_class(x: torch.Tensor, labels: torch.Tensor, n: int):
    out = []
    for c in range(n):
        m = labels == c
        if not m.any():
            continue
        out.append(torch.relu(x * m).mean(0))
    return out
""",
    "a branch outside loops on a computed name (a shape decision)": """\
import torch

def table(key: torch.Tensor):
    low = key.min()
    span = key.max() - low
    if span <= 1000:
        out = torch.full((int(key.numel()),), -1)
    else:
        out = torch.zeros(key.shape)
    return out + key
""",
    "a branch outside loops whose arm only does host work": """\
import torch

def count(x: torch.Tensor, y: torch.Tensor):
    n = 0
    h = torch.relu(x)
    if h.sum() > 0:
        n += 1
    return h * y, n
""",
    "an element of a tensor made a slice bound (a size) in a working loop": """\
import torch

def crop(x: torch.Tensor, lengths: torch.Tensor):
    outs = []
    for length in lengths:
        outs.append(torch.tanh(x[: int(length)]).sum())
    return outs
""",
    "a float read of a list of Python numbers zipped with tensors": """\
import torch

def total(xs: list[torch.Tensor], ws: list[float]):
    out = []
    for x, w in zip(xs, ws):
        out.append(torch.relu(x) * float(w))
    return out
""",
    ".item() of a value of unknown type in a file that imports numpy": """\
import numpy as np
import torch


def collect(xs, w: torch.Tensor):
    out = []
    for x in xs:
        h = torch.relu(w * 2)
        out.append(x.item())
    return out, h
""",
    "a branch in a loop whose arm fails through torch._assert (validation)": """\
import torch


def check_targets(targets: list[torch.Tensor], w: torch.Tensor):
    for boxes in targets:
        bad = boxes[:, 2:] <= boxes[:, :2]
        if bad.any():
            idx = torch.where(bad.any(dim=1))[0][0]
            torch._assert(False, f"invalid box {boxes[idx].tolist()}")
    return w * 2
""",
    "a hand-off that builds an error message in an arm that raises": """\
import torch


class Net(torch.nn.Module):
    def forward(self, x, targets):
        for target in targets:
            boxes = target["boxes"]
            bad = boxes[:, 2:] <= boxes[:, :2]
            if bad.any():
                idx = torch.where(bad.any(dim=1))[0][0]
                box = boxes[idx].tolist()
                raise ValueError(f"invalid box {box}")
        return torch.relu(x * 2)
""",
    "a comparison of the metadata of a tensor's element (its ndim) in a working loop": """\
import torch


def paint(masks: torch.Tensor, w: torch.Tensor):
    out = []
    for mask in masks:
        if mask.ndim != 3:
            mask = mask[None]
        out.append(torch.relu(mask * w))
    return out
""",
    "an element compared after the loop changed its tensor in place": """\
import torch

def decay(x: torch.Tensor, budget: torch.Tensor):
    for i in range(budget.shape[0]):
        budget[i] -= 1
        if budget[i] > 0:
            x = torch.tanh(x * 2)
    return x
""",
    "an element compared in a loop that does no tensor work": """\
import torch

def count(lengths: torch.Tensor, limit: int):
    n = 0
    for i in range(lengths.shape[0]):
        if lengths[i] > limit:
            n += 1
    return n
""",
    "an element of an untyped argument compared with a string": """\
import torch

class Net(torch.nn.Module):
    def forward(self, x, names):
        for i in range(len(names)):
            if names[i] == "skip":
                continue
            x = torch.relu(x * 2)
        return x
""",
    "host draws from torch's RNG (LayerDrop, a coin flip)": """\
import torch

class Drop(torch.nn.Module):
    def forward(self, x: torch.Tensor, layers: list, p: float):
        for w in layers:
            if torch.rand([]).item() < p:
                continue
            x = torch.tanh(x @ w)
        return -x if torch.rand(1).item() < p else x
""",
    "a fast path that skips selections keeping every row": """\
import torch

class Edges(torch.nn.Module):
    def forward(self, edge_index: torch.Tensor, weight: torch.Tensor):
        mask = edge_index[0] != edge_index[1]
        if not mask.all():
            edge_index = edge_index[:, mask]
            weight = weight[mask]
        return torch.tanh(weight * 2), edge_index
""",
    "a read made a slice bound before the work": """\
import torch

def head(errors: torch.Tensor, thr: float):
    h = torch.tanh(errors * 2)
    last = int(torch.searchsorted(h, h.new_tensor(thr)).item())
    return torch.relu(h[:last]) * 2
""",
    "arithmetic on a name of unknown type is no tensor": """\
import torch

def loss_fn(x: torch.Tensor, y: torch.Tensor, steps):
    d = x - y
    last = steps - 1
    if last > 0:
        d = d * 2
    return d.mean()
""",
    "one element read outside a loop": """\
import torch

def crop(image: torch.Tensor, box: torch.Tensor):
    h = torch.tanh(image * 2)
    w = int(box[2] - box[0])
    return h[:, :w] * 2
""",
    "arithmetic on elements in __init__ (runs once)": """\
import torch

class Boxes(torch.nn.Module):
    def __init__(self, boxes: torch.Tensor):
        super().__init__()
        self.sizes = []
        for i in range(boxes.shape[0]):
            self.sizes.append(int(boxes[i, 2] - boxes[i, 0]))
            self.register_buffer(f"b{i}", torch.tanh(boxes[i]))
""",
    "a size rounded from an element of a tensor the loop changes": """\
import torch

def f(x: torch.Tensor, lengths: torch.Tensor):
    out = []
    for i in range(x.shape[0]):
        n = int(torch.round(lengths[i] * 4))
        lengths = lengths - 1
        out.append(torch.tanh(x[i, :n]))
    return out
""",
    "a choice on an element of a tensor the loop writes": """\
import torch

def g(t: torch.Tensor, w: torch.Tensor):
    out = []
    for i in range(t.shape[0]):
        t[i] = torch.tanh(t[i] @ w)
        flag = 1 if t[i, 0] == 0 else 0
        out.append(flag)
    return out
""",
    "a row reduction of a tensor the loop changes, over a dim, or of a row rebound above": """\
import torch

def f(x: torch.Tensor, m: torch.Tensor, rows: torch.Tensor):
    out = []
    for i in range(m.shape[0]):
        n = int(m[i].sum())
        k = m[i].sum(-1).tolist()
        out.append(torch.tanh(x[i, :n]) * k[0])
        m = m * 2
    for row in rows:
        row = row * 2
        size = row.sum().item()
        out.append(torch.tanh(x[:size]))
    return out
""",
    "per-row writes and reads the rule leaves: host-made bounds, work per row, a row index, a loader, a grouping": """\
import torch

def drop_chunks(x: torch.Tensor, n: int) -> torch.Tensor:
    start = torch.randint(0, 10, (n,))
    end = start + 4
    for j in range(n):
        x[:, start[j] : end[j]] = 0.0
    return x * 2

def fill(x: torch.Tensor, out: torch.Tensor, lengths: torch.Tensor, cand: torch.Tensor, v: torch.Tensor):
    for i in range(x.shape[0]):
        out[i, : lengths[i]] = torch.tanh(x[i, : lengths[i]])
        out[i, cand[i]] = v[i]
    return out * 2

def predict(model, batches: list) -> list:
    preds = []
    for x in batches:
        h = torch.tanh(x * 2)
        preds.extend(model(h).argmax(-1).cpu().tolist())
    return preds

def per_level(x: torch.Tensor, levels: torch.Tensor, n: int) -> list:
    out = []
    for k in range(n):
        idx = (levels == k).nonzero().flatten()
        out.append(torch.tanh(x[idx]) * 2)
    return out
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert positions(SILENT[name]) == []
