"""Figure: time to train against cost for the planning sweep, one colour per hardware option.

Reads the results CSV of ``simcluster sweep scenarios/plan-10b-300b.yaml`` (one row per candidate
layout; those with ``status`` ok are timed), marks each option's cheapest layout with its layout,
and draws the Pareto front (no other layout is both faster and cheaper). Writes a PNG, an SVG and
a CSV of the plotted layouts (default: ``planning.png`` next to the results CSV). Needs
matplotlib (``pip install simcluster[plots]``).
Usage: ``python analysis/plot_planning.py [RESULTS.parquet|.csv] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _guard import guarded
from _inputs import read_rows

from simcluster.errors import SpecError
from simcluster.report.figures import planning

DEFAULT_CSV = Path("runs") / "sweep" / "plan-10b-300b" / "results.parquet"
#: Columns the figure reads; the sweep writes more (schedule, recompute, mfu, ...).
INT_COLUMNS = ("cluster.nodes", "tp", "pp", "cp", "dp", "micro_batch")
FLOAT_COLUMNS = ("time_to_train_days", "cost_usd")
FALSE = ("false", "0", "no", "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One evaluated layout of one hardware option: where it lands and what it costs."""

    option: str
    nodes: int
    tp: int
    pp: int
    cp: int
    dp: int
    micro_batch: int
    days: float
    cost_usd: float

    @property
    def label(self) -> str:
        """``"32 nodes tp2 pp4 mb1"`` (``cp`` shown when above 1)."""
        cp = f" cp{self.cp}" if self.cp > 1 else ""
        nodes = "1 node" if self.nodes == 1 else f"{self.nodes} nodes"
        return f"{nodes} tp{self.tp} pp{self.pp}{cp} mb{self.micro_batch}"


def read_layouts(path: Path) -> list[Layout]:
    """The rows of a sweep results CSV that fit, as :class:`Layout`; ``SpecError`` naming the file,
    the row and the column for a missing column or a value that is not a number."""
    rows = read_rows(path)
    if not rows:
        raise SpecError("", "no rows: expected a sweep results table with a header and results",
                        str(path))
    missing = [c for c in ("option", *INT_COLUMNS, *FLOAT_COLUMNS) if c not in rows[0]]
    if missing:
        raise SpecError(missing[0], f"missing column (needs {', '.join(missing)})", str(path))
    layouts = [_layout(row, i, path) for i, row in enumerate(rows, start=2)
               if str(row.get("fits", "true")).strip().lower() not in FALSE
               and row.get("status", "ok") == "ok"  # the sweep's untimed rows: memory, rule
               and row.get("rank", "1") != ""]  # ranked: meets the sweep's constraints
    if not layouts:
        raise SpecError("fits", "no row fits in memory: nothing to plot", str(path))
    return layouts


def _layout(row: dict[str, str], line: int, path: Path) -> Layout:
    ints = {c: _number(row, c, line, path, int) for c in INT_COLUMNS}
    days, cost = (_number(row, c, line, path, float) for c in FLOAT_COLUMNS)
    return Layout(option=row["option"], nodes=ints["cluster.nodes"], tp=ints["tp"], pp=ints["pp"],
                  cp=ints["cp"], dp=ints["dp"], micro_batch=ints["micro_batch"], days=days,
                  cost_usd=cost)


def _number(row: dict[str, str], column: str, line: int, path: Path, kind: type[Any]) -> Any:
    text = (row.get(column) or "").strip()
    try:
        value = kind(float(text)) if kind is int and text.endswith(".0") else kind(text)
    except ValueError:
        raise SpecError(f"line {line}.{column}", f"expected a number, got {text!r}", str(path)) \
            from None
    if not math.isfinite(value) or value < 0:
        raise SpecError(f"line {line}.{column}", f"expected a finite number >= 0, got {text!r}",
                        str(path))
    return value


def best_per_option(layouts: Iterable[Layout]) -> dict[str, Layout]:
    """Each option's cheapest layout (ties: the faster, then the first in the file), in the order
    options first appear."""
    best: dict[str, Layout] = {}
    for layout in layouts:
        held = best.get(layout.option)
        if held is None or (layout.cost_usd, layout.days) < (held.cost_usd, held.days):
            best[layout.option] = layout
    return best


def pareto_front(layouts: Iterable[Layout]) -> list[Layout]:
    """Layouts no other layout beats on both time and cost (at least as good on both, better on
    one), fastest first; of equal points the first in the file is kept."""
    front: list[Layout] = []
    for layout in sorted(layouts, key=lambda x: (x.days, x.cost_usd)):
        if not front or layout.cost_usd < front[-1].cost_usd:
            front.append(layout)
    return front


def rows(layouts: Iterable[Layout]) -> list[dict[str, Any]]:
    """The plotted data: each layout's fields and its label."""
    return [{**asdict(x), "label": x.label} for x in layouts]


def plot(layouts: Sequence[Layout], out: Path, title: str) -> list[Path]:
    """Time to train (days, x) against cost (USD, y), each option's best annotated, the front drawn
    (:func:`simcluster.report.figures.planning`): PNG, SVG and CSV; returns their paths."""
    return planning(rows(layouts), out, title)


def main(argv: Sequence[str]) -> int:
    """Read the CSV, print each option's best layout, draw the figure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv", nargs="?", default=str(DEFAULT_CSV),
                        help="sweep results (results.parquet, or a .csv / .csv.gz)")
    parser.add_argument("--out", default=None, help="PNG to write (default: planning.png next to "
                        "the CSV)")
    args = parser.parse_args(argv[1:])
    path = Path(args.csv)
    layouts = read_layouts(path)
    importlib.import_module("matplotlib")  # say it is missing before anything is printed
    for option, best in best_per_option(layouts).items():
        print(f"{option:24s} {best.label:28s} {best.days:8.1f} days  ${best.cost_usd:>14,.0f}")
    out = Path(args.out) if args.out else path.parent / "planning.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    written = plot(layouts, out, f"{path.parent.name or path.stem}: time vs cost to train, best "
                                 "layout per option")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_planning.py", main, sys.argv))
