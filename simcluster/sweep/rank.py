"""Ranking: constraints, the objective, and the Pareto front of time against cost.

A row is *eligible* when it is timed (``status`` ok) and meets every constraint; ineligible timed
rows are counted by the constraint they break. Ties on the objective are broken by the row's
position in the enumeration, so the ranking is a total order and the same on every run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simcluster.sweep.config import OBJECTIVES, Constraints
from simcluster.sweep.runner import Row
from simcluster.sweep.space import Rejections


def broken_constraint(row: Row, c: Constraints) -> str | None:
    """The first constraint ``row`` breaks (``constraint.max_days`` ...), or ``None``."""
    checks = (("max_gpus", "gpus"), ("max_days", "time_to_train_days"),
              ("max_cost_usd", "cost_usd"))
    for name, column in checks:
        limit = getattr(c, name)
        value = row.get(column)
        if limit is not None and isinstance(value, int | float) and value > limit:
            return f"constraint.{name}"
    return None


def eligible(rows: Sequence[Row], c: Constraints, rejections: Rejections) -> list[int]:
    """Indexes of the timed rows meeting ``c``; the others are counted in ``rejections``."""
    out = []
    for i, row in enumerate(rows):
        status = row.get("status")
        if status == "memory":
            rejections.add("layout", "memory", str(row.get("reason")))
        elif status == "rule":
            key, _, message = str(row.get("reason")).partition(": ")
            rejections.add("variant", key, message)
        elif (broken := broken_constraint(row, c)) is not None:
            value = row.get(_column(broken))
            shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            rejections.add("layout", broken, f"{_column(broken)} {shown} over the limit")
        else:
            out.append(i)
    return out


def _column(constraint: str) -> str:
    return {"constraint.max_gpus": "gpus", "constraint.max_days": "time_to_train_days",
            "constraint.max_cost_usd": "cost_usd"}[constraint]


def objective_value(row: Row, objective: str) -> float:
    """``row``'s objective as a number to minimise (``inf`` when missing)."""
    value = row.get(objective)
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return math.inf
    return -float(value) if OBJECTIVES[objective] else float(value)


def rank(rows: Sequence[Row], indexes: Sequence[int], objective: str) -> list[int]:
    """``indexes`` ordered best first by ``objective`` (enumeration order breaks ties)."""
    return sorted(indexes, key=lambda i: (objective_value(rows[i], objective), i))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point dominates (both coordinates minimised).

    ``q`` dominates ``p`` when ``q <= p`` in both coordinates and ``q < p`` in one. Sorted by the
    first coordinate (then the second), a point is on the front exactly when its second coordinate
    is below every earlier one's; equal points are all kept. O(n log n). Returned in that order.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1], i))
    front: list[int] = []
    best = math.inf
    last: tuple[float, float] | None = None
    for i in order:
        p = points[i]
        if p[1] < best or p == last:
            front.append(i)
            best = min(best, p[1])
            last = p
    return front
