"""The even/odd split the host-time calibrations share: fit one parameter on the even rows over a
grid, report the held-out odd rows (``calibrate_host_overhead.py``, ``calibrate_megatron_host.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Row = TypeVar("Row")


def best_on_even(rows: Sequence[Row], median_abs: Callable[[list[Row], float], float],
                 grid: Iterable[int]) -> int:
    """The grid value minimising ``median_abs`` on the even rows (the smallest of ties)."""
    fit = list(rows[0::2])
    return min(grid, key=lambda us: (median_abs(fit, us), us))


def fit_even_report_odd(rows: Sequence[Row], median_abs: Callable[[list[Row], float], float],
                        grid: Iterable[int], what: str = "") -> int:
    """:func:`best_on_even`, printed with both halves' median |error| at it and at 0."""
    fit, held = list(rows[0::2]), list(rows[1::2])
    best = best_on_even(rows, median_abs, grid)
    print(f"host_op_us = {best} (fitted on {len(fit)} even {what}rows: median |error| "
          f"{median_abs(fit, best):.1%}; 0 us: {median_abs(fit, 0):.1%})")
    print(f"held-out odd {what}rows ({len(held)}): median |error| {median_abs(held, best):.1%} "
          f"(0 us: {median_abs(held, 0):.1%})")
    return best
