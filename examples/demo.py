"""`make demo`: lint examples/, measure every example before and after, print one table.

Each example script's pattern and its better program run under fusionrt (``showcase``); the
notebooks measure the same blocks through ``%%fuse --compare``. ``--update`` also executes the
notebooks and rewrites the committed numbers (``numbers.json``) and the table in ``README.md``,
which tests/examples/ checks against fresh runs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # `showcase`, as the example scripts import it

from showcase import measure_example  # noqa: E402

from fusionrt.cli import print_rendered  # noqa: E402
from fusionrt.report import human_bytes  # noqa: E402

NUMBERS = HERE / "numbers.json"
README = HERE / "README.md"
TABLE_START, TABLE_END = "<!-- numbers: start (python examples/demo.py --update) -->", "<!-- numbers: end -->"
HELPERS = {"demo.py", "showcase.py"}
# A cell the notebook test and --update append: it prints what `%%fuse --compare -o comparison` measured.
NUMBERS_CELL = "import json\nfrom showcase import numbers_of\nprint(json.dumps(numbers_of(comparison)))"


def scripts() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name not in HELPERS)


def notebooks() -> list[Path]:
    return sorted(HERE.glob("*.ipynb"))


def script_numbers(path: Path) -> dict[str, Any]:
    return measure_example(path).numbers()


def notebook_numbers(path: Path) -> dict[str, Any]:
    """Execute the notebook in a real Jupyter kernel (in examples/) and read its comparison's numbers.

    Every example notebook leaves its ``%%fuse --compare -o comparison`` result in ``comparison``.
    """
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(NUMBERS_CELL))
    client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(HERE)}})
    client.execute()
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs if o.output_type == "stream")
    return json.loads(printed)


def load_numbers() -> dict[str, dict[str, Any]]:
    return json.loads(NUMBERS.read_text(encoding="utf-8"))


def markdown_table(numbers: dict[str, dict[str, Any]]) -> str:
    """The README's table: one row per example file, before -> after."""
    rows = ["| example | rules found | kernels | writes | bytes written | results equal |",
            "|---|---|---|---|---|---|"]
    for name, n in numbers.items():
        b, a = n["before"], n["after"]
        rules = ", ".join(n["rules"]) if "rules" in n else "–"  # a notebook shows its findings in the cell
        rows.append(f"| [{name}]({name}) | {rules} | {b['kernels']} → {a['kernels']} "
                    f"| {b['writes']} → {a['writes']} | {b['bytes_written']:,} → {a['bytes_written']:,} "
                    f"| {'yes' if n['results_equal'] else 'NO'} |")
    return "\n".join(rows) + "\n"


def readme_table(text: str) -> str:
    """The table between the markers in examples/README.md."""
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[start:end].strip("\n") + "\n"


def _update(numbers: dict[str, dict[str, Any]]) -> None:
    NUMBERS.write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")
    text = README.read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    README.write_text(text[:start] + "\n" + markdown_table(numbers) + text[end:], encoding="utf-8")


def _table(numbers: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="fusionrt: each example's pattern -> fusionlint's fix (or the rewrite by hand)")
    for column in ("example", "rules found", "kernels", "writes", "bytes written", "results equal"):
        table.add_column(column, justify="left" if column in ("example", "rules found") else "right")
    for name, n in numbers.items():
        b, a = n["before"], n["after"]
        table.add_row(name, ", ".join(n.get("rules", ())), f"{b['kernels']} -> {a['kernels']}",
                      f"{b['writes']} -> {a['writes']}",
                      f"{human_bytes(b['bytes_written'])} -> {human_bytes(a['bytes_written'])}",
                      "yes" if n["results_equal"] else "NO")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true",
                        help="also execute the notebooks; rewrite numbers.json and the table in README.md")
    options = parser.parse_args(argv)
    print(f"$ fusionlint check {HERE.name}/", flush=True)
    subprocess.run([sys.executable, "-m", "fusionlint", "check", "--output-format", "concise", HERE.name],
                   cwd=HERE.parent, check=False)
    numbers = {path.name: script_numbers(path) for path in scripts()}
    if options.update:
        numbers |= {path.name: notebook_numbers(path) for path in notebooks()}
        numbers = dict(sorted(numbers.items()))
        _update(numbers)
    print()
    print_rendered(_table(numbers))
    print(f"\nOne example in full (findings, the fix, both reports): python {HERE.name}/<example>.py")
    return 0 if all(n["results_equal"] for n in numbers.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
