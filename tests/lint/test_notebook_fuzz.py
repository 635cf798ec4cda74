"""A few hundred seeded random bad notebooks through ``fusionlint check``: never a traceback, an
exit code of 0, 1 or 2, no file written without ``--fix``, and with ``--fix --unsafe-fixes`` a
notebook changed only in its code cells' sources, still readable (and still valid nbformat).
And random cells of Python that looks like IPython, between real IPython lines: only the real
ones are masked."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from fusionlint.notebook import code_cells, read_notebook, unmask
from fusionlint.rules import all_rules
from fusionlint.sourcefile import SourceFileError

SEED = 20240611
COUNT = 300

IPYTHON_BITS = [
    "%time y = x * 2\n", "!ls -l\n", "files = !ls\n", "x?\n", "?x\n", "x.sum??\n", "%%time\n", "%%bash\n",
    "y = (x\n    != 2)\n", "z = (x\n    % 2)\n", "w = x \\\n    % 3\n", "s = '''\n%d\n!x\n?y\n'''\n",
    "for i in range(3):\n    !echo {i}\n", "if x:\n        a = 1\n    !ls\n", "    %time x\n",
]
BROKEN_BITS = ["def f(:\n", "(\n", ")\n", "'unterminated\n", '"""\n', "\\\n", "x = 1 $ 2\n", "\tx = 1\n  y = 2\n"]
ODD_TEXT = ["caf\u00e9 = '\u2028%d'\n", "t = 'a\x0c!b'\n", "\r\n", "x = 1\r", "\x00\n", "\ud800\n", "# \U0001f600\n"]


def fixable_snippets() -> list[str]:
    return [example.bad for rule in all_rules() for example in rule.examples if example.fixed is not None]


def random_json(rng: random.Random, depth: int = 0):
    kind = rng.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 4, 3.5, 1e308])
    if kind == 2:
        return rng.choice(["", "code", "markdown", "x = 1\n", "%%bash", "\u00e9"])
    if kind == 3:
        return rng.randrange(10)
    if kind in (4, 5):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["cells", "source", "cell_type", "metadata", "nbformat", "k"]): random_json(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def random_source(rng: random.Random, fixable: list[str]) -> str:
    pools = [fixable, IPYTHON_BITS, BROKEN_BITS, ODD_TEXT, ["import torch\n", "x = torch.ones(3)\n", "\n"]]
    parts = [rng.choice(rng.choice(pools)) for _ in range(rng.randrange(1, 6))]
    if rng.random() < 0.02:  # a huge cell
        parts.append("".join(f"v{i} = torch.ones(3) * {i}\n" for i in range(3000)))
    return "".join(parts)


def random_notebook(rng: random.Random, fixable: list[str]) -> dict:
    cells = []
    for _ in range(rng.randrange(6)):
        kind = rng.choice(["code", "code", "code", "markdown", "raw"])
        source = random_source(rng, fixable) if kind == "code" else "# notes\n"
        make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
                "raw": nbformat.v4.new_raw_cell}[kind]
        cells.append(make(source))
    language = rng.choice(["python", "python", "julia"])
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"language_info": {"name": language}})
    return json.loads(nbformat.writes(notebook))


def mangle(rng: random.Random, notebook: dict) -> dict | list:
    """Valid JSON of another shape: a key gone or replaced, a cell or a source of the wrong kind."""
    choice = rng.randrange(7)
    if choice == 0:
        notebook.pop(rng.choice(["cells", "metadata", "nbformat"]), None)
    elif choice == 1:
        notebook[rng.choice(["cells", "metadata", "nbformat"])] = random_json(rng)
    elif choice == 2 and notebook["cells"]:
        notebook["cells"][rng.randrange(len(notebook["cells"]))] = random_json(rng)
    elif choice == 3 and notebook["cells"]:
        cell = rng.choice(notebook["cells"])
        cell[rng.choice(["source", "cell_type", "metadata", "outputs"])] = random_json(rng)
    elif choice == 4:
        notebook["cells"] = [{"cell_type": "code", "source": ["x = 1\n", random_json(rng)]}]
    elif choice == 5:
        return {"nbformat": 3, "worksheets": [{"cells": notebook["cells"]}]}
    else:
        return random_json(rng)
    return notebook


def serialize(rng: random.Random, data) -> str:
    text = json.dumps(data, indent=rng.choice([None, 1, 2]), ensure_ascii=rng.random() < 0.5)
    return text.replace("\n", "\r\n") if rng.random() < 0.2 else text + "\n"


def encode(text: str, encoding: str = "utf-8") -> bytes:
    """A lone surrogate stays in: escaped in ASCII JSON, else it makes the file invalid UTF-8."""
    return text.encode(encoding, "surrogatepass")


def random_file(rng: random.Random, fixable: list[str]) -> bytes:
    roll = rng.random()
    notebook = random_notebook(rng, fixable)
    text = serialize(rng, notebook)
    if roll < 0.45:  # a notebook, its cells full of IPython syntax, broken code and odd text
        return encode(text)
    if roll < 0.7:
        return encode(serialize(rng, mangle(rng, notebook)))
    if roll < 0.8:  # truncated
        return encode(text[: rng.randrange(max(1, len(text)))])
    if roll < 0.9:  # bad encodings
        return rng.choice([
            encode(text).replace(b"cells", "c\u00e9lls".encode("latin-1")),
            b"\xef\xbb\xbf" + encode(text),
            encode(text, "utf-16"),
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))),
            encode(text)[: rng.randrange(1, len(text))] + b"\xc3",
        ])
    # deep nesting; not near the recursion limit, where whether it reads depends on the reader's stack
    depth = rng.choice([10, 500, 800, 5000])
    notebook["metadata"]["deep"] = "DEEP"
    return encode(json.dumps(notebook).replace('"DEEP"', "[" * depth + "]" * depth))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(SEED)
    fixable = fixable_snippets()
    folder = tmp_path_factory.mktemp("fuzz")
    for index in range(COUNT):
        (folder / f"nb{index:03}.ipynb").write_bytes(random_file(rng, fixable))
    return folder


def check(folder, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "fusionlint", "check", "--no-cache", "--output-format", "json", *flags, "."]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)


def no_crash(result: subprocess.CompletedProcess) -> bool:
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown and "internal error" not in shown, result.stderr[-3000:]
    return result.returncode in (0, 1, 2)


def snapshot(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.ipynb"))}


def readable(data: bytes) -> dict | None:
    try:
        return read_notebook(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, SourceFileError):
        return None


def valid_nbformat(data: bytes) -> bool:
    try:
        nbformat.validate(nbformat.reads(data.decode("utf-8-sig"), as_version=nbformat.NO_CONVERT))
    except Exception:  # noqa: BLE001 - any failure means: not valid
        return False
    return True


def without_code_sources(notebook: dict) -> dict:
    cells = [{k: v for k, v in cell.items() if not (k == "source" and cell["cell_type"] == "code")}
             for cell in notebook["cells"]]
    return {**notebook, "cells": cells}


def test_random_bad_notebooks_never_crash_the_checker(corpus, tmp_path):
    before = snapshot(corpus)
    kinds = {"readable": sum(readable(data) is not None for data in before.values())}
    assert 100 < kinds["readable"] < COUNT - 50  # the corpus really mixes good and bad notebooks

    start = time.perf_counter()
    result = check(corpus)
    assert no_crash(result)
    assert snapshot(corpus) == before  # nothing written without --fix
    rows = json.loads(result.stdout)
    unreadable = {row["path"] for row in rows if row["code"] == "FL998"}
    assert unreadable == {name for name, data in before.items() if readable(data) is None}

    fixed_folder = tmp_path / "fixed"
    shutil.copytree(corpus, fixed_folder)
    result = check(fixed_folder, "--fix", "--unsafe-fixes")
    assert time.perf_counter() - start < 20
    assert no_crash(result)
    after = snapshot(fixed_folder)
    changed = [name for name in before if after[name] != before[name]]
    assert changed  # the fixable snippets were fixed somewhere
    for name in changed:
        old, new = readable(before[name]), readable(after[name])
        assert old is not None and new is not None, name
        assert without_code_sources(new) == without_code_sources(old), name  # only code cells' sources
        assert valid_nbformat(after[name]) or not valid_nbformat(before[name]), name


PYTHON_LIKE_IPYTHON = [
    "y = (x\n    != 2)\n", "z = (x\n    % 2)\n", "w = x \\\n    % 3\n", "s = \'\'\'\n%d\n!x\n?y\n\'\'\'\n",
    "t = [x,\n     # %not a magic\n     x != 1]\n", "u = f(x\n      %\n      2)\n", "v = 'a\u2028%d'\n",
    "if x:\n    q = (x\n         % 2)\n", "g = lambda a: (a\n    != 2)\n", "\n",
]
IPYTHON_LINES = [
    "%time y = x * 2\n", "!ls -l\n", "files = !ls\n", "x?\n", "?x\n", "x.sum??\n", "%load_ext fusionlint\n",
]


def test_only_real_ipython_lines_are_masked():
    rng = random.Random(SEED)
    for _ in range(500):
        parts = [rng.choice(rng.choice([PYTHON_LIKE_IPYTHON, IPYTHON_LINES])) for _ in range(rng.randrange(1, 12))]
        source = rng.choice(["", "%%time\n", "\n%%fuse --compare\n"]) + "".join(parts)
        (cell,) = code_cells({"cells": [{"cell_type": "code", "source": source}]})
        expected = [line.rstrip("\n") for line in parts if line in IPYTHON_LINES]
        assert [m for m in cell.masked if not m.startswith("%%")] == expected, source
        compile(cell.text, "cell", "exec")
        assert unmask(cell, cell.text) == source
