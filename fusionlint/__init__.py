"""fusionlint: find and fix PyTorch code patterns that break kernel fusion in lazy backends."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
REPOSITORY_URL = "https://github.com/fusionlint/fusionlint"  # rule links, SARIF, docs point here


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext fusionlint``: registers ``%%fuse`` (torch, IPython and rich load only now)."""
    from fusionlint.runtime_extra import require_runtime

    require_runtime("%%fuse")
    from fusionlint.magic import load_ipython_extension as load

    load(ipython)
