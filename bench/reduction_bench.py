"""Reductions that leave most of the GPU idle, split and unsplit, against eager and torch.compile.

A reduction with few rows (a bias gradient's column sum, a batch-norm channel sum, a whole-tensor
sum) runs one program per row block, so a handful of programs walk all of memory. The executor
splits such rows into chunks (``codegen.config.Split``). This times each kernel as the executor
launches it with the default block policy and with splitting turned off, next to eager, the
compiled function (``torch.compile``) and the floor (bytes read and written over the measured
copy bandwidth). Results equal aten's (checked before timing).

    python bench/reduction_bench.py [--out FILE]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fusionrt.codegen import BlockConfig, TritonExecutor  # noqa: E402
from fusionrt.codegen.launch import SplitLaunch  # noqa: E402
from fusionrt.kernel_ir import FusedKernel, Input, Instr, Value  # noqa: E402
from gpu_bench import ceilings, median_ms, rel_err, save  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16


@dataclasses.dataclass
class Case:
    name: str
    kernel: FusedKernel
    inputs: Callable[[], list[torch.Tensor]]
    eager: Callable[..., torch.Tensor]  # the reduced output, as eager computes it


def _sum_kernel(shape: tuple[int, ...], dims: tuple[int, ...], dtype: torch.dtype) -> FusedKernel:
    """``sum`` over ``dims`` in fp32, cast back to ``dtype``."""
    instrs = (Instr("_to_copy", (Input(0),), F32, (("dtype", F32),)), Instr("sum", (Value(0),), F32),
              Instr("_to_copy", (Value(1),), dtype, (("dtype", dtype),)))
    return FusedKernel(shape, (dtype,), instrs, (Value(2),), dims)


def _bias_gradient(rows: int, cols: int) -> Case:
    """A linear layer's backward: the element-wise gradient (a full output) and its column sum."""
    instrs = (Instr("mul", (Input(0), Input(1)), BF16), Instr("_to_copy", (Value(0),), F32, (("dtype", F32),)),
              Instr("sum", (Value(1),), F32), Instr("_to_copy", (Value(2),), BF16, (("dtype", BF16),)))
    kernel = FusedKernel((rows, cols), (BF16, BF16), instrs, (Value(0), Value(3)), (0,))
    return Case(f"bias gradient {rows}x{cols} bf16", kernel,
                lambda: [torch.randn(rows, cols, device="cuda", dtype=BF16) for _ in range(2)],
                lambda g, y: (g * y).float().sum(0).to(BF16))


def cases() -> list[Case]:
    def summed(shape: tuple[int, ...], dims: tuple[int, ...], dtype: torch.dtype, name: str) -> Case:
        return Case(name, _sum_kernel(shape, dims, dtype), lambda: [torch.randn(shape, device="cuda", dtype=dtype)],
                    lambda x: x.float().sum(dims).to(dtype))

    return [
        _bias_gradient(6304, 768),                       # ViT-B/16, batch 32: qkv/proj bias
        _bias_gradient(6304, 3072),                      # ViT-B/16 fc1 bias
        _bias_gradient(2048, 768),                       # GPT-2, 4x512 tokens
        summed((32, 64, 56, 56), (0, 2, 3), BF16, "channel sum 32x64x56x56 bf16"),   # ResNet-50 stem
        summed((32, 2048, 7, 7), (0, 2, 3), BF16, "channel sum 32x2048x7x7 bf16"),
        summed((4096, 4096), (0, 1), F32, "whole sum 4096x4096 fp32"),
        summed((16, 1 << 20), (1,), F32, "row sums 16x1M fp32"),
    ]


def bench(case: Case, bandwidth: float) -> dict:
    torch.manual_seed(0)
    inputs = case.inputs()
    expected = case.eager(*inputs)
    row: dict = {"case": case.name}
    for label, blocks in (("split", BlockConfig()), ("unsplit", BlockConfig(split_below=0))):
        bound = TritonExecutor(interpret=False, blocks=blocks).bind(case.kernel, inputs)
        out = bound()[-1].reshape(expected.shape)  # the kernel keeps the reduced dims
        torch.cuda.synchronize()
        row[f"{label}_ms"] = median_ms(bound)
        row[f"{label}_rel_err"] = rel_err(out, expected)
        if label == "split":
            row["split"] = isinstance(bound.launch, SplitLaunch)
            moved = sum(t.nbytes for t in inputs) + sum(o.nbytes for o in bound.outputs)
    compiled = torch.compile(case.eager)
    compiled(*inputs)
    row["eager_ms"] = median_ms(lambda: case.eager(*inputs))
    row["compile_ms"] = median_ms(lambda: compiled(*inputs))
    row["floor_ms"] = 1e3 * moved / bandwidth
    return row


def table(rows: list[dict]) -> str:
    head = (f"{'case':34s} {'eager':>8s} {'compile':>8s} {'unsplit':>8s} {'split':>8s} {'floor':>7s} "
            f"{'split/unsplit':>13s} {'vs compile':>10s} {'vs floor':>8s} {'rel_err':>8s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['case']:34s} {r['eager_ms']:8.4f} {r['compile_ms']:8.4f} {r['unsplit_ms']:8.4f} "
                     f"{r['split_ms']:8.4f} {r['floor_ms']:7.4f} {r['split_ms'] / r['unsplit_ms']:12.2f}x "
                     f"{r['split_ms'] / r['compile_ms']:9.2f}x {r['split_ms'] / r['floor_ms']:7.2f}x "
                     f"{r['split_rel_err']:8.1e}" + ("" if r["split"] else "  (not split)"))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="results file (default bench/results/<date>-<gpu>-reductions.json)")
    args = parser.parse_args()
    bandwidth, _ = ceilings()
    rows = [bench(case, bandwidth) for case in cases()]
    print(table(rows))
    save(rows, args.out, "-reductions", copy_gbps=bandwidth / 1e9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
