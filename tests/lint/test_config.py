"""``[tool.fusionlint]``: discovery, validation, rule selection, globs; and folder walking."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fusionlint.config import Config, ConfigError, find_config_file, load_config
from fusionlint.discovery import find_source_files

CODES = frozenset({"FL001", "FL002", "FL010", "FL101", "FL999"})


def write_config(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(f"[project]\nname = 'x'\n\n[tool.fusionlint]\n{body}\n")
    return path


def test_nearest_pyproject_with_the_table_wins(tmp_path):
    outer = write_config(tmp_path, "ignore = ['FL002']")
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname = 'no table here'\n")
    assert find_config_file(inner) == outer
    assert find_config_file(inner / "mod.py") == outer
    nearer = write_config(inner, "")
    assert find_config_file(inner / "mod.py") == nearer


def test_selection_select_extend_ignore_and_prefixes():
    config = Config(root=Path("/p"), select=("FL0",), extend_select=("FL101",), ignore=("FL01",))
    assert config.enabled_codes(CODES) == {"FL001", "FL002", "FL101", "FL999"}
    cli = config.with_overrides(select=("FL002",), ignore=("FL101",))
    assert cli.enabled_codes(CODES) == {"FL002", "FL999"}  # the syntax-error pseudo rule stays...
    assert cli.with_overrides(ignore=("FL999",)).enabled_codes(CODES) == {"FL002"}  # ...unless named
    assert Config(root=Path("/p"), ignore=("ALL",)).enabled_codes(CODES) == {"FL999"}
    assert Config(root=Path("/p")).enabled_codes(CODES) == CODES


def test_per_file_ignores_and_exclude_globs(tmp_path):
    config = load_config(
        write_config(
            tmp_path,
            "exclude = ['generated', '*_pb2.py']\n"
            "[tool.fusionlint.per-file-ignores]\n'tests/*' = ['FL0']\n'conftest.py' = ['FL101']\n",
        ),
        tmp_path,
    )
    assert config.root == tmp_path.absolute()
    assert config.enabled_codes(CODES, tmp_path / "tests" / "unit" / "test_a.py") == {"FL101", "FL999"}
    assert config.enabled_codes(CODES, tmp_path / "src" / "conftest.py") == CODES - {"FL101"}
    assert config.enabled_codes(CODES, tmp_path / "src" / "model.py") == CODES
    assert config.is_excluded(tmp_path / "generated")
    assert config.is_excluded(tmp_path / "generated" / "deep" / "x.py")
    assert config.is_excluded(tmp_path / "src" / "api_pb2.py")
    assert not config.is_excluded(tmp_path / "src" / "generated_code.py")


def test_extra_ops_are_passed_through_sorted(tmp_path):
    config = load_config(
        write_config(tmp_path, "[tool.fusionlint.extra-ops]\nview = ['my_view']\ncompute = ['fast_mm', 'conv']\n"),
        tmp_path,
    )
    assert config.extra_ops == (("compute", ("fast_mm", "conv")), ("view", ("my_view",)))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("selct = ['FL001']", "unknown key(s) selct"),
        ("select = 'FL001'", "select must be a list of strings"),
        ("ignore = [1]", "ignore must be a list of strings"),
        ("select = ['E501']", "'E501' is not a rule selector"),
        ("per-file-ignores = ['x']", "per-file-ignores must be a table"),
        ("[tool.fusionlint.per-file-ignores]\n'a.py' = ['nope']", "'nope' is not a rule selector"),
        ("[tool.fusionlint.extra-ops]\nviews = ['x']", "unknown op class 'views'"),
        ("select = [", "invalid TOML"),
    ],
)
def test_invalid_config_is_a_clear_error(tmp_path, body, message):
    path = write_config(tmp_path, body)
    with pytest.raises(ConfigError) as error:
        load_config(find_config_file(tmp_path), tmp_path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_selectors_that_name_no_rule_are_refused():
    Config(root=Path("/p"), select=("FL0",), ignore=("FL999",)).check_selectors(CODES)
    with pytest.raises(ConfigError, match="unknown rule selector 'FL5'"):
        Config(root=Path("/p"), ignore=("FL9", "FL5")).check_selectors(CODES - {"FL999"})
    with pytest.raises(ConfigError, match="not a rule selector"):
        Config(root=Path("/p")).with_overrides(select=("fl001",))


def test_walk_skips_tool_folders_virtualenvs_and_excludes(tmp_path):
    files = [
        "a.py", "b.pyi", "nb.ipynb", "notes.txt", "pkg/c.py", "pkg/__pycache__/c.py",
        ".git/hooks/x.py", ".venv/lib/y.py", "venv/z.py", "build/lib/w.py", "dist/v.py",
        "node_modules/n.py", ".tox/t.py", "x.egg-info/e.py", "myenv/lib/site.py", "gen/g.py",
    ]  # fmt: skip
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    config = Config(root=tmp_path, exclude=("gen",))
    found = find_source_files([tmp_path], config.is_excluded)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a.py", "b.pyi", "nb.ipynb", "pkg/c.py"]

    named = tmp_path / "gen" / "g.py"
    assert find_source_files([named, tmp_path / "a.py", tmp_path / "a.py"], config.is_excluded) == [
        tmp_path / "a.py",
        named,
    ]  # named files are checked even when excluded, and only once
    assert find_source_files([named], config.is_excluded, force_exclude=True) == []
    with pytest.raises(FileNotFoundError, match="missing.py: no such file"):
        find_source_files([tmp_path / "missing.py"], config.is_excluded)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"tool = 5\n", "`tool` must be a table, got 5"),
        (b"[tool]\nfusionlint = 3\n", "`tool.fusionlint` must be a table, got 3"),
        (b"[tool.fusionlint\n", "invalid TOML"),
        ("[tool.fusionlint]\nselect = ['FL001']\n".encode("utf-16"), "not valid UTF-8 (TOML files must be UTF-8)"),
    ],
)
def test_a_malformed_pyproject_is_one_line_naming_it(tmp_path, monkeypatch, capsys, data, message):
    from fusionlint.cli import main

    (tmp_path / "pyproject.toml").write_bytes(data)
    (tmp_path / "m.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    for args in (["check"], ["check", "--config", "pyproject.toml"]):
        assert main(args) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1
        assert captured.err.startswith("fusionlint: error: ") and "pyproject.toml: " in captured.err
        assert message in captured.err


@pytest.mark.skipif(sys.version_info < (3, 11), reason="simulates Python 3.10 on a newer one (3.10 runs the real path)")
def test_tomli_stands_in_for_tomllib_on_python_3_10(tmp_path):
    """Python 3.10 has no tomllib: simulated by blocking it and offering the stdlib parser as ``tomli``."""
    write_config(tmp_path, "select = ['FL001']")
    program = (
        "import importlib.util, pathlib, sys, tomllib\n"
        "folder = pathlib.Path(tomllib.__file__).parent\n"
        "for name in [m for m in sys.modules if m.split('.')[0] == 'tomllib']: del sys.modules[name]\n"
        "sys.modules['tomllib'] = None\n"
        "spec = importlib.util.spec_from_file_location(\n"
        "    'tomli', folder / '__init__.py', submodule_search_locations=[str(folder)])\n"
        "tomli = sys.modules['tomli'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(tomli)\n"
        "from fusionlint import config\n"
        "assert config.tomllib is tomli, config.tomllib\n"
        "print(config.load_config(config.find_config_file(pathlib.Path('.')), pathlib.Path('.')).select)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "('FL001',)\n", "")
    blocked = "import sys; sys.modules['tomllib'] = sys.modules['tomli'] = None; import fusionlint.config"
    done = subprocess.run([sys.executable, "-c", blocked], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "tomli" in done.stderr.splitlines()[-1]  # names what is missing
