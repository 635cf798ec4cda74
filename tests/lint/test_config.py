"""``[tool.fusionlint]``: discovery, validation, rule selection, globs; each file's own settings."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fusionlint.config import Config, ConfigError, find_config_file, load_config, tomllib

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
        ("extend-exclude = 'gen'", "extend-exclude must be a list of strings"),
        ("respect-gitignore = 'yes'", "respect-gitignore must be true or false, got 'yes'"),
        ("cache-dir = 3", "cache-dir must be a path"),
        ("cache_dir = 'x'", "unknown key(s) cache_dir"),
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


def concise_codes(output: str) -> dict[str, set[str]]:
    """``{path: codes}`` from ``--output-format concise``."""
    found: dict[str, set[str]] = {}
    for line in output.splitlines():
        path, _, rest = line.partition(":")
        if rest:
            found.setdefault(path, set()).add(rest.split(": ", 1)[1].split()[0])
    return found


@pytest.fixture
def two_packages(tmp_path, monkeypatch):
    """pkgA selects one rule and pkgB another; both hold the same two files, each a rule's example."""
    from fusionlint.rules import all_rules

    examples = [(rule.code, rule.examples[0].bad) for rule in all_rules() if rule.examples][:2]
    for package, selected in (("pkgA", examples[0][0]), ("pkgB", examples[1][0])):
        (tmp_path / package / "src").mkdir(parents=True)
        write_config(tmp_path / package, f"select = ['{selected}']")
        for index, (_, text) in enumerate(examples):
            (tmp_path / package / "src" / f"m{index}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    return examples[0][0], examples[1][0]


def test_each_file_is_checked_with_its_nearest_config(two_packages, capsys):
    from fusionlint.cli import main

    first, second = two_packages
    expected = {
        "pkgA/src/m0.py": {first}, "pkgB/src/m1.py": {second},
    }  # fmt: skip
    for args in (["pkgA", "pkgB"], ["pkgA/src/m0.py", "pkgB/src/m1.py", "pkgA/src/m1.py", "pkgB/src/m0.py"]):
        for run in ("cold", "warm"):  # the warm run answers from each package's cache
            assert main(["check", "--output-format", "concise", *args]) == 1
            assert concise_codes(capsys.readouterr().out) == expected, (args, run)
    assert (Path("pkgA") / ".fusionlint_cache" / "findings.json").is_file()
    assert (Path("pkgB") / ".fusionlint_cache" / "findings.json").is_file()
    assert main(["check", "--output-format", "concise", "--config", "pkgA/pyproject.toml", "pkgA", "pkgB"]) == 1
    assert concise_codes(capsys.readouterr().out) == {"pkgA/src/m0.py": {first}, "pkgB/src/m0.py": {first}}
    write_config(Path("pkgB"), "ignore = ['FL5']")  # no such rule: the error names the config it is in
    assert main(["check", "pkgA", "pkgB"]) == 2
    assert capsys.readouterr().err == (
        f"fusionlint: error: {Path('pkgB/pyproject.toml').absolute()}: [tool.fusionlint]: unknown rule selector 'FL5'"
        " (see `fusionlint rules`)\n"
    )


def test_one_cache_folder_for_both_packages_keeps_their_settings_apart(two_packages, capsys, monkeypatch, tmp_path):
    """The same bytes under two configs are two cache entries: the key holds the file's settings."""
    from fusionlint.cli import main

    first, second = two_packages
    monkeypatch.setenv("FUSIONLINT_CACHE_DIR", str(tmp_path / "shared"))
    for run in ("cold", "warm"):
        assert main(["check", "--output-format", "concise", "pkgA", "pkgB"]) == 1
        assert concise_codes(capsys.readouterr().out) == {"pkgA/src/m0.py": {first}, "pkgB/src/m1.py": {second}}
    entries = json.loads((tmp_path / "shared" / "findings.json").read_text())["entries"]
    assert len(entries) == 4 and not (tmp_path / "pkgA" / ".fusionlint_cache").exists()


def test_show_files_and_show_settings(two_packages, capsys, tmp_path):
    from fusionlint.cli import main

    first, _ = two_packages
    (tmp_path / "pkgA" / "src" / "notes.txt").write_text("not Python\n")
    assert main(["check", "--show-files", "pkgB", "pkgA"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pkgA/src/m0.py", "pkgA/src/m1.py", "pkgB/src/m0.py", "pkgB/src/m1.py",
    ]  # fmt: skip
    assert main(["check", "--show-settings", "--ignore", first, "pkgA/src/m0.py"]) == 0
    shown = capsys.readouterr().out
    settings = tomllib.loads(shown)  # the values are TOML's
    assert shown.startswith("# Resolved settings for: pkgA/src/m0.py\n")
    assert f"# Settings path: {tmp_path / 'pkgA' / 'pyproject.toml'}\n" in shown
    assert settings["select"] == [first] and settings["ignore"] == [first]  # the command line on top
    assert settings["enabled-rules"] == ["FL998", "FL999"]
    assert settings["cache-dir"] == str(tmp_path / "pkgA" / ".fusionlint_cache")
    assert settings["respect-gitignore"] is True and ".git" in settings["exclude"]


def test_a_file_with_no_config_above_it_gets_the_current_folders(tmp_path, monkeypatch, capsys):
    """As in Ruff: a file from elsewhere is checked with the settings of where the run starts."""
    from fusionlint.cli import main
    from fusionlint.rules import all_rules

    rule = next(rule for rule in all_rules() if rule.examples)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "m.py").write_text(rule.examples[0].bad)
    (tmp_path / "project").mkdir()
    write_config(tmp_path / "project", "ignore = ['ALL']")
    monkeypatch.chdir(tmp_path / "project")
    assert main(["check", "--no-cache", "-q", "../elsewhere/m.py"]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "-q", "elsewhere/m.py"]) == 1
    capsys.readouterr()
