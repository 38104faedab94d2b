"""Print the torchtitan FSDP2 validation table: tokens per second per GPU, both engines.

Run from the repository root: ``python analysis/validate_torchtitan.py``. The cases and the fixed
choices live in ``tests/validation/torchtitan.py`` (the same code the validation tests run).
"""

import sys
from collections.abc import Sequence

from _guard import guarded
from validate_sc21 import print_source


def main(argv: Sequence[str]) -> int:
    """Print the table (``argv`` unused)."""
    print_source("torchtitan", digits=0)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_torchtitan.py", main, sys.argv))
