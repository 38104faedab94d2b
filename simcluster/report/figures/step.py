"""Figures of one step and of layouts: the pipeline Gantt, time-breakdown bars, the TP x PP heatmap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simcluster.report.figures._io import pyplot, save, targets, write_csv
from simcluster.report.gantt import COLOURS, gantt, gantt_rows

#: Categories of ``time_breakdown_s`` in stacking order (the DES and analytical engines share them).
CATEGORIES = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble",
              "optimizer", "other")
#: Columns of the Gantt CSV: one row per ``X`` span of the trace.
SPAN_KEYS = ("pid", "tid", "name", "cat", "ts", "dur")
#: Rows of the Gantt (as :func:`simcluster.report.gantt.gantt` draws by default).
MAX_ROWS = 48


def spans(events: Sequence[dict[str, Any]], max_rows: int = MAX_ROWS) -> list[dict[str, Any]]:
    """The ``X`` spans the Gantt draws (those of its first ``max_rows`` rows), reduced to
    :data:`SPAN_KEYS`."""
    drawn = set(list(gantt_rows(events))[:max_rows])
    return [{k: e.get(k, "") for k in SPAN_KEYS} for e in events
            if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in drawn]


def gantt_figure(events: Sequence[dict[str, Any]], path: str | Path, title: str = "",
                 window_ms: tuple[float, float] | None = None) -> list[Path]:
    """The Gantt of a traced step (:func:`simcluster.report.gantt.gantt`) as PNG and SVG, with
    the spans (microseconds, as in the trace) in the CSV; ``window_ms`` zooms on an interval."""
    png, svg, table = targets(path)
    pyplot()  # Agg and the fixed SVG salt
    gantt(events, png, title=title, max_rows=MAX_ROWS, window_ms=window_ms)
    gantt(events, svg, title=title, max_rows=MAX_ROWS, window_ms=window_ms)
    return [png, svg, write_csv(table, spans(events))]


def breakdown_bars(rows: Sequence[Mapping[str, Any]], path: str | Path,
                   title: str = "") -> list[Path]:
    """Stacked bars of the step-time breakdown, one bar per row.

    Each row has a ``label`` and seconds under the names of :data:`CATEGORIES` (missing: 0).
    """
    plt = pyplot()
    labels = [str(r["label"]) for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(rows) + 2.5), 4.5))
    bottom = [0.0] * len(rows)
    for cat in CATEGORIES:
        values = [float(r.get(cat, 0.0) or 0.0) for r in rows]
        if any(values):
            ax.bar(labels, values, bottom=bottom, color=COLOURS.get(cat, COLOURS["other"]),
                   label=cat)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("time per step (s)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelsize=8, rotation=20)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, path, rows)


def _grid(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[int], list[list[float]]]:
    tps = sorted({int(r["tp"]) for r in rows})
    pps = sorted({int(r["pp"]) for r in rows})
    cells = {(int(r["tp"]), int(r["pp"])): float(r[key]) for r in rows}
    nan = float("nan")
    return tps, pps, [[cells.get((tp, pp), nan) for tp in tps] for pp in pps]


def heatmap(rows: Sequence[Mapping[str, Any]], path: str | Path, title: str = "") -> list[Path]:
    """Two heatmaps over TP (x) and PP (y): step time (s) and peak memory (GiB) per GPU.

    Each row is one cell: ``tp``, ``pp``, ``step_time_s`` and ``peak_memory_gib`` (for instance
    the fastest layout with that TP and PP); a cell with no row is left blank.
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, label, cmap in ((axes[0], "step_time_s", "step time (s)", "viridis_r"),
                                 (axes[1], "peak_memory_gib", "peak memory per GPU (GiB)",
                                  "magma_r")):
        tps, pps, grid = _grid(rows, key)
        image = ax.imshow(grid, cmap=cmap, origin="lower", aspect="auto")
        fig.colorbar(image, ax=ax, label=label)
        ax.set_xticks(range(len(tps)), [str(t) for t in tps])
        ax.set_yticks(range(len(pps)), [str(p) for p in pps])
        ax.set_xlabel("tensor parallel (TP)")
        ax.set_ylabel("pipeline parallel (PP)")
        ax.set_title(label, fontsize=9)
        for y, line in enumerate(grid):
            for x, value in enumerate(line):
                if value == value:  # not NaN
                    ax.text(x, y, f"{value:.3g}", ha="center", va="center", fontsize=7,
                            color="black",
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.6,
                                  "lw": 0})
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path, rows)
