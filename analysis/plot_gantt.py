"""Figure: the pipeline Gantt of one simulated step, from a trace.

Reads the Chrome/Perfetto trace of ``simcluster run SCENARIO --trace t.json`` and draws one row
per (stage, stream), coloured by category (compute, pp_comm, dp_comm, bubble, ...). Writes a PNG,
an SVG and a CSV of the spans (default: ``<trace>.png`` next to the trace). ``--head F`` or
``--tail F`` zooms on the first or last fraction F of the step. Needs matplotlib.
Usage: ``python analysis/plot_gantt.py TRACE.json [--out FILE] [--head F | --tail F]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _guard import guarded
from _inputs import output, read_json

from simcluster.errors import SpecError
from simcluster.report.figures import gantt_figure


def _window(events: list[dict[str, object]], head: float | None,
            tail: float | None) -> tuple[float, float] | None:
    ends = [float(e["ts"]) + float(e["dur"]) for e in events if e.get("ph") == "X"]  # type: ignore[arg-type]
    if not ends:
        return None
    step_ms = max(ends) / 1e3
    if head is not None:
        return (0.0, head * step_ms)
    if tail is not None:
        return ((1 - tail) * step_ms, step_ms)
    return None


def main(argv: Sequence[str]) -> int:
    """Read the trace, draw the Gantt."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", help="trace JSON of simcluster run --trace")
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    parser.add_argument("--title", default=None)
    zoom = parser.add_mutually_exclusive_group()
    zoom.add_argument("--head", type=float, default=None, help="zoom on the first fraction")
    zoom.add_argument("--tail", type=float, default=None, help="zoom on the last fraction")
    args = parser.parse_args(argv[1:])
    path = Path(args.trace)
    events = read_json(path, ["traceEvents"], "a trace of simcluster run --trace")["traceEvents"]
    if not isinstance(events, list) or not any(isinstance(e, dict) and e.get("ph") == "X"
                                                for e in events):
        raise SpecError("traceEvents", "no X spans: expected a trace of simcluster run --trace",
                        str(path))
    for frac in (args.head, args.tail):
        if frac is not None and not 0 < frac <= 1:
            raise SpecError("--head/--tail", f"expected a fraction in (0, 1], got {frac}")
    out = output(args.out, path.with_suffix(".png"))
    written = gantt_figure(events, out, title=args.title or path.stem,
                           window_ms=_window(events, args.head, args.tail))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_gantt.py", main, sys.argv))
