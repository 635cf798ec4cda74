"""``python -m fusionlint``: the same as the ``fusionlint`` command."""
import sys

from fusionlint.cli import main

sys.exit(main())
