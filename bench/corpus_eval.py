"""Recall and precision of fusionlint on the hand-labelled real-code corpus (bench/corpus/README.md).

For each package, the installed ``fusionlint check --output-format json`` runs over the files
its label file names (the labelled scope), from ``<corpus>/<package>``. A finding hits a label
when it is in the same file and its line lies within the label's statement (any rule).

- recall: actionable labels hit by some finding / actionable labels; given twice, over all of them
  and over the labels not read off a finding (without ``"source": "finding-review"``), since a
  label added from a finding is hit by construction;
- precision: findings that hit an actionable label / all findings on the labelled files;
- precision (labelled): the same over findings that hit some label only, so a finding on a
  look-alike is a false positive and a finding on no label is left out.

Findings that hit no label are printed for review by hand: each is a missed label or noise.
Held-out packages (``"held_out": true``) are reported apart: the rules were never tuned on them.
Whoever tunes a rule runs it with ``--tuning-only``, which never lints or prints them.
``--missed`` lists the actionable labels no finding hit, for rule authors to work from; it leaves
out held-out packages unless their label file is named on the command line.

Recall is also given per reach (``corpus/reach/<package>.json``, kept apart per package like the
label files, so that a held-out package's stay unread): what a sound linter reading one file at a
time would need to flag the label — nothing beyond the file and a general idiom (local-general), an
insight that fits this code only (local-specific), facts from callers, configs or other packages
(elsewhere), or facts about values at run time (runtime). Labels not classified count as "-".

    .venv/bin/python bench/corpus_eval.py --corpus /tmp/corpus
    .venv/bin/python bench/corpus_eval.py --corpus /tmp/corpus --tuning-only --missed
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from real_code import fusionlint_command

LABELS = Path(__file__).resolve().parent / "corpus" / "labels"
REACH = Path(__file__).resolve().parent / "corpus" / "reach"


def statement_lines(source: str, line: int) -> tuple[int, int]:
    """First and last line of the innermost statement at ``line``; of a compound statement, its header."""
    best: ast.stmt | None = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno or 0) - node.lineno < (best.end_lineno or 0) - best.lineno:
                best = node
    if best is None:
        return line, line
    body = getattr(best, "body", None)
    if isinstance(body, list) and body and line < body[0].lineno:
        return best.lineno, body[0].lineno - 1
    return best.lineno, best.end_lineno or best.lineno


@dataclass
class Tally:
    actionable: int = 0
    recalled: int = 0
    independent: int = 0  # actionable labels not read off a finding
    independent_recalled: int = 0
    findings: int = 0
    on_actionable: int = 0
    on_lookalike: int = 0
    rules: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)  # (kind, recalled) -> actionable labels
    reaches: Counter = field(default_factory=Counter)  # (reach, recalled) -> actionable labels
    missed: list[dict] = field(default_factory=list)  # actionable labels no finding hit

    def add(self, other: Tally) -> None:
        for name in ("actionable", "recalled", "independent", "independent_recalled", "findings", "on_actionable", "on_lookalike"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rules.update(other.rules)
        self.kinds.update(other.kinds)
        self.reaches.update(other.reaches)

    def row(self, name: str) -> str:
        recall = f"{self.recalled / self.actionable:.2f}" if self.actionable else "-"
        independent = f"{self.independent_recalled / self.independent:.2f}" if self.independent else "-"
        precision = f"{self.on_actionable / self.findings:.2f}" if self.findings else "-"
        labelled = self.on_actionable + self.on_lookalike
        precision_labelled = f"{self.on_actionable / labelled:.2f}" if labelled else "-"
        unlabelled = self.findings - labelled
        return (f"{name:<16} {self.recalled:>3}/{self.actionable:<3} {recall:>6} {self.independent_recalled:>3}/{self.independent:<3} {independent:>6}"
                f"   {self.findings:>8} {self.on_actionable:>10}"
                f" {self.on_lookalike:>10} {unlabelled:>10} {precision:>9} {precision_labelled:>9}")


def lint(root: Path, files: list[str]) -> list[dict]:
    done = subprocess.run(
        [*fusionlint_command(), "check", "--no-cache", "--exit-zero", "--output-format", "json", *files],
        cwd=root, capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"fusionlint failed in {root} ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def evaluate(data: dict, corpus: Path, unlabelled: list[str], reach: dict[str, dict]) -> Tally:
    """Lint one package's labelled files and count hits; findings on no label go to ``unlabelled``."""
    root = corpus / data["package"]
    tally = Tally()
    spans: dict[str, list[tuple[int, int, dict]]] = {}
    sources: dict[str, list[str]] = {}
    for path in data["files"]:
        source = (root / path).read_text(encoding="utf-8")
        sources[path] = source.splitlines()
        spans[path] = [(*statement_lines(source, label["line"]), label) for label in data["labels"] if label["path"] == path]
    hit: set[str] = set()
    for finding in lint(root, data["files"]):
        path = Path(finding["path"]).as_posix()
        labels = [label for first, last, label in spans.get(path, []) if first <= finding["line"] <= last]
        tally.findings += 1
        tally.rules[finding["code"]] += 1
        if any(label["actionable"] for label in labels):
            tally.on_actionable += 1
            hit.update(label["id"] for label in labels if label["actionable"])
        elif labels:
            tally.on_lookalike += 1
            unlabelled.append(f"  FP {labels[0]['id']} {finding['code']} {path}:{finding['line']}: {finding['message']}")
        else:
            code = sources[path][finding["line"] - 1].strip() if path in sources else ""
            unlabelled.append(f"  ?? {data['package']} {finding['code']} {path}:{finding['line']}: {code}")
    for label in data["labels"]:
        if label["actionable"]:
            tally.actionable += 1
            tally.recalled += label["id"] in hit
            if label.get("source") != "finding-review":
                tally.independent += 1
                tally.independent_recalled += label["id"] in hit
            tally.kinds[label["kind"], label["id"] in hit] += 1
            tally.reaches[reach.get(label["id"], {}).get("reach", "-"), label["id"] in hit] += 1
            if label["id"] not in hit:
                tally.missed.append(label)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="label files (default: every bench/corpus/labels/*.json)")
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/corpus"), help="folder of unpacked wheels, one per package")
    parser.add_argument("--tuning-only", action="store_true",
                        help="skip the held-out packages (for whoever tunes rules: their findings stay unseen)")
    parser.add_argument("--missed", action="store_true",
                        help="list the actionable labels no finding hit (held-out packages only if their file is named)")
    args = parser.parse_args(argv)

    groups = {"tuning": Tally(), "held-out": Tally(), "all": Tally()}
    review: list[str] = []
    missed: list[str] = []
    print(f"{'package':<16} {'recall':>14} {'(no review)':>14}   {'findings':>8} {'actionable':>10} {'look-alike':>10} {'unlabelled':>10}"
          f" {'precision':>9} {'(labelled)':>9}")
    for file in args.files or sorted(LABELS.glob("*.json")):
        data = json.loads(file.read_text(encoding="utf-8"))
        if data["held_out"] and args.tuning_only:
            continue
        reach = REACH / f"{data['package']}.json"  # read only for a package evaluated
        tally = evaluate(data, args.corpus, review, json.loads(reach.read_text(encoding="utf-8")) if reach.exists() else {})
        print(tally.row(data["package"]))
        groups["held-out" if data["held_out"] else "tuning"].add(tally)
        groups["all"].add(tally)
        if args.missed and data["held_out"] and file not in args.files:
            missed.append(f"  {data['package']}: held out, not listed (name its label file to list it)")
        elif args.missed:
            missed += [f"  {label['id']} {label['kind']} {label['path']}:{label['line']}: {label['quote']}"
                       for label in tally.missed]
    for name, tally in groups.items():
        if name == "tuning" or not args.tuning_only:
            print(tally.row(name))
    print("\nfindings per rule: " + ", ".join(f"{rule} {n}" for rule, n in sorted(groups["all"].rules.items())))
    for name, counts in (("kind", groups["all"].kinds), ("reach", groups["all"].reaches)):
        print(f"recall per {name}: " + ", ".join(
            f"{key} {counts[key, True]}/{counts[key, True] + counts[key, False]}" for key in sorted({k for k, _ in counts})
        ))
    if review:
        print("\nfindings on a look-alike (FP) or on no label (??, review by hand):")
        print("\n".join(review))
    if missed:
        print("\nactionable labels no finding hit:")
        print("\n".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
