"""A ledger of exposed time per category: what one GPU's timeline spent its step on.

The categories are those of ``time_breakdown_s`` (docs/metrics.md). The ledger only adds up; which
interval belongs to which category is decided by the caller (``sim/collect.py``). Conservation
(categories sum to the elapsed time) is checked by :meth:`Ledger.gap_s`, not assumed.
"""

from __future__ import annotations

from typing import Final

from simcluster.errors import InvariantError

#: The breakdown categories, in the order of ``perf.step.TimeBreakdown``.
CATEGORIES: Final = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble",
                     "optimizer", "other")


class Ledger:
    """Seconds per category; ``add`` refuses unknown categories and negative time."""

    __slots__ = ("_seconds",)

    def __init__(self) -> None:
        self._seconds: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)

    def add(self, category: str, seconds: float) -> None:
        """Book ``seconds`` (>= 0) to ``category``."""
        if category not in self._seconds:
            raise InvariantError(f"ledger category {category!r} is not one of {list(CATEGORIES)}")
        if seconds < 0:
            raise InvariantError(f"ledger seconds must be >= 0, got {seconds}")
        self._seconds[category] += seconds

    def as_dict(self) -> dict[str, float]:
        """Category -> seconds (a copy)."""
        return dict(self._seconds)

    @property
    def total_s(self) -> float:
        """Sum of every category."""
        return sum(self._seconds.values())

    def gap_s(self, elapsed_s: float) -> float:
        """``elapsed_s`` minus the booked total (0 when time is conserved)."""
        return elapsed_s - self.total_s
