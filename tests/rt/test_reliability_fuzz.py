"""Random programs that reach pending memory the awkward ways real code does: parameters and
subclasses built from computed tensors, ``.data`` reads and swaps, pickling, copies, DLPack,
module construction and dtype conversion, work in other threads; mixed with the element-wise,
view, reduction and in-place lines of the differential tests. Always eager's result.
"""
from __future__ import annotations

import contextlib
import copy
import io
import pickle
import random
import re
import threading
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import fusionrt

from .differential import LOW_PRECISION, assert_consistent, assert_same, rand
from .test_differential import BINARY, IN_PLACE, REDUCTIONS, UNARY, VIEWS

ESCAPES = [
    "{n} = torch.nn.Parameter({v} * 2, requires_grad=False)",
    "{n} = ({v} + 1).as_subclass(torch.Tensor)",
    "{n} = {v}.data",
    "{v}.data = ({w} * 3).data",
    "{v}.data, {w}.data = {w}.data, {v}.data",
    "{n} = copy.deepcopy({v} - 1)",
    "{n} = pickle.loads(pickle.dumps({v} * 2))",
    "{n} = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack({v} + 2))",
    "{n} = in_thread(lambda: {v} * 2 + 1)",
    "{n} = in_thread(lambda: ({v} + 1).sum().item()) + {w}",
    "{n} = torch.nn.Linear({v}.shape[-1], 3).to({v}.dtype)({v})",
    "{n} = torch.nn.Linear({v}.shape[-1], 2).half()({v}.half())",
    "{n} = torch.nn.LayerNorm({v}.shape[-1]).double()({v}.double())",
    "{n} = Scaled({v}.shape[-1])({v})",
    "{n} = Scaled({v}.shape[-1]).bfloat16()({v}.bfloat16())",
]
KINDS = [("{n} = ", UNARY, 3), ("{n} = ", BINARY, 2), ("{n} = ", VIEWS, 2), ("{n} = ", REDUCTIONS, 1),
         ("", IN_PLACE, 2), ("", ESCAPES, 4)]
DTYPES = [torch.float32] * 4 + [torch.float16, torch.bfloat16, torch.int64, torch.float64]


class Scaled(torch.nn.Module):
    """A module whose parameters are computed when it is built."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(d) * 0.5 + torch.arange(d) / d)
        self.register_buffer("b", torch.linspace(-1, 1, d) * 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w + self.b


def in_thread(fn: Callable[[], Any]) -> Any:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.__setitem__("value", fn()))
    thread.start()
    thread.join()
    return box["value"]


def _exec(lines: list[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    env = {"x": x, "torch": torch, "F": F, "fusionrt": fusionrt, "copy": copy, "pickle": pickle,
           "in_thread": in_thread, "Scaled": Scaled}
    torch.manual_seed(0)  # modules built by the program get the same weights in both runs
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        exec("\n".join(lines), env)
    return {k: v for k, v in env.items() if isinstance(v, torch.Tensor)}


def random_program(seed: int, device: str = "cpu") -> tuple[torch.Tensor, list[str]]:
    """Each candidate line is kept only if the program still runs eagerly with it."""
    rng = random.Random(seed)
    shape = tuple(rng.choice([2, 3, 5]) for _ in range(rng.choice([1, 2, 2, 3])))
    x = rand(*shape, dtype=rng.choice(DTYPES), generator=torch.Generator().manual_seed(seed)).to(device)
    lines, names = ["e0 = x * 1"], ["e0"]
    live = list(_exec(lines, x.clone()))
    for _ in range(rng.choice([6, 10, 14])):
        n = f"e{len(names)}"
        prefix, table, _ = rng.choices(KINDS, weights=[k[2] for k in KINDS])[0]
        choices = [name for name in names if name in live] or ["x"]
        line = (prefix + rng.choice(table)).format(
            n=n, v=rng.choice(choices), w=rng.choice(choices), d=rng.choice([0, -1]))
        try:
            live = list(_exec(lines + [line], x.clone()))
        except Exception:  # noqa: BLE001 - eager rejects it: try another line
            continue
        lines.append(line)
        if line.startswith(n + " "):
            names.append(n)
    return x, lines


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_with_escapes_give_eager_results(chunk):
    _check_programs(range(chunk * 25, chunk * 25 + 25), "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_random_programs_with_escapes_on_the_gpu():
    """The generated Triton kernels, CUDA's allocator and its streams."""
    _check_programs(range(40), "cuda")


def _check_programs(seeds: range, device: str) -> None:
    for seed in seeds:
        x, lines = random_program(seed, device)
        program = "\n".join(lines)
        expected = _exec(lines, x.clone())
        with fusionrt.lazy() as session:
            got = _exec(lines, x.clone())
        assert got.keys() == expected.keys(), program
        for name, value in expected.items():
            try:
                assert_same(got[name], value, low_precision_inside=True, what=name)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, x {tuple(x.shape)} {x.dtype}:\n{program}\n{exc}") from None
        assert_consistent(session.report)


def test_the_programs_use_every_escape():
    used = [line for seed in range(100) for line in random_program(seed)[1]]
    for escape in ESCAPES:
        pattern = re.compile(re.escape(escape).replace(r"\{n\}", r"e\d+").replace(r"\{v\}", r"(e\d+|x)")
                             .replace(r"\{w\}", r"(e\d+|x)"))
        assert any(pattern.fullmatch(line) for line in used), escape
