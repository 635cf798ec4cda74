"""fusionrt against eager PyTorch and torch.compile on a CUDA GPU (run through the device tool).

For each workload: median time of eager, `torch.compile` (default mode) and fusionrt (a
`fusionrt.jit` function under the `speed` policy: its first call records, plans and compiles;
the timed calls replay the plan with the generated Triton kernels, or record again where the call
cannot be replayed, which the row says), the floor (fewest bytes over measured
copy bandwidth, or flops over measured matmul rate), fusionrt's writes and bytes written (and
those `lazy()`/`measure` make under `stream`, the policy the linter's contract is measured in),
and the relative error against eager. Prints one table and writes
`bench/results/<YYYY-MM-DD>-<gpu>.json` (or `--out FILE`).

    python bench/gpu_bench.py [--only NUMBER ...] [--out FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusionrt  # noqa: E402

Inputs = Callable[[], tuple]


@dataclass
class Workload:
    name: str
    fn: Callable
    inputs: Inputs
    min_bytes: int  # each input read once, each output written once
    flops: int = 0
    memory_bound: bool = True


def _t(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def chain10(x, y):
    a = x * 1.5 + y
    b = torch.relu(a) - 0.25
    c = torch.sigmoid(b) * y
    d = c.exp() / (1.0 + a.abs())
    return d.tanh() + b * 0.5


def clone_reduction(x, y):
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


def clone_reduction_rewritten(x, y):
    a = x * 2
    b = y + 1
    tmp = a * b
    t3 = a.sum(-1, keepdim=True)
    return t3 + tmp


def rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def workloads() -> list[Workload]:
    n = 1 << 26
    f32, bf16, f16 = 4, 2, 2
    m, k = 8192, 4096
    return [
        Workload("1 relu(x*2)+1", lambda x: torch.relu(x * 2) + 1, lambda: (_t(n),), 2 * n * f32),
        Workload("2 10-op chain", chain10, lambda: (_t(n), _t(n)), 3 * n * f32),
        Workload("3 unsqueeze-matmul", lambda t1, t2, t3: t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0),
                 lambda: (_t(1024, 1024, dtype=torch.bfloat16), _t(16, 1024, 1024, dtype=torch.bfloat16),
                          _t(1024, 1024, dtype=torch.bfloat16)),
                 (2 * 1024 * 1024 + 2 * 16 * 1024 * 1024) * bf16, 2 * 16 * 1024 ** 3, False),
        Workload("4 clone-reduction", clone_reduction, lambda: (_t(m, k), _t(m, k)), 3 * m * k * f32),
        Workload("4b clone-reduction rewritten", clone_reduction_rewritten,
                 lambda: (_t(m, k), _t(m, k)), 3 * m * k * f32),
        Workload("5 relu(x@w.T+b)", lambda x, w, b: torch.relu(x @ w.T + b),
                 lambda: (_t(m, k, dtype=torch.bfloat16), _t(k, k, dtype=torch.bfloat16),
                          _t(k, dtype=torch.bfloat16)),
                 (2 * m * k + k * k + k) * bf16, 2 * m * k * k, False),
        Workload("6 conv3x3+bias+relu", lambda x, w, b: torch.relu(F.conv2d(x, w, b, padding=1)),
                 lambda: (_t(32, 128, 56, 56, dtype=torch.float16).to(memory_format=torch.channels_last),
                          _t(128, 128, 3, 3, dtype=torch.float16).to(memory_format=torch.channels_last),
                          _t(128, dtype=torch.float16)),
                 2 * 32 * 128 * 56 * 56 * f16, 2 * 32 * 128 * 56 * 56 * 128 * 9, False),
        Workload("7 layer_norm(x+res)", lambda x, r, w, b: F.layer_norm(x + r, (k,), w, b),
                 lambda: (_t(m, k, dtype=torch.bfloat16), _t(m, k, dtype=torch.bfloat16),
                          _t(k, dtype=torch.bfloat16), _t(k, dtype=torch.bfloat16)), 3 * m * k * bf16),
        Workload("8 rms_norm fp32 math", rms_norm,
                 lambda: (_t(m, k, dtype=torch.bfloat16), _t(k, dtype=torch.bfloat16)), 2 * m * k * bf16),
        Workload("9 softmax(s*0.125+mask)", lambda s, mask: torch.softmax(s * 0.125 + mask, -1),
                 lambda: (_t(8, 16, 1024, 1024, dtype=torch.bfloat16), _t(1024, 1024, dtype=torch.bfloat16)),
                 2 * 8 * 16 * 1024 * 1024 * bf16 + 1024 * 1024 * bf16),
        Workload("10 gelu_tanh(x@w+b)", lambda x, w, b: F.gelu(x @ w + b, approximate="tanh"),
                 lambda: (_t(m, k, dtype=torch.bfloat16), _t(k, k, dtype=torch.bfloat16),
                          _t(k, dtype=torch.bfloat16)),
                 (2 * m * k + k * k + k) * bf16, 2 * m * k * k, False),
        Workload("11 silu(x@w1)*(x@w2)", lambda x, w1, w2: F.silu(x @ w1) * (x @ w2),
                 lambda: (_t(4096, 4096, dtype=torch.bfloat16), _t(4096, 11008, dtype=torch.bfloat16),
                          _t(4096, 11008, dtype=torch.bfloat16)),
                 (4096 * 4096 + 2 * 4096 * 11008 + 4096 * 11008) * bf16, 2 * 2 * 4096 * 4096 * 11008, False),
        Workload("12 1024-elem chain", lambda x: torch.sigmoid(torch.relu(x * 2 + 1)) * x,
                 lambda: (_t(1024),), 2 * 1024 * f32),
    ]


def median_ms(fn: Callable[[], object]) -> float:
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")


def ceilings() -> tuple[float, float]:
    """Measured device-copy bandwidth (bytes read + written per s) and bf16 matmul rate (flop/s)."""
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda: dst.copy_(src))
    a = _t(8192, 8192, dtype=torch.bfloat16)
    b = _t(8192, 8192, dtype=torch.bfloat16)
    mm_ms = median_ms(lambda: a @ b)
    return 2 * src.numel() * 4 / (copy_ms * 1e-3), 2 * 8192 ** 3 / (mm_ms * 1e-3)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30)).item()


def run(selected: list[Workload]) -> list[dict]:
    bandwidth, matmul_rate = ceilings()
    print(f"measured ceilings: copy {bandwidth / 1e9:.0f} GB/s, bf16 matmul {matmul_rate / 1e12:.0f} TFLOP/s")
    rows = []
    for w in selected:
        torch.manual_seed(0)
        args = w.inputs()
        ref = w.fn(*args)
        fast = fusionrt.jit(w.fn, executor="triton", policy="speed")
        fast(*args)
        lazy_out = fast(*args)  # replayed when the call allows it
        report = fast.report
        _, stream = fusionrt.measure(w.fn, *args, executor="triton", policy="stream")
        compiled = torch.compile(w.fn)
        compiled(*args)
        row = {
            "workload": w.name,
            "eager_ms": median_ms(lambda: w.fn(*args)),
            "compile_ms": median_ms(lambda: compiled(*args)),
            "fusionrt_ms": median_ms(lambda: fast(*args)),
            "fusionrt_path": "replay" if fast.stats.replays else f"record ({fast.stats.last_recording})",
            "floor_ms": 1e3 * max(w.min_bytes / bandwidth, w.flops / matmul_rate),
            "policy": report.policy,
            "writes": report.writes,
            "kernels": report.kernels,
            "bytes_written": report.bytes_written,
            "stream_writes": stream.writes,
            "stream_bytes_written": stream.bytes_written,
            "rel_err": rel_err(lazy_out, ref),
            "memory_bound": w.memory_bound,
        }
        rows.append(row)
        print(f"{w.name:32s} eager {row['eager_ms']:8.3f}  compile {row['compile_ms']:8.3f}  "
              f"fusionrt {row['fusionrt_ms']:8.3f} ms  floor {row['floor_ms']:8.3f}  "
              f"writes {row['writes']} (stream {row['stream_writes']})  err {row['rel_err']:.1e}  "
              f"fusionrt {row['fusionrt_path']}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'workload':32s} {'eager':>9s} {'compile':>9s} {'fusionrt':>9s} {'floor':>8s} "
            f"{'vs eager':>8s} {'vs compile':>10s} {'vs floor':>8s} {'writes':>6s} {'MB written':>10s} "
            f"{'stream MB':>9s} {'rel_err':>8s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['workload']:32s} {r['eager_ms']:9.3f} {r['compile_ms']:9.3f} {r['fusionrt_ms']:9.3f} "
            f"{r['floor_ms']:8.3f} {r['eager_ms'] / r['fusionrt_ms']:7.2f}x {r['fusionrt_ms'] / r['compile_ms']:9.2f}x "
            f"{r['fusionrt_ms'] / r['floor_ms']:7.2f}x {r['writes']:6d} {r['bytes_written'] / 1e6:10.1f} "
            f"{r['stream_bytes_written'] / 1e6:9.1f} {r['rel_err']:8.1e}")
    lines.append("vs eager: speed-up over eager; vs compile and vs floor: fusionrt time over theirs (lower is better); "
                 "fusionrt runs the speed policy, stream MB is what lazy()/measure write")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="workload numbers to run (e.g. 1 4 4b)")
    parser.add_argument("--out", type=Path, help="results file (default bench/results/<date>-<gpu>.json)")
    args = parser.parse_args()
    selected = [w for w in workloads() if not args.only or w.name.split()[0] in args.only]
    rows = run(selected)
    print(table(rows))
    save(rows, args.out, "")
    return 0


def save(rows: list[dict], out: Path | None, suffix: str, **extra: object) -> None:
    """Write a run's rows with the date, GPU, torch and triton versions (default
    ``bench/results/<date>-<gpu><suffix>.json``)."""
    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    result = {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, "date": date, **extra,
              "rows": rows}
    out = out or Path(__file__).parent / "results" / f"{date}-{gpu.replace(' ', '-')}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"gpu {gpu}, torch {torch.__version__}, triton {triton.__version__}, {date}; written {out}")


if __name__ == "__main__":
    sys.exit(main())
