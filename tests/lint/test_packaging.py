"""The package as users install it: one repository URL everywhere, a pre-commit `rev` that exists,
a torch source the Makefile lets them choose, and the linter-only install (no torch) naming the
runtime extra instead of failing with a traceback."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fusionlint

ROOT = Path(__file__).resolve().parents[2]
MISSING_RUNTIME = "fusionrt needs the runtime extra: pip install 'fusionlint[rt]'"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_repository_url_is_the_canonical_one():
    urls = _pyproject()["project"]["urls"]
    assert urls["Source"] == fusionlint.REPOSITORY_URL
    assert all(url.startswith(fusionlint.REPOSITORY_URL) for url in urls.values())
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".pre-commit-hooks.yaml",
             *sorted((ROOT / "docs").glob("*.md"))]
    named = {(path.name, url) for path in files
             for url in re.findall(r"https?://[^\s)\"'`>]*fusionlint[^\s)\"'`>]*", path.read_text())}
    assert named, "no file names the repository"
    assert {(name, url) for name, url in named if not url.startswith(fusionlint.REPOSITORY_URL)} == set()


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_pre_commit_snippets_name_this_repository_at_a_rev_that_exists(doc):
    text = (ROOT / doc).read_text()
    repos = re.findall(r"-\s*repo:\s*(\S+)\s*\n\s*rev:\s*(\S+)", text)
    assert repos, f"no pre-commit snippet in {doc}"
    tags = subprocess.run(["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    for repo, rev in repos:
        assert repo == fusionlint.REPOSITORY_URL
        assert rev == "main" or rev in tags or re.fullmatch(r"[0-9a-f]{40}", rev), (doc, rev)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_makefile_takes_the_torch_source_from_a_variable(tmp_path):
    """The torch line installs what TORCH_CPU names; the model library keeps that torch (its own
    line pins the installed version instead of repeating TORCH_CPU, whose --index-url would hide
    PyPI from it)."""
    index = "torch --index-url https://download.pytorch.org/whl/cpu"
    dry = subprocess.run(["make", "-n", "setup", f"VENV={tmp_path / 'venv'}", f"TORCH_CPU={index}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    py = f"{tmp_path / 'venv'}/bin/python"
    assert f"{py} -m pip install -q {index}" in dry
    [zoo] = [line for line in dry if "transformers" in line]
    assert "--index-url" not in zoo and "torch==$(" in zoo


@pytest.mark.slow
def test_linter_only_install_names_the_runtime_extra(tmp_path):
    """A real venv with the package and its own dependencies only (no torch): the linter works,
    the runtime's entry points name the extra, without a traceback (about 13 s)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    for args in (["--no-deps", "-e", str(ROOT)], _pyproject()["project"]["dependencies"]):
        installed = subprocess.run([*pip, *args], capture_output=True, text=True, timeout=300)
        if installed.returncode:
            pytest.skip(f"cannot install into a new venv here: {installed.stderr.strip().splitlines()[-1:]}")
    bin_dir = venv / "bin"
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode == 1
    for args in (["run", str(ROOT / "examples" / "fl002_clone_before_compute.py")], ["--version"]):
        result = subprocess.run([str(bin_dir / "fusionrt"), *args], capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", MISSING_RUNTIME + "\n")
    for code, what in (("import fusionlint; fusionlint.load_ipython_extension(None)", "%%fuse"),
                       ("import fusionrt", "fusionrt")):
        result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
        assert result.stderr.splitlines()[-1] == (
            f"fusionlint.runtime_extra.MissingRuntime: {what} needs the runtime extra: pip install 'fusionlint[rt]'")
    result = subprocess.run([str(bin_dir / "fusionlint"), "check", "--no-cache", "--output-format", "concise",
                             str(ROOT / "examples" / "fl002_clone_before_compute.py")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "FL002" in result.stdout, result.stderr


def test_load_ext_without_torch_names_the_extra(tmp_path):
    """Through IPython's own %load_ext, in this environment with torch made unimportable."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None  # import torch fails\n")
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "try:\n"
        "    shell.run_line_magic('load_ext', 'fusionlint')\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(blocker)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "MissingRuntime %%fuse needs the runtime extra: pip install 'fusionlint[rt]'\n"
