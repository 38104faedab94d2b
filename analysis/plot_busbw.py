"""Figure: bus bandwidth against message size, simcluster beside published nccl-tests curves.

Reads outputs of ``simcluster collective --topology T --bytes 32K:16G --json`` (one series per
file, named by topology and group size). Published points come from the validation suite
(``tests/validation/test_collectives_published.py``: the 8x A100 NVLink3 nccl-tests sweep and the
GTC plateaus), drawn for the series whose topology and group size they were measured on. Writes
a PNG, an SVG and a CSV (default: ``busbw.png`` next to the first file). Needs matplotlib.
Usage: ``python analysis/plot_busbw.py COLLECTIVE.json [...] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded
from _inputs import output, read_json

from simcluster.errors import SpecError
from simcluster.report.figures import busbw
from tests.validation.test_collectives_published import PLATEAU_BYTES, PLATEAUS, SWEEP

#: The published sweep's platform: (topology, group size).
SWEEP_PLATFORM = ("dgx-a100-80gb", 8)


def published(topology: str, gpus: int) -> list[tuple[str, float, float]]:
    """(what, size_bytes, busbw_GBps) published for ``topology`` with ``gpus`` ranks."""
    points = [("nccl-tests sweep", float(s), b) for s, b in SWEEP] \
        if (topology, gpus) == SWEEP_PLATFORM else []
    plateaus = {(entry, float(value)) for entry, _, value, topo, size, _ in PLATEAUS
                if (topo, size) == (topology, gpus)}
    return points + [("GTC plateau", float(PLATEAU_BYTES), v) for _, v in sorted(plateaus)]


def series_rows(path: Path) -> list[dict[str, Any]]:
    """The simcluster curve of one ``collective --json`` file and its published points."""
    data = read_json(path, ["topology", "gpus", "op", "rows"], "the output of simcluster "
                     "collective --json")
    if not isinstance(data["rows"], list) or not data["rows"]:
        raise SpecError("rows", "no sizes: expected a --bytes A:B range", str(path))
    name = f"{data['topology']} x{data['gpus']} {data['op']}"
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(data["rows"]):
        if not isinstance(r, dict) or not {"size_bytes", "busbw_GBps"} <= r.keys():
            raise SpecError(f"rows[{i}]", "expected size_bytes and busbw_GBps", str(path))
        rows.append({"series": name, "source": "simcluster", "size_bytes": r["size_bytes"],
                     "busbw_GBps": r["busbw_GBps"]})
    if data["op"] == "all_reduce":
        rows += [{"series": name, "source": f"published ({what})", "size_bytes": size,
                  "busbw_GBps": value} for what, size, value in
                 published(str(data["topology"]), int(data["gpus"]))]
    return rows


def main(argv: Sequence[str]) -> int:
    """Read the sweeps, draw the curves."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweeps", nargs="+", help="outputs of simcluster collective --json")
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    parser.add_argument("--title", default="all-reduce bus bandwidth: simcluster vs published")
    args = parser.parse_args(argv[1:])
    rows = [row for p in args.sweeps for row in series_rows(Path(p))]
    out = output(args.out, Path(args.sweeps[0]).parent / "busbw.png")
    written = busbw(rows, out, title=args.title)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_busbw.py", main, sys.argv))
