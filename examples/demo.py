"""`make demo`: lint the bundled examples, then measure each one under fusionrt before and after
fusionlint's fix, so the saving is shown, not claimed."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

import fusionrt
from fusionlint.engine import lint_source
from fusionlint.model import FixMode, LintOptions
from fusionlint.rules import all_rules

HERE = Path(__file__).resolve().parent
EXAMPLES = {
    "clone_before_reduction.py": lambda: (torch.randn(512, 256), torch.randn(512, 256)),
    "unsqueeze_matmul.py": lambda: (torch.randn(64, 64), torch.randn(4, 64, 64), torch.randn(64, 64)),
}


def load_block(source: str, name: str) -> types.FunctionType:
    """The example's `block` function, compiled from `source` (the file or its fixed text)."""
    module = types.ModuleType(name)
    module.__file__ = str(HERE / name)
    exec(compile(source, str(HERE / name), "exec"), module.__dict__)
    return module.block


def main() -> int:
    console = Console()
    console.rule("fusionlint check examples/")
    subprocess.run([sys.executable, "-m", "fusionlint", "check", HERE.name], cwd=HERE.parent, check=False)

    options = LintOptions(codes=frozenset(r.code for r in all_rules()), fix=FixMode.UNSAFE)
    table = Table(title="fusionrt: before and after fusionlint --fix (reference executor, CPU)")
    for column in ("example", "kernels", "writes", "bytes written", "results equal"):
        table.add_column(column, justify="right" if column != "example" else "left")
    for name, make_inputs in EXAMPLES.items():
        source = (HERE / name).read_text()
        fixed = lint_source(source, str(HERE / name), options).source or source
        torch.manual_seed(0)
        inputs = make_inputs()
        before, report_before = fusionrt.measure(load_block(source, name), *inputs)
        after, report_after = fusionrt.measure(load_block(fixed, name), *inputs)
        console.rule(f"{name}")
        console.print(fusionrt.compare(report_before, report_after))
        equal = torch.allclose(before, after, rtol=1e-5, atol=1e-5)
        table.add_row(name,
                      f"{report_before.kernels} → {report_after.kernels}",
                      f"{report_before.writes} → {report_after.writes}",
                      f"{report_before.bytes_written:,} → {report_after.bytes_written:,}",
                      "yes" if equal else "NO")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
