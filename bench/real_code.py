"""fusionlint on real code we did not write: findings per rule per package, and fix safety.

Five pinned packages are installed without their dependencies into a corpus folder (only to be
read), linted with the installed ``fusionlint`` command (JSON output), and every finding is
written with its source line to a JSON file for triage by hand (docs/triage.md). Then a copy of
the trees is fixed with ``--fix --unsafe-fixes``: every file must still parse, a second ``--fix``
must change nothing, and each fixed function is verified as ``fusionlint check --verify`` does
(``fusionlint.verify``): the original and the fixed text run in two processes under fusionrt on
the same random tensors and the results are compared with ``torch.testing.assert_close``; the
functions without a harness are listed with the reason they were not run.

    .venv/bin/python bench/real_code.py --corpus /tmp/real --triage docs/triage.json

With ``--triage``, findings are joined with the verdicts given by hand in that file (keyed by
rule, path, line and column) and the table of TP / FP / noise per rule per package is printed
as Markdown; findings without a verdict and verdicts whose finding is gone are listed.
"""
from __future__ import annotations

import argparse
import ast
import collections
import difflib
import hashlib
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fusionlint.verify import changed_functions, verify_fix

REPO = Path(__file__).resolve().parents[1]
# distribution -> (version, the import folders it installs, the name findings are counted under)
PACKAGES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "kornia": ("0.9.0", ("kornia",), "kornia"),
    "torch_geometric": ("2.8.1", ("torch_geometric",), "torch_geometric"),
    "x_transformers": ("2.31.10", ("x_transformers",), "x_transformers"),
    "open_clip_torch": ("3.3.0", ("open_clip", "open_clip_train"), "open_clip"),
    "torchmetrics": ("1.9.0", ("torchmetrics",), "torchmetrics"),
}
# Light runtime dependencies the packages import, pinned; installed --no-deps so no torch is pulled.
RUNTIME_DEPS = (
    "einops==0.8.2",
    "einx==0.4.3",
    "loguru==0.7.3",
    "torch-einops-utils==0.2.0",
    "kornia-rs==0.2.0",
    "lightning-utilities==0.15.3",
    "frozendict==2.5.1",
    "xxhash==4.1.0",
    "fsspec==2026.9.0",
    "tqdm==4.70.1",
)


def fusionlint_command() -> list[str]:
    script = Path(sys.executable).parent / "fusionlint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fusionlint"]


def pip_install(target: Path, requirements: list[str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(target), *requirements],
        check=True,
    )


def ensure_corpus(corpus: Path) -> None:
    """Install the pinned packages that are missing (``<dist>-<version>.dist-info`` absent)."""
    missing = [
        f"{dist}=={version}"
        for dist, (version, _, _) in PACKAGES.items()
        if not (corpus / f"{dist}-{version}.dist-info").is_dir()
    ]
    if missing:
        print(f"installing {', '.join(missing)} into {corpus} (--no-deps)")
        pip_install(corpus, missing)
    # A config of its own (default rules): the repository's config excludes .corpus/, and its
    # .gitignore names it, neither of which should hide the packages from the check.
    (corpus / "pyproject.toml").write_text("[tool.fusionlint]\nrespect-gitignore = false\n")


def source_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def lint(corpus: Path, folders: tuple[str, ...], extra: tuple[str, ...] = ()) -> tuple[list[dict], float, float]:
    """Findings of ``fusionlint check`` on ``folders`` (paths relative to the corpus), wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*fusionlint_command(), "check", "--no-cache", "--exit-zero", "--output-format", "json", *extra, *folders],
        cwd=corpus,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"fusionlint failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def collect_findings(corpus: Path, dists: tuple[str, ...] = tuple(PACKAGES)) -> tuple[list[dict], dict[str, tuple[float, float]]]:
    """Every finding in the packages ``dists`` with its source line; wall and CPU seconds per package."""
    findings: list[dict] = []
    timing: dict[str, tuple[float, float]] = {}
    lines_of: dict[str, list[str]] = {}
    for dist in dists:
        version, folders, label = PACKAGES[dist]
        raw, wall, cpu = lint(corpus, folders)
        timing[label] = (wall, cpu)
        for item in raw:
            path = item["path"]
            if path not in lines_of:
                lines_of[path] = source_lines(corpus / path)
            findings.append(
                {
                    "package": label,
                    "version": version,
                    "rule": item["code"],
                    "path": path,
                    "line": item["line"],
                    "column": item["column"],
                    "code": lines_of[path][item["line"] - 1].strip(),
                    "message": item["message"],
                    "fix_safety": item["fix_safety"],
                }
            )
    findings.sort(key=lambda f: (f["package"], f["path"], f["line"], f["column"], f["rule"]))
    return findings, timing


def counts_table(findings: list[dict]) -> str:
    counts = collections.Counter((f["package"], f["rule"]) for f in findings)
    rules = sorted({rule for _, rule in counts})
    labels = [label for _, _, label in PACKAGES.values()]
    rows = [["package", *rules, "total"]]
    for label in labels:
        row = [counts[label, rule] for rule in rules]
        rows.append([label, *map(str, row), str(sum(row))])
    totals = [sum(counts[label, rule] for label in labels) for rule in rules]
    rows.append(["all", *map(str, totals), str(sum(totals))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows)


def finding_key(finding: dict) -> tuple:
    return finding["rule"], finding["path"], finding["line"], finding["column"]


def triage_table(findings: list[dict], triage: dict) -> tuple[str, list[dict], list[dict]]:
    """Markdown counts per package and rule; the findings with no verdict; the verdicts whose finding is gone."""
    verdicts = {finding_key(entry): entry for entry in triage["findings"]}
    current = {finding_key(finding) for finding in findings}
    untriaged = [finding for finding in findings if finding_key(finding) not in verdicts]
    gone = [entry for key, entry in verdicts.items() if key not in current]
    counts: collections.Counter = collections.Counter()
    for finding in findings:
        entry = verdicts.get(finding_key(finding))
        verdict = entry["verdict"] if entry else "untriaged"
        for package in (finding["package"], "all"):
            counts[package, finding["rule"], "findings"] += 1
            counts[package, finding["rule"], verdict] += 1
    rows = ["| package | rule | findings | TP | FP | noise | precision | TP share |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for package in [label for _, _, label in PACKAGES.values()] + ["all"]:
        for rule in sorted({rule for pkg, rule, _ in counts if pkg == package}):
            n, tp, fp, noise = (counts[package, rule, kind] for kind in ("findings", "TP", "FP", "noise"))
            rows.append(
                f"| {package} | {rule} | {n} | {tp} | {fp} | {noise} | {(tp + noise) / n:.0%} | {tp / n:.0%} |"
            )
    return "\n".join(rows), untriaged, gone


# ---------------------------------------------------------------- fix safety


def digest_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def run_fix(root: Path, folders: list[str]) -> None:
    subprocess.run(
        [*fusionlint_command(), "check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero", "-q", *folders],
        cwd=root,
        capture_output=True,
        check=True,
    )


def check_fixes(corpus: Path, scratch: Path, deps: Path | None, seed: int) -> dict:
    """Fix a copy of the trees; parse, idempotence and run-time checks per changed file."""
    fixed_root = scratch / "fixed"
    shutil.rmtree(fixed_root, ignore_errors=True)
    folders = [folder for _, folders, _ in PACKAGES.values() for folder in folders]
    for folder in folders:
        shutil.copytree(corpus / folder, fixed_root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for dist, (version, _, _) in PACKAGES.items():  # packages that read their own metadata at import
        info = f"{dist}-{version}.dist-info"
        shutil.copytree(corpus / info, fixed_root / info)
    original = digest_tree(fixed_root)
    start = time.perf_counter()
    run_fix(fixed_root, folders)
    fix_seconds = time.perf_counter() - start
    once = digest_tree(fixed_root)
    changed = sorted(path for path in once if once[path] != original[path])
    run_fix(fixed_root, folders)
    twice = digest_tree(fixed_root)
    result: dict = {"fix_seconds": round(fix_seconds, 1), "changed_files": [], "idempotent": once == twice, "runs": []}
    for path in changed:
        before = (corpus / path).read_text(encoding="utf-8")
        after = (fixed_root / path).read_text(encoding="utf-8")
        try:
            ast.parse(after)
            parses = True
        except SyntaxError as error:
            parses = f"{error.msg} at line {error.lineno}"
        diff = "".join(
            difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}", n=1)
        )
        functions = changed_functions(before, after)
        result["changed_files"].append({"path": path, "parses": parses, "functions": functions, "diff": diff})
        module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        verdicts = verify_fix(before, after, corpus / path, seed=seed, extra_paths=(deps,) if deps else ()).verdicts
        for function in functions:
            verdict = verdicts[function]
            run = {"function": f"{module}:{function}", "ran": verdict.equal is not None, "seed": seed}
            if verdict.equal is None:
                run["why"] = verdict.reason
            else:
                run["result"] = "equal" if verdict.equal else f"DIFFERENT: {verdict.reason}"
            result["runs"].append(run)
    return result


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / ".corpus" / "real", help="where the packages are installed")
    parser.add_argument("--findings", type=Path, default=None, help="write every finding here (JSON)")
    parser.add_argument("--triage", type=Path, default=None, help="verdicts given by hand (JSON): print the triage table")
    parser.add_argument("--scratch", type=Path, default=None, help="working folder for the fixed copy and runtime deps")
    parser.add_argument("--no-fix-check", action="store_true", help="only lint")
    parser.add_argument("--fix-report", type=Path, default=None, help="write the fix-safety results here (JSON)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: a fresh one)")
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    corpus.mkdir(parents=True, exist_ok=True)
    ensure_corpus(corpus)
    findings, timing = collect_findings(corpus)
    if args.findings:
        args.findings.write_text(json.dumps(findings, indent=1) + "\n")
    print(counts_table(findings))
    for label, (wall, cpu) in timing.items():
        print(f"  {label}: {wall:.1f} s wall, {cpu:.1f} CPU-s")
    if args.triage:
        table, untriaged, gone = triage_table(findings, json.loads(args.triage.read_text()))
        print("\n" + table)
        for finding in untriaged:
            print(f"  no verdict: {finding['rule']} {finding['path']}:{finding['line']}:{finding['column']}  {finding['code']}")
        for entry in gone:
            print(f"  gone: {entry['rule']} {entry['path']}:{entry['line']}:{entry['column']} ({entry['verdict']})")
    if args.no_fix_check:
        return
    scratch = (args.scratch or Path(tempfile.mkdtemp(prefix="fusionlint-real-"))).resolve()
    deps = scratch / "deps"
    if not deps.is_dir():
        pip_install(deps, list(RUNTIME_DEPS))
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    report = check_fixes(corpus, scratch, deps, seed)
    if args.fix_report:
        args.fix_report.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nfix: {len(report['changed_files'])} files changed in {report['fix_seconds']} s; "
          f"second --fix changes nothing: {report['idempotent']}")
    for change in report["changed_files"]:
        print(f"  {change['path']}: parses: {change['parses']}; functions: {', '.join(change['functions'])}")
    for run in report["runs"]:
        print(f"  {run['function']}: " + (run["result"] if run["ran"] else f"not run ({run['why']})"))


if __name__ == "__main__":
    main()
