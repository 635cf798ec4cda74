"""``fusionrt compare``: a script as it is and as fusionlint's fixes rewrite it, side by side."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from fusionrt.cli import main

# Burn's clone pattern, in a function (names die at return, so the fix can move the later use);
# a helper module next to the script checks that sys.path and __file__ are the script's own.
BURN_SCRIPT = """\
import os
import torch
from burn_scale import scale


def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * scale
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


x, y = torch.randn(64, 32), torch.randn(64, 32)
out = block(x, y)
print(os.path.basename(__file__), "checksum", round(out.double().sum().item(), 3))
"""


def write_burn(tmp_path: Path) -> Path:
    (tmp_path / "burn_scale.py").write_text("scale = 2\n")
    script = tmp_path / "burn.py"
    script.write_text(BURN_SCRIPT)
    return script


def totals(out: str, row: str) -> tuple[int, int]:
    match = re.search(rf"^{row}\s+(\d+)\s+(\d+)\s", out, re.MULTILINE)
    assert match, out
    return int(match[1]), int(match[2])


def test_compare_burn_clone_pattern_in_a_subprocess(tmp_path):
    script = write_burn(tmp_path)
    fusionrt = Path(sys.executable).with_name("fusionrt")
    result = subprocess.run(
        [str(fusionrt), "compare", "--executor", "reference", "burn.py"], cwd=tmp_path,
        env={**os.environ, "CI": "1"}, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("burn.py checksum") == 1  # the original's output, shown once
    writes_before, writes_after = totals(out, "writes")
    assert writes_after < writes_before
    assert "outputs equal" in out and "Writes only in original (1)" in out
    assert script.read_text() == BURN_SCRIPT  # the file is not touched


def test_no_fix_runs_the_same_code_twice(tmp_path, capsys):
    script = tmp_path / "plain.py"
    script.write_text("import torch\nz = torch.relu(torch.randn(4, 4)) + 1\nprint(z.shape)\n")
    assert main(["compare", "--executor", "reference", str(script)]) == 0
    out = capsys.readouterr().out
    assert "has no fix" in out and "outputs equal" in out and totals(out, "writes")[0] == totals(out, "writes")[1]


def test_unseeded_random_inputs_are_the_same_in_both_runs(tmp_path, capsys):
    script = write_burn(tmp_path)  # torch.randn without a seed: compare restores the RNG state
    assert main(["compare", "--executor", "reference", str(script)]) == 0
    assert "OUTPUTS DIFFER" not in capsys.readouterr().out


def test_differing_outputs_are_shown(tmp_path, capsys):
    script = write_burn(tmp_path)
    # the fix adds a local variable (tmp): a script that prints its function's locals sees it
    script.write_text(BURN_SCRIPT + "print(block.__code__.co_varnames)\n")
    main(["compare", "--executor", "reference", str(script)])
    out = capsys.readouterr().out
    assert "OUTPUTS DIFFER" in out and "--- original output" in out


def test_exit_codes(tmp_path, capsys):
    raising = tmp_path / "raising.py"
    raising.write_text("import torch\nx = torch.ones(3) * 2\nraise ValueError('boom')\n")
    assert main(["compare", str(raising)]) == 1
    assert "ValueError: boom" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_details_list_each_write_only_one_run_has(tmp_path, capsys):
    script = write_burn(tmp_path)
    assert main(["compare", "--executor", "reference", str(script)]) == 0
    grouped = capsys.readouterr().out
    assert "Writes only in original (1) by source line and reason" in grouped and "(64, 32)" not in grouped
    assert main(["compare", "--executor", "reference", "--details", str(script)]) == 0
    listed = capsys.readouterr().out
    row = next(line for line in listed.splitlines() if "(64, 32)" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")][1:5] == ["(64, 32)", "float32", "8.00 KiB",
                                                                         "consumed-later"]
