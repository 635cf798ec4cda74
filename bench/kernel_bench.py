"""fusionrt's generated kernels alone, against eager and torch.compile, on a CUDA GPU.

``gpu_bench.py`` times the whole lazy call (capture, planning, launches). This times only the
kernels: each workload is recorded and planned once, the plan is bound to its tensors
(``Runner.bind``: inputs viewed, destinations allocated, every launch prepared), and only the
bound plan's launches are timed (``triton.testing.do_bench``: CUDA events, L2 flushed between
repeats, median). Per workload it prints eager, compile and kernel times, the workload's floor
(fewest bytes over measured copy bandwidth), the plan's floor (the bytes its kernels really
read and write, which is above the workload's when the plan writes intermediates), and per
kernel its variant (single-pass/looped, blocks, warps), time and bandwidth. A kernel far above
its own floor is a code-generation problem; a plan floor far above the workload floor is a
planning one.

    python bench/kernel_bench.py [--only 1 2 4 4b 7 8 9] [--out FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fusionrt  # noqa: E402
from fusionrt.codegen import BoundKernel  # noqa: E402
from fusionrt.codegen.launch import SplitSpec  # noqa: E402
from fusionrt.runtime import BoundPlan, Runner  # noqa: E402
from gpu_bench import ceilings, median_ms, rel_err, save, workloads  # noqa: E402

KERNEL_WORKLOADS = ("1", "2", "4", "4b", "7", "8", "9")


@contextlib.contextmanager
def captured_plans() -> Iterator[list[tuple[Any, BoundPlan]]]:
    """Every plan the runtime executes inside the block, bound to its flush's tensors while the
    flush's nodes still point at them (the plan cache forgets them once the plan has run)."""
    seen: list[tuple[Any, BoundPlan]] = []
    execute = Runner.execute

    def recording(self, plan, leaves, first_kernel, flush):
        seen.append((plan, self.bind(plan, leaves)))
        return execute(self, plan, leaves, first_kernel, flush)

    Runner.execute = recording
    try:
        yield seen
    finally:
        Runner.execute = execute


def describe(step: Any) -> str:
    """The variant a bound step launches (block sizes and warps of a generated kernel)."""
    if not isinstance(step, BoundKernel) or step.launch is None:
        return "torch / copy"
    spec = step.launch.spec
    if isinstance(spec, SplitSpec):
        return f"split reduction: {_variant(spec.partial)}, then {_variant(spec.finish)}"
    kind = "matmul" if "BLOCK_M" in spec.constants else "reduction" if "RBLOCK" in spec.constants else "pointwise"
    return f"{kind} {_variant(spec)}"


def _variant(spec: Any) -> str:
    blocks = " ".join(f"{k}={v}" for k, v in spec.constants.items() if k.endswith("BLOCK") or k.startswith("BLOCK_"))
    return f"{blocks} warps={spec.constants['num_warps']} grid={'x'.join(map(str, spec.grid))}"


def bench(w: Any, bandwidth: float) -> dict:
    torch.manual_seed(0)
    args = w.inputs()
    ref = w.fn(*args)
    with captured_plans() as plans:
        out, report = fusionrt.measure(w.fn, *args, executor="triton")
    bound = [b for _, b in plans]

    def kernels() -> None:
        for b in bound:
            b()

    kernels()
    torch.cuda.synchronize()
    err = rel_err(out, ref)  # the plan's output tensor, rewritten by the bound launches
    compiled = torch.compile(w.fn)
    compiled(*args)
    plan_bytes = 0
    per_kernel = []
    for (plan, _), b in zip(plans, bound):
        written = {}
        for write in plan.writes:
            written[write.kernel] = written.get(write.kernel, 0) + write.node.nbytes
        for k, (planned, step) in enumerate(zip(plan.kernels, b.steps)):
            moved = b.read[k] + written.get(k, 0)
            plan_bytes += moved
            ms = median_ms(step)
            per_kernel.append({"name": planned.name, "variant": describe(step), "ms": ms, "bytes": moved,
                               "floor_ms": 1e3 * moved / bandwidth, "gbps": moved / (ms * 1e-3) / 1e9})
    row = {
        "workload": w.name,
        "eager_ms": median_ms(lambda: w.fn(*args)),
        "compile_ms": median_ms(lambda: compiled(*args)),
        "kernels_ms": median_ms(kernels),
        "floor_ms": 1e3 * w.min_bytes / bandwidth,
        "plan_floor_ms": 1e3 * plan_bytes / bandwidth,
        "kernels": per_kernel,
        "writes": report.writes,
        "rel_err": err,
    }
    return row


def table(rows: list[dict]) -> str:
    head = (f"{'workload':30s} {'eager':>8s} {'compile':>8s} {'kernels':>8s} {'floor':>7s} {'plan fl':>7s} "
            f"{'vs compile':>10s} {'vs floor':>8s} {'vs plan':>7s} {'rel_err':>8s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['workload']:30s} {r['eager_ms']:8.3f} {r['compile_ms']:8.3f} {r['kernels_ms']:8.3f} "
            f"{r['floor_ms']:7.3f} {r['plan_floor_ms']:7.3f} {r['kernels_ms'] / r['compile_ms']:9.2f}x "
            f"{r['kernels_ms'] / r['floor_ms']:7.2f}x {r['kernels_ms'] / r['plan_floor_ms']:6.2f}x {r['rel_err']:8.1e}")
        for k in r["kernels"]:
            lines.append(f"    {k['name'][:40]:40s} {k['variant']:52s} {k['ms']:7.3f} ms {k['gbps']:6.0f} GB/s "
                         f"({k['ms'] / k['floor_ms']:.2f}x its floor)")
    lines.append("targets: kernels within 1.10x of compile and 1.15x of the floor; 'vs plan' isolates the "
                 "kernels from the plan's extra writes")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(KERNEL_WORKLOADS), help="workload numbers")
    parser.add_argument("--out", type=Path, help="results file (default bench/results/<date>-<gpu>-kernels.json)")
    args = parser.parse_args()
    selected = [w for w in workloads() if w.name.split()[0] in args.only]
    bandwidth, _ = ceilings()
    print(f"measured copy bandwidth {bandwidth / 1e9:.0f} GB/s")
    rows = []
    for w in selected:
        rows.append(bench(w, bandwidth))
        r = rows[-1]
        print(f"{w.name:30s} eager {r['eager_ms']:.3f}  compile {r['compile_ms']:.3f}  kernels {r['kernels_ms']:.3f} ms"
              f"  floor {r['floor_ms']:.3f}  plan floor {r['plan_floor_ms']:.3f}  err {r['rel_err']:.1e}", flush=True)
    print(table(rows))
    save(rows, args.out, "-kernels", bandwidth_gbps=bandwidth / 1e9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
