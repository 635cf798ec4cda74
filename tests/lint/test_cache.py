"""The findings cache on its own; the CLI's warm runs are tested in test_cli_cache.py."""
from __future__ import annotations

import json
import sys

from fusionlint import cache as cache_module
from fusionlint.cache import Cache, options_digest, tool_fingerprint
from fusionlint.model import Finding, FixMode, FixSafety, LintOptions, LintResult

FINDING = Finding("FL001", "group the views", 3, 5, 3, 20, FixSafety.SAFE, cell=2, pays_in=("fusionrt",))
OPTIONS = LintOptions(codes=frozenset({"FL001", "FL002"}))


def test_entries_survive_a_reload(tmp_path):
    cache = Cache(tmp_path, tool="v1")
    key = cache.key(b"x = 1\n", options_digest(OPTIONS), ".py")
    assert cache.get(key) is None
    cache.put(key, LintResult(findings=(FINDING,), errors=("a dropped fix",)))
    cache.remember_rules(frozenset({"FL001", "FL002"}))
    cache.save()
    assert (tmp_path / ".gitignore").read_text().endswith("*\n")

    again = Cache(tmp_path, tool="v1")
    assert again.get(key) == LintResult(findings=(FINDING,), errors=("a dropped fix",))
    assert again.rule_codes == {"FL001", "FL002"}


def test_key_depends_on_content_kind_selection_and_python_not_on_fix_mode(tmp_path, monkeypatch):
    digest = options_digest(OPTIONS)
    assert Cache.key(b"a", digest, ".py") != Cache.key(b"b", digest, ".py")
    assert len({Cache.key(b"{}", digest, kind) for kind in (".py", ".pyi", ".ipynb")}) == 3
    assert options_digest(LintOptions(codes=frozenset({"FL001"}))) != digest
    assert options_digest(LintOptions(codes=OPTIONS.codes, extra_ops=(("view", ("v",)),))) != digest
    assert options_digest(LintOptions(codes=OPTIONS.codes, fix=FixMode.SAFE)) == digest
    monkeypatch.setattr(sys, "version", "3.99.0 (another parser)")
    assert options_digest(OPTIONS) != digest


def test_another_build_of_the_tool_or_a_damaged_file_starts_afresh(tmp_path):
    cache = Cache(tmp_path, tool="v1")
    cache.put("k", LintResult(findings=(FINDING,)))
    cache.save()
    assert Cache(tmp_path, tool="v2").get("k") is None
    (tmp_path / "findings.json").write_text('{"tool": "v1", "entr')
    assert Cache(tmp_path, tool="v1").get("k") is None


def test_a_run_that_adds_nothing_writes_nothing(tmp_path):
    cache = Cache(tmp_path, tool="v1")
    cache.save()
    assert list(tmp_path.iterdir()) == []


def test_trimming_keeps_what_this_run_used(tmp_path, monkeypatch):
    first = Cache(tmp_path, tool="v1")
    for key in ("old", "older", "used"):
        first.put(key, LintResult(findings=()))
    first.save()
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 2)
    second = Cache(tmp_path, tool="v1")
    assert second.get("used") is not None
    second.put("new", LintResult(findings=()))
    second.save()
    stored = json.loads((tmp_path / "findings.json").read_text())
    assert sorted(stored["entries"]) == ["new", "used"]


def test_the_tool_fingerprint_follows_the_package_sources():
    assert tool_fingerprint() == tool_fingerprint()
    assert len(tool_fingerprint()) == 32
