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
import re
from pathlib import Path
from typing import Any


class GitIgnore:
    """Answers for one run: each folder's repository, ignore file and verdict is found once."""

    def __init__(self) -> None:
        self._repositories: dict[str, str | None] = {}
        self._chains: dict[str, tuple[tuple[str, Any], ...]] = {}
        self._ignored_folders: dict[str, bool] = {}

    def is_ignored(self, path: Path, is_dir: bool) -> bool:
        absolute = os.path.abspath(path)
        repository = self._repository(os.path.dirname(absolute))
        return repository is not None and self._ignored(absolute, is_dir, repository)

    def named(self, folder: Path) -> None:
        """``folder`` was named on the command line: what lies under it is judged by the patterns
        alone, as Ruff does, even where git ignores the folder or one above it."""
        self._ignored_folders[os.path.abspath(folder)] = False

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
        for prefix, patterns in self._ignore_files(parent, repository):  # the first file that decides wins
            verdict = _verdict(patterns, path[len(prefix) :].replace(os.sep, "/") + ("/" if is_dir else ""))
            if verdict is not None:
                return verdict
        return False

    def _ignored_folder(self, folder: str, repository: str) -> bool:
        if folder not in self._ignored_folders:
            self._ignored_folders[folder] = self._ignored(folder, True, repository)
        return self._ignored_folders[folder]

    def _ignore_files(self, folder: str, repository: str) -> tuple[tuple[str, Any], ...]:
        """The patterns that apply in ``folder``, nearest first, each with its folder (a prefix)."""
        if folder not in self._chains:
            lines = _lines(os.path.join(folder, ".gitignore"))
            if folder == repository:  # the repository's own excludes, overridden by its .gitignore
                lines = _lines(os.path.join(folder, ".git", "info", "exclude")) + lines
            above = () if folder == repository else self._ignore_files(os.path.dirname(folder), repository)
            self._chains[folder] = ((os.path.join(folder, ""), _compiled(lines)), *above) if lines else above
        return self._chains[folder]


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:  # none there (or unreadable, as git takes it)
        return []


def _compiled(lines: list[str]) -> list[Any]:
    import pathspec  # only a repository with ignore files pays for its import

    return [pattern for pattern in pathspec.GitIgnoreSpec.from_lines(lines).patterns if pattern.include is not None]


def _verdict(patterns: list[Any], path: str) -> bool | None:
    """Whether the last pattern matching ``path`` itself ignores it (None: no pattern matches).
    ``path`` ends with ``/`` for a folder."""
    for pattern in reversed(patterns):
        match = pattern.regex.match(path)
        if match is not None and _matches_itself(pattern.regex, match, path):
            return pattern.include
    return None


def _matches_itself(regex: re.Pattern, match: re.Match, path: str) -> bool:
    """pathspec's patterns also match what lies inside a folder they match; git's match the path
    itself only (the walk never enters an ignored folder, and a nearer ``!folder/`` must not
    re-include what an outer file ignores inside it)."""
    if "ps_d" in regex.groupindex:  # a pattern that may name a folder: its end, at the path's end
        return match.start("ps_d") == -1 or match.end("ps_d") == len(path)
    if regex.pattern == ".":  # "*": anything
        return True
    # "a/**", "**/a/**": what is inside an ``a``, at any depth where one is (the folder a/a is inside
    # the first a, though the greedy match ends at the second)
    return any(regex.fullmatch(path, 0, end + 1) for end, char in enumerate(path[:-1]) if char == "/")
