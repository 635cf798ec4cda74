"""``python -m fusionrt``: the same as the ``fusionrt`` command."""
import sys

from .cli import main

sys.exit(main())
