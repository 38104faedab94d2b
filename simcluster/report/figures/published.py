"""Figures against published numbers: bus bandwidth curves, the validation scatter, and goodput
against the checkpoint interval with Young's and Daly's optima."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simcluster.report.figures._io import finish, pyplot, save, targets, write_csv
from simcluster.report.reliability import plot_goodput_interval

#: Half-width of the shaded band around y = x in the validation scatter.
BAND = 0.10
Row = Mapping[str, Any]


def busbw(rows: Sequence[Row], path: str | Path, title: str = "") -> list[Path]:
    """Bus bandwidth (GB/s) against message size (bytes, log2), one colour per ``series``.

    Each row has ``series``, ``source`` (``simcluster``: drawn as a line; anything else, e.g.
    ``published``: drawn as markers), ``size_bytes`` and ``busbw_GBps``.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    series = list(dict.fromkeys(str(r["series"]) for r in rows))
    for i, name in enumerate(series):
        for source in dict.fromkeys(str(r["source"]) for r in rows if r["series"] == name):
            mine = sorted((r for r in rows if r["series"] == name and r["source"] == source),
                          key=lambda r: float(r["size_bytes"]))
            x = [float(r["size_bytes"]) for r in mine]
            y = [float(r["busbw_GBps"]) for r in mine]
            if source == "simcluster":
                ax.plot(x, y, "-", color=f"C{i}", label=f"{name}: simcluster")
            else:
                ax.plot(x, y, "o", color=f"C{i}", markerfacecolor="none", label=f"{name}: {source}")
    ax.set_xscale("log", base=2)
    return finish(fig, ax, path, rows, labels=("message size (bytes)", "bus bandwidth (GB/s)"),
                  title=title, legend_size=7)


def validation_scatter(rows: Sequence[Row], path: str | Path, title: str = "") -> list[Path]:
    """Predicted (y) against published (x) on log-log axes, one marker per ``source``, with the
    y = x line and a +-10% band.

    Each row has ``source``, ``quantity`` (what was compared, with its unit), ``case``,
    ``published`` and ``predicted`` (both > 0, in the quantity's unit).
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 6.5))
    markers = ("o", "s", "^", "D", "v", "P", "X")
    sources = list(dict.fromkeys(str(r["source"]) for r in rows))
    for i, source in enumerate(sources):
        mine = [r for r in rows if r["source"] == source]
        ax.scatter([float(r["published"]) for r in mine], [float(r["predicted"]) for r in mine],
                   s=14, alpha=0.7, marker=markers[i % len(markers)], color=f"C{i}",
                   label=f"{source}: {mine[0]['quantity']} ({len(mine)})")
    values = [float(r[k]) for r in rows for k in ("published", "predicted")]
    low, high = min(values) / 1.5, max(values) * 1.5
    ax.plot([low, high], [low, high], color="black", linewidth=1, label="y = x")
    ax.fill_between([low, high], [low * (1 - BAND), high * (1 - BAND)],
                    [low * (1 + BAND), high * (1 + BAND)], color="grey", alpha=0.2,
                    label=f"+-{BAND:.0%}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("published")
    ax.set_ylabel("simcluster (predicted)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return save(fig, path, rows)


def residuals(rows: Sequence[Row], path: str | Path, x: str, title: str = "",
              x_label: str = "", log_x: bool = True) -> list[Path]:
    """Prediction error (%) against ``x``, one colour per ``group``, with the +-10% band.

    Each row has ``group``, ``error`` (predicted / published - 1) and the numeric field ``x``.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    groups = list(dict.fromkeys(str(r["group"]) for r in rows))
    for i, group in enumerate(groups):
        mine = [r for r in rows if r["group"] == group]
        ax.scatter([float(r[x]) for r in mine], [100 * float(r["error"]) for r in mine], s=16,
                   alpha=0.75, color=f"C{i}", label=f"{group} ({len(mine)})")
    ax.axhline(0, color="black", linewidth=1)
    ax.axhspan(-100 * BAND, 100 * BAND, color="grey", alpha=0.2, label=f"+-{BAND:.0%}")
    if log_x:
        ax.set_xscale("log", base=2)
    return finish(fig, ax, path, rows, labels=(x_label or x, "error: predicted / published - 1 (%)"),
                  title=title, legend_size=7)


def goodput(sweep: Mapping[str, Any], path: str | Path, title: str = "") -> list[Path]:
    """Goodput against the checkpoint interval (:func:`plot_goodput_interval`: simulated mean,
    95% band, Daly's closed form, simulated/Young/Daly optima) as PNG and SVG; the CSV holds the
    sweep's points (``SweepResult.to_dict()["interval_sweep"]``)."""
    png, svg, table = targets(path)
    png.parent.mkdir(parents=True, exist_ok=True)
    pyplot()  # Agg and the fixed SVG salt
    plot_goodput_interval(dict(sweep), png, title)
    plot_goodput_interval(dict(sweep), svg, title)
    return [png, svg, write_csv(table, sweep["interval_sweep"])]
