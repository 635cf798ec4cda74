"""Whole models through fusionrt, next to eager PyTorch and torch.compile (the model zoo).

Every model is built from a config with random weights (no downloads), in eval mode, and run
under ``torch.no_grad()`` in bfloat16 on a GPU (float32 on the CPU). Per model:

- ms per call of eager, ``torch.compile`` (default mode) and fusionrt: a device
  synchronize around N back-to-back calls, N chosen so a round lasts about ``ROUND_S``; median of
  the rounds. This is wall time, so fusionrt's recording (on the CPU) counts like any other cost.
- first-call seconds of fusionrt and of torch.compile, with empty kernel caches, in a process
  that already ran a trivial function through each path (so imports and CUDA init stay out);
- peak memory over one warm call of eager and fusionrt: allocated (``max_memory_allocated``) and
  reserved from the device with the cache emptied first (a CUDA graph's pool is reserved);
- kernels and writes of fusionrt's report next to the report's eager counts, its fallbacks;
- rel err ‖out - ref‖ / ‖ref‖ of each path's main output (logits, else the last hidden state)
  against the same model run eagerly in float32 (no TF32);
- whether the timed jit calls replayed, and else why the last call recorded.

fusionrt runs the model as ``torch.compile(model, backend="fusionrt")`` (``--route compile``, the
default: Dynamo's graphs, each replayed by fusionrt) or as ``fusionrt.jit`` of the forward with
the weights passed as an argument (``--route jit``). Each model runs in its own
process with its own time limit, so a crash, a hang or an out-of-memory error costs one row.
The two built-in models (a decoder block with attention written out, a CNN with BatchNorm) need
no library: they are what the CPU test runs.

Models (GPU sizes): transformers Llama (246M, grouped-query attention) and GPT-2 (124M) at
4x512 tokens, BERT-base at 8x512 tokens; timm vit_base_patch16_224, torchvision resnet50, timm
convnext_tiny and efficientnet_b0 at 32 images of 224x224.

    python bench/models_bench.py [--models NAME ...] [--quick] [--no-compile] [--out FILE]
    python bench/models_bench.py --device cpu --tiny --models block cnn    # smoke test

Writes JSON to FILE, else $OUT/models.json when $OUT is set, else
bench/results/<date>-<device>-models.json, and a markdown table with the same stem (.md).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import gc
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusionrt  # noqa: E402

FIELDS = ("model", "library", "mode", "dtype", "shape", "params_m", "eager_ms", "compile_ms", "fusionrt_ms",
          "fusionrt_first_s", "compile_first_s", "eager_peak_mib", "fusionrt_peak_mib",
          "eager_reserved_mib", "fusionrt_reserved_mib", "kernels",
          "eager_kernels", "writes", "eager_writes", "fallbacks", "fallback_ops", "eager_rel_err", "rel_err",
          "compile_rel_err", "replayed", "why_not_replayed", "route", "graphs", "cuda_graphed",
          "cuda_graph_held_calls")
ROUND_S = {"full": 0.25, "quick": 0.1}  # seconds per timing round
ROUNDS = {"full": 5, "quick": 3}
MAX_CALLS = 200  # per round: a sub-millisecond tiny model would otherwise loop for long
RESERVE_S = 30  # time kept back for each model still to run


# -- the models ----------------------------------------------------------------------------------

@dataclass
class Model:
    name: str
    library: str  # the module that must be importable; "builtin" for the two defined here
    build: Callable[[bool], tuple[nn.Module, torch.Tensor]]  # tiny -> (model, input)
    kwargs: dict = field(default_factory=dict)


def _tokens(vocab: int, batch: int, seq: int) -> torch.Tensor:
    return torch.randint(vocab, (batch, seq))


def _images(batch: int, size: int) -> torch.Tensor:
    return torch.randn(batch, 3, size, size)


def llama(tiny: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    size = (dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2) if tiny else
            dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                 num_attention_heads=16, num_key_value_heads=4))
    config = LlamaConfig(max_position_embeddings=1024, **size)
    return LlamaForCausalLM(config), _tokens(config.vocab_size, *((2, 16) if tiny else (4, 512)))


def gpt2(tiny: bool):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4) if tiny else GPT2Config()
    return GPT2LMHeadModel(config), _tokens(config.vocab_size, *((2, 16) if tiny else (4, 512)))


def bert(tiny: bool):
    from transformers import BertConfig, BertModel

    config = (BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128) if tiny else BertConfig())
    return BertModel(config), _tokens(config.vocab_size, *((2, 16) if tiny else (8, 512)))


def vit(tiny: bool):
    import timm

    size = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=10) if tiny else {}
    return timm.create_model("vit_base_patch16_224", **size), _images(*((2, 32) if tiny else (32, 224)))


def resnet50(tiny: bool):
    from torchvision.models import resnet

    model = resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=10) if tiny else resnet.resnet50()
    return model, _images(*((2, 32) if tiny else (32, 224)))


def convnext(tiny: bool):
    import timm

    size = dict(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128), num_classes=10) if tiny else {}
    return timm.create_model("convnext_tiny", **size), _images(*((2, 64) if tiny else (32, 224)))


def efficientnet(tiny: bool):
    import timm

    return (timm.create_model("efficientnet_b0", **(dict(num_classes=10) if tiny else {})),
            _images(*((2, 32) if tiny else (32, 224))))


class Block(nn.Module):
    """A pre-norm decoder block with attention written out (scale, causal mask, softmax)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 8 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = (q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5).masked_fill(causal, float("-inf"))
        x = x + self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


def block(tiny: bool):
    dim, heads, layers, batch, seq = (64, 4, 2, 2, 16) if tiny else (1024, 16, 4, 4, 512)
    model = nn.Sequential(*(Block(dim, heads) for _ in range(layers)), nn.RMSNorm(dim))
    return model, torch.randn(batch, seq, dim)


def _conv_bn(cin: int, cout: int, stride: int = 1, k: int = 3) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout))


class Residual(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_conv_bn(cin, cout, 2), nn.ReLU(), _conv_bn(cout, cout))
        self.skip = _conv_bn(cin, cout, 2, k=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


def cnn(tiny: bool):
    w, batch, size = (8, 2, 32) if tiny else (64, 32, 224)
    model = nn.Sequential(_conv_bn(3, w, 2), nn.ReLU(), Residual(w, 2 * w), Residual(2 * w, 4 * w),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 1000))
    return model, _images(batch, size)


NO_CACHE = {"use_cache": False}
ZOO = {m.name: m for m in [
    Model("llama", "transformers", llama, NO_CACHE),
    Model("gpt2", "transformers", gpt2, NO_CACHE),
    Model("bert", "transformers", bert),
    Model("vit_b16", "timm", vit),
    Model("resnet50", "torchvision", resnet50),
    Model("convnext_tiny", "timm", convnext),
    Model("efficientnet_b0", "timm", efficientnet),
    Model("block", "builtin", block),
    Model("cnn", "builtin", cnn),
]}
DEFAULT = [name for name, m in ZOO.items() if m.library != "builtin"]  # about 7.5 minutes on an H100


def randomize_batch_norm(model: nn.Module) -> None:
    """Fresh BatchNorm layers are the identity in eval mode, which would hide a wrong fold."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.normal_(0, 0.1)


def without_dropout(model: nn.Module) -> None:
    """Training without randomness, so each path's output can be compared with the reference."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
        for name in ("attention_dropout", "attn_dropout_p", "dropout_p"):  # passed to SDPA as floats
            if isinstance(getattr(m, name, None), float):
                setattr(m, name, 0.0)


def main_output(out: Any) -> torch.Tensor:
    """The tensor the errors are measured on: logits, else the last hidden state, else the output."""
    for name in ("logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    return out


# -- measuring one model (in its own process) ----------------------------------------------------

def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.detach().cpu().double(), ref.double()
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30)).item()


def timed_s(fn: Callable[[], Any], device: str) -> tuple[Any, float]:
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - start


def per_call_ms(fn: Callable[[], Any], device: str, pace: str) -> float:
    """Median over rounds of (synchronize, N calls, synchronize) / N; one call sets N."""
    estimate = timed_s(fn, device)[1]
    calls = max(1, min(MAX_CALLS, round(ROUND_S[pace] / estimate)))
    rounds = []
    for _ in range(ROUNDS[pace]):
        rounds.append(timed_s(lambda: _repeat(fn, calls), device)[1] / calls)
    return statistics.median(rounds) * 1e3


def _repeat(fn: Callable[[], Any], calls: int) -> None:
    """``calls`` calls, each result dropped before the next call, as an inference loop does (a
    CUDA graph that hands out its memory copies its results instead when they are all kept)."""
    for _ in range(calls):
        fn()


def peak_call(fn: Callable[[], Any], device: str) -> tuple[torch.Tensor, float | None, float | None]:
    """One call's output, the peak of allocated memory during it (weights and input included),
    and the peak of memory reserved from the device with the allocator's cache emptied first:
    what a CUDA graph's private pool holds is reserved, not allocated, between launches."""
    if device != "cuda":
        return fn(), None, None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    return out, torch.cuda.max_memory_allocated() / 2 ** 20, torch.cuda.max_memory_reserved() / 2 ** 20


def warm_paths(device: str, executor: str, with_compile: bool) -> None:
    """Run a trivial function through each path, so first calls pay only for the model."""
    x = torch.randn(64, device=device)
    fusionrt.jit(lambda t: t * 2 + 1, executor=executor)(x)
    torch.compile(lambda t: t * 2 + 1, backend="fusionrt", options={"executor": executor})(x)
    if with_compile:
        torch.compile(lambda t: t * 2 + 1)(x)
    _sync(device)


def fusionrt_call(spec: Model, model: nn.Module, x: torch.Tensor, executor: str,
                  route: str) -> tuple[Callable[[], torch.Tensor], Callable[[], list[fusionrt.Jitted]]]:
    """One call of the model through fusionrt, and the jitted graphs that call runs.

    ``compile``: ``torch.compile(model, backend="fusionrt")``, one jitted aten graph per Dynamo
    graph. ``jit``: ``fusionrt.jit`` of the whole forward, the weights passed as an argument
    (``torch.func.functional_call``), one jitted function."""
    if route == "jit":
        weights = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        jitted = fusionrt.jit(lambda w, t: main_output(torch.func.functional_call(model, w, (t,), spec.kwargs)),
                              executor=executor)
        return (lambda: jitted(weights, x)), (lambda: [jitted])
    from fusionrt.compile_backend import compiled_graphs

    seen = {id(g) for g in compiled_graphs()}
    compiled = torch.compile(model, backend="fusionrt", options={"executor": executor})
    return (lambda: main_output(compiled(x, **spec.kwargs))), (
        lambda: [g for g in compiled_graphs() if id(g) not in seen])


def measure_model(spec: Model, opts: argparse.Namespace, row: dict, stage: Callable[[str], None]) -> None:
    device, pace = opts.device, "quick" if opts.quick else "full"
    executor = opts.executor or ("triton" if device == "cuda" else "reference")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    row["dtype"] = str(dtype).removeprefix("torch.")
    torch.manual_seed(0)
    with torch.device(device):
        model, x = spec.build(opts.tiny)
    randomize_batch_norm(model)
    train = opts.mode == "train"
    model.train(train)
    if train:
        without_dropout(model)
    row["shape"] = "x".join(map(str, x.shape))
    row["params_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
    if x.is_floating_point():
        x = x.to(dtype)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False), torch.no_grad():
        ref = main_output(model(x.float() if x.is_floating_point() else x, **spec.kwargs)).float().cpu()
    model.to(dtype)
    stage(f"{row['params_m']}M parameters, input {row['shape']}, {row['dtype']}, {opts.mode}")
    # A training step: forward, a loss, backward and an SGD step (learning rate 0: the update's
    # kernels run, the weights stay, so every step computes the same and errors stay comparable).
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0, foreach=True) if train else None

    def as_call(forward: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        if not train:
            return forward

        def step() -> torch.Tensor:
            out = forward()
            out.float().square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return out.detach()

        return step

    eager = as_call(lambda: main_output(model(x, **spec.kwargs)))

    eager()
    row["eager_ms"] = per_call_ms(eager, device, pace)
    out, row["eager_peak_mib"], row["eager_reserved_mib"] = peak_call(eager, device)
    row["eager_rel_err"] = rel_err(out, ref)
    del out
    stage(f"eager {row['eager_ms']:.2f} ms")

    warm_paths(device, executor, with_compile=not opts.no_compile)
    call, graphs = fusionrt_call(spec, model, x, executor, opts.route)
    call = as_call(call)
    out, row["fusionrt_first_s"] = timed_s(call, device)
    first_err = rel_err(out, ref)
    del out
    reports = [g.report for g in graphs()]
    fallback_ops = collections.Counter(f.op for r in reports for f in r.fallbacks)
    row.update(kernels=sum(r.kernels for r in reports), eager_kernels=sum(r.eager_kernels for r in reports),
               writes=sum(r.writes for r in reports), eager_writes=sum(r.eager_writes for r in reports),
               fallbacks=sum(fallback_ops.values()), fallback_ops=dict(fallback_ops.most_common()),
               graphs=len(reports))
    stage(f"fusionrt first call {row['fusionrt_first_s']:.2f} s, {row['kernels']} kernels, {row['writes']} writes, "
          f"{row['fallbacks']} fallbacks, {len(reports)} graph(s)")
    replays = {id(g): g.stats.replays for g in graphs()}
    row["fusionrt_ms"] = per_call_ms(call, device, pace)
    not_replayed = [g for g in graphs() if g.stats.replays <= replays.get(id(g), 0)]
    row["replayed"] = not not_replayed
    row["why_not_replayed"] = "; ".join(g.stats.last_recording for g in not_replayed) or None
    if opts.route == "compile":
        from fusionrt.compile_backend import cuda_graphed

        graphed = [cuda_graphed(g) for g in graphs() if cuda_graphed(g) is not None]
        row["cuda_graphed"] = sum(bool(g.launches) for g in graphed)
        row["cuda_graph_held_calls"] = sum(g.held_calls for g in graphed)
    out, row["fusionrt_peak_mib"], row["fusionrt_reserved_mib"] = peak_call(call, device)
    row["rel_err"] = max(first_err, rel_err(out, ref))  # the recorded call's and a timed call's
    del out
    stage(f"fusionrt {row['fusionrt_ms']:.2f} ms ({'replayed' if row['replayed'] else 'recorded'})")

    if opts.no_compile:
        return
    compiled = torch.compile(model)
    compiled_call = as_call(lambda: main_output(compiled(x, **spec.kwargs)))
    out, row["compile_first_s"] = timed_s(compiled_call, device)
    row["compile_rel_err"] = rel_err(out, ref)
    del out
    row["compile_ms"] = per_call_ms(compiled_call, device, pace)
    stage(f"compile {row['compile_ms']:.2f} ms, first call {row['compile_first_s']:.1f} s")


def worker(opts: argparse.Namespace) -> int:
    """Measure one model and keep its row in ``--row-file`` after every stage, so a row killed by
    its time limit still has what was measured."""
    spec = ZOO[opts.worker]
    row = {**new_row(spec), "route": opts.route, "mode": opts.mode}
    path = Path(opts.row_file)
    start = time.monotonic()

    def stage(done: str) -> None:
        path.write_text(json.dumps(row))
        print(f"{time.monotonic() - start:6.1f} s  {spec.name}: {done}", flush=True)

    try:
        with torch.set_grad_enabled(opts.mode == "train"):
            measure_model(spec, opts, row, stage)
    except Exception as e:  # recorded in the row; the traceback goes to stderr
        row["error"] = f"{type(e).__name__}: {e}"[:400]
        stage("error")
        raise
    return 0


# -- the driver ----------------------------------------------------------------------------------

def new_row(spec: Model) -> dict:
    return {**dict.fromkeys(FIELDS), "model": spec.name, "library": spec.library, "mode": "inference"}


def run_model(spec: Model, opts: argparse.Namespace, timeout: float) -> dict:
    """Run one model's worker in a fresh process with empty kernel caches, within ``timeout``."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, FUSIONRT_CACHE_DIR=f"{tmp}/fusionrt", TRITON_CACHE_DIR=f"{tmp}/triton",
                   TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor")
        row_file, log = Path(tmp, "row.json"), Path(tmp, "stderr.log")
        command = [sys.executable, __file__, "--worker", spec.name, "--row-file", str(row_file),
                   "--device", opts.device]
        command += [flag for flag, on in (("--tiny", opts.tiny), ("--quick", opts.quick),
                                          ("--no-compile", opts.no_compile)) if on]
        command += ["--executor", opts.executor] if opts.executor else []
        command += ["--route", opts.route, "--mode", opts.mode]
        with log.open("w") as stderr:
            proc = subprocess.Popen(command, env=env, stderr=stderr, start_new_session=True)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and the compile workers it started
                proc.wait()
                code = None
        row = json.loads(row_file.read_text()) if row_file.exists() else new_row(spec)
        if code is None:
            row["error"] = f"time limit: killed after {timeout:.0f} s"
        elif code != 0:
            row.setdefault("error", f"worker exited with {code}")
        if "error" in row:
            print("\n".join(log.read_text().splitlines()[-15:]), file=sys.stderr)
        return row


def run(opts: argparse.Namespace) -> list[dict]:
    rows = []
    deadline = time.monotonic() + opts.budget_s
    for i, name in enumerate(opts.models):
        spec = ZOO[name]
        left = deadline - time.monotonic() - RESERVE_S * (len(opts.models) - i - 1)
        if spec.library != "builtin" and importlib.util.find_spec(spec.library) is None:
            row = {**new_row(spec), "skipped": f"{spec.library} not installed"}
        elif left < RESERVE_S:
            row = {**new_row(spec), "error": "not run: the time budget was spent"}
        else:
            row = run_model(spec, opts, min(opts.model_timeout, left))
        rows.append(row)
        spent = f" ({opts.budget_s - (deadline - time.monotonic()):.0f} s into the run)"
        print(f"== {name}: " + (row.get("skipped") or row.get("error") or "done") + spent, flush=True)
    return rows


def _num(v: Any, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "–"


def markdown(result: dict) -> str:
    lines = [f"# Model zoo: fusionrt, eager and torch.compile on {result['device']}", "",
             f"{result['date']}, torch {result['torch']}, triton {result['triton']}, executor "
             f"{result['executor']}, route {result.get('route', 'jit')}, {result.get('mode', 'inference')}"
             f"{', tiny configs' if result['tiny'] else ''}. Time per call: wall time "
             "around N calls, median of rounds (lower is better); ratios are fusionrt over the other. "
             "rel err: against the model run eagerly in float32 (eager's own: its dtype's rounding).", "",
             "| model | input | eager ms | compile ms | fusionrt ms | fusionrt/eager | fusionrt/compile "
             "| first call s (fusionrt / compile) | peak MiB (eager / fusionrt) | peak ratio "
             "| reserved MiB (eager / fusionrt) "
             "| writes (fusionrt / eager) | writes ratio | kernels (fusionrt / eager) | fallbacks "
             "| rel err (eager / fusionrt / compile) | replayed |",
             "|" + "---|" * 17]
    notes = []
    for r in result["rows"]:
        if r.get("skipped"):
            notes.append(f"- {r['model']} ({r['library']}): skipped, {r['skipped']}")
            continue
        if r.get("error"):
            notes.append(f"- {r['model']} ({r['library']}): **error** {r['error']}")
        if r["fallback_ops"]:
            ops = ", ".join(f"{op} ×{n}" for op, n in r["fallback_ops"].items())
            notes.append(f"- {r['model']}: fallbacks {ops}")
        if r["why_not_replayed"]:
            notes.append(f"- {r['model']}: recorded every call: {r['why_not_replayed']}")
        if r.get("cuda_graph_held_calls"):
            notes.append(f"- {r['model']}: {r['cuda_graph_held_calls']} calls ran the jitted replay "
                         "because a CUDA graph's results were still held")
        lines.append(
            f"| {r['model']} | {r['shape'] or '–'} | {_num(r['eager_ms'], '.2f')} | {_num(r['compile_ms'], '.2f')} "
            f"| {_num(r['fusionrt_ms'], '.2f')} | {_ratio(r['fusionrt_ms'], r['eager_ms'])} "
            f"| {_ratio(r['fusionrt_ms'], r['compile_ms'])} "
            f"| {_num(r['fusionrt_first_s'], '.1f')} / {_num(r['compile_first_s'], '.1f')} "
            f"| {_num(r['eager_peak_mib'], '.0f')} / {_num(r['fusionrt_peak_mib'], '.0f')} "
            f"| {_ratio(r['fusionrt_peak_mib'], r['eager_peak_mib'])} "
            f"| {_num(r.get('eager_reserved_mib'), '.0f')} / {_num(r.get('fusionrt_reserved_mib'), '.0f')} "
            f"| {_num(r['writes'], 'd')} / {_num(r['eager_writes'], 'd')} | {_ratio(r['writes'], r['eager_writes'])} "
            f"| {_num(r['kernels'], 'd')} / {_num(r['eager_kernels'], 'd')} | {_num(r['fallbacks'], 'd')} "
            f"| {_num(r['eager_rel_err'], '.1e')} / {_num(r['rel_err'], '.1e')} / {_num(r['compile_rel_err'], '.1e')} "
            f"| {_num(r['replayed'], '')} |")
    return "\n".join(lines + [""] + notes) + "\n"


def save(result: dict, out: Path | None) -> Path:
    if out is None:
        out = (Path(os.environ["OUT"]) / "models.json" if os.environ.get("OUT") else
               Path(__file__).parent / "results" / f"{result['date']}-{result['device'].replace(' ', '-')}-models.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(ZOO), default=DEFAULT, metavar="NAME",
                        help=f"models to run, of {', '.join(ZOO)} (default: all but the built-in block and cnn)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    parser.add_argument("--executor", help="fusionrt executor (default: triton on cuda, reference on cpu)")
    parser.add_argument("--tiny", action="store_true", help="tiny configs and inputs (the CPU smoke test)")
    parser.add_argument("--quick", action="store_true", help="fewer and shorter timing rounds")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--mode", choices=["inference", "train"], default="inference",
                        help="inference under no_grad, or training steps (forward, loss, backward, SGD step)")
    parser.add_argument("--route", choices=["compile", "jit"], default="compile",
                        help="how fusionrt runs the model: torch.compile(backend='fusionrt') (default) or fusionrt.jit")
    parser.add_argument("--budget-s", type=float, default=540, help="time for the whole run (default 540)")
    parser.add_argument("--model-timeout", type=float, default=180, help="most seconds per model (default 180)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", choices=list(ZOO), help=argparse.SUPPRESS)
    parser.add_argument("--row-file", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.mode == "train" and opts.route == "jit":
        parser.error("--mode train needs --route compile (fusionrt.jit records only what runs without grad)")
    if opts.worker:
        return worker(opts)

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    result = {"date": datetime.date.today().isoformat(),
              "device": torch.cuda.get_device_name() if opts.device == "cuda" else "cpu",
              "torch": torch.__version__, "triton": triton_version, "tiny": opts.tiny,
              "executor": opts.executor or ("triton" if opts.device == "cuda" else "reference"),
              "route": opts.route, "mode": opts.mode,
              "rows": run(opts)}
    out = save(result, opts.out)
    print(markdown(result))
    print(f"written {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
