"""Seeing inside a run: the ``fusionrt`` loggers and ``FUSIONRT_LOG``, the ``FUSIONRT_DEBUG_DIR``
copy of every generated kernel, the Chrome trace and the DataFrames of a report."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fusionrt
from fusionrt.report import display_source, human_bytes


def _at(marker: str) -> str:
    """``file:line`` of the line of this file that ends in comment ``marker``, as logs show it."""
    lines = Path(__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))
    return display_source(f"{__file__}:{line}")


def _program(executor: str) -> tuple[fusionrt.Report, torch.Tensor, torch.Tensor]:
    """An element-wise chain, a matmul, a softmax and a host read; then a fallback (sort)."""
    x, w = torch.randn(48, 40), torch.randn(40, 24)
    with fusionrt.lazy(executor=executor) as session:
        y = torch.tanh(x * 3) - 1  # chain
        z = (y @ w).softmax(-1)  # matmul
        total = z.sum().item()  # item
        ranked = torch.sort(y, dim=-1)[0] + 2  # sort
    expected = (torch.tanh(x * 3) - 1) @ w
    assert total == pytest.approx(expected.softmax(-1).sum().item(), rel=1e-5)
    torch.testing.assert_close(ranked, torch.sort(torch.tanh(x * 3) - 1, dim=-1)[0] + 2)
    return session.report, y, z


def test_each_flush_logs_its_plan(caplog):
    caplog.set_level(logging.INFO, logger="fusionrt")
    report, _, _ = _program("reference")
    plans = [r for r in caplog.records if r.name == "fusionrt.schedule"]
    assert len(plans) == sum(f.ops > 0 for f in report.flushes) == 2  # the fallback's flush had nothing pending
    first = plans[0].getMessage().splitlines()
    kernels = [k for k in report.kernel_records if k.flush == 0]
    writes = [w for w in report.materialized if report.kernel_records[w.kernel].flush == 0]
    assert first[0] == (f"flush 0 (item at {_at('item')}): ops {report.flushes[0].ops}, kernels {len(kernels)}, "
                        f"writes {len(writes)} ({human_bytes(sum(w.bytes for w in writes))})")
    assert len(first) == 1 + len(kernels)
    chain = next(line for line in first if " fused " in line)
    assert "mul tanh sub" in chain and f"{_at('chain')}" in chain and "(alive)" in chain
    assert any(" matmul " in line and f"{_at('matmul')}" in line for line in first)
    kernel_lines = [line for plan in plans for line in plan.getMessage().splitlines() if line.startswith("  kernel")]
    fallback_kernels = sum(k.kind == "fallback" for k in report.kernel_records)  # recorded outside a plan
    assert len(kernel_lines) == report.kernels - fallback_kernels


def test_debug_level_lists_every_write(caplog):
    caplog.set_level(logging.DEBUG, logger="fusionrt")
    report, _, _ = _program("reference")
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "fusionrt.schedule")
    assert text.count("\n    write ") == sum(w.reason != "fallback" for w in report.materialized)


def test_fusionrt_log_switches_the_loggers_on_from_the_environment(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""\
        import torch, fusionrt
        x = torch.randn(16, 16)
        with fusionrt.lazy(executor="reference"):
            y = (x * 2).relu()
            print(y.sum().item())
    """))
    env = {**os.environ, "FUSIONRT_LOG": "plans,nonsense"}
    result = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "[fusionrt.schedule] flush 0 (item at run.py:5): ops 3, kernels 1, writes 2 (1.00 KiB)\n" \
        "  kernel 0 reduction mul_relu_sum [generated]: mul relu sum from run.py:4, run.py:5;" in result.stderr
    assert "FUSIONRT_LOG: unknown 'nonsense'" in result.stderr
    assert "[fusionrt.codegen]" not in result.stderr  # kernels were not asked for


def test_debug_dir_receives_each_generated_kernel_with_its_plan(tmp_path, monkeypatch, caplog):
    # a cache folder of its own: every kernel is generated here, none found in memory or on disk
    monkeypatch.setenv("FUSIONRT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FUSIONRT_DEBUG_DIR", str(tmp_path / "debug"))
    caplog.set_level(logging.INFO, logger="fusionrt.codegen")
    report, _, _ = _program("interpret")
    generated = [k for k in report.kernel_records if k.backend in ("generated", "template")]
    files = sorted((tmp_path / "debug").iterdir())
    assert len(files) == len(generated) == 5
    assert len([r for r in caplog.records if r.getMessage().startswith("generated ")]) == len(generated)
    for kernel in generated:
        [path] = [f for f in files if f.name.startswith(f"{kernel.name}-")]
        text = path.read_text()
        header = dict(line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("# ") and ": " in line)
        assert header["planned kernel"] == f"{kernel.name} ({kernel.kind}, backend {kernel.backend})"
        assert header["ops"] == " ".join(kernel.ops)
        assert header["source lines"] == ", ".join(display_source(s) for s in kernel.sources)
        compile(text, str(path), "exec")  # the file is Python, header included
        cache_file = Path(header["cache"])
        assert cache_file.parent == tmp_path / "cache" / "kernels"
        assert text.endswith(cache_file.read_text())  # exactly the source that ran
        assert "@triton.jit" in text or "tl." in text


def test_an_unwritable_debug_dir_warns_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSIONRT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "taken").write_text("a file where the folder should be\n")
    monkeypatch.setenv("FUSIONRT_DEBUG_DIR", str(tmp_path / "taken"))
    x = torch.randn(33, 7)
    with pytest.warns(RuntimeWarning, match="fusionrt: cannot write .*taken"):
        with fusionrt.lazy(executor="interpret"):
            y = torch.sigmoid(x) * 5
    torch.testing.assert_close(y, torch.sigmoid(x) * 5)


def test_chrome_trace_has_kernels_and_writes_on_a_timeline(tmp_path):
    report, _, _ = _program("reference")
    path = tmp_path / "trace.json"
    report.to_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    for event in events:
        assert {"name", "ph", "pid"} <= event.keys()
        assert event["ph"] in ("M", "X", "i", "C")
        if event["ph"] != "M":
            assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
    slices = [e for e in events if e["ph"] == "X"]
    assert [e["args"]["index"] for e in slices] == list(range(report.kernels))
    end = 0.0
    for event, kernel in zip(slices, report.kernel_records):
        assert event["name"] == kernel.name and event["args"]["ops"] == list(kernel.ops)
        assert event["args"]["bytes_read"] == kernel.bytes_read
        assert event["args"]["bytes_written"] == kernel.bytes_written
        assert event["args"]["sources"] == list(kernel.sources)
        assert event["dur"] == pytest.approx((kernel.bytes_read + kernel.bytes_written) / 1024)
        assert event["ts"] == pytest.approx(end)  # one after the other
        end = event["ts"] + event["dur"]
    writes = [e for e in events if e.get("cat") == "write"]
    assert [(e["args"]["reason"], e["args"]["source"], e["args"]["bytes"]) for e in writes] == [
        (w.reason, w.source, w.bytes) for w in report.materialized]
    flushes = [e for e in events if e.get("cat") == "flush"]
    assert [e["args"]["reason"] for e in flushes] == [f.reason for f in report.flushes] == ["item", "fallback", "exit"]
    counter = [e for e in events if e["ph"] == "C"]
    assert counter[-1]["args"]["bytes"] == sum(w.bytes for w in report.materialized)
    assert "proxy" in trace["otherData"]["timeline"]
    assert trace["otherData"]["kernels"] == report.kernels


def test_dataframes_have_a_row_per_record():
    pandas = pytest.importorskip("pandas")
    report, _, _ = _program("reference")
    kernels = report.to_dataframe()
    assert isinstance(kernels, pandas.DataFrame)
    assert len(kernels) == report.kernels
    assert kernels["bytes_written"].sum() == report.bytes_written
    assert list(kernels["name"]) == [k.name for k in report.kernel_records]
    writes = report.to_dataframe("writes")
    assert len(writes) == report.writes
    assert writes.groupby("reason")["bytes"].sum().to_dict() == {
        r: sum(w.bytes for w in report.materialized if w.reason == r) for r in {w.reason for w in report.materialized}}
    assert len(report.to_dataframe("flushes")) == len(report.flushes)
    assert list(fusionrt.Report().to_dataframe("fallbacks").columns) == ["op", "source", "reason"]
    with pytest.raises(ValueError, match="unknown record kind 'rows'"):
        report.to_dataframe("rows")


def test_dataframe_without_pandas_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match="needs pandas: pip install pandas"):
        fusionrt.Report().to_dataframe()
