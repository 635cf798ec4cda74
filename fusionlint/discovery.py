"""Which files a run checks: the named files, and the Python files and notebooks under named folders.

Walking a folder skips what each path's settings exclude: the ``exclude`` and ``extend-exclude``
globs, and with ``respect-gitignore`` what git ignores; virtualenvs are skipped under any name. A
path the user names explicitly is always checked, unless ``force_exclude`` asks for the
exclusions to apply to it too (what pre-commit, which names every file, needs); so is what lies
under a named folder that git ignores (the patterns still apply below it).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from fusionlint.config import Settings
from fusionlint.gitignore import GitIgnore

SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


def find_source_files(paths: Iterable[Path], settings: Settings, force_exclude: bool = False) -> list[Path]:
    """Sorted, de-duplicated files to check. A missing path raises ``FileNotFoundError``.

    A named path that exists but cannot be read as a file (a dangling symlink, a FIFO) is kept:
    reading it reports why (FL998).
    """
    exclusion = Exclusion(settings)
    found: set[Path] = set()
    for path in paths:
        if not os.path.lexists(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        if force_exclude and exclusion.excludes(path, path.is_dir()):
            continue
        if path.is_dir():
            exclusion.gitignore.named(path)
            found.update(_walk(path, exclusion))
        else:
            found.add(path)
    return sorted(found)


class Exclusion:
    """Whether a path is left out, by its own settings' globs and, when they say so, by git."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gitignore = GitIgnore()

    def excludes(self, path: Path, is_dir: bool) -> bool:
        config = self.settings.for_path(path)
        return config.is_excluded(path) or (config.respect_gitignore and self.gitignore.is_ignored(path, is_dir))


def _walk(root: Path, exclusion: Exclusion) -> Iterable[Path]:
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            name
            for name in subfolders
            if not (here / name / "pyvenv.cfg").exists() and not exclusion.excludes(here / name, True)
        ]
        for name in files:
            path = here / name
            if name.endswith(SOURCE_SUFFIXES) and not exclusion.excludes(path, False):
                yield path
