"""What the tests of the fused-op rules (FL011-FL013) share: run a program and its rewrite on the
same random inputs in a dtype, compare them against float64, and prove a fix with ``--verify``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

import fusionrt


def run(source: str, call: str, dtype: torch.dtype, seed: int = 0):
    """(result, fusionrt report) of ``call`` in ``source``'s namespace; ``randn(*shape)`` gives
    fresh random tensors of ``dtype``, the same ones for the same seed."""
    namespace: dict = {"__name__": "example"}
    exec(compile(source, "example.py", "exec"), namespace)
    generator = torch.Generator().manual_seed(seed)
    namespace["randn"] = lambda *shape: torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)
    callee, _, arguments = call.partition("(")
    args = eval(f"({arguments[:-1]},)", namespace)
    with torch.no_grad():
        return fusionrt.measure(namespace[callee], *args, executor="reference")


def assert_equal_within_tolerance(bad: str, fixed: str, call: str, dtype: torch.dtype) -> None:
    """The rewrite's result equals the original's: closely in fp32; in bf16, where the fused op
    skips a rounding of its intermediate, it is at least as close to the float64 result (up to
    one bf16 step of the result's magnitude) and within bf16's tolerance of it."""
    (before, _), (after, _) = run(bad, call, dtype), run(fixed, call, dtype)
    assert before.dtype == after.dtype == dtype
    if dtype is torch.float32:
        torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
        return
    exact, _ = run(bad, call, torch.float64)
    step = 2.0 ** -7 * exact.abs().max().item()
    error_before, error_after = ((out.double() - exact).abs().max().item() for out in (before, after))
    assert error_after <= error_before + step
    torch.testing.assert_close(after.double(), exact, rtol=1.6e-2, atol=error_before + step)


def verify(tmp_path: Path, source: str, code: str) -> tuple[str, str]:
    """``fusionlint check --fix --unsafe-fixes --verify`` of ``source`` with rule ``code`` alone:
    (what it printed, the file afterwards)."""
    path = tmp_path / "module.py"
    path.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "fusionlint", "check", "--no-cache", "--select", code, "--fix", "--unsafe-fixes",
         "--verify", str(path)],
        capture_output=True, text=True,
    )
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out
    return out, path.read_text()
