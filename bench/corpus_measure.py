"""Measure every label of the hand-labelled real-code corpus (bench/corpus/README.md).

Each label carries a minimal extraction of real model code (``snippet`` with ``original`` and
``rewrite``) and a ``call`` made of ``randn(...)`` inputs. Both functions are called on the same
fresh random inputs under ``fusionrt.measure(..., executor="reference")``; the label gets the
fusionrt and eager counts before and after, whether the results are equal, and where the rewrite
pays: no worse on kernels, writes and bytes written, and strictly better on one of them (the rule
the contract test applies to every lint rule's fix).

    .venv/bin/python bench/corpus_measure.py                      # measure, write the labels back
    .venv/bin/python bench/corpus_measure.py --check              # fail if a committed number changed
    .venv/bin/python bench/corpus_measure.py --corpus /tmp/corpus # also check each quote at its line

``--corpus`` is the folder holding one unpacked wheel per package (``<corpus>/<package>/<path>``).
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch

import fusionrt

LABELS = Path(__file__).resolve().parent / "corpus" / "labels"
KINDS = (
    "redundant-copy", "order-rewrite", "merge-views", "clone-before-compute", "kept-alive",
    "host-sync-in-loop", "fused-op", "other",
)
# Where a label came from, when it was not labelled before the rules were evaluated: read off a finding
# ("finding-review", found by construction) or from a later search of the labelled files ("survey").
SOURCES = ("finding-review", "survey")
COUNTS = ("kernels", "writes", "bytes_written")
SEED = 0


def run(snippet: str, function: str, call: str, filename: str) -> tuple[Any, fusionrt.Report]:
    """Call ``function`` of a fresh namespace of ``snippet`` with the arguments of ``call``,
    built eagerly from a generator seeded the same way for both sides; the call itself is lazy."""
    namespace: dict[str, Any] = {"__name__": "corpus_snippet"}
    exec(compile(snippet, filename, "exec"), namespace)
    generator = torch.Generator().manual_seed(SEED)
    namespace["randn"] = lambda *shape: torch.randn(*shape, generator=generator)
    expr = ast.parse(call, mode="eval").body
    if not isinstance(expr, ast.Call):
        raise ValueError(f"`call` must be a call expression: {call!r}")
    evaluate = lambda node: eval(compile(ast.Expression(node), filename, "eval"), namespace)  # noqa: E731
    args = [evaluate(a) for a in expr.args]
    kwargs = {k.arg: evaluate(k.value) for k in expr.keywords}
    return fusionrt.measure(namespace[function], *args, executor="reference", **kwargs)


def counts(report: fusionrt.Report, eager: bool) -> dict[str, int]:
    if eager:
        return {"kernels": report.eager_kernels, "writes": report.eager_writes,
                "bytes_written": report.eager_bytes_written}
    return {"kernels": report.kernels, "writes": report.writes, "bytes_written": report.bytes_written}


def pays(before: dict[str, int], after: dict[str, int]) -> bool:
    return all(after[c] <= before[c] for c in COUNTS) and any(after[c] < before[c] for c in COUNTS)


def equal(a: Any, b: Any) -> bool:
    try:
        torch.testing.assert_close(a, b)
    except AssertionError:
        return False
    return True


def measure(label: dict) -> dict:
    """The label's ``measured``, ``equal`` and ``pays_in``, freshly measured."""
    name = f"<{label['id']}>"
    before_out, before = run(label["snippet"], "original", label["call"], name)
    after_out, after = run(label["snippet"], "rewrite", label["call"], name)
    measured = {
        side: {"before": counts(before, side == "eager"), "after": counts(after, side == "eager")}
        for side in ("fusionrt", "eager")
    }
    return {
        "measured": measured,
        "equal": equal(after_out, before_out),
        "pays_in": [side for side in ("fusionrt", "eager") if pays(measured[side]["before"], measured[side]["after"])],
    }


def problems(label: dict, data: dict, corpus: Path | None) -> list[str]:
    """What is inconsistent in a label of the package file ``data``, independent of its numbers."""
    found = []
    if label["path"] not in data["files"]:
        found.append("its path is not among the package's files (the labelled scope the evaluation lints)")
    if label["kind"] not in KINDS:
        found.append(f"unknown kind {label['kind']!r}")
    if label.get("source", SOURCES[0]) not in SOURCES:
        found.append(f"unknown source {label['source']!r}")
    if label["actionable"] and not (label.get("equal") and label.get("pays_in")):
        found.append("actionable, but the rewrite is not equal or pays nowhere")
    if label["actionable"] and not label.get("snippet"):
        found.append("actionable without a snippet")
    if corpus is not None:
        path = corpus / data["package"] / label["path"]
        if not path.is_file():
            found.append(f"{path} does not exist")
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
            at = lines[label["line"] - 1].strip() if 0 < label["line"] <= len(lines) else ""
            if at != label["quote"]:
                hits = [i + 1 for i, line in enumerate(lines) if line.strip() == label["quote"]]
                found.append(f"quote not at line {label['line']} (found at {hits or 'no line'})")
    return found


def cell(m: dict | None, side: str) -> str:
    if not m:
        return "-"
    b, a = m[side]["before"], m[side]["after"]
    return f"k {b['kernels']}->{a['kernels']} w {b['writes']}->{a['writes']} B {b['bytes_written']}->{a['bytes_written']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="label files (default: every bench/corpus/labels/*.json)")
    parser.add_argument("--check", action="store_true", help="do not write; fail if a measured value changed")
    parser.add_argument("--corpus", type=Path, help="folder of unpacked wheels, to check each quote at its line")
    args = parser.parse_args(argv)

    failures: list[str] = []
    rows = [("id", "kind", "act", "fusionrt", "eager", "equal", "pays_in", "")]
    summary: Counter = Counter()
    for file in args.files or sorted(LABELS.glob("*.json")):
        text = file.read_text(encoding="utf-8")
        data = json.loads(text)
        for label in data["labels"]:
            issues = []
            if label.get("snippet"):
                try:
                    fresh = measure(label)
                except Exception as error:  # a broken snippet is reported; the others are still measured
                    issues.append(f"snippet failed: {type(error).__name__}: {error}")
                else:
                    issues += [f"{key} changed (committed {label.get(key)})" for key, value in fresh.items()
                               if args.check and label.get(key) != value]
                    label.update(fresh)
            issues += problems(label, data, args.corpus)
            failures += [f"{label['id']}: {issue}" for issue in issues]
            pays_in = ",".join(label.get("pays_in") or []) or "-"
            summary[data["package"], "actionable" if label["actionable"] else "look-alike"] += 1
            if label["actionable"]:
                summary["pays in", pays_in] += 1
            rows.append((
                label["id"], label["kind"], "yes" if label["actionable"] else "no",
                cell(label.get("measured"), "fusionrt"), cell(label.get("measured"), "eager"),
                str(label.get("equal", "-")), pays_in, "; ".join(issues),
            ))
        updated = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        if not args.check and updated != text:
            file.write_text(updated, encoding="utf-8")

    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())
    print()
    for (group, what), n in sorted(summary.items()):
        print(f"{group}: {n} {what}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
