"""How fast ``fusionlint check`` is on real code: the model folders ``[a-d]*`` of transformers 5.23.0.

Runs the installed ``fusionlint`` command as users do: cold (cache removed) and warm (nothing
changed), three times each, measuring wall time and CPU seconds of the command and its worker
processes (fusionlint's bytecode written first, as an install does); then one file of 50,000 lines (the corpus's modeling files end to end), for its time
and peak memory. CPU seconds are the figure to compare on a shared machine. Also times the fixed costs (interpreter + CLI startup, importing the engine) to show
where the time goes, counts findings per rule, and prints a sample of findings with their source
lines to check by eye that each points at its pattern. Writes ``bench/results/lint-speed.md``.

    .venv/bin/python bench/lint_speed.py      # or: make bench-lint
    .venv/bin/python bench/lint_speed.py --profile    # where a cold run's CPU seconds go
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / ".corpus" / "transformers-5.23.0"
WHEEL_VERSION = "5.23.0"
TARGETS = {"cold": 6.0, "warm": 0.3, "large file": 10.0}  # wall seconds, from issue 2
CPU_TARGETS = {"cold": 10.0}  # CPU seconds, children included
LARGE_FILE_LINES = 50_000
LARGE_FILE_MEMORY = 500  # MB, peak resident
RUNS = 3
RESULT = REPO / "bench" / "results" / "lint-speed.md"


def ensure_corpus() -> Path:
    """``transformers/models/[a-d]*`` under ``.corpus/``, unpacked on first use, with its config."""
    models = CORPUS / "transformers" / "models"
    if not models.is_dir():
        unpack_corpus()
    # A config of its own: the corpus's cache lives next to it, not in the repository's, and the
    # repository's .gitignore (which names .corpus/) does not hide the corpus from the check.
    (CORPUS / "pyproject.toml").write_text("[tool.fusionlint]\nrespect-gitignore = false\n")
    return models


def unpack_corpus() -> None:
    """Download the wheel and unpack ``transformers/models/[a-d]*`` into ``.corpus/``."""
    wheels = REPO / ".corpus" / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"transformers=={WHEEL_VERSION}", "-d", str(wheels)],
        check=True,
    )
    (wheel,) = wheels.glob(f"transformers-{WHEEL_VERSION}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if len(parts) > 3 and parts[:2] == ["transformers", "models"] and parts[2][:1] in "abcd":
                archive.extract(name, CORPUS)


def large_file(models: Path) -> Path:
    """The modeling files end to end until the text holds ``LARGE_FILE_LINES`` lines (those with a
    ``from __future__`` import are left out: it must come first in a file)."""
    path = CORPUS / f"large_{LARGE_FILE_LINES}.py"
    parts, lines = [], 0
    for module in sorted(models.glob("*/modeling_*.py")):
        text = module.read_text(encoding="utf-8")
        if lines >= LARGE_FILE_LINES:
            break
        if "from __future__" not in text:
            parts.append(text)
            lines += text.count("\n")
    text = "".join(parts)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def compile_bytecode() -> None:
    """Write fusionlint's bytecode, as installing a package does: run from a source tree where
    ``PYTHONDONTWRITEBYTECODE`` is set, every command would compile each module it imports again
    (a quarter of a CPU-second), which no installed copy does."""
    import compileall

    import fusionlint

    compileall.compile_dir(Path(fusionlint.__file__).parent, quiet=1)


def fusionlint_command() -> list[str]:
    script = Path(sys.executable).parent / "fusionlint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fusionlint"]


def timed(command: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system, children included), and the finished process."""
    wall, cpu, _, done = measured(command, cwd)
    return wall, cpu, done


def measured(command: list[str], cwd: Path) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """``timed``'s figures and the peak resident memory (MB) of the command or of its largest worker."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        done = subprocess.CompletedProcess(command, code, out.read().decode(), err.read().decode())
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--result", type=Path, default=RESULT, help=f"where the report goes (default: {RESULT})")
    parser.add_argument("--profile", action="store_true", help="profile the per-file work of a cold run instead")
    args = parser.parse_args()
    result = args.result
    models = ensure_corpus()
    if args.profile:
        profile(models)
        return 0
    compile_bytecode()
    load_before = os.getloadavg()[0]
    files = sorted(p for p in models.rglob("*") if p.suffix in (".py", ".pyi", ".ipynb"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    mention_torch = sum(b"torch" in p.read_bytes() for p in files)
    check = fusionlint_command() + ["check", "--output-format", "json", "transformers/models"]
    cache = CORPUS / ".fusionlint_cache"

    runs: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
    findings: list[dict] = []
    for _ in range(RUNS):
        shutil.rmtree(cache, ignore_errors=True)
        wall, cpu, done = timed(check, CORPUS)
        runs["cold"].append((wall, cpu))
        findings = json.loads(done.stdout)
        if done.stderr.strip():
            print(done.stderr, file=sys.stderr)
    for _ in range(RUNS):
        wall, cpu, done = timed(check, CORPUS)
        runs["warm"].append((wall, cpu))
        assert json.loads(done.stdout) == findings, "a warm run must report what the cold run did"

    large = large_file(models)
    large_lines = large.read_bytes().count(b"\n")
    large_check = fusionlint_command() + ["check", "--no-cache", "--output-format", "json", large.name]
    wall, cpu, memory, _ = measured(large_check, CORPUS)
    runs["large file"] = [(wall, cpu)]

    startup = min(timed(fusionlint_command() + ["--version"], CORPUS)[0] for _ in range(RUNS))
    engine_import = min(
        timed([sys.executable, "-c", "import fusionlint.engine, fusionlint.rules"], CORPUS)[0] for _ in range(RUNS)
    )
    no_files = min(timed(fusionlint_command() + ["check", "--no-cache", "--exit-zero", "pyproject.toml"], CORPUS)[0] for _ in range(RUNS))

    per_rule = collections.Counter(f["code"] for f in findings)
    random.seed(0)
    sample = random.sample(findings, min(12, len(findings)))
    report = render(
        files, lines, mention_torch, runs, (large_lines, memory), startup, engine_import, no_files, per_rule, sample,
        load_before,
    )
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(report)
    print(report)
    return 0 if all(verdicts(kind, values, memory)[1] for kind, values in runs.items()) else 1


def profile(models: Path) -> None:
    """The per-file work of a cold run, in this process as a pool worker does it, under cProfile:
    the CPU seconds, and the functions that take most of them."""
    import cProfile
    import gc
    import pstats

    from fusionlint.check import _lint_job
    from fusionlint.model import LintOptions
    from fusionlint.rules import all_rules

    options = LintOptions(codes=frozenset(rule.code for rule in all_rules()))
    jobs = [(path.read_text(encoding="utf-8"), str(path.relative_to(CORPUS)), options) for path in sorted(models.rglob("*.py"))]
    gc.freeze()  # as check_files does before forking its workers
    start = time.process_time()
    results = [_lint_job(job) for job in jobs]
    print(f"{len(jobs)} files, {sum(len(result.findings) for result, _ in results)} findings: {time.process_time() - start:.2f} CPU-s")
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [_lint_job(job) for job in jobs])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def verdicts(kind: str, values: list[tuple[float, float]], memory: float) -> tuple[str, bool]:
    """The targets of one kind of run, each with met/MISSED, and whether all were met (best of the runs)."""
    checks = [(f"< {TARGETS[kind]} s", min(wall for wall, _ in values) < TARGETS[kind])]
    if kind in CPU_TARGETS:
        checks.append((f"< {CPU_TARGETS[kind]} CPU s", min(cpu for _, cpu in values) < CPU_TARGETS[kind]))
    if kind == "large file":
        checks.append((f"< {LARGE_FILE_MEMORY} MB ({memory:.0f} MB)", memory < LARGE_FILE_MEMORY))
    text = "; ".join(f"{target}: {'met' if ok else 'MISSED'}" for target, ok in checks)
    return text, all(ok for _, ok in checks)


def render(files, lines, mention_torch, runs, large, startup, engine_import, no_files, per_rule, sample, load_before) -> str:
    cpu_model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor(),
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    out = [
        "# fusionlint check: speed on transformers/models/[a-d]*",
        "",
        f"- Date: {datetime.date.today().isoformat()}; commit {commit or 'unknown'}",
        f"- Machine: {cpu_model}, {len(os.sched_getaffinity(0))} cores usable, {platform.system()} {platform.release()};"
        f" load average {load_before:.1f} when the runs began, {os.getloadavg()[0]:.1f} when they ended (other work on the"
        " machine inflates wall times, and CPU seconds less so)",
        f"- Python {platform.python_version()}, libcst {metadata.version('libcst')}, fusionlint {metadata.version('fusionlint')}",
        f"- Corpus: transformers {WHEEL_VERSION} wheel, {len(files)} files, {lines:,} lines, {mention_torch} mention torch",
        "- Command: `fusionlint check --output-format json transformers/models` (default config: every rule)",
        "",
        "| run | wall s | CPU s, children included | target |",
        "|---|---|---|---|",
    ]
    large_lines, memory = large
    what = {"cold": "cold (cache removed)", "warm": "warm (cache kept)", "large file": f"one file of {large_lines:,} lines"}
    for kind, values in runs.items():
        walls = ", ".join(f"{wall:.2f}" for wall, _ in values)
        cpus = ", ".join(f"{cpu:.2f}" for _, cpu in values)
        out.append(f"| {what[kind]} | {walls} | {cpus} | {verdicts(kind, values, memory)[0]} |")
    out += [
        "",
        "Where the time goes (best of 3, wall seconds):",
        "",
        f"- interpreter + CLI start (`fusionlint --version`): {startup:.3f}",
        f"- a check with no Python file (config, no cache, rule registry import): {no_files:.3f}",
        f"- importing the engine and rules (libcst): {engine_import:.3f}",
        f"- a warm run, all {len(files)} files read and hashed, findings from the cache: {min(w for w, _ in runs['warm']):.3f}",
        "- the rest of a cold run is the engine's per-file work, spread over a process pool (one worker per core).",
        "",
        "Findings per rule:",
        "",
        "| rule | findings |",
        "|---|---|",
        *[f"| {code} | {count} |" for code, count in sorted(per_rule.items())],
        "",
        "A random sample of findings and the line each points at (checked by eye: the pattern is there):",
        "",
    ]
    for finding in sample:
        line = (CORPUS / finding["path"]).read_text(encoding="utf-8").splitlines()[finding["line"] - 1]
        end = finding["end_column"] - 1 if finding["end_line"] == finding["line"] else len(line)
        pointed = line[finding["column"] - 1 : end]
        where = f"{finding['path']}:{finding['line']}:{finding['column']}"
        out += [f"- `{where}` {finding['code']} points at `{pointed}` in `{line.strip()[:100]}`"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
