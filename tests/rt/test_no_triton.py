"""Triton is optional (no wheels for macOS or Windows): without it, fusionrt imports, the reference
executor runs programs through ``lazy``, ``measure``, ``jit``, ``fusionrt run`` and ``%%fuse``,
``auto`` picks ``reference``, and asking for a Triton executor is one clear error.

Each check runs in a new process whose import system refuses ``triton`` as an absent package."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WITHOUT_TRITON = textwrap.dedent("""
    import sys

    class _NoTriton:
        def find_spec(self, name, path=None, target=None):
            if name == "triton" or name.startswith("triton."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoTriton())
""")


def _run(body: str, *args: str) -> subprocess.CompletedProcess:
    code = WITHOUT_TRITON + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], env=dict(os.environ, CI="1"))


def test_lazy_measure_and_jit_run_on_the_reference_executor():
    out = _run("""
        import torch
        import fusionrt
        from fusionrt.executors import resolve

        def program(x, bias):
            return torch.softmax(x * 0.5 + bias, dim=-1).sum(0) * 3

        for seed in range(3):
            gen = torch.Generator().manual_seed(seed)
            x, bias = torch.randn(8, 33, generator=gen), torch.randn(33, generator=gen)
            eager = program(x, bias)
            with fusionrt.lazy(executor="reference") as session:
                lazy = program(x, bias)
            torch.testing.assert_close(lazy, eager)
            assert session.report.kernels
            measured, report = fusionrt.measure(program, x, bias)  # executor "auto"
            torch.testing.assert_close(measured, eager)
            assert report.executor == "reference", report.executor
            jitted = fusionrt.jit(program)
            for _ in range(2):
                torch.testing.assert_close(jitted(x, bias), eager)
        assert resolve("auto", torch.device("cuda")) == "reference"
        assert "triton" not in sys.modules
        print("ok")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "ok"


@pytest.mark.parametrize("executor", ["interpret", "triton"])
def test_a_triton_executor_is_one_clear_error(executor):
    out = _run("""
        import fusionrt
        from fusionrt.executors import get_executor

        for ask in (lambda: fusionrt.lazy(executor=sys.argv[1]), lambda: fusionrt.jit(executor=sys.argv[1])(abs),
                    lambda: get_executor(sys.argv[1])):
            try:
                ask()
            except ImportError as exc:
                print(exc)
            else:
                print("no error")
    """, executor)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"fusionrt: the {executor!r} executor needs triton (pip install triton)"] * 3


def test_fusionrt_run_without_triton(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import torch\nx = torch.randn(4, 8)\ny = (x * 2).relu().sum(1)\nprint(y.shape)\n")
    out = _run("""
        from fusionrt.cli import main
        sys.exit(main(["run", sys.argv[1]]))
    """, str(script))
    assert out.returncode == 0, out.stderr
    assert "torch.Size([4])" in out.stdout and "fusionrt report" in out.stdout
    assert "(policy stream, executor reference)" in out.stdout


def test_fuse_magic_without_triton():
    pytest.importorskip("IPython")
    out = _run("""
        from IPython.testing import globalipapp

        shell = globalipapp.start_ipython() or globalipapp.get_ipython()
        shell.run_line_magic("load_ext", "fusionrt")
        shell.run_cell("import torch\\nx = torch.randn(8, 16)")
        result = shell.run_cell("%%fuse -o rep\\ny = (x * 2).relu().sum(1)\\n")
        assert result.error_in_exec is None, result.error_in_exec
        torch = shell.user_ns["torch"]
        torch.testing.assert_close(shell.user_ns["y"], (shell.user_ns["x"] * 2).relu().sum(1))
        assert shell.user_ns["rep"].executor == "reference"
        assert "triton" not in sys.modules
        print("ok")
    """)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.strip().splitlines()[-1] == "ok"


def test_asking_for_generated_kernels_without_triton_is_one_line_in_the_cli_and_the_magic(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("print('the script ran')\n")
    out = _run("""
        from fusionrt.cli import main
        code = main(["run", "--executor", "interpret", sys.argv[1]])
        from IPython.testing import globalipapp

        shell = globalipapp.start_ipython() or globalipapp.get_ipython()
        shell.run_line_magic("load_ext", "fusionrt")
        result = shell.run_cell("%%fuse --executor triton\\ny = 1\\n")
        print("exit", code, type(result.error_in_exec).__name__, "y" in shell.user_ns)
    """, str(script))
    assert out.returncode == 0, out.stderr
    assert "the script ran" not in out.stdout and "Traceback" not in out.stderr + out.stdout
    assert out.stderr.strip().splitlines() == [
        "fusionrt: the 'interpret' executor needs triton (pip install triton)",
        "UsageError: fusionrt: the 'triton' executor needs triton (pip install triton)"]
    assert out.stdout.strip().splitlines()[-1] == "exit 2 UsageError False"
