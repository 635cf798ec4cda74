"""The hand-labelled real-code corpus (bench/corpus): its label files are consistent with the
measurements they record, its measuring script measures, and its evaluation counts a finding
on a label's statement as a hit."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEL_FILES = sorted((REPO / "bench" / "corpus" / "labels").glob("*.json"))


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import corpus_eval
    import corpus_measure

    return corpus_measure, corpus_eval


def _labels() -> list:
    params = []
    for file in LABEL_FILES:
        data = json.loads(file.read_text(encoding="utf-8"))
        for label in data["labels"]:
            params.append(pytest.param(label, id=label["id"]))
    return params


def test_label_files_have_the_schema():
    ids = []
    for file in LABEL_FILES:
        data = json.loads(file.read_text(encoding="utf-8"))
        assert file.stem == data["package"]
        assert {"version", "held_out", "files", "labels"} <= data.keys()
        ids += [label["id"] for label in data["labels"]]
        outside = [label["id"] for label in data["labels"] if label["path"] not in data["files"]]
        assert not outside, f"labels on files outside the labelled scope: {outside}"
    assert len(ids) == len(set(ids)), "label ids must be unique across packages"


@pytest.mark.parametrize("label", _labels())
def test_label_agrees_with_its_measurement(bench, label):
    measure, _ = bench
    assert label["kind"] in measure.KINDS
    assert label["quote"] and label["note"]
    if label["actionable"]:
        assert label["snippet"] and label["equal"] and label["pays_in"]
    if label.get("measured"):
        derived = [side for side in ("fusionrt", "eager")
                   if measure.pays(label["measured"][side]["before"], label["measured"][side]["after"])]
        assert label["pays_in"] == derived


def test_measure_finds_where_dropping_a_copy_pays(bench):
    measure, _ = bench
    label = {
        "id": "test",
        "snippet": "import torch\n\ndef original(x):\n    return torch.relu(x.t().contiguous())\n\n"
                   "def rewrite(x):\n    return torch.relu(x.t())\n",
        "call": "original(randn(8, 16))",
    }
    result = measure.measure(label)
    assert result["equal"] is True
    assert result["measured"]["eager"]["before"]["kernels"] == 2
    assert result["measured"]["eager"]["after"]["kernels"] == 1
    assert "eager" in result["pays_in"]


def test_measure_reports_a_rewrite_that_changes_results(bench):
    measure, _ = bench
    label = {"id": "test", "snippet": "def original(x):\n    return x * 2\n\ndef rewrite(x):\n    return x * 3\n",
             "call": "original(randn(4))"}
    assert measure.measure(label)["equal"] is False


def test_statement_lines_span_the_statement_or_a_header(bench):
    statement_lines = bench[1].statement_lines
    source = "y = f(\n    x,\n)\nfor i in range(\n    3):\n    z = i\n"
    assert statement_lines(source, 2) == (1, 3)
    assert statement_lines(source, 5) == (4, 5)
    assert statement_lines(source, 6) == (6, 6)


def test_evaluate_counts_hits_on_actionable_labels_and_look_alikes(bench, tmp_path):
    _, evaluate = bench
    package = tmp_path / "pkg"
    (package / "pkg").mkdir(parents=True)
    (package / "pkg" / "m.py").write_text(
        "import torch\n\n\n"
        "def energy(x: torch.Tensor, y: torch.Tensor) -> float:\n"
        "    total = 0.0\n"
        "    for i in range(4):\n"
        "        h = torch.tanh(x[i] - y)\n"  # work that changes with i: no loop-invariant finding
        "        total += h.sum().item()\n"
        "    return total\n\n\n"
        "def sizes(x: torch.Tensor, y: torch.Tensor) -> float:\n"
        "    total = 0.0\n"
        "    for i in range(4):\n"
        "        h = torch.tanh(x[i] - y)\n"  # work that changes with i: no loop-invariant finding
        "        total += h.sum().item()\n"
        "    return total\n"
    )
    label = {"path": "pkg/m.py", "kind": "host-sync-in-loop", "quote": "total += h.sum().item()"}
    data = {"package": "pkg", "files": ["pkg/m.py"], "labels": [
        {**label, "id": "pkg-001", "line": 8, "actionable": True},
        {**label, "id": "pkg-002", "line": 16, "actionable": False},
    ]}
    review: list[str] = []
    tally = evaluate.evaluate(data, tmp_path, review, {"pkg-001": {"reach": "local-general", "why": "a sync per row"}})
    assert (tally.actionable, tally.recalled) == (1, 1)
    assert tally.reaches == {("local-general", True): 1}
    assert (tally.findings, tally.on_actionable, tally.on_lookalike) == (2, 1, 1)
    assert review and review[0].startswith("  FP pkg-002")
    assert (tally.independent, tally.independent_recalled) == (1, 1)
    data["labels"][0]["source"] = "finding-review"  # read off a finding: left out of the second recall
    tally = evaluate.evaluate(data, tmp_path, [], {})
    assert (tally.recalled, tally.independent, tally.independent_recalled) == (1, 0, 0)
    assert tally.reaches == {("-", True): 1}  # a label nobody classified


def test_missed_lists_unhit_actionable_labels_and_keeps_held_out_ones_unless_named(bench, tmp_path, monkeypatch, capsys):
    _, evaluate = bench
    labels = tmp_path / "labels"
    labels.mkdir()
    for package, held_out in (("pkg", False), ("hid", True)):
        (tmp_path / package / package).mkdir(parents=True)
        (tmp_path / package / package / "m.py").write_text("def f(x):\n    return x + 1\n")
        label = {"id": f"{package}-001", "path": f"{package}/m.py", "line": 2, "kind": "other",
                 "actionable": True, "quote": "return x + 1"}
        data = {"package": package, "version": "0", "held_out": held_out, "files": [f"{package}/m.py"], "labels": [label]}
        (labels / f"{package}.json").write_text(json.dumps(data))
    monkeypatch.setattr(evaluate, "LABELS", labels)

    evaluate.main(["--corpus", str(tmp_path), "--missed"])
    out = capsys.readouterr().out
    assert "pkg-001 other pkg/m.py:2: return x + 1" in out
    assert "hid: held out, not listed" in out and "hid-001" not in out

    evaluate.main(["--corpus", str(tmp_path), "--missed", str(labels / "hid.json")])
    assert "hid-001 other hid/m.py:2: return x + 1" in capsys.readouterr().out
