"""Print the torchtitan FSDP2 validation table: tokens per second per GPU, both engines.

Run from the repository root: ``python analysis/validate_torchtitan.py``. The cases and the fixed
choices live in ``tests/validation/torchtitan.py`` (the same code the validation tests run).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "validation"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from torchtitan import table
from validate_sc21 import print_table


def main() -> None:
    print_table(table(), digits=0)


if __name__ == "__main__":
    main()
