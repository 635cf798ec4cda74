"""The child process of a verification: load one version of a file and run its functions under fusionrt.

``python -m fusionlint.verify.runner JOB.json`` loads the module from the job's text (never
from disk, so the original and the fixed text each run in their own process under the file's
real module name), calls each function with seeded random tensors under ``fusionrt.measure``
(``reference`` executor: CPU, and the plan's counts are those of every executor), and writes one
``<i>.json`` (status, counts) and ``<i>.pt`` (result and inputs after the call) per function as
it goes, so a function that hangs costs only its own result.

The run of the original picks, per function, the first input shapes that run; the run of the
fixed text reuses them, compares its results with the original's and decides the verdict.
"""
from __future__ import annotations

import json
import signal
import sys
import types
from pathlib import Path
from typing import Any

# Input shapes tried in turn until the original runs: every tensor argument the same shape
# first, then the first one full and the others broadcastable to it.
SAME_SHAPES = ((2, 3, 16, 16), (16, 16), (4, 16), (8,), (2, 8, 16), (4, 128), (2, 16, 64))
BROADCAST_SHAPES = (((4, 16), (16,)), ((2, 8, 16), (16,)), ((2, 3, 16, 16), (16, 16)), ((4, 16), (4, 1)))


class Timeout(BaseException):
    """The function ran past its time (a BaseException, so that no ``except Exception`` of the
    user's code or of fusionrt's dispatch swallows it)."""


def shapes_for(index: int, count: int) -> list[tuple[int, ...]]:
    if index < len(SAME_SHAPES):
        return [SAME_SHAPES[index]] * count
    first, rest = BROADCAST_SHAPES[index - len(SAME_SHAPES)]
    return [first] + [rest] * (count - 1)


def shape_count(count: int) -> int:
    return len(SAME_SHAPES) + (len(BROADCAST_SHAPES) if count > 1 else 0)


def load_module(text: str, path: str, name: str, root: str) -> types.ModuleType:
    """Execute ``text`` as the module ``name`` of the file ``path`` (its folder tree importable from ``root``)."""
    sys.path.insert(0, root)
    module = types.ModuleType(name)
    module.__file__ = path
    module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    exec(compile(text, path, "exec", dont_inherit=True), module.__dict__)
    return module


def _target(module: types.ModuleType, name: str, seed: int):
    """The callable for ``name``; a method is bound to an instance built without arguments (in eval mode)."""
    import torch

    owner: Any = module
    parts = name.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
    if owner is None or not hasattr(owner, parts[-1]):
        raise NoHarness(f"{name} is not defined when the module is loaded")
    if owner is module:
        return getattr(module, parts[-1])
    torch.manual_seed(seed)
    try:
        instance = owner()
    except Exception as exc:  # noqa: BLE001 - any failure means: no harness
        raise NoHarness(f"{parts[-2]}() cannot be built without arguments: {_first_line(exc)}") from None
    if isinstance(instance, torch.nn.Module):
        instance.eval()
    return getattr(instance, parts[-1])


class NoHarness(Exception):
    """The function cannot be called with random tensors alone."""


def _call(function, tensors: list[str], shape_index: int, seed: int):
    """Call ``function`` under fusionrt with random tensors; (result, inputs after the call, counts)."""
    import inspect

    import torch

    import fusionrt

    torch.manual_seed(seed)
    shapes = iter(shapes_for(shape_index, len(tensors)))
    args, kwargs, inputs = [], {}, []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name not in tensors:
            continue
        value = torch.randn(next(shapes))
        inputs.append(value)
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    with torch.no_grad():
        result, report = fusionrt.measure(function, *args, executor="reference", **kwargs)
    return result, inputs, [report.writes, report.bytes_written, report.kernels,
                            report.eager_writes, report.eager_bytes_written, report.eager_kernels]


def _with_deadline(seconds: float, work):
    """``work()``, interrupted after ``seconds`` (where there are interval timers: not on Windows,
    where only the parent's limit on the whole process applies)."""
    if not hasattr(signal, "setitimer"):
        return work()

    def expire(signum, frame):
        raise Timeout(f"ran past {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def run_original(module, job: dict, index: int, function: dict, out: Path) -> dict:
    import torch

    try:
        target = _target(module, function["name"], job["seed"])
    except NoHarness as exc:
        return {"status": "no_harness", "reason": str(exc)}
    error = "no input shape was tried"
    for shape_index in range(shape_count(len(function["tensors"]))):
        try:
            result, inputs, counts = _with_deadline(
                job["timeout"], lambda: _call(target, function["tensors"], shape_index, job["seed"])
            )
        except Timeout as exc:
            return {"status": "failed", "reason": f"the original {exc}"}
        except Exception as exc:  # noqa: BLE001 - try the next shapes
            error = _first_line(exc)
            continue
        try:
            torch.save({"result": result, "inputs": inputs}, out / f"{index}.pt")
        except Exception as exc:  # noqa: BLE001 - a result pickle cannot hold cannot be compared
            return {"status": "no_harness", "reason": f"its result cannot be saved for comparison: {_first_line(exc)}"}
        return {"status": "ran", "shape": shape_index, "counts": counts}
    return {"status": "no_harness", "reason": f"the original raises on every input shape tried ({error})"}


def run_fixed(module, job: dict, index: int, function: dict, out: Path, reference: dict) -> dict:
    import torch

    shape_index, before = reference["shape"], reference["counts"]
    try:
        target = _target(module, function["name"], job["seed"])
        result, inputs, after = _with_deadline(
            job["timeout"], lambda: _call(target, function["tensors"], shape_index, job["seed"])
        )
    except Timeout as exc:
        return {"verified": False, "reason": f"the fixed function {exc}"}
    except Exception as exc:  # noqa: BLE001 - the fix broke the call
        return {"verified": False, "reason": f"the fixed function raises: {_first_line(exc)}"}
    expected = torch.load(Path(job["reference"]) / f"{index}.pt", weights_only=False)
    try:
        torch.testing.assert_close(result, expected["result"], equal_nan=True)
        torch.testing.assert_close(inputs, expected["inputs"], equal_nan=True)
    except (AssertionError, TypeError, ValueError) as exc:
        detail = [line.strip() for line in str(exc).splitlines() if line.strip()][:3]
        return {"verified": False, "equal": False, "reason": f"results differ: {'; '.join(detail)}"}
    # Cheaper: fusionrt no worse on any count, and fewer of one count under fusionrt, or else
    # under eager PyTorch with none more there (a rewrite that pays in eager only).
    labels = ("writes", "bytes written", "kernels")
    change = ", ".join(f"{label} {b} -> {a}" for label, b, a in zip(labels, before, after))
    eager = ", ".join(f"{label} {b} -> {a}" for label, b, a in zip(labels, before[3:], after[3:]))
    fusionrt_worse = any(a > b for a, b in zip(after[:3], before[:3]))
    eager_cheaper = all(a <= b for a, b in zip(after[3:], before[3:])) and after[3:] != before[3:]
    if fusionrt_worse or (after[:3] == before[:3] and not eager_cheaper):
        return {"verified": False, "equal": True, "reason": f"not cheaper under fusionrt ({change}) nor in eager ({eager})"}
    if after[:3] == before[:3]:
        change = f"fusionrt unchanged; eager {eager}"
    shape = " and ".join(str(tuple(s)) for s in dict.fromkeys(shapes_for(shape_index, len(function["tensors"])))) or "no tensors"
    return {"verified": True, "equal": True, "reason": f"equal results on random inputs of shape {shape}; {change}"}


def main(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    out = Path(job["out"])
    module = load_module(job["text"], job["path"], job["module"], job["root"])
    for index, function in enumerate(job["functions"]):
        if function.get("skip"):
            continue
        if job["reference"] is None:
            verdict = run_original(module, job, index, function, out)
        else:
            reference = json.loads((Path(job["reference"]) / f"{index}.json").read_text(encoding="utf-8"))
            if reference["status"] != "ran":
                continue
            verdict = run_fixed(module, job, index, function, out, reference)
        (out / f"{index}.json").write_text(json.dumps(verdict), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
