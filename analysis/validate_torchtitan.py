"""Print the torchtitan FSDP2 validation table: tokens per second per GPU, both engines.

Run from the repository root: ``python analysis/validate_torchtitan.py``. The cases and the fixed
choices live in ``tests/validation/torchtitan.py`` (the same code the validation tests run).
"""

from validate_sc21 import print_source

if __name__ == "__main__":
    print_source("torchtitan", digits=0)
