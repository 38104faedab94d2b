"""Print the SC'21 validation table: configuration, published, predicted by both engines, error.

Run from the repository root: ``python analysis/validate_sc21.py``. The cases and the fixed choices
live in ``tests/validation/sc21.py`` (the same code the validation tests run).
"""

from __future__ import annotations

import importlib
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "validation"))


def print_table(rows: list[tuple[str, float, float, float]], digits: int = 1) -> None:
    """Markdown table of (id, published, analytical, DES) rows and the error summary per engine."""
    print("| configuration | published | analytical | error | DES | error |")
    print("|---|---:|---:|---:|---:|---:|")
    for case_id, published, fast, des in rows:
        print(f"| {case_id} | {published:.0f} | {fast:.{digits}f} | {fast / published - 1:+.1%} "
              f"| {des:.{digits}f} | {des / published - 1:+.1%} |")
    for name, column in (("analytical", 2), ("DES", 3)):
        errors = [abs(r[column] / r[1] - 1) for r in rows]
        print(f"\n{name}: max |error| {max(errors):.1%}, median |error| "
              f"{statistics.median(errors):.1%}, {sum(e <= 0.10 for e in errors)}/{len(errors)} "
              "within 10%", end="")
    print()


def print_source(module: str, digits: int = 1) -> None:
    """Print the table of ``tests/validation/<module>.py`` (its ``table()``: the cases and fixed
    choices the validation tests run)."""
    print_table(importlib.import_module(module).table(), digits)


def main(argv: Sequence[str]) -> int:
    """Print the SC'21 table (``argv`` unused)."""
    print_source("sc21")
    return 0


if __name__ == "__main__":
    from _guard import guarded

    sys.exit(guarded("validate_sc21.py", main, sys.argv))
