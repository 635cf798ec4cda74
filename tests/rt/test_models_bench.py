"""bench/models_bench.py's tiny CPU path: the benchmark runs on the GPU machine, where a broken
row costs device time, so the schema and fusionrt's agreement with eager are checked here first."""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "models_bench.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("models_bench", SCRIPT)
    module = sys.modules["models_bench"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


bench = load_bench()


@pytest.mark.slow
def test_tiny_models_on_cpu(tmp_path: Path) -> None:
    """Every model whose library is importable here (at least the two built-in ones) gives a
    full row, and fusionrt's output matches eager's in float32."""
    models = [name for name, m in bench.ZOO.items()
              if m.library == "builtin" or importlib.util.find_spec(m.library) is not None]
    out = tmp_path / "models.json"
    subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--quick", "--no-compile",
                    "--models", *models, "--out", str(out)], check=True, timeout=300, capture_output=True)
    result = json.loads(out.read_text())
    assert {"date", "device", "torch", "triton", "rows"} <= result.keys()
    assert [r["model"] for r in result["rows"]] == models
    for row in result["rows"]:
        assert "error" not in row, row
        assert set(bench.FIELDS) <= row.keys()
        assert row["mode"] == "inference" and row["dtype"] == "float32"
        assert row["eager_ms"] > 0 and row["fusionrt_ms"] > 0 and row["fusionrt_first_s"] > 0
        assert row["rel_err"] < 1e-4 and row["eager_rel_err"] < 1e-6
        assert row["compile_ms"] is None and row["compile_rel_err"] is None  # --no-compile
        assert row["kernels"] > 0 and row["eager_kernels"] > 0 and row["writes"] > 0 and row["eager_writes"] > 0
        assert row["fallbacks"] == sum(row["fallback_ops"].values())
        assert isinstance(row["replayed"], bool) and (row["why_not_replayed"] is None) == row["replayed"]
    table = out.with_suffix(".md").read_text()
    assert all(f"| {name} |" in table for name in models)


def test_missing_library_is_a_skipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(bench.ZOO, "ghost", bench.Model("ghost", "no_such_library_for_the_zoo", bench.block))
    opts = argparse.Namespace(models=["ghost"], budget_s=60)
    rows = bench.run(opts)
    assert rows == [{**bench.new_row(bench.ZOO["ghost"]), "skipped": "no_such_library_for_the_zoo not installed"}]
    assert "ghost (no_such_library_for_the_zoo): skipped" in bench.markdown(
        {"date": "d", "device": "cpu", "torch": "t", "triton": None, "tiny": True, "executor": "reference",
         "rows": rows})
