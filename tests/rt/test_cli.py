"""``fusionrt run``: scripts run under the lazy backend, end to end (subprocesses) and in-process."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fusionrt.cli import main, run_module, run_script
from fusionrt.report import SCHEMA_VERSION

# relu(x*2)+1 on random inputs; the checksum is printed so the test can compare with eager.
RELU_SCRIPT = """\
import sys
import torch
torch.manual_seed(int(sys.argv[1]))
x = torch.randn(64, 33)
y = torch.relu(x * 2) + 1
print("checksum", repr(y.double().sum().item()))
"""


def write_script(tmp_path: Path, text: str, name: str = "script.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(*args: str, cwd: Path, module: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "fusionrt"] if module else [str(Path(sys.executable).with_name("fusionrt"))]
    env = {**os.environ, "CI": "1"}
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def eager_checksum(seed: int) -> float:
    import torch

    torch.manual_seed(seed)
    x = torch.randn(64, 33)
    return (torch.relu(x * 2) + 1).double().sum().item()


def test_run_prints_the_report_and_writes_json(tmp_path):
    script = write_script(tmp_path, RELU_SCRIPT)
    result = run_cli("run", "--executor", "reference", "--json", "report.json", "script.py", "7", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert float(out.split("checksum ")[1].split()[0]) == pytest.approx(eager_checksum(7), rel=1e-9)
    assert "\x1b" not in out  # piped output is plain
    assert "fusionrt report (policy stream, executor reference)" in out
    assert "Materialized writes" in out and "script.py:5" in out  # the line that made y
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["version"] == SCHEMA_VERSION
    assert data["executor"] == "reference" and data["policy"] == "stream"
    assert data["totals"]["kernels"] >= 1
    # y is still bound to a script global (alive); the checksum's reduction is read by .item() (sync)
    assert [(w["source"], w["shape"], w["dtype"], w["reason"]) for w in data["materialized"]] == [
        (f"{script}:5", [64, 33], "float32", "alive"), (f"{script}:6", [], "float64", "sync")]
    assert [(f["reason"], f["source"]) for f in data["flushes"]] == [("item", f"{script}:6")]


def test_a_raising_script_shows_its_traceback_and_the_report(tmp_path):
    write_script(tmp_path, RELU_SCRIPT + "raise ValueError('bad input')\n")
    result = run_cli("run", "--executor", "reference", "script.py", "1", cwd=tmp_path, module=True)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):\n  File ")
    assert "script.py\", line 7, in <module>" in result.stderr and "ValueError: bad input" in result.stderr
    assert "cli.py" not in result.stderr  # the runner's frames are cut
    assert "checksum" in result.stdout and "script.py:5" in result.stdout


def test_script_sees_python_script_semantics(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 41\n")
    script = write_script(tmp_path, """\
        import json, sys
        import torch
        import helper
        with open(sys.argv[2], "w") as out: json.dump({"argv": sys.argv, "name": __name__, "file": __file__,
            "path0": sys.path[0], "main": sys.modules["__main__"].__dict__ is globals()}, out)
        t = torch.rand(3, 5) * 2
        sys.exit(helper.VALUE + 1)
    """)
    saved = sys.argv[:], sys.path[:], sys.modules["__main__"]
    report, code = run_script(str(script), ["--flag", str(tmp_path / "seen.json")], "stream", "reference")
    assert code == 42
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": [str(script), "--flag", str(tmp_path / "seen.json")],
                    "name": "__main__", "file": str(script), "path0": str(tmp_path), "main": True}
    assert (sys.argv, sys.path, sys.modules["__main__"]) == saved
    # the script's globals outlive its last line: t is written as alive, at the exit flush that
    # the sys.exit() line caused
    assert [(w.source, w.reason) for w in report.materialized] == [(f"{script}:6", "alive")]
    assert [(f.reason, f.source) for f in report.flushes] == [("exit", f"{script}:7")]


def test_the_exit_flush_names_the_scripts_last_line(tmp_path):
    script = write_script(tmp_path, "import torch\nx = torch.rand(4, 4)\ny = (x + 1).relu()\n\n# done")
    report, code = run_script(str(script), [], "stream", "reference")
    assert code == 0
    assert [(f.reason, f.source, f.ops) for f in report.flushes] == [("exit", f"{script}:5", 2)]
    assert [(w.source, w.reason) for w in report.materialized] == [(f"{script}:3", "alive")]


def test_syntax_error_is_reported_like_python(tmp_path, capsys):
    write_script(tmp_path, "x = (1,\n")
    assert main(["run", "--executor", "reference", str(tmp_path / "script.py")]) == 1
    err = capsys.readouterr().err
    assert "SyntaxError" in err and "Traceback" not in err


def test_missing_script_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert "nope.py' does not exist" in capsys.readouterr().err
    assert main(["run", str(tmp_path)]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_unreadable_script_is_a_usage_error(tmp_path, capsys):
    locked = write_script(tmp_path, "print('never')\n")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything
        pytest.skip("permissions are not enforced for this user")
    assert main(["run", str(locked)]) == 2
    assert "cannot read script" in capsys.readouterr().err


def test_unwritable_json_keeps_the_printed_report(tmp_path, capsys):
    write_script(tmp_path, RELU_SCRIPT)
    code = main(["run", "--executor", "reference", "--json", str(tmp_path / "no" / "dir" / "r.json"),
                 str(tmp_path / "script.py"), "3"])
    assert code == 2
    captured = capsys.readouterr()
    assert "fusionrt report" in captured.out and "cannot write the JSON report" in captured.err


def test_usage_errors(capsys):
    assert main([]) == 2
    assert "run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--executor", "warp-drive", "x.py"])
    assert exit_.value.code == 2


@pytest.mark.parametrize("ci, styled", [(None, True), ("1", False)])
def test_terminal_gets_rich_output_unless_ci(monkeypatch, ci, styled):
    from fusionrt.cli import print_rendered
    from fusionrt.report import Report

    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    master, slave = os.openpty()
    with open(slave, "w", encoding="utf-8") as tty, open(master, "rb", buffering=0) as reader:
        print_rendered(Report(eager_kernels=4), file=tty)
        tty.flush()
        out = reader.read(65536).decode()
    assert "fusionrt report" in out and "0.00x" in out
    assert ("\x1b[" in out) == styled


def test_executor_option_reaches_the_run_and_counts_do_not_depend_on_it(tmp_path):
    script = write_script(tmp_path, """\
        import torch
        x = torch.randn(8, 8)
        y = x * 2
        values, indices = torch.sort(y, dim=-1)
        z = values + 1
    """)
    reports = {ex: run_script(str(script), [], "stream", ex)[0] for ex in ("reference", "interpret")}
    for executor, report in reports.items():
        assert report.executor == executor
    reference, interpret = (reports[ex].to_dict() for ex in ("reference", "interpret"))
    for data in (reference, interpret):
        del data["executor"]
    assert reference == interpret
    text = str(reports["interpret"])
    assert "Fallbacks (1)" in text and "sort" in text and "fallback-input" in text
    assert [(f.reason, f.source) for f in reports["interpret"].flushes] == [
        ("fallback", f"{script}:4"), ("exit", f"{script}:5")]


def test_details_option_lists_every_write(tmp_path, capsys, monkeypatch):
    """Seven values kept alive on seven lines: the default view shows five groups, --details all seven writes."""
    monkeypatch.chdir(tmp_path)
    names = "abcdefg"
    script = write_script(tmp_path, "import torch\nx = torch.randn(16, 16)\n" + "".join(
        f"{name} = x * {i + 2}\n" for i, name in enumerate(names)))
    assert main(["run", "--executor", "reference", script.name]) == 0
    summary = capsys.readouterr().out
    assert "Materialized writes (7) by source line and reason" in summary
    assert "… 2 more groups (--details)" in summary
    row = re.compile(r"\s+1\s+1\.00 KiB\s+alive\s+script\.py:\d+\s+mul")
    rows = [line for line in summary.splitlines() if row.fullmatch(line)]
    assert len(rows) == 5, summary
    assert main(["run", "--executor", "reference", "--details", script.name]) == 0
    details = capsys.readouterr().out
    assert re.search(r"^Materialized writes \(7\) *$", details, re.MULTILINE) and "(--details)" not in details
    for line in range(3, 10):
        assert re.search(rf"│ alive\s+│ script\.py:{line}\s+│ mul\s+│", details), details


def test_version_is_the_package_version(capsys):
    import fusionlint

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"fusionrt {fusionlint.__version__}"


def test_run_m_runs_a_module_like_python_m(tmp_path):
    write_script(tmp_path, RELU_SCRIPT, name="relu_module.py")
    result = run_cli("run", "--executor", "reference", "-m", "relu_module", "11", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.split("checksum ")[1].split()[0]) == pytest.approx(eager_checksum(11), rel=1e-9)
    assert "fusionrt report (policy stream, executor reference)" in result.stdout
    assert "relu_module.py:5" in result.stdout  # the line that made y, kept alive by a module global


def test_run_module_sees_python_m_semantics(tmp_path, monkeypatch):
    """A package's __main__, run with its arguments, from the current folder, exiting with a code."""
    package = tmp_path / "fusionrt_cli_probe"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 6\n")
    (package / "__main__.py").write_text(textwrap.dedent("""\
        import json, sys
        import torch
        from . import VALUE
        with open(sys.argv[1], "w") as out:
            json.dump({"argv": sys.argv, "name": __name__, "package": __package__, "path0": sys.path[0]}, out)
        t = torch.rand(4, 6) * 3
        sys.exit(VALUE)
    """))
    monkeypatch.chdir(tmp_path)
    saved = sys.argv[:], sys.path[:], sys.modules["__main__"]
    try:
        report, code = run_module("fusionrt_cli_probe", ["seen.json", "--flag"], "stream", "reference")
    finally:
        sys.modules.pop("fusionrt_cli_probe", None)
    assert code == 6
    main_file = str(package / "__main__.py")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": [main_file, "seen.json", "--flag"], "name": "__main__",
                    "package": "fusionrt_cli_probe", "path0": str(tmp_path)}
    assert (sys.argv, sys.path, sys.modules["__main__"]) == saved
    # the module's globals outlive its sys.exit(): t is written as alive, at the flush that line caused
    assert [(w.source, w.reason) for w in report.materialized] == [(f"{main_file}:6", "alive")]
    assert [(f.reason, f.source) for f in report.flushes] == [("exit", f"{main_file}:7")]


def test_run_m_usage_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain_package").mkdir()
    (tmp_path / "plain_package" / "__init__.py").write_text("")
    try:
        for argv, message in ((["run", "-m", "no_such_module_here"], "No module named 'no_such_module_here'"),
                              (["run", "-m", "plain_package"], "'plain_package' is a package and cannot be run"),
                              (["run", "-m"], "-m needs a module name"),
                              (["run"], "run needs SCRIPT or -m MODULE")):
            assert main(argv) == 2
            assert message in capsys.readouterr().err
    finally:
        sys.modules.pop("plain_package", None)
