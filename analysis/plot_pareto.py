"""Figure: the Pareto front of a sweep, time to train against cost.

Reads ``runs/sweep/<name>/results.parquet`` (or a results CSV) of ``simcluster sweep``
(docs/sweep.md): every ranked layout (a ``rank``) is a point, those with ``pareto`` true form the
front, labelled with their layout. Writes a PNG, an SVG and a CSV (default: ``pareto.png`` next
to the results). Needs matplotlib. Usage: ``python analysis/plot_pareto.py RESULTS.parquet [--out FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _guard import guarded
from _inputs import number, output, read_csv

from simcluster.errors import SpecError
from simcluster.report.figures import pareto

NEEDS = ("tp", "pp", "dp", "micro_batch", "time_to_train_days", "cost_usd", "rank", "pareto")


def label(row: dict[str, str]) -> str:
    """``"tp2 pp4 dp2 mb1 1f1b"`` (cp shown when above 1)."""
    cp = f" cp{row['cp']}" if row.get("cp", "1") not in ("1", "") else ""
    return (f"tp{row['tp']} pp{row['pp']}{cp} dp{row['dp']} mb{row['micro_batch']} "
            f"{row.get('schedule', '')}").strip()


def points(path: Path) -> list[dict[str, Any]]:
    """The ranked rows of a sweep results CSV as plot points."""
    rows = read_csv(path, NEEDS, "the results table of simcluster sweep")
    kept = [{"label": label(r), "time_to_train_days": number(r, "time_to_train_days", i, path),
             "cost_usd": number(r, "cost_usd", i, path),
             "pareto": r["pareto"].strip().lower() == "true"}
            for i, r in enumerate(rows, start=2) if r["rank"].strip()]
    if not kept:
        raise SpecError("rank", "no ranked row: nothing to plot", str(path))
    return kept


def main(argv: Sequence[str]) -> int:
    """Read the sweep, draw the front."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv", help="results.parquet (or .csv) of simcluster sweep")
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv[1:])
    path = Path(args.csv)
    rows = points(path)
    out = output(args.out, path.parent / "pareto.png")
    written = pareto(rows, out, title=args.title or f"{path.parent.name}: time vs cost")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_pareto.py", main, sys.argv))
