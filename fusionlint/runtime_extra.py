"""The runtime half (``fusionrt``, ``%%fuse``) needs torch, which the linter-only install
(``pip install fusionlint``) leaves out: what needs it says which extra to install, in one line,
instead of a traceback. This module imports nothing heavy, so the ``fusionrt`` command starts here.
"""
from __future__ import annotations

import sys

INSTALL = "pip install 'fusionlint[rt]'"


class MissingRuntime(ImportError):
    """torch is not installed: the runtime extra is missing."""


def require_runtime(what: str) -> None:
    """Raise ``MissingRuntime`` naming the extra when torch cannot be imported."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise MissingRuntime(f"{what} needs the runtime extra: {INSTALL}") from exc


def fusionrt_command() -> int:
    """The ``fusionrt`` script: ``fusionrt.cli.main``, or the missing extra named (exit 2)."""
    try:
        require_runtime("fusionrt")
    except MissingRuntime as exc:
        print(exc, file=sys.stderr)
        return 2
    from fusionrt.cli import main

    return main()
