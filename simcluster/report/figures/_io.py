"""Shared plumbing of the figures: lazy matplotlib (Agg), PNG + SVG output, the CSV beside them.

Every figure function takes plain data and a path; it writes ``<stem>.png``, ``<stem>.svg`` and
``<stem>.csv`` (the plotted rows, one per input row, columns in first-seen order) and returns the
three paths. matplotlib is an optional dependency (``pip install 'simcluster[plots]'``).
"""

from __future__ import annotations

import csv
import importlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Suffixes each figure writes, in the order the paths are returned.
SUFFIXES = (".png", ".svg", ".csv")
DPI = 120
#: Fixed salt of the SVG element ids (matplotlib draws random ones otherwise).
HASH_SALT = "simcluster"


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, imported on first use."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = HASH_SALT  # same figure, same SVG ids
    return importlib.import_module("matplotlib.pyplot")


def targets(path: str | Path) -> list[Path]:
    """The PNG, SVG and CSV paths of the figure at ``path`` (any suffix is replaced)."""
    base = Path(path)
    return [base.with_suffix(s) for s in SUFFIXES]


def columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows`` in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as CSV with a header (missing keys are empty cells); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns(rows), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def finish(fig: Any, ax: Any, path: str | Path, rows: Sequence[Mapping[str, Any]], *,
           labels: tuple[str, str], title: str, title_size: int | None = 9,
           legend_size: int = 8) -> list[Path]:
    """Axis labels, title, a light grid and the legend, then :func:`save`."""
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(title, **({} if title_size is None else {"fontsize": title_size}))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    return save(fig, path, rows)


def save(fig: Any, path: str | Path, rows: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Save ``fig`` as PNG and SVG at ``path``, close it, write ``rows`` to the CSV beside them."""
    png, svg, table = targets(path)
    png.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(png, dpi=DPI)
        fig.savefig(svg, metadata={"Date": None})
    finally:
        pyplot().close(fig)
    return [png, svg, write_csv(table, rows)]
