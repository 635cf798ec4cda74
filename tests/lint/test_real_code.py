"""fusionlint on two pinned packages we did not write: the findings must be exactly those triaged by
hand in docs/triage.json, so a rule change that adds or drops a finding on real code shows up here
(re-triage with bench/real_code.py --triage). Skipped where the registry cannot deliver the
packages within INSTALL_SECONDS (CI without network)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The two smallest of the five triaged packages: about 4 CPU-seconds of linting.
DISTS = ("x_transformers", "open_clip_torch")
INSTALL_SECONDS = 30


def _bench():
    spec = importlib.util.spec_from_file_location("real_code", REPO / "bench" / "real_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    bench = _bench()
    target = tmp_path_factory.mktemp("real")
    requirements = [f"{dist}=={bench.PACKAGES[dist][0]}" for dist in DISTS]
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *requirements],
            check=True,
            capture_output=True,
            timeout=INSTALL_SECONDS,
        )
    except subprocess.CalledProcessError as error:
        why = (error.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"pip cannot install {' '.join(requirements)} --no-deps: {why}")
    except (subprocess.TimeoutExpired, OSError) as error:
        pytest.skip(f"cannot install {' '.join(requirements)} --no-deps within {INSTALL_SECONDS} s: {error}")
    return bench, target


@pytest.mark.slow
def test_findings_on_real_code_are_the_triaged_ones(corpus):
    bench, target = corpus
    findings, _ = bench.collect_findings(target, DISTS)
    triage = json.loads((REPO / "docs" / "triage.json").read_text())
    labels = {bench.PACKAGES[dist][2] for dist in DISTS}
    expected = {bench.finding_key(entry) for entry in triage["findings"] if entry["package"] in labels}
    found = {bench.finding_key(finding) for finding in findings}
    assert len(found) == len(findings), "two findings share rule, path, line and column"
    assert not found - expected, f"findings with no verdict in docs/triage.json: {sorted(found - expected)}"
    assert not expected - found, f"triaged findings no longer reported: {sorted(expected - found)}"
    assert found, "the triage lists findings in these packages; none found means the lint did not run"
