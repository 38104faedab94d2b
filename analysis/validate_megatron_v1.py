"""Print the Megatron-LM v1 (Sept 2020) validation table: iteration time in ms, both engines.

Run from the repository root: ``python analysis/validate_megatron_v1.py``. The cases and the fixed
choices live in ``tests/validation/megatron_v1.py`` (the same code the validation tests run).
"""

from validate_sc21 import print_source

if __name__ == "__main__":
    print_source("megatron_v1", digits=0)
