"""Random bad files never crash ``fusionlint check`` nor make it write what it should not.

A seeded generator writes a few hundred files into one folder (random bytes, truncated and
mutated rule examples, NUL bytes, BOMs and encoding cookies, deep nesting, huge lines, CR and
CRLF line endings, random unicode); the command then runs over the folder as the user runs it.
``FUSIONLINT_FUZZ_SEED`` picks another seed to explore.
"""
from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fusionlint.rules import all_rules

SEED = int(os.environ.get("FUSIONLINT_FUZZ_SEED", "20250101"))
CASES = 300
EXAMPLES = [example.bad for rule in all_rules() for example in rule.examples]
ODD_CHARACTERS = "\u00e9\u4e2d\U0001f600\u200b\u200f\ufeff\u2028\x0c\t\\'\"#()[]{}:"


def mutated(rng: random.Random) -> str:
    """A rule example with lines dropped, repeated, re-indented or swapped: near-valid torch code."""
    lines = rng.choice(EXAMPLES).splitlines(keepends=True)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        action = rng.randrange(4)
        if action == 0:
            del lines[i]
        elif action == 1:
            lines.insert(i, lines[i])
        elif action == 2:
            lines[i] = " " * rng.choice((1, 4, 8)) + lines[i]
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        if not lines:
            return ""
    return "".join(lines)


def deep(rng: random.Random) -> str:
    depth = rng.randint(50, 250)
    expression = rng.choice(
        [
            "x" + ".relu()" * depth,
            "(" * depth + "x" + ")" * depth,
            " + ".join(["x"] * depth * 3),
            "-" * depth + "x",
            "torch.relu(" * depth + "x" + ")" * depth,
            "[" * depth + "]" * depth,
        ]
    )
    finding = rng.choice(["    h = F.gelu(x).flatten(0, 1)\n", "    h = x\n"])  # FL001, or nothing to fix
    body = f"    y = {expression}\n{finding}    return h + y\n"
    if rng.random() < 0.3:  # statements nested deeply too
        levels = rng.randint(20, 110)
        body = "".join("    " * (i + 1) + "if x:\n" for i in range(levels)) + "    " * (levels + 1) + "y = x.relu()\n"
    return f"import torch\nimport torch.nn.functional as F\n\ndef f(x: torch.Tensor):\n{body}"


def case(rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(
        ["bytes", "truncated", "nul", "encoding", "deep", "huge", "newlines", "unicode", "mutated", "mutated"]
    )
    example = rng.choice(EXAMPLES)
    if kind == "bytes":
        data = rng.randbytes(rng.randint(0, 2000))
    elif kind == "truncated":
        raw = example.encode()
        data = raw[: rng.randint(0, len(raw))]
    elif kind == "nul":
        raw = bytearray(example.encode())
        for _ in range(rng.randint(1, 3)):
            raw.insert(rng.randint(0, len(raw)), 0)
        data = bytes(raw)
    elif kind == "encoding":
        data = rng.choice(
            [
                b"\xef\xbb\xbf" + example.encode(),
                b"\xef\xbb\xbf# coding: latin-1\n" + example.encode(),
                b"# -*- coding: latin-1 -*-\n" + example.replace("h", "\u00e9h").encode("latin-1"),
                b"# coding: klingon\n" + example.encode(),
                example.encode("utf-16"),
                example.replace("x", "\u00e9", 1).encode("latin-1"),
                b"# coding: utf-8\n" + example.encode() + "\u00e9".encode("cp1252"),
            ]
        )
    elif kind == "deep":
        data = deep(rng).encode()
    elif kind == "huge":
        line = rng.choice(["x = " + " + ".join(["1"] * 20_000), "s = '" + "a" * 200_000 + "'", "# " + "z" * 200_000])
        data = (example + line + "\n").encode()
    elif kind == "newlines":
        data = example.replace("\n", rng.choice(["\r", "\r\n", "\n\r", "\r\r\n"])).encode()
    elif kind == "unicode":
        text = list(example)
        for _ in range(rng.randint(1, 6)):
            text.insert(rng.randint(0, len(text)), rng.choice(ODD_CHARACTERS + chr(rng.randint(0x80, 0x10FFFF))))
        data = "".join(text).encode("utf-8", errors="surrogatepass")
    else:
        data = mutated(rng).encode()
    return kind, data


def fusionlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT", "FUSIONLINT_DEBUG")}
    command = [sys.executable, "-m", "fusionlint", "check", "--output-format", "json", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in folder.glob("case*")}


def parses(data: bytes) -> bool:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def assert_sane(done: subprocess.CompletedProcess) -> None:
    """No traceback and no internal error (exit 2): bad input is a finding (FL998, FL999), never a crash."""
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr


@pytest.mark.slow
def test_random_bad_files(tmp_path):
    rng = random.Random(SEED)
    for index in range(CASES):
        kind, data = case(rng)
        (tmp_path / f"case{index:03}_{kind}{rng.choice(['.py', '.py', '.pyi'])}").write_bytes(data)
    before = snapshot(tmp_path)

    checked = fusionlint(cwd=tmp_path)
    assert_sane(checked)
    rows = json.loads(checked.stdout)
    assert {row["path"] for row in rows if row["code"] in ("FL998", "FL999")}  # the generator does make bad files
    assert {row["code"] for row in rows} - {"FL998", "FL999"}  # and files with real findings
    assert snapshot(tmp_path) == before  # nothing written without --fix
    warm = fusionlint(cwd=tmp_path)
    assert (warm.returncode, warm.stdout) == (checked.returncode, checked.stdout)  # the cache answers the same

    fixed = fusionlint("--fix", "--unsafe-fixes", cwd=tmp_path)
    assert_sane(fixed)
    after = snapshot(tmp_path)
    changed = [name for name in before if after[name][0] != before[name][0]]
    assert changed  # some mutated examples are still fixable
    for name in changed:
        assert parses(before[name][0]) and parses(after[name][0]), name

    again = fusionlint("--fix", "--unsafe-fixes", cwd=tmp_path)
    assert_sane(again)
    assert snapshot(tmp_path) == after  # a fixed tree is a fixpoint
