"""Which paths git ignores, for ``respect-gitignore``: the ``.gitignore`` files from the repository's
root down to the path, and the repository's ``.git/info/exclude``.

As in Ruff (and git), they count only inside a git repository: a folder holding ``.git`` (a folder,
or the file of a worktree or submodule, whose ``info/exclude`` is not read) at or above the path.
The user's global excludes file (``core.excludesFile``) is not read. Patterns follow git's rules
(``pathspec``'s gitwildmatch): a deeper ``.gitignore`` overrides a shallower one, the last
matching line of a file wins, and nothing inside an ignored folder can be re-included.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class GitIgnore:
    """Answers for one run: each folder's repository, ignore file and verdict is found once."""

    def __init__(self) -> None:
        self._repositories: dict[str, str | None] = {}
        self._specs: dict[str, Any] = {}  # folder -> its compiled patterns, None without any
        self._ignored_folders: dict[str, bool] = {}

    def is_ignored(self, path: Path, is_dir: bool) -> bool:
        absolute = os.path.abspath(path)
        repository = self._repository(os.path.dirname(absolute))
        return repository is not None and self._ignored(absolute, is_dir, repository)

    def _repository(self, folder: str) -> str | None:
        """The root of the repository holding ``folder``, None outside any."""
        if folder not in self._repositories:
            parent = os.path.dirname(folder)
            if os.path.lexists(os.path.join(folder, ".git")):
                self._repositories[folder] = folder
            else:
                self._repositories[folder] = None if parent == folder else self._repository(parent)
        return self._repositories[folder]

    def _ignored(self, path: str, is_dir: bool, repository: str) -> bool:
        if path == repository:
            return False
        parent = os.path.dirname(path)
        if self._ignored_folder(parent, repository):
            return True
        verdict = None
        folder = parent
        while True:  # from the nearest ignore file up: the first that decides wins
            spec = self._spec(folder, repository)
            if spec is not None:
                relative = os.path.relpath(path, folder).replace(os.sep, "/") + ("/" if is_dir else "")
                verdict = spec.check_file(relative).include
                if verdict is not None:
                    break
            if folder == repository:
                break
            folder = os.path.dirname(folder)
        return bool(verdict)

    def _ignored_folder(self, folder: str, repository: str) -> bool:
        if folder not in self._ignored_folders:
            self._ignored_folders[folder] = self._ignored(folder, True, repository)
        return self._ignored_folders[folder]

    def _spec(self, folder: str, repository: str) -> Any:
        if folder not in self._specs:
            lines = _lines(os.path.join(folder, ".gitignore"))
            if folder == repository:  # the repository's own excludes, overridden by its .gitignore
                lines = _lines(os.path.join(folder, ".git", "info", "exclude")) + lines
            self._specs[folder] = _compiled(lines) if lines else None
        return self._specs[folder]


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:  # none there (or unreadable, as git takes it)
        return []


def _compiled(lines: list[str]) -> Any:
    import pathspec  # only a repository with ignore files pays for its import

    return pathspec.GitIgnoreSpec.from_lines(lines)
