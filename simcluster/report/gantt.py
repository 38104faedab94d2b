"""A Gantt chart of a simulated step, drawn with matplotlib from Chrome trace events.

The input is the same event list the ``--trace`` file holds (``X`` spans and ``M`` names), so the
picture and the Perfetto view cannot disagree. matplotlib is imported lazily (extra ``plots``).
One row per (stage, stream); colours by category; idle gaps on compute rows are drawn as bubbles.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLOURS = {"compute": "#4C72B0", "pp_comm": "#DD8452", "dp_comm": "#55A868",
           "bubble": "#D9D9D9", "optimizer": "#8172B3", "tp_comm": "#64B5CD",
           "cp_comm": "#CCB974", "ep_comm": "#C44E52", "other": "#937860"}
#: A row-and-colour group with more spans than this is drawn as an image inside vector output.
RASTER_SPANS = 200


def gantt_rows(events: Sequence[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """Rows of the chart in drawing order: (pid, tid) of every stream with a span -> its label."""
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    return {key: f"{procs.get(key[0], key[0])} {threads.get(key, key[1])}"
            for key in sorted(used)}


def gantt(events: Sequence[dict[str, Any]], path: str | Path, title: str = "",
          max_rows: int = 48, window_ms: tuple[float, float] | None = None) -> Path:
    """Draw ``events`` (Chrome trace ``traceEvents``) to a PNG at ``path``; returns the path.

    ``window_ms`` zooms on an interval of the step (milliseconds), e.g. the drain and the DP
    reduction at its end.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = dict(list(gantt_rows(events).items())[:max_rows])
    index = {key: i for i, key in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(14, 0.32 * len(rows) + 1.6))
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}  # one artist per row and colour
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] != "X" or key not in index:
            continue
        colour = COLOURS.get(e.get("cat", "other"), COLOURS["other"])
        bars.setdefault((index[key], colour), []).append((e["ts"] / 1e3, e["dur"] / 1e3))
    for (row, colour), spans in bars.items():  # rasterized: an SVG of a big step stays small
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colour, edgecolors="none",
                       rasterized=len(spans) > RASTER_SPANS)
    ax.set_yticks(range(len(rows)), list(rows.values()), fontsize=7)
    ax.invert_yaxis()
    if window_ms is not None:
        ax.set_xlim(*window_ms)
    ax.set_xlabel("time (ms)")
    ax.set_title(title)
    fig.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], ncol=9,
               fontsize=7, loc="lower center")
    fig.tight_layout(rect=(0.0, 0.6 / (0.32 * len(rows) + 1.6), 1.0, 1.0))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target
