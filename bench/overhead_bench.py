"""Per-call overhead and first-call latency: eager, torch.compile, fusionrt.measure, fusionrt.jit.

The overhead regime of issue 4: `torch.sigmoid(torch.relu(x * 2 + 1)) * x` on a 1024-element
float32 tensor (workload 12), where launching and Python work are all the time there is.

- per call: N back-to-back calls then one device synchronize, divided by N; median of 7 rounds.
  `fusionrt_measure` records, looks up the plan and runs it on every call; `fusionrt_jit`
  replays the plan of its first call without recording (docs/replay.md).
- first call: each path's first call with empty kernel caches (fusionrt's, Triton's,
  Inductor's), so code generation and compilation are included: in a process that already ran
  another function through the same path (`first_call_s`: the per-function compile latency), and
  as the first thing a fresh process does (`first_call_cold_process_s`: imports included; the
  meta kernels fusionrt infers shapes with import torch._dynamo on their first use).
- recording: microseconds per recorded op inside a lazy block (cache hits), next to eager's.

    python bench/overhead_bench.py [--device cuda|cpu] [--executor NAME] [--out FILE]

Writes JSON to FILE, else to $OUT/overhead.json when $OUT is set, else
bench/results/<date>-<device>-overhead.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusionrt  # noqa: E402

PATHS = ("eager", "compile", "fusionrt_measure", "fusionrt_jit")


def chain(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(torch.relu(x * 2 + 1)) * x


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def callables(path: str, executor: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if path == "eager":
        return chain
    if path == "compile":
        return torch.compile(chain)
    if path == "fusionrt_measure":
        return lambda x: fusionrt.measure(chain, x, executor=executor)[0]
    return fusionrt.jit(chain, executor=executor)


def per_call_us(fn: Callable[[], object], device: str, calls: int) -> float:
    for _ in range(max(3, calls // 10)):
        fn()
    _sync(device)
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def recording_us_per_op(device: str, executor: str, ops: int = 1000) -> tuple[float, float]:
    """(eager, recorded) microseconds per op of a long chain of adds, metadata cache warm."""
    x = torch.randn(1024, device=device)

    def run() -> None:
        y = x
        for _ in range(ops):
            y = y + 1

    eager = min(per_call_us(run, device, 3) for _ in range(3)) / ops
    with fusionrt.lazy(executor=executor, max_pending=10 * ops):
        run()
        recorded = min(_timed(run) for _ in range(5)) / ops
    return eager, recorded


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def first_call_s(path: str, device: str, executor: str, cold: bool) -> float:
    """The first call of ``path`` in a new process whose kernel caches are empty."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, FUSIONRT_CACHE_DIR=f"{tmp}/fusionrt", TRITON_CACHE_DIR=f"{tmp}/triton",
                   TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor")
        command = [sys.executable, __file__, "--first-call", path, "--device", device, "--executor", executor]
        out = subprocess.run(command + (["--cold"] if cold else []), env=env, capture_output=True, text=True,
                             check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _first_call_here(path: str, device: str, executor: str, cold: bool) -> None:
    x = torch.randn(1024, device=device)
    if not cold:  # imports done, the device initialized: only this function's compile is left
        warm = {"eager": lambda t: t - 1, "compile": torch.compile(lambda t: t - 1),
                "fusionrt_measure": lambda t: fusionrt.measure(lambda u: u - 1, t, executor=executor)[0],
                "fusionrt_jit": fusionrt.jit(lambda t: t - 1, executor=executor)}[path]
        warm(x)
    fn = callables(path, executor)
    _sync(device)
    start = time.perf_counter()
    fn(x)
    _sync(device)
    print(time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--executor", help="fusionrt executor (default: triton on cuda, reference on cpu)")
    parser.add_argument("--calls", type=int, help="calls per timing round")
    parser.add_argument("--skip", nargs="*", default=[], choices=PATHS, help="paths to leave out")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--first-call", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    executor = args.executor or ("triton" if args.device == "cuda" else "reference")
    if args.first_call:
        _first_call_here(args.first_call, args.device, executor, args.cold)
        return 0

    torch.manual_seed(0)
    x = torch.randn(1024, device=args.device)
    calls = args.calls or (2000 if args.device == "cuda" or executor == "reference" else 50)
    expected = chain(x)
    result: dict = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                    "torch": torch.__version__, "date": datetime.date.today().isoformat(),
                    "executor": executor, "workload": "torch.sigmoid(torch.relu(x * 2 + 1)) * x, float32 [1024]",
                    "per_call_us": {}, "first_call_s": {}, "first_call_cold_process_s": {}, "rel_err": {}}
    try:
        import triton
        result["triton"] = triton.__version__
    except ImportError:
        result["triton"] = None
    for path in PATHS:
        if path in args.skip:
            continue
        result["first_call_s"][path] = first_call_s(path, args.device, executor, cold=False)
        result["first_call_cold_process_s"][path] = first_call_s(path, args.device, executor, cold=True)
        fn = callables(path, executor)
        got = fn(x)
        result["rel_err"][path] = ((got - expected).norm() / expected.norm()).item()
        result["per_call_us"][path] = per_call_us(lambda: fn(x), args.device, calls)
        if path == "fusionrt_jit":
            result["jit_replays"] = fn.stats.replays
            result["jit_report"] = fn.report.summary()
        print(f"{path:18s} per call {result['per_call_us'][path]:9.1f} us   "
              f"first call {result['first_call_s'][path]:7.3f} s "
              f"(fresh process {result['first_call_cold_process_s'][path]:7.3f} s)   "
              f"rel_err {result['rel_err'][path]:.1e}",
              flush=True)
    eager_op, recorded_op = recording_us_per_op(args.device, executor)
    result["eager_us_per_op"], result["recording_us_per_op"] = eager_op, recorded_op
    print(f"recording {recorded_op:.1f} us/op (eager {eager_op:.1f} us/op)")
    per_call = result["per_call_us"]
    if "eager" in per_call and "fusionrt_jit" in per_call:
        print(f"jit replay / eager per call: {per_call['fusionrt_jit'] / per_call['eager']:.2f}x (target <= 1)")
    first = result["first_call_s"]
    if "compile" in first and "fusionrt_jit" in first:
        print(f"fusionrt first call / torch.compile first call: {first['fusionrt_jit'] / first['compile']:.2f}x"
              " (target < 0.5)")
    out = args.out
    if out is None:
        out = (Path(os.environ["OUT"]) / "overhead.json" if os.environ.get("OUT") else
               Path(__file__).parent / "results" / f"{result['date']}-{result['device'].replace(' ', '-')}-overhead.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['device']}, torch {result['torch']}, triton {result['triton']}; written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
