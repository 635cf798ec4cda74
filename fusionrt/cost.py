"""The planner's cost model: which backend runs a matmul, and how much a fusion may hold.

A roofline: a kernel takes ``max(flops / rate, bytes / bandwidth)`` plus a launch. The numbers
are an H100's (measured in /work/shared/NOTES.md: ~3000 GB/s copy, ~700 TFLOP/s bf16 cuBLAS);
``template_efficiency`` is the share of cuBLAS's rate the Triton template is assumed to reach,
the one number here that the GPU benchmark has to tune. The model is pure: plans, and so write
counts, do not depend on the machine that runs them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

# Register-pressure proxies. A prologue runs once per loaded tile of its operand (N / BLOCK_N
# times over the whole product), an epilogue once per output tile; both hold their loads and
# values in registers next to the accumulator.
MAX_PROLOGUE_OPS = 16
MAX_PROLOGUE_LOADS = 3
MAX_EPILOGUE_OPS = 32
MAX_EPILOGUE_LOADS = 4
# A producer made of concrete data only (casts of inputs, ``w.float()``) is recomputed by each
# consumer instead of being given a kernel and a write, up to this many ops; so is, under the
# speed policy, an element-wise value read after a reduction or by a later kernel.
MAX_RECOMPUTE_OPS = 8

TEMPLATE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class Machine:
    bandwidth: float = 3.0e12  # bytes read + written per second
    launch: float = 4e-6  # seconds per kernel launch, host side included
    cublas_rate: dict = field(default_factory=lambda: {
        torch.float16: 700e12, torch.bfloat16: 700e12, torch.float32: 50e12})
    # Measured through the compile backend on an H100 (docs/codegen.md): the tuned template
    # with a bias epilogue reaches 0.35-0.51 of cuBLAS's rate on the 2-d products of the linear
    # layers of ViT-B/16, GPT-2 and BERT (K of 768 or 3072, N of 768-3072), 0.6-0.75 on
    # 4096-wide ones; on batched products (bench workload 3: 16 of 1024^3 sharing an operand)
    # it beats cuBLAS plus an epilogue kernel. fp32 runs on CUDA cores in both (no TF32 unless
    # torch allows it): the template's FMA loop is slower than cuBLAS's SGEMM.
    template_efficiency: dict = field(default_factory=lambda: {
        torch.float16: 0.45, torch.bfloat16: 0.45, torch.float32: 0.6})
    batched_template_efficiency: dict = field(default_factory=lambda: {
        torch.float16: 0.9, torch.bfloat16: 0.9, torch.float32: 0.6})


H100 = Machine()


@dataclass(frozen=True)
class MatmulWork:
    """What one planned matmul reads, computes and writes, both ways.

    ``fused_operand_bytes``: operands the template computes on read, which the torch path has
    their producer write and cuBLAS read back. ``epilogue``: whether ops fuse on write; then the
    torch path writes the product and a separate kernel reads it back.
    """

    batch: int
    m: int
    n: int
    k: int
    dtype: torch.dtype
    operand_bytes: int  # what cuBLAS reads: both operands
    template_read_bytes: int  # what the template loads: prologue inputs and epilogue inputs
    extra_read_bytes: int  # epilogue inputs besides the product (both paths read them)
    product_bytes: int
    output_bytes: int  # what the fused epilogue writes
    fused_operand_bytes: int
    epilogue: bool

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


@dataclass(frozen=True)
class Choice:
    backend: str  # "template" (generated Triton matmul), "cublaslt" (its fused epilogue) or "torch"
    reason: str


def _kernel(flops: float, rate: float, nbytes: float, machine: Machine) -> float:
    return max(flops / rate, nbytes / machine.bandwidth) + machine.launch


def choose_matmul(work: MatmulWork, machine: Machine = H100) -> Choice:
    """Template when something fuses and the estimate says it is faster than cuBLAS plus a
    separate epilogue kernel (and a producer kernel writing each fused operand)."""
    if work.dtype not in TEMPLATE_DTYPES:
        return Choice("torch", f"no template for {str(work.dtype).removeprefix('torch.')}")
    if not work.epilogue and not work.fused_operand_bytes:
        return Choice("torch", "nothing fuses")
    rate = machine.cublas_rate[work.dtype]
    bw = machine.bandwidth
    torch_time = _kernel(work.flops, rate, work.operand_bytes + work.product_bytes, machine)
    torch_time += 2 * work.fused_operand_bytes / bw  # the producer writes it, cuBLAS reads it
    if work.epilogue:
        torch_time += _kernel(0, rate, work.product_bytes + work.extra_read_bytes + work.output_bytes,
                              machine)
    template_time = _kernel(work.flops, rate * template_efficiency(work, machine),
                            work.template_read_bytes + work.output_bytes, machine)
    estimate = f"template ~{template_time * 1e6:.1f} us vs cuBLAS + epilogue ~{torch_time * 1e6:.1f} us"
    if template_time < torch_time:
        return Choice("template", estimate)
    return Choice("torch", estimate)


def template_efficiency(work: MatmulWork, machine: Machine = H100) -> float:
    """The template's share of cuBLAS's rate on this product."""
    shares = machine.batched_template_efficiency if work.batch > 1 else machine.template_efficiency
    return shares[work.dtype]


def recompute_pays(extra_read_bytes: int, saved_bytes: int) -> bool:
    """The speed policy's test, Inductor's trade: recompute an element-wise value in its
    consumer's kernel when the loads that adds (inputs that kernel does not read yet, and their
    writes where they would not be written anyway) cost fewer bytes than writing the value and
    reading it back. A looped reduction reads its row again in each pass, so ``extra_read_bytes``
    is what a single-pass kernel reads: the plan does not depend on the machine's tile sizes."""
    return extra_read_bytes < saved_bytes


def cublaslt(activation: str, dtype: torch.dtype, machine: Machine = H100) -> Choice:
    """A template-bound kernel that is ``act(a @ b + bias)`` runs as cuBLASLt's fused epilogue:
    the same reads and one write, at cuBLAS's rate instead of the template's share of it."""
    return Choice("cublaslt", f"cuBLASLt's bias+{activation} epilogue: cuBLAS's rate, one write "
                              f"(the template assumes {machine.template_efficiency[dtype]:.0%} of it)")

