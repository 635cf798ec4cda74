"""The IPython shell the ``%%fuse`` tests run cells in."""
from __future__ import annotations

import pytest


@pytest.fixture
def ip():
    """IPython's in-process test shell (one per process), the magic loaded, tensors x and y defined."""
    pytest.importorskip("torch")
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "fusionlint")
    shell.run_cell("import torch\nx = torch.randn(8, 16)\ny = torch.randn(8, 16)")
    shell.rl_next_input = None
    yield shell
    shell.run_line_magic("reset", "-f")
