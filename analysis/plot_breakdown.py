"""Figure: the step-time breakdown of several layouts as stacked bars.

Reads the outputs of ``simcluster run SCENARIO --json [--set parallelism.tp=...]`` (one file per
layout; the bar is labelled with the file name) and stacks each one's ``time_breakdown_s``
(compute, tp_comm, pp_comm, dp_comm, bubble, optimizer, ...). Writes a PNG, an SVG and a CSV
(default: ``breakdown.png`` next to the first file). Needs matplotlib.
Usage: ``python analysis/plot_breakdown.py RUN.json [RUN.json ...] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _guard import guarded
from _inputs import output, read_json

from simcluster.errors import SpecError
from simcluster.report.figures import breakdown_bars
from simcluster.report.figures.step import CATEGORIES


def row(path: Path) -> dict[str, Any]:
    """The bar of one ``run --json`` file: its label, step time and breakdown seconds."""
    data = read_json(path, ["time_breakdown_s", "iteration_time_s"],
                     "the output of simcluster run --json")
    parts = data["time_breakdown_s"]
    if not isinstance(parts, dict) or any(not isinstance(parts.get(c, 0.0), int | float)
                                          for c in CATEGORIES):
        raise SpecError("time_breakdown_s", "expected seconds per category", str(path))
    return {"label": path.stem, "step_time_s": data["iteration_time_s"],
            **{c: float(parts.get(c, 0.0)) for c in CATEGORIES}}


def main(argv: Sequence[str]) -> int:
    """Read the runs, draw the bars."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", help="outputs of simcluster run --json")
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    parser.add_argument("--title", default="step-time breakdown by layout")
    args = parser.parse_args(argv[1:])
    rows = [row(Path(p)) for p in args.runs]
    out = output(args.out, Path(args.runs[0]).parent / "breakdown.png")
    written = breakdown_bars(rows, out, title=args.title)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_breakdown.py", main, sys.argv))
