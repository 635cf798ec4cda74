"""First-call seconds of ``torch.compile(model, backend="fusionrt")`` next to its floor.

The floor is ``torch.compile`` with AOTAutograd, fusionrt's decompositions and an identity
compiler (``aot_eager`` with the same tables): Dynamo and AOTAutograd's work, which fusionrt
shares and cannot go below. What fusionrt adds on top (recording, planning, kernel IR, code
generation, kernel compiles and tuning, the report) is its share. Of each first call, the
``run`` columns are the seconds spent inside the compiled graphs (AOTAutograd's runtime wrappers
and the backend's callable: fusionrt records, plans and runs there; the floor runs the aten graph
eagerly); the rest is Dynamo, AOTAutograd and the backend's compile function. A full garbage
collection of a process holding Dynamo's objects costs most of a second and lands on either side
by chance: compare CPU seconds, and use ``--repeat``.

By default fusionrt runs its ``reference`` executor on the CPU in float32, so no kernel compiles
and what is measured is the Python of the first call. ``--device cuda --executor triton --dtype
bfloat16`` measures the GPU's first call, kernel compiles and matmul tuning included.

Each model runs in its own process, with empty kernel caches (``FUSIONRT_CACHE_DIR``,
``TRITON_CACHE_DIR``), after a small function went through both backends (imports) and the model
ran once eagerly (lazy imports of its code). The floor is measured before and after fusionrt and
the lower one kept, so neither side pays a one-time cost the other skipped. Torch runs on one
thread, so CPU seconds near wall seconds say the machine was not busy. Models are transformers'
built from configs with random weights, in eval mode, under ``torch.no_grad()``; fusionrt's main
output must match eager's (relative error of the norm).

    python bench/first_call.py [--models gpt2 bert ...] [--repeat N] [--save-reports F | --check-reports F]

``--repeat N`` runs each model's process N times and keeps each column's lowest. ``--save-reports``
writes the report of every graph fusionrt compiled (kernels, writes, bytes, flushes, fallbacks)
to F; ``--check-reports`` fails when one differs from F's: a speed-up of the first call must not
change any plan.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH, SEQ, IMAGES, SIZE = 4, 128, 2, 224


def _tokens(vocab: int) -> torch.Tensor:
    return torch.randint(vocab, (BATCH, SEQ))


def _images() -> torch.Tensor:
    return torch.randn(IMAGES, 3, SIZE, SIZE)


def gpt2() -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config()
    return GPT2Model(config), _tokens(config.vocab_size)


def bert() -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import BertConfig, BertModel

    config = BertConfig()
    return BertModel(config), _tokens(config.vocab_size)


def vit() -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import ViTConfig, ViTModel

    return ViTModel(ViTConfig()), _images()


def convnext() -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import ConvNextConfig, ConvNextModel

    return ConvNextModel(ConvNextConfig()), _images()


def resnet50() -> tuple[torch.nn.Module, torch.Tensor]:
    from transformers import ResNetConfig, ResNetModel

    return ResNetModel(ResNetConfig()), _images()


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, torch.Tensor]]] = {
    "gpt2": gpt2, "bert": bert, "vit": vit, "convnext": convnext, "resnet50": resnet50}


def floor_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    from torch._dynamo.backends.common import aot_autograd

    from fusionrt.compile_backend import decompositions

    return aot_autograd(fw_compiler=lambda gm, _: gm, decompositions=decompositions())(gm, example_inputs)


@dataclass
class FirstCall:
    wall_s: float
    cpu_s: float
    run_s: float = 0.0  # in the compiled graphs: AOTAutograd's runtime wrappers and the backend's run
    run_cpu_s: float = 0.0
    output: Any = None


class Timed:
    """A backend whose compiled graphs add the seconds of their calls to ``call``."""

    def __init__(self, backend: Callable[..., Any], call: FirstCall) -> None:
        self.backend, self.call = backend, call

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        compiled = self.backend(gm, example_inputs)
        call = self.call

        def run(*args: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return compiled(*args)
            finally:
                call.run_s += time.perf_counter() - wall
                call.run_cpu_s += time.process_time() - cpu

        return run


def first_call(model: torch.nn.Module, x: torch.Tensor, backend: Callable[..., Any]) -> FirstCall:
    """Seconds of the first call of ``model`` compiled with ``backend``."""
    torch._dynamo.reset()
    result = FirstCall(0.0, 0.0)
    compiled = torch.compile(model, backend=Timed(backend, result))
    wall, cpu = time.perf_counter(), time.process_time()
    result.output = compiled(x)
    if x.is_cuda:
        torch.cuda.synchronize()
    result.wall_s, result.cpu_s = time.perf_counter() - wall, time.process_time() - cpu
    return result


def _main_output(out: Any) -> torch.Tensor:
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def _reports(earlier: list[Any]) -> list[dict[str, Any]]:
    """The report of each graph fusionrt compiled, but those in ``earlier``."""
    from fusionrt.compile_backend import compiled_graphs

    reports = []
    for graph in compiled_graphs():
        if any(graph is e for e in earlier):
            continue
        report = graph.report.to_dict()
        # the source of the flush at a graph's exit is the frame that called it: a line of this file
        flushes = [{k: v for k, v in f.items() if k != "source"} for f in report["flushes"]]
        reports.append({**{k: report[k] for k in ("totals", "kernel_records", "materialized", "fallbacks")},
                        "flushes": flushes})
    return reports


def measure(name: str, executor: str, device: str, dtype: torch.dtype) -> dict[str, Any]:
    """One model's row (run in a process of its own)."""
    from fusionrt.compile_backend import compiled_graphs, fusionrt_backend

    torch.set_num_threads(1)
    torch.manual_seed(0)
    fusionrt = functools.partial(fusionrt_backend, options={"executor": executor})
    small = torch.nn.Linear(8, 8).eval().to(device)
    with torch.no_grad():
        for backend in (floor_backend, fusionrt):  # imports and first uses
            first_call(small, torch.randn(2, 8, device=device), backend)
        warm_up = compiled_graphs()  # held, so that no later graph takes the place of one
        model, x = MODELS[name]()
        model, x = model.eval().to(device, dtype), x.to(device, dtype if x.is_floating_point() else x.dtype)
        expected = _main_output(model(x))
        floor_before = first_call(model, x, floor_backend)
        ours = first_call(model, x, fusionrt)
        reports = _reports(warm_up)
        floor_after = first_call(model, x, floor_backend)
    error = float((_main_output(ours.output).float() - expected.float()).norm() / expected.float().norm())
    if error > (1e-4 if dtype == torch.float32 else 5e-2):
        raise AssertionError(f"fusionrt's result is not eager's: relative error {error:.1e}")
    floor = min(floor_before, floor_after, key=lambda f: f.cpu_s)
    row: dict[str, Any] = {"model": name}
    for side, call in (("floor", floor), ("fusionrt", ours)):
        row.update({f"{side}_s": call.wall_s, f"{side}_cpu_s": call.cpu_s, f"{side}_run_s": call.run_s,
                    f"{side}_run_cpu_s": call.run_cpu_s})
    return {**row, "kernels": sum(r["totals"]["kernels"] for r in reports), "reports": reports}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


COLUMNS = ("_s", "_cpu_s", "_run_s", "_run_cpu_s")
SHARE = ("_s", "_cpu_s", "_run_cpu_s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=1, help="processes per model; each column's lowest is kept")
    parser.add_argument("--executor", default="reference", help="fusionrt's executor (default reference)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    reports = parser.add_mutually_exclusive_group()
    reports.add_argument("--save-reports", type=Path, metavar="FILE")
    reports.add_argument("--check-reports", type=Path, metavar="FILE")
    parser.add_argument("--one", choices=list(MODELS), help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.executor, args.device, getattr(torch, args.dtype))))
        return 0

    expected = json.loads(args.check_reports.read_text()) if args.check_reports else {}
    saved: dict[str, Any] = {}
    failed = False
    print(f"executor {args.executor} on {args.device}, {args.dtype}; load average at start: {_load()}")
    print("seconds: wall, CPU, and of them the compiled graphs' first run (the rest is Dynamo, AOTAutograd and "
          "the backend's compile); share: fusionrt minus floor")
    print(f"{'':<9}| {'floor':^28}| {'fusionrt':^28}| {'share':^22}|")
    print(f"{'model':<9}|" + 2 * f"{'s':>6} {'CPU':>6} {'run':>6} {'run CPU':>7} |"
          + f"{'s':>6} {'CPU':>6} {'run CPU':>7} | kernels")
    for name in args.models:
        rows = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as caches:  # a first call finds no kernel compiled or tuned
                env = dict(os.environ, FUSIONRT_CACHE_DIR=f"{caches}/fusionrt", TRITON_CACHE_DIR=f"{caches}/triton")
                done = subprocess.run([sys.executable, __file__, "--one", name, "--executor", args.executor,
                                       "--device", args.device, "--dtype", args.dtype],
                                      capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"{name:<9} failed:\n{done.stderr[-3000:]}")
                failed = True
                break
            rows.append(json.loads(done.stdout.splitlines()[-1]))
        if len(rows) < args.repeat:
            continue
        best = {side + c: min(r[side + c] for r in rows) for side in ("floor", "fusionrt") for c in COLUMNS}
        sides = [" ".join(f"{best[side + c]:{len(h)}.2f}" for c, h in zip(COLUMNS, ("     s", "   CPU", "   run",
                                                                                  "run CPU")))
                 for side in ("floor", "fusionrt")]
        share = " ".join(f"{best['fusionrt' + c] - best['floor' + c]:{w}.2f}" for c, w in zip(SHARE, (6, 6, 7)))
        print(f"{name:<9}|{sides[0]} |{sides[1]} |{share} | {rows[0]['kernels']:7d}", flush=True)
        saved[name] = rows[0]["reports"]
        if any(r["reports"] != rows[0]["reports"] for r in rows):
            print(f"{name}: reports differ between runs")
            failed = True
        if args.check_reports and expected.get(name) != rows[0]["reports"]:
            print(f"{name}: reports differ from {args.check_reports}")
            failed = True
    print(f"load average at end: {_load()}")
    if args.save_reports:
        args.save_reports.write_text(json.dumps(saved, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
