"""The Triton matmul template: ``epilogue(prologue_a(...) @ prologue_b(...))`` in one kernel.

Each program computes one ``[BLOCK_M, BLOCK_N]`` tile of one batch entry. In its K loop it loads
the inputs of each operand's prologue as tiles through their strides (transposed, broadcast and
sliced operands alike), computes the prologue's element-wise instructions in registers ("fuse on
read") and accumulates ``tl.dot`` in float32. The epilogue rounds the product to its dtype as
eager does, loads its other inputs at the output tile, runs its instructions ("fuse on write")
and stores each output. Rows and columns past M and N are clamped on load and masked on store;
a K tail is masked and, after a prologue, zeroed (a prologue of 0 need not be 0).

Block sizes come from a few configs, timed per shape class on the GPU the first time one is
seen and remembered in ``matmul-tuning.json`` beside the kernel cache; the interpreter uses one
small config. The lowering of each instruction is the element-wise generator's (``lowering.py``).
"""
from __future__ import annotations

import hashlib
import json
import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..bounded import LRUCache
from ..kernel_ir import FusedKernel, Input, MatmulKernel, Value, plain_operand
from .cache import write_atomic
from .config import pow2
from .emit import indent, module_source
from .launch import BoundKernel, Launch, Spec, compile_new
from .lowering import Operand, cast, lower, tl_type

KERNEL_NAME = "matmul_kernel"
_SOURCE_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


@dataclass(frozen=True)
class MatmulConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def constants(self) -> dict[str, int]:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "GROUP_M": self.group_m, "num_warps": self.num_warps, "num_stages": self.num_stages}


# Candidates for 2-byte operands on Hopper (wgmma wants 4 or 8 warps and K blocks of 64), then
# smaller tiles for small or skinny products; fp32 operands take half the K block (shared memory).
# On an H100 the best of these for issue 4's products is a 128x256 or 256x128 tile with 3 or 4
# stages; 5 stages of 128x256x64 do not fit in shared memory.
GPU_CONFIGS = (
    MatmulConfig(128, 256, 64, 8, 8, 3),
    MatmulConfig(128, 256, 64, 8, 8, 4),
    MatmulConfig(256, 128, 64, 8, 8, 3),
    MatmulConfig(256, 128, 64, 8, 8, 4),
    MatmulConfig(128, 128, 64, 8, 4, 4),
    MatmulConfig(128, 128, 64, 8, 8, 3),
    MatmulConfig(64, 128, 64, 8, 4, 4),
    MatmulConfig(128, 64, 64, 8, 4, 4),
    MatmulConfig(64, 64, 64, 8, 4, 4),
    MatmulConfig(32, 64, 64, 8, 4, 3),
)
INTERPRETER_CONFIG = MatmulConfig(32, 32, 32, 4, 4, 1)
# Launch specs kept per runner: they are per shape, and shapes may change on every call.
MAX_SPECS = 512


def configs_for(dtype: torch.dtype) -> tuple[MatmulConfig, ...]:
    if dtype.itemsize <= 2:
        return GPU_CONFIGS
    return tuple(dict.fromkeys(MatmulConfig(c.block_m, c.block_n, c.block_k // 2, c.group_m, c.num_warps,
                                            min(c.num_stages, 3)) for c in GPU_CONFIGS))


def _fitting(configs: tuple[MatmulConfig, ...], m: int, n: int) -> tuple[MatmulConfig, ...]:
    """The configs whose tile is no larger than the product needs (as Inductor prunes its mm
    configs): a 256-wide tile over 96 columns computes 160 of them for nothing."""
    fit = tuple(c for c in configs if c.block_m <= max(32, pow2(m)) and c.block_n <= max(32, pow2(n)))
    return fit or configs[-1:]


def _matmul_precision(dtype: torch.dtype) -> str:
    """Eager's fp32 matmul is full precision unless torch allows TF32."""
    if dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return "ieee"
    return "tf32"


class _Names:
    """Register names of one part (``a``, ``b`` or ``e``): inputs ``{p}in{k}``, values ``{p}v{i}``."""

    def __init__(self, part: str, kernel: FusedKernel, first_pointer: int) -> None:
        self.part, self.kernel, self.first = part, kernel, first_pointer

    def pointer(self, k: int) -> str:
        return f"in{self.first + k}"

    def loaded(self, k: int) -> str:
        return f"{self.part}in{k}"

    def value(self, i: int) -> str:
        return f"{self.part}v{i}"

    def lines(self) -> list[str]:
        """The instructions, each lowered to one assignment."""
        out = []
        for i, ins in enumerate(self.kernel.instrs):
            ops = []
            for a in ins.args:
                if isinstance(a, Input):
                    ops.append(Operand(self.loaded(a.index), self.kernel.input_dtypes[a.index]))
                elif isinstance(a, Value):
                    ops.append(Operand(self.value(a.index), self.kernel.instrs[a.index].dtype))
                else:
                    ops.append(Operand(None, None, a))
            out.append(f"{self.value(i)} = {lower(ins, ops)}")
        return out


def _strides(part: _Names, k: int) -> tuple[str, str, str]:
    t = part.first + k
    return f"st{t}_0", f"st{t}_1", f"st{t}_2"


def generate(kernel: MatmulKernel, wide: bool, interpret: bool, even_k: bool = False,
             aligned: tuple[bool, bool] = (False, False)) -> str:
    """Source of the template for ``kernel``. ``wide``: 64-bit offsets; ``even_k``: the block
    divides K, so the K loop needs no mask; ``aligned``: M, N are multiples of 16, so a tile's
    rows (columns) may be declared contiguous, which lets an operand whose M (N) dim has stride 1
    load in vectors (without the hint, clamping the tail rows hides their contiguity and such an
    operand, e.g. ``x @ w`` with ``w`` row-major, loads one element per instruction). Any vector
    of up to 16 elements then lies wholly before or wholly past M, and the clamped ones past M
    read row 0's neighbours, in bounds, and are never stored."""
    a_part = _Names("a", kernel.a, 0)
    b_part = _Names("b", kernel.b, len(kernel.a.input_dtypes))
    e_part = _Names("e", kernel.epilogue, len(kernel.a.input_dtypes) + len(kernel.b.input_dtypes) - 1)
    n_in = len(kernel.input_dtypes)
    n_out = len(kernel.outputs)
    operand = kernel.operand_dtype
    precision = _matmul_precision(operand)
    body = [
        "pid = tl.program_id(0)",
        "bid = tl.program_id(1)" + (".to(tl.int64)" if wide else ""),
        "grid_m = (M + BLOCK_M - 1) // BLOCK_M",
        "grid_n = (N + BLOCK_N - 1) // BLOCK_N",
        "width = GROUP_M * grid_n",
        "first_m = (pid // width) * GROUP_M",
        "group_size = tl.minimum(grid_m - first_m, GROUP_M)",
        "pid_m = first_m + (pid % width) % group_size",
        "pid_n = (pid % width) // group_size",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
    ]
    if wide:
        body += ["rm = rm.to(tl.int64)", "rn = rn.to(tl.int64)"]
    body += [
        "mmask = rm < M",
        "nmask = rn < N",
        "ram = tl.where(mmask, rm, 0)",  # clamped rows/cols: loads stay in bounds without masks
        "rbn = tl.where(nmask, rn, 0)",
    ]
    for name, block, hinted in (("ram", "BLOCK_M", aligned[0]), ("rbn", "BLOCK_N", aligned[1])):
        if hinted:
            body.append(f"{name} = tl.max_contiguous(tl.multiple_of({name}, {block}), {block})")
    body += [
        "rk = tl.arange(0, BLOCK_K)",
        "acc = tl.full((BLOCK_M, BLOCK_N), 0, tl.float32)",
    ]
    # Each operand input's tile pointers are built once and advanced by a K block per step.
    loop = [] if even_k else ["kmask = kb * BLOCK_K + rk < K"]
    for part, rows, cols, k_mask in ((a_part, "ram[:, None]", "rk[None, :]", "kmask[None, :]"),
                                     (b_part, "rk[:, None]", "rbn[None, :]", "kmask[:, None]")):
        for k in range(len(part.kernel.input_dtypes)):
            sb, sr, sc = _strides(part, k)
            tile = f"{part.part}ptr{k}"
            body.append(f"{tile} = {part.pointer(k)} + bid * {sb} + {rows} * {sr} + {cols} * {sc}")
            mask = "" if even_k else f", mask={k_mask}, other=0"
            loop.append(f"{part.loaded(k)} = tl.load({tile}{mask})")
            loop.append(f"{tile} += BLOCK_K * {sc if part is a_part else sr}")
        loop += part.lines()
        out = part.value(part.kernel.outputs[0].index)
        plain = len(part.kernel.instrs) == 1 and part.kernel.instrs[0].op == "clone"
        if not plain and not even_k:  # the prologue of a zero-padded element need not be zero
            loop.append(f"{out} = tl.where({k_mask}, {out}, 0).to({tl_type(operand)})")
        loop.append(f"{part.part}op = {out}")
    a_op, b_op = "aop", "bop"
    if interpret and operand == torch.bfloat16:  # the interpreter's bf16 dot is wrong; fp32 is exact
        a_op, b_op = "aop.to(tl.float32)", "bop.to(tl.float32)"
    loop.append(f"acc = tl.dot({a_op}, {b_op}, acc, input_precision=\"{precision}\")")
    body.append("for kb in range(0, (K + BLOCK_K - 1) // BLOCK_K):")
    body += indent(loop, 1)
    body += [
        f"ein0 = {cast('acc', torch.float32, kernel.product_dtype)}",
        "omask = mmask[:, None] & nmask[None, :]",
    ]
    for k in range(1, len(kernel.epilogue.input_dtypes)):
        sb, sr, sc = _strides(e_part, k)
        ptr = f"{e_part.pointer(k)} + bid * {sb} + rm[:, None] * {sr} + rn[None, :] * {sc}"
        body.append(f"{e_part.loaded(k)} = tl.load({ptr}, mask=omask, other=0)")
    body += e_part.lines()
    for j, out in enumerate(kernel.outputs):
        body.append(f"tl.store(out{j} + bid * so{j}_0 + rm[:, None] * so{j}_1 + rn[None, :] * so{j}_2, "
                    f"{e_part.value(out.index)}, mask=omask)")
    strides = [s for t in range(n_in) for s in (f"st{t}_0", f"st{t}_1", f"st{t}_2")]
    strides += [s for j in range(n_out) for s in (f"so{j}_0", f"so{j}_1", f"so{j}_2")]
    args = ([f"in{t}" for t in range(n_in)] + [f"out{j}" for j in range(n_out)] + ["M", "N", "K"] + strides
            + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"])
    return module_source("\n".join([f"def {KERNEL_NAME}({', '.join(args)}):"] + indent(body, 1)) + "\n")


def _strides3(t: torch.Tensor) -> tuple[int, int, int]:
    """Strides over (batch, rows, cols), 0 where a dim is broadcast or absent."""
    st = [0 if n == 1 else s for n, s in zip(t.shape, t.stride())]
    return (0, *st) if t.dim() == 2 else tuple(st)  # type: ignore[return-value]


def _reach(t: torch.Tensor) -> int:
    return sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) + t.storage_offset()


def _shape_class(m: int, n: int, k: int, batch: int) -> tuple[int, ...]:
    """Products whose sizes round to the same powers of two share a tuned config."""
    return tuple(1 << max(0, x - 1).bit_length() for x in (m, n, k, batch))


class _Tuning:
    """Tuned configs per (matmul family, shape class), remembered on disk as JSON: a family is
    the operands' dtypes, rank and prologues, whatever the epilogue."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "matmul-tuning.json"
        self._lock = threading.Lock()
        try:
            table = json.loads(self.path.read_text())
        except (OSError, ValueError):
            table = {}
        self.table: dict[str, list[int]] = table if isinstance(table, dict) else {}

    def get(self, key: str) -> MatmulConfig | None:
        """The config remembered for ``key``; the caller still checks it is one it runs."""
        found = self.table.get(key)
        return MatmulConfig(*found) if isinstance(found, list) and len(found) == 6 else None

    def put(self, key: str, config: MatmulConfig) -> None:
        """Remember ``config``; a folder that cannot be written only loses it at exit."""
        with self._lock:
            self.table[key] = [config.block_m, config.block_n, config.block_k, config.group_m,
                               config.num_warps, config.num_stages]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.path, json.dumps(self.table).encode())
            except OSError:
                pass


class MatmulRunner:
    """Runs ``MatmulKernel``s as the generated template, compiled or interpreted."""

    def __init__(self, interpret: bool, cache: Any, configs: Sequence[MatmulConfig] | None = None) -> None:
        self.interpret = interpret
        self.cache = cache
        self.configs = configs
        self.tuning = _Tuning(cache.directory)
        self._specs: LRUCache[Spec] = LRUCache(MAX_SPECS)
        self._jobs: dict[str, _Job] = {}  # tuning key -> its tuning, started but not finished
        self._waiting: list[weakref.ref[_TunedLaunch]] = []

    def run(self, kernel: MatmulKernel, inputs: Sequence[torch.Tensor],
            outputs: Sequence[torch.Tensor | None] | None = None) -> list[torch.Tensor]:
        """Compute the outputs into ``outputs`` (any strides; None: new contiguous tensors)."""
        return self.bind(kernel, inputs, outputs)()

    def bind(self, kernel: MatmulKernel, inputs: Sequence[torch.Tensor],
             outputs: Sequence[torch.Tensor | None] | None = None) -> Callable[[], list[torch.Tensor]]:
        """``run`` prepared for these tensors (source loaded, config chosen): each call launches.
        Without outputs given it is a ``BoundKernel``, which a replayed plan relaunches."""
        kernel.check_inputs(inputs)
        if not self.interpret and any(not t.is_cuda for t in inputs):
            raise ValueError("the triton executor runs on CUDA tensors; use 'interpret' or "
                             "'reference' for CPU tensors")
        shape = kernel.shape
        m, n, k = shape[-2], shape[-1], kernel.a.shape[-1]
        batch = math.prod(shape[:-2])
        device = inputs[0].device
        given = list(outputs) if outputs is not None else [None] * len(kernel.outputs)
        # Other programs still read the inputs while one stores its tile: an output sharing
        # storage with an input is computed aside and copied.
        read = {t.untyped_storage().data_ptr() for t in inputs if t.numel()}
        outs = [torch.empty(kernel.output_shape(j), dtype=kernel.epilogue.instrs[o.index].dtype, device=device)
                if g is None or (g.numel() and g.untyped_storage().data_ptr() in read) else g
                for j, (o, g) in enumerate(zip(kernel.outputs, given))]
        aside = [(g, out) for g, out in zip(given, outs) if g is not None and g is not out]
        empty = 0 in (m, n, k, batch)  # nothing to launch: aten's answer (zeros when K is 0)
        launch = None if empty else self._spec(kernel, inputs, outs, m, n, k, batch).bind((*inputs, *outs))
        bound = BoundKernel(launch, outs, kernel, list(inputs))
        if not aside:
            return bound
        results = [out if g is None else g for g, out in zip(given, outs)]

        def call() -> list[torch.Tensor]:
            bound()
            for g, out in aside:
                g.copy_(out)
            return results

        return call

    def _spec(self, kernel: MatmulKernel, inputs: Sequence[torch.Tensor], outs: list[torch.Tensor],
              m: int, n: int, k: int, batch: int) -> Spec | _Untuned:
        wide = max([_reach(t) for t in (*inputs, *outs)]) >= 2**31
        key = (kernel, wide, tuple(t.stride() for t in inputs), tuple(t.stride() for t in outs), m, n, k, batch)
        spec = self._specs.get(key)
        if spec is None:
            source = ("matmul", _SOURCE_HASH, kernel.structure_key(), wide, self.interpret,
                      _matmul_precision(kernel.operand_dtype))
            aligned = (m % 16 == 0, n % 16 == 0)

            def variant(config: MatmulConfig) -> Any:
                even_k = k % config.block_k == 0
                return self.cache.kernel((*source, even_k, aligned),
                                         lambda: generate(kernel, wide, self.interpret, even_k, aligned),
                                         KERNEL_NAME, self.interpret)

            scalars = (m, n, k, *[s for t in (*inputs, *outs) for s in _strides3(t)])

            def spec_of(config: MatmulConfig) -> Spec:
                grid = (math.ceil(m / config.block_m) * math.ceil(n / config.block_n), batch)
                return Spec(variant(config), grid, scalars, config.constants(), self.interpret)

            # epilogues share a tuned config: tuning each would compile every candidate again
            family = ("matmul", _SOURCE_HASH, kernel.operand_dtype, kernel.product_dtype, plain_operand(kernel.a),
                      plain_operand(kernel.b), len(kernel.shape), wide, _matmul_precision(kernel.operand_dtype))
            config = self._config(spec_of, kernel, inputs, outs, (m, n, k, batch), family)
            if isinstance(config, _Job):
                return _Untuned(self, config, spec_of, key)
            spec = spec_of(config)
            self._specs.put(key, spec)
        return spec

    def _config(self, spec_of: Callable[[MatmulConfig], Spec], kernel: MatmulKernel, inputs: Sequence[torch.Tensor],
                outs: list[torch.Tensor], sizes: tuple[int, int, int, int], family: tuple) -> MatmulConfig | _Job:
        """The interpreter's one config, the tuned one for this shape class, or the class's
        tuning: its candidates bound, waiting to compile with the plan's other kernels."""
        if self.interpret:
            return self.configs[0] if self.configs else INTERPRETER_CONFIG
        candidates = _fitting(tuple(self.configs or configs_for(kernel.operand_dtype)), *sizes[:2])
        if len(candidates) == 1:
            return candidates[0]
        tuning_key = repr((hashlib.sha256(repr(family).encode()).hexdigest()[:16], _shape_class(*sizes),
                           torch.cuda.get_device_name(inputs[0].device)))
        config = self.tuning.get(tuning_key)
        if config in candidates:  # else not tuned yet (or the file names a config we do not run)
            return config
        job = self._jobs.get(tuning_key)
        if job is None:
            aside = [torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=o.device) for o in outs]
            # timed into outputs of their own: the real ones may hold data the plan still reads
            job = self._jobs[tuning_key] = _Job(tuning_key, {c: spec_of(c).bind((*inputs, *aside)) for c in candidates})
        return job

    def choose(self, job: _Job) -> MatmulConfig:
        """The fastest candidate of ``job``, timed once its candidates are compiled."""
        if job.config is None:
            from triton.runtime.errors import OutOfResources
            from triton.testing import do_bench

            compile_new()  # whatever is still uncompiled, all at once (normally done already)
            timings = {}
            for c, launch in job.launches.items():
                try:  # timed as they will run: direct launches, so the host never sets the pace
                    timings[c] = do_bench(launch, warmup=2, rep=10)
                except OutOfResources:  # a config the chip cannot hold (shared memory, registers)
                    continue
            job.config = min(timings, key=timings.get)
            job.launches = {}
            self.tuning.put(job.key, job.config)
            self._jobs.pop(job.key, None)
        return job.config

    def finish_tuning(self) -> None:
        """Choose the config of every matmul bound while its shape class was untuned, then
        compile the chosen kernels together: a plan's first run tunes all its classes after one
        compile of every candidate, not class after class."""
        waiting = [launch for launch in (ref() for ref in self._waiting) if launch is not None]
        self._waiting.clear()
        for launch in waiting:
            launch.resolve()
        if waiting:
            compile_new()


class _Job:
    """One shape class's tuning: each candidate config bound to the first matmul of the class."""

    def __init__(self, key: str, launches: dict[MatmulConfig, Launch]) -> None:
        self.key, self.launches = key, launches
        self.config: MatmulConfig | None = None


class _Untuned:
    """A matmul's spec whose config its shape class's tuning has yet to choose."""

    def __init__(self, runner: MatmulRunner, job: _Job, spec_of: Callable[[MatmulConfig], Spec], key: tuple) -> None:
        self.runner, self.job, self.spec_of, self.key = runner, job, spec_of, key

    def bind(self, tensors: Sequence[torch.Tensor]) -> _TunedLaunch:
        launch = _TunedLaunch(self, tuple(tensors))
        self.runner._waiting.append(weakref.ref(launch))
        return launch


class _TunedLaunch:
    """A ``Launch`` once its config is chosen: by ``MatmulRunner.finish_tuning`` when the plan
    that bound it compiles, or else at the first use."""

    __slots__ = ("untuned", "tensors", "device", "_launch", "__weakref__")

    def __init__(self, untuned: _Untuned, tensors: tuple[torch.Tensor, ...]) -> None:
        self.untuned, self.tensors, self.device = untuned, tensors, tensors[0].device
        self._launch: Launch | None = None

    def resolve(self) -> Launch:
        if self._launch is None:
            untuned = self.untuned
            runner = untuned.runner
            spec = runner._specs.get(untuned.key)
            if spec is None:
                spec = untuned.spec_of(runner.choose(untuned.job))
                runner._specs.put(untuned.key, spec)
            self._launch = spec.bind(self.tensors)
        return self._launch

    @property
    def spec(self) -> Spec:
        return self.resolve().spec

    @property
    def _key(self) -> tuple:
        return self.resolve()._key

    def __call__(self) -> None:
        self.resolve()()
