"""``fusionlint check --fix --verify``: a fix is applied only once running it proved it.

Real libcst, real torch, real fusionrt: every verification starts Python processes that import
torch (~2 s each), so each test batches its functions into one file.
"""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from fusionlint.cli import main  # noqa: E402
from fusionlint.output import format_json, write_text  # noqa: E402
from fusionlint.check import FileOutcome  # noqa: E402
from fusionlint.model import Finding, FixSafety  # noqa: E402
from fusionlint.verify import changed_functions, verify_fix  # noqa: E402

# Two functions that FL001 and FL002 fix (unsafe fixes, each paying under fusionrt), and one
# that FL002 flags but that takes an int: no call with random tensors reaches it.
HEADER = "import torch\nimport torch.nn.functional as F\n"
MLP = '''

def mlp_out(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x).flatten(0, 1)
    return h + bias
'''
BLOCK = '''

class Block(torch.nn.Module):
    def forward(self, x, y):
        a = x * 2
        b = y + 1
        t3 = a.clone().sum(-1, keepdim=True)
        out = t3 + a * b
        return out
'''
SCALE = '''

def scale(x: torch.Tensor, k: int) -> torch.Tensor:
    a = x * k
    b = x + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b
'''


def check(*args: str) -> tuple[int, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT")}
    done = subprocess.run([sys.executable, "-m", "fusionlint", "check", "--no-cache", *args],
                          capture_output=True, text=True, env=env)
    return done.returncode, done.stdout + done.stderr


def test_proven_fixes_are_applied_as_plain_fix_applies_them(tmp_path):
    source = HEADER + MLP + BLOCK
    verified, plain = tmp_path / "verified.py", tmp_path / "plain.py"
    verified.write_text(source)
    plain.write_text(source)
    assert check("--fix", "--unsafe-fixes", str(plain))[0] == 0
    assert plain.read_text() != source
    status, out = check("--fix", "--unsafe-fixes", "--verify", str(verified))
    assert status == 0, out
    assert re.search(r"^Found \d+ errors \(\d+ fixed, 0 remaining\)\.$", out, re.MULTILINE), out
    assert re.search(r"^Verified: \d+ fixes proven and applied, 0 refused, 0 not run \(no harness\)\.$", out, re.MULTILINE)
    assert verified.read_text() == plain.read_text()


def test_a_fix_without_harness_is_left_unapplied_with_the_reason(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(HEADER + SCALE)
    status, out = check("--fix", "--unsafe-fixes", "--verify", "--output-format", "json", str(path))
    assert status == 1
    assert path.read_text() == HEADER + SCALE
    rows = json.loads(out)  # FL002's finding, and any other rule's on the same function
    assert "FL002" in {row["code"] for row in rows}
    assert {(row["verified"], row["verification"]) for row in rows} == {
        (None, "parameter 'k' is required and not known to be a tensor")
    }
    status, out = check("--diff", "--unsafe-fixes", "--verify", str(path))
    assert (status, out) == (0, "No fixes to apply.\n")  # the diff of the proven fixes: none


def test_a_notebook_keeps_its_fixes_unapplied(tmp_path):
    cells = [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
              "source": (HEADER + SCALE.replace("k: int", "k: torch.Tensor")).splitlines(keepends=True)}]
    notebook = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook)
    status, out = check("--fix", "--unsafe-fixes", "--verify", "--output-format", "json", str(path))
    assert status == 1 and path.read_text() == notebook
    rows = json.loads(out)
    assert "FL002" in {row["code"] for row in rows}
    assert {(row["cell"], row["verified"], row["verification"]) for row in rows} == {
        (1, None, "fixes in notebooks are not verified")
    }


def test_verify_needs_fix_or_diff(tmp_path, capsys):
    (tmp_path / "m.py").write_text(HEADER + MLP)
    assert main(["check", "--verify", str(tmp_path / "m.py")]) == 2
    assert "give --fix (or --diff) with it" in capsys.readouterr().err


# A hand-made "fix" of each kind the verifier must tell apart. `wrong` moves `y = x * 2` past an
# in-place update of `x` through a view: same ops, different result.
ORIGINAL = '''import torch
from torch import Tensor


def good(x: Tensor) -> Tensor:
    h = (x * 2).flatten(0, 1)
    return h + 1


def wrong(x: Tensor) -> Tensor:
    y = x * 2
    x.view(-1).add_(1)
    return y + x


def same_cost(x: Tensor, y: Tensor) -> Tensor:
    return x * y + 1
'''
FIXED = '''import torch
from torch import Tensor


def good(x: Tensor) -> Tensor:
    h = x.flatten(0, 1) * 2
    return h + 1


def wrong(x: Tensor) -> Tensor:
    x.view(-1).add_(1)
    y = x * 2
    return y + x


def same_cost(x: Tensor, y: Tensor) -> Tensor:
    return y * x + 1
'''


def test_only_the_changes_proven_equal_and_cheaper_are_kept(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(ORIGINAL)
    assert changed_functions(ORIGINAL, FIXED) == ["good", "wrong", "same_cost"]
    result = verify_fix(ORIGINAL, FIXED, path)
    good, wrong, same = (result.verdicts[name] for name in ("good", "wrong", "same_cost"))
    assert wrong.verified is False and wrong.equal is False and wrong.reason.startswith("results differ")
    assert same.verified is False and same.equal is True and same.reason.startswith("not cheaper under fusionrt")
    assert good.verified is True and "writes 2 -> 1" in good.reason, good.reason
    expected = ORIGINAL.replace("    h = (x * 2).flatten(0, 1)\n", "    h = x.flatten(0, 1) * 2\n")
    assert result.text == expected
    assert path.read_text() == ORIGINAL  # verifying writes nothing


def test_a_function_past_its_time_is_refused(tmp_path):
    original = "import torch\n\n\ndef spin(x: torch.Tensor) -> torch.Tensor:\n    while True:\n        x = x + 1\n"
    fixed = original.replace("x + 1", "1 + x")
    result = verify_fix(original, fixed, tmp_path / "m.py", timeout=1.0)
    assert result.text is None
    assert result.verdicts["spin"].verified is False
    assert "ran past 1 s" in result.verdicts["spin"].reason


def test_a_module_that_cannot_be_imported_proves_nothing(tmp_path):
    original = "import torch\nimport no_such_module_anywhere\n\n\ndef f(x: torch.Tensor):\n    return x * 2\n"
    result = verify_fix(original, original.replace("x * 2", "2 * x"), tmp_path / "m.py")
    assert result.text is None
    assert result.verdicts["f"].verified is False
    assert "ModuleNotFoundError: No module named 'no_such_module_anywhere'" in result.verdicts["f"].reason


def test_an_interrupted_verification_leaves_the_file_intact(tmp_path):
    path = tmp_path / "m.py"
    source = "import time\n" + HEADER + MLP.replace("    h = ", "    time.sleep(600)\n    h = ")
    path.write_text(source)
    process = subprocess.Popen(
        [sys.executable, "-m", "fusionlint", "check", "--no-cache", "--fix", "--unsafe-fixes", "--verify", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not _runner_started(process.pid):
        assert time.monotonic() < deadline and process.poll() is None, "the verifier never started"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    assert process.wait(timeout=30) == 130
    assert path.read_text() == source


def _runner_started(parent: int) -> bool:
    for cmdline in Path("/proc").glob("*/cmdline"):
        try:
            ours = Path(cmdline.parent, "stat").read_text().rsplit(")", 1)[1].split()[1] == str(parent)
            if ours and b"fusionlint.verify.runner" in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def test_json_and_text_say_why_a_fix_was_refused():
    refused = Finding("FL003", "m", 2, 5, 2, 9, FixSafety.UNSAFE, verified=False, verification="results differ: x")
    plain = Finding("FL004", "n", 3, 1, 3, 2)
    outcome = FileOutcome(path=Path("m.py"), source=None, findings=(refused, plain))
    rows = json.loads(format_json([outcome]))
    assert rows[0]["verified"] is False and rows[0]["verification"] == "results differ: x"
    assert "verified" not in rows[1]  # not tried: absent, as without --verify
    text = io.StringIO()
    write_text([outcome], text, unsafe_hint=True, show_source=False)
    assert text.getvalue().splitlines() == [
        "m.py:2:5: FL003 [*] m (fix refused: results differ: x)",
        "m.py:3:1: FL004 n",
    ]
