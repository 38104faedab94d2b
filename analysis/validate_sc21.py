"""Print the SC'21 validation table: configuration, published, predicted, error.

Run from the repository root: ``python analysis/validate_sc21.py``. The cases and the fixed choices
live in ``tests/validation/sc21.py`` (the same code the validation tests run).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "validation"))

from sc21 import table


def main() -> None:
    rows = table()
    print("| configuration | published TFLOP/s | predicted TFLOP/s | error |")
    print("|---|---:|---:|---:|")
    for case_id, published, predicted, error in rows:
        print(f"| {case_id} | {published:.0f} | {predicted:.1f} | {error:+.1%} |")
    errors = [abs(r[3]) for r in rows]
    print(f"\nmax |error| {max(errors):.1%}, median |error| {statistics.median(errors):.1%}, "
          f"{sum(e <= 0.10 for e in errors)}/{len(errors)} within 10%")


if __name__ == "__main__":
    main()
