"""Figures of a sweep: the Pareto front (time vs cost) and the hardware-planning chart."""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from simcluster.report.figures._io import finish, pyplot

TIME_COST = ("time to train (days)", "cost to train (USD)")

#: An axis goes logarithmic when its largest value is more than this many times its smallest.
LOG_SPREAD = 10.0
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
Row = Mapping[str, Any]


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _log_if_spread(ax: Any, values: Sequence[float], axis: str) -> bool:
    spread = min(values) > 0 and max(values) / min(values) > LOG_SPREAD
    if spread:
        getattr(ax, f"set_{axis}scale")("log")
    return spread


def pareto(rows: Sequence[Row], path: str | Path, title: str = "") -> list[Path]:
    """Every layout's time to train (days, x) against its cost (USD, y), the Pareto front drawn.

    Each row has ``time_to_train_days``, ``cost_usd``, ``pareto`` (true for a front point) and a
    ``label`` (shown beside front points).
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    days = [float(r["time_to_train_days"]) for r in rows]
    cost = [float(r["cost_usd"]) for r in rows]
    ax.scatter(days, cost, s=10, alpha=0.35, color="C0", label=f"layouts ({len(rows)})")
    front = sorted((r for r in rows if _truthy(r.get("pareto"))),
                   key=lambda r: float(r["time_to_train_days"]))
    fx = [float(r["time_to_train_days"]) for r in front]
    fy = [float(r["cost_usd"]) for r in front]
    ax.step(fx, fy, where="post", color="black", linewidth=1)
    ax.scatter(fx, fy, s=40, color="C3", edgecolors="black", zorder=3,
               label=f"Pareto front ({len(front)})")
    shown: set[tuple[float, float]] = set()
    for r, x, y in zip(front, fx, fy, strict=True):
        if (round(x, 6), round(y, 2)) in shown:  # layouts tied on both axes: label the first
            continue
        shown.add((round(x, 6), round(y, 2)))
        ax.annotate(str(r.get("label", "")), (x, y), textcoords="offset points", xytext=(6, 4),
                    fontsize=7)
    if days:
        _log_if_spread(ax, days, "x")
        _log_if_spread(ax, cost, "y")
    return finish(fig, ax, path, rows, labels=TIME_COST, title=title)


def best_per_option(rows: Iterable[Row]) -> dict[str, Row]:
    """Each option's cheapest row (ties: the faster, then the first), in first-seen order."""
    best: dict[str, Row] = {}
    for row in rows:
        held = best.get(row["option"])
        if held is None or (row["cost_usd"], row["days"]) < (held["cost_usd"], held["days"]):
            best[row["option"]] = row
    return best


def front(rows: Iterable[Row]) -> list[Row]:
    """Rows no other row beats on both days and cost, fastest first (the first of equals kept)."""
    kept: list[Row] = []
    for row in sorted(rows, key=lambda x: (x["days"], x["cost_usd"])):
        if not kept or row["cost_usd"] < kept[-1]["cost_usd"]:
            kept.append(row)
    return kept


def _annotate_best(ax: Any, rows: Sequence[Row], log_x: bool) -> None:
    days = [r["days"] for r in rows]
    middle = (math.log(min(days) * max(days)) / 2 if log_x else (min(days) + max(days)) / 2)
    for i, (option, best) in enumerate(best_per_option(rows).items()):
        ax.scatter([best["days"]], [best["cost_usd"]], s=90, marker=MARKERS[i % len(MARKERS)],
                   color=f"C{i}", edgecolors="black", zorder=3)
        # Labels of the slower points go to their left, inside the axes; one line per option.
        left = (math.log(best["days"]) if log_x else best["days"]) > middle
        ax.annotate(f"{option}: {best['label']}, {best['days']:.0f} d, ${best['cost_usd']:,.0f}",
                    (best["days"], best["cost_usd"]), textcoords="offset points",
                    xytext=(-8 if left else 8, 6 + 11 * i), ha="right" if left else "left",
                    fontsize=8, arrowprops={"arrowstyle": "-", "color": f"C{i}", "lw": 0.5})


def planning(rows: Sequence[Row], path: str | Path, title: str = "") -> list[Path]:
    """Time to train (days, x) against cost (USD, y), one colour per hardware option, each
    option's cheapest layout annotated and the Pareto front drawn.

    Each row has ``option``, ``label`` (the layout), ``days`` and ``cost_usd``.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    for i, option in enumerate(best_per_option(rows)):
        mine = [r for r in rows if r["option"] == option]
        ax.scatter([r["days"] for r in mine], [r["cost_usd"] for r in mine], s=8, alpha=0.4,
                   marker=MARKERS[i % len(MARKERS)], color=f"C{i}", label=option)
    log_x = _log_if_spread(ax, [r["days"] for r in rows], "x")
    _annotate_best(ax, rows, log_x)
    kept = front(rows)
    ax.step([r["days"] for r in kept], [r["cost_usd"] for r in kept], where="post",
            color="black", linewidth=1, label="Pareto front (time vs cost)")
    _log_if_spread(ax, [r["cost_usd"] for r in rows], "y")
    ax.yaxis.set_major_formatter(importlib.import_module("matplotlib.ticker").StrMethodFormatter("${x:,.0f}"))
    return finish(fig, ax, path, rows, labels=TIME_COST, title=title, title_size=None)

