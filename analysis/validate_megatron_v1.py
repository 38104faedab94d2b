"""Print the Megatron-LM v1 (Sept 2020) validation table: iteration time in ms, both engines.

Run from the repository root: ``python analysis/validate_megatron_v1.py``. The cases and the fixed
choices live in ``tests/validation/megatron_v1.py`` (the same code the validation tests run).
"""

import sys
from collections.abc import Sequence

from _guard import guarded
from validate_sc21 import print_source


def main(argv: Sequence[str]) -> int:
    """Print the table (``argv`` unused)."""
    print_source("megatron_v1", digits=0)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_megatron_v1.py", main, sys.argv))
