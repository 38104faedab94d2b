"""Print the vTrain single-node validation: error statistics and their breakdown, both engines.

Run from the repository root: ``python analysis/validate_vtrain.py`` (``--rows`` adds the
1440-row table). The rows and the fixed choices live in ``tests/validation/vtrain.py`` (the same
code the validation tests run). Error = predicted / measured - 1: negative means simcluster is
faster than the measured iteration (optimistic).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded

from tests.validation.vtrain import (
    BREAKDOWN_KEYS,
    SUBSETS,
    ErrorSummary,
    VTrainRow,
    breakdown,
    load_rows,
    predicted_ms,
    summarise,
)

ENGINES = ("analytical", "des")


def _cells(s: ErrorSummary) -> str:
    return f"{s.median_abs:.1%} | {s.median_signed:+.1%} | {s.p90_abs:.1%}"


def print_summary(rows: list[VTrainRow], errors: dict[str, list[float]]) -> None:
    """Median |error|, median signed error and p90 |error| per subset and engine."""
    print("| rows | n | analytical median \\|e\\| | median | p90 \\|e\\| "
          "| DES median \\|e\\| | median | p90 \\|e\\| |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, keep in SUBSETS.items():
        chosen = {e: [x for r, x in zip(rows, errors[e], strict=True) if keep(r)] for e in ENGINES}
        print(f"| {name} | {len(chosen['des'])} | {_cells(summarise(chosen['analytical']))} "
              f"| {_cells(summarise(chosen['des']))} |")


def print_breakdown(rows: list[VTrainRow], errors: dict[str, list[float]]) -> None:
    """The signed and absolute median error grouped by each layout or shape column."""
    print("\n| column | value | n | analytical median | median \\|e\\| | DES median | median \\|e\\| |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in BREAKDOWN_KEYS:
        fast = breakdown(rows, errors["analytical"], key)
        des = dict(breakdown(rows, errors["des"], key))
        for value, s in fast:
            d = des[value]
            print(f"| {key} | {value} | {s.rows} | {s.median_signed:+.1%} | {s.median_abs:.1%} "
                  f"| {d.median_signed:+.1%} | {d.median_abs:.1%} |")


def print_per_layer(rows: list[VTrainRow], errors: dict[str, list[float]]) -> None:
    """PP = 1 rows: measured and analytical time per layer and micro-batch (ms), median by
    (hidden, TP, micro-batch); the measured column shows the floor simcluster lacks."""
    groups: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
    for row, fast in zip(rows, errors["analytical"], strict=True):
        if row.pp == 1:
            scale = row.layers * row.global_batch // (row.dp * row.micro_batch)
            groups.setdefault((row.hidden, row.tp, row.micro_batch), []).append(
                (row.iteration_ms / scale, row.iteration_ms * (1 + fast) / scale))
    print("\n| hidden | TP | micro-batch | n | measured ms per layer and micro-batch | analytical |")
    print("|---:|---:|---:|---:|---:|---:|")
    for (hidden, tp, micro), pairs in sorted(groups.items()):
        measured = statistics.median(p[0] for p in pairs)
        predicted = statistics.median(p[1] for p in pairs)
        print(f"| {hidden} | {tp} | {micro} | {len(pairs)} | {measured:.2f} | {predicted:.2f} |")


def print_rows(rows: list[VTrainRow], errors: dict[str, list[float]]) -> None:
    """Every row: measured and predicted iteration time (ms) and the error of both engines."""
    print("\n| row | measured | analytical | error | DES | error |")
    print("|---|---:|---:|---:|---:|---:|")
    for row, fast, des in zip(rows, errors["analytical"], errors["des"], strict=True):
        ms = row.iteration_ms
        print(f"| {row.id} | {ms:.1f} | {ms * (1 + fast):.1f} | {fast:+.1%} "
              f"| {ms * (1 + des):.1f} | {des:+.1%} |")


def main(argv: Sequence[str]) -> int:
    """Print the summary and breakdown tables (and every row with ``--rows``)."""
    parser = argparse.ArgumentParser(prog="validate_vtrain.py", description=__doc__)
    parser.add_argument("--rows", action="store_true", help="also print the 1440-row table")
    args = parser.parse_args(argv[1:])
    rows = load_rows()
    errors = {e: [predicted_ms(r, e) / r.iteration_ms - 1 for r in rows] for e in ENGINES}
    print_summary(rows, errors)
    print_breakdown(rows, errors)
    print_per_layer(rows, errors)
    if args.rows:
        print_rows(rows, errors)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_vtrain.py", main, sys.argv))
