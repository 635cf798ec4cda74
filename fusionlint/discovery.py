"""Which files a run checks: the named files, and the Python files and notebooks under named folders.

Folders that hold other people's code or generated files are skipped while walking (version
control, virtualenvs, build output, caches), as are the config's ``exclude`` globs. A path the
user names explicitly is always checked, unless ``force_exclude`` asks for the config's
excludes to apply to it too (what pre-commit, which names every file, needs).
"""
from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from pathlib import Path

SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")
SKIPPED_FOLDERS = frozenset(
    {
        ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "__pycache__",
        "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".fusionlint_cache",
        ".ipynb_checkpoints",
    }
)  # fmt: skip
SKIPPED_FOLDER_GLOBS = ("*.egg-info",)


def is_skipped_folder(folder: Path) -> bool:
    name = folder.name
    return (
        name in SKIPPED_FOLDERS
        or any(fnmatch.fnmatchcase(name, glob) for glob in SKIPPED_FOLDER_GLOBS)
        or (folder / "pyvenv.cfg").exists()  # a virtualenv under any name
    )


def find_source_files(
    paths: Iterable[Path], is_excluded: Callable[[Path], bool], force_exclude: bool = False
) -> list[Path]:
    """Sorted, de-duplicated files to check. A missing path raises ``FileNotFoundError``.

    A named path that exists but cannot be read as a file (a dangling symlink, a FIFO) is kept:
    reading it reports why (FL998).
    """
    found: set[Path] = set()
    for path in paths:
        if not os.path.lexists(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        if force_exclude and is_excluded(path):
            continue
        if path.is_dir():
            found.update(_walk(path, is_excluded))
        else:
            found.add(path)
    return sorted(found)


def _walk(root: Path, is_excluded: Callable[[Path], bool]) -> Iterable[Path]:
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            name
            for name in subfolders
            if not is_skipped_folder(here / name) and not is_excluded(here / name)
        ]
        for name in files:
            path = here / name
            if name.endswith(SOURCE_SUFFIXES) and not is_excluded(path):
                yield path
