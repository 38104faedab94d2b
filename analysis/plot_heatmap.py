"""Figure: step time and memory over TP x PP for a scenario.

Sweeps SCENARIO's layouts with the library (``simcluster.sweep``; ``--search AXIS=V1,V2`` narrows
it as on the command line) and keeps, for each (TP, PP), the fastest layout that fits: its step
time and its peak memory per GPU. Writes a PNG, an SVG and a CSV (default: ``heatmap.png`` next
to the scenario). Needs matplotlib.
Usage: ``python analysis/plot_heatmap.py SCENARIO.yaml [--search AXIS=V1,V2 ...] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _guard import guarded
from _inputs import output

import simcluster
from simcluster.errors import SpecError
from simcluster.report.figures import heatmap


def cells(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The fastest record of each (tp, pp), sorted by tp then pp."""
    best: dict[tuple[int, int], dict[str, Any]] = {}
    for r in records:
        key = (int(r["tp"]), int(r["pp"]))
        if key not in best or float(r["step_time_s"]) < best[key]["step_time_s"]:
            best[key] = {"tp": key[0], "pp": key[1], "cp": int(r["cp"]), "dp": int(r["dp"]),
                         "micro_batch": int(r["micro_batch"]), "schedule": str(r["schedule"]),
                         "step_time_s": float(r["step_time_s"]),
                         "peak_memory_gib": float(r["peak_memory_gib"])}
    return [best[k] for k in sorted(best)]


def main(argv: Sequence[str]) -> int:
    """Sweep, keep the best per cell, draw."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", help="scenario YAML")
    parser.add_argument("--search", action="append", default=[], metavar="AXIS=V1,V2",
                        help="restrict a layout axis, as simcluster sweep --search")
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv[1:])
    importlib.import_module("matplotlib")  # say it is missing before the sweep
    path = Path(args.scenario)
    if not path.is_file():
        raise SpecError("", "not found: expected a scenario YAML", str(path))
    frame = simcluster.sweep(str(path), search=args.search)
    rows = cells(frame.to_dict("records"))
    if not rows:
        raise SpecError("parallelism", "no layout fits: nothing to plot", str(path))
    out = output(args.out, path.with_name(f"{path.stem}-heatmap.png"))
    title = args.title or f"{path.stem}: fastest layout per TP x PP"
    written = heatmap(rows, out, title=title)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_heatmap.py", main, sys.argv))
