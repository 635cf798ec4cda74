"""Which files a run checks: default and configured excludes, and git's ignore files (git itself is
the oracle: a real repository, compared with what ``git ls-files`` leaves out)."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from fusionlint.config import Settings
from fusionlint.discovery import find_source_files

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def make_tree(root: Path, files: list[str]) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n")


def relative(root: Path, found: list[Path]) -> list[str]:
    return [path.relative_to(root).as_posix() for path in found]


def git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")  # no user's excludesFile
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True).stdout


def test_walk_skips_tool_folders_virtualenvs_and_excludes(tmp_path, monkeypatch):
    make_tree(tmp_path, [
        "a.py", "b.pyi", "nb.ipynb", "notes.txt", "pkg/c.py", "pkg/__pycache__/c.py",
        ".git/hooks/x.py", ".venv/lib/y.py", "venv/z.py", "build/lib/w.py", "dist/v.py",
        "node_modules/n.py", ".tox/t.py", "x.egg-info/e.py", "myenv/lib/site.py", "gen/g.py",
    ])  # fmt: skip
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "pyproject.toml").write_text("[tool.fusionlint]\nextend-exclude = ['gen']\n")
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert relative(tmp_path, find_source_files([tmp_path], settings)) == ["a.py", "b.pyi", "nb.ipynb", "pkg/c.py"]

    named = tmp_path / "gen" / "g.py"
    assert find_source_files([named, tmp_path / "a.py", tmp_path / "a.py"], settings) == [
        tmp_path / "a.py",
        named,
    ]  # named files are checked even when excluded, and only once
    assert find_source_files([named], settings, force_exclude=True) == []
    with pytest.raises(FileNotFoundError, match="missing.py: no such file"):
        find_source_files([tmp_path / "missing.py"], settings)


def test_exclude_replaces_the_default_folders_and_extend_exclude_adds_to_them(tmp_path, monkeypatch):
    make_tree(tmp_path, ["a.py", "build/b.py", "gen/g.py", "venv/v.py"])
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.fusionlint]\nrespect-gitignore = false\nexclude = ['gen']\n")
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py", "build/b.py", "venv/v.py"]
    config.write_text("[tool.fusionlint]\nextend-exclude = ['gen']\n")
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py"]


def test_each_folder_is_walked_with_its_own_settings(tmp_path, monkeypatch):
    """Exclude globs are relative to their own config's folder, and apply below it only."""
    make_tree(tmp_path, ["gen/top.py", "pkg/gen/top.py", "pkg/own/o.py", "pkg/m.py", "other/own/o.py"])
    (tmp_path / "pyproject.toml").write_text("[tool.fusionlint]\nextend-exclude = ['pkg', 'gen/top.py']\n")
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.fusionlint]\nextend-exclude = ['own']\n")
    monkeypatch.chdir(tmp_path)
    found = relative(tmp_path, find_source_files([tmp_path, tmp_path / "pkg"], Settings()))
    # the root's config leaves pkg out of the root's walk; named, pkg is walked with its own
    assert found == ["other/own/o.py", "pkg/gen/top.py", "pkg/m.py"]


GITIGNORED_TREE = [
    "a.py", "gen/g.py", "gen/keep.py", "logs/x.py", "pkg/m.py", "pkg/tmp_m.py", "pkg/deep/tmp_d.py",
    "pkg/deep/kept.py", "pkg/local.py", "sub/only_root.py", "only_root.py", "notes/n.py", "notes/sub/n.py",
    "data/raw/r.py", "data/keep/k.py", "private.py",
]  # fmt: skip
GITIGNORES = {
    ".gitignore": "gen/\n!gen/keep.py\nlogs\n/only_root.py\nnotes/**/n.py\ndata/*\n!data/keep/\n",
    "pkg/.gitignore": "tmp_*.py\nlocal.py\n",
    "pkg/deep/.gitignore": "!tmp_d.py\n",
}


@needs_git
def test_git_ignored_files_are_skipped_as_git_skips_them(tmp_path, monkeypatch):
    make_tree(tmp_path, GITIGNORED_TREE)
    for name, patterns in GITIGNORES.items():
        (tmp_path / name).write_text(patterns)
    git(tmp_path, "init", "-q")
    (tmp_path / ".git" / "info" / "exclude").write_text("private.py\n")
    monkeypatch.chdir(tmp_path)
    found = sorted(relative(tmp_path, find_source_files([tmp_path], Settings())))
    kept_by_git = sorted(name for name in git(tmp_path, "ls-files", "--others", "--exclude-standard").split() if name.endswith(".py"))
    assert found == kept_by_git
    assert "gen/keep.py" not in found  # nothing inside an ignored folder comes back
    assert {"a.py", "pkg/m.py", "pkg/deep/tmp_d.py", "data/keep/k.py", "sub/only_root.py"} <= set(found)


@needs_git
def test_git_ignore_agrees_with_git_on_random_trees(tmp_path):
    """Random ignore files (anchored, folder-only, negated, wildcard patterns) over random trees."""
    rng = random.Random()
    names = ["a", "b", "gen", "tmp"]  # folders are these, files these plus .py: they never collide
    patterns = [
        "a", "/a", "a/", "b.py", "*.py", "gen/", "!a.py", "!b.py", "tmp*", "**/gen/*.py", "a/**", "!gen/", "*/b.py",
        "!a/b.py", "**/a/**", "!tmp/", "gen/*", "/b/", "!*.py", "a/**/b.py",
    ]  # fmt: skip
    for trial in range(20):
        root = tmp_path / f"repo{trial}"
        files = ["/".join(rng.choices(names, k=rng.randint(0, 3)) + [f"{rng.choice(names)}.py"]) for _ in range(25)]
        make_tree(root, files)
        folders = sorted({Path(name).parent.as_posix() for name in files})
        for folder in rng.sample(folders, rng.randint(1, min(4, len(folders)))):
            (root / folder / ".gitignore").write_text("\n".join(rng.sample(patterns, rng.randint(1, 4))) + "\n")
        git(root, "init", "-q")
        found = sorted(relative(root, find_source_files([root], Settings())))
        kept_by_git = sorted(
            name for name in git(root, "ls-files", "--others", "--exclude-standard").split() if name.endswith(".py")
        )
        ignore_files = {path.relative_to(root).as_posix(): path.read_text() for path in root.rglob(".gitignore")}
        assert found == kept_by_git, ignore_files


@needs_git
def test_a_folder_inside_an_ignored_folder_pattern_stays_ignored(tmp_path):
    """``**/a/**`` ignores the folder a/a (inside the first a), so a nearer ``!*.py`` cannot
    re-include a/a/b.py; a/b.py is a file inside, which it can. Found by the random trees."""
    make_tree(tmp_path, ["a/a/b.py", "a/b.py", "b.py"])
    (tmp_path / ".gitignore").write_text("!*.py\ngen/*\n**/a/**\n")
    (tmp_path / "a" / ".gitignore").write_text("!b.py\n!*.py\n")
    git(tmp_path, "init", "-q")
    kept_by_git = sorted(git(tmp_path, "ls-files", "--others", "--exclude-standard").split())
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == [n for n in kept_by_git if n.endswith(".py")]
    assert "a/a/b.py" not in kept_by_git and "a/b.py" in kept_by_git


@needs_git
def test_gitignore_counts_only_inside_a_repository_and_can_be_turned_off(tmp_path, monkeypatch):
    make_tree(tmp_path, ["a.py", "gen/g.py"])
    (tmp_path / ".gitignore").write_text("gen/\n")
    monkeypatch.chdir(tmp_path)
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py", "gen/g.py"]  # no repository
    git(tmp_path, "init", "-q")
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py"]
    named = tmp_path / "gen" / "g.py"
    assert find_source_files([named], Settings()) == [named]  # named: checked all the same
    assert find_source_files([named], Settings(), force_exclude=True) == []
    # a named folder that git ignores is walked, as Ruff walks it; the patterns still apply below
    (tmp_path / "gen" / ".gitignore").write_text("skip.py\n")
    make_tree(tmp_path, ["gen/skip.py"])
    assert relative(tmp_path, find_source_files([tmp_path / "gen"], Settings())) == ["gen/g.py"]
    assert find_source_files([tmp_path / "gen"], Settings(), force_exclude=True) == []
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py"]
    (tmp_path / "gen" / "skip.py").unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.fusionlint]\nrespect-gitignore = false\n")
    assert relative(tmp_path, find_source_files([tmp_path], Settings())) == ["a.py", "gen/g.py"]


@needs_git
def test_a_git_ignored_folder_is_not_checked_unless_a_file_in_it_is_named(tmp_path, monkeypatch, capsys):
    from fusionlint.cli import main
    from fusionlint.rules import all_rules

    rule, example = next((rule, example) for rule in all_rules() for example in rule.examples)
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "g.py").write_text(example.bad)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("gen/\n")
    git(tmp_path, "init", "-q")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--show-files"]) == 0
    assert capsys.readouterr().out == "a.py\n"
    assert main(["check", "--no-cache", "--output-format", "concise"]) == 0
    capsys.readouterr()
    assert main(["check", "--no-cache", "--output-format", "concise", "gen/g.py"]) == 1
    out = capsys.readouterr().out
    assert f"gen/g.py:{example.at[0][0]}:" in out and f" {rule.code} " in out
    assert main(["check", "--no-cache", "--output-format", "concise", "--force-exclude", "gen/g.py"]) == 0
    capsys.readouterr()
