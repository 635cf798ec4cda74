"""Warm runs: the cache answers without the engine, and never hides a change; the process pool."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from fusionlint import check
from fusionlint.cli import main
from fusionlint.model import FixSafety
from fusionlint.rules import all_rules

FIXABLE = [(r, e) for r in all_rules() for e in r.examples if e.fixed is not None]


@pytest.fixture
def example():
    if not FIXABLE:
        pytest.skip("no rule with a fixable example")
    return FIXABLE[0]


def imports_of(*args: str, cwd) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "PRE_COMMIT")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fusionlint", *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, modules


def test_a_warm_run_reports_the_same_without_importing_the_engine(tmp_path, example):
    rule, sample = example
    for index in range(3):
        (tmp_path / f"m{index}.py").write_text(sample.bad)
    (tmp_path / "broken.py").write_text("import torch\nx = (\n")
    cold, cold_modules = imports_of("check", "--output-format", "json", cwd=tmp_path)
    assert cold.returncode == 1 and "libcst" in cold_modules
    assert "torch" not in cold_modules  # the linter never imports what it lints
    warm, warm_modules = imports_of("check", "--output-format", "json", cwd=tmp_path)
    assert warm.returncode == 1
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert not {"libcst", "torch", "fusionlint.engine", "fusionlint.rules", "rich"} & warm_modules
    assert (tmp_path / ".fusionlint_cache" / "findings.json").is_file()


def test_changes_to_a_file_or_the_selection_are_never_answered_from_the_cache(tmp_path, capsys, monkeypatch, example):
    rule, sample = example
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "m.py"
    path.write_text(sample.bad)
    assert main(["check", "-q"]) == 1
    assert main(["check", "-q", "--ignore", rule.code]) == 0
    path.write_text(sample.fixed)
    assert main(["check", "-q"]) == 0
    path.write_text(sample.bad)
    assert main(["check", "-q"]) == 1
    capsys.readouterr()


def test_fix_still_fixes_a_file_whose_findings_are_cached(tmp_path, capsys, monkeypatch, example):
    rule, sample = example
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(sample.bad)
    assert main(["check"]) == 1
    flags = ["--fix", "--unsafe-fixes"] if rule.fix_safety is FixSafety.UNSAFE else ["--fix"]
    assert main(["check", *flags]) == 0
    assert (tmp_path / "m.py").read_text() == sample.fixed
    capsys.readouterr()


def test_no_cache_leaves_no_trace(tmp_path, capsys, monkeypatch, example):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(example[1].bad)
    assert main(["check", "--no-cache", "-q"]) == 1
    assert not (tmp_path / ".fusionlint_cache").exists()
    capsys.readouterr()


def test_the_cache_lives_next_to_the_config(tmp_path, capsys, monkeypatch, example):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.fusionlint]\n")
    (project / "src" / "m.py").write_text(example[1].bad)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "-q", "project/src"]) == 1
    assert (project / ".fusionlint_cache").is_dir() and not (tmp_path / ".fusionlint_cache").exists()
    capsys.readouterr()


def test_the_process_pool_gives_what_one_process_gives(tmp_path, capsys, monkeypatch, example):
    rule, sample = example
    monkeypatch.chdir(tmp_path)
    files = 2 * check.POOL_THRESHOLD
    for index in range(files):
        (tmp_path / f"m{index:02}.py").write_text(sample.bad if index % 2 else sample.fixed)
    (tmp_path / "broken.py").write_text("def f(:\n")
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    pooled = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(check, "POOL_THRESHOLD", 10**6)
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == pooled
    assert len(pooled) == files // 2 * len(sample.at) + 1


@pytest.mark.parametrize("pooled", [True, False])
def test_a_run_leaves_the_garbage_collector_as_it_found_it(tmp_path, capsys, monkeypatch, example, pooled):
    """The engine's objects are frozen while files are linted, then thawed."""
    monkeypatch.chdir(tmp_path)
    files = 2 * check.POOL_THRESHOLD
    if not pooled:
        monkeypatch.setattr(check, "POOL_THRESHOLD", 10**6)
    for index in range(files):
        (tmp_path / f"m{index:02}.py").write_text(example[1].bad)
    assert gc.get_freeze_count() == 0
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    assert len(json.loads(capsys.readouterr().out)) == files * len(example[1].at)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_pool_without_sched_getaffinity_or_fork(tmp_path, capsys, monkeypatch, example):
    """macOS and Windows have no ``os.sched_getaffinity``; Windows cannot fork."""
    import concurrent.futures
    import multiprocessing

    monkeypatch.chdir(tmp_path)
    for index in range(2 * check.POOL_THRESHOLD):
        (tmp_path / f"m{index:02}.py").write_text(example[1].bad)
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    expected = json.loads(capsys.readouterr().out)

    pools = []
    real_pool = concurrent.futures.ProcessPoolExecutor

    def pool(workers, **options):
        pools.append(workers)
        return real_pool(workers, **options)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", pool)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert check.usable_cpus() == 3
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == expected and pools == [3]

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert main(["check", "--no-cache", "--output-format", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == expected and pools == [3]  # linted in this process


def test_the_cache_folder_comes_from_the_flag_the_variable_or_the_config(tmp_path, capsys, monkeypatch, example):
    """``--cache-dir`` over ``$FUSIONLINT_CACHE_DIR`` over ``cache-dir`` (relative to its config's folder)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.fusionlint]\ncache-dir = 'caches/lint'\n")
    (project / "m.py").write_text(example[1].bad)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FUSIONLINT_CACHE_DIR", raising=False)

    def run(*args: str) -> set[str]:
        """Where the cache files are after a run (relative to tmp_path)."""
        assert main(["check", "-q", *args, "project"]) == 1
        capsys.readouterr()
        return {path.parent.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("findings.json")}

    assert run() == {"project/caches/lint"}
    assert (project / "caches" / "lint" / ".gitignore").is_file()
    monkeypatch.setenv("FUSIONLINT_CACHE_DIR", "from-env")  # relative to the current folder
    assert run() == {"project/caches/lint", "from-env"}
    assert run("--cache-dir", str(tmp_path / "from-flag")) == {"project/caches/lint", "from-env", "from-flag"}
    stored = json.loads((tmp_path / "from-flag" / "findings.json").read_text())
    assert len(stored["entries"]) == 1 and stored["tool"]
