"""Figures of simcluster results, from plain data: each function takes rows (dicts) or a trace
event list and a path, and writes ``<stem>.png``, ``<stem>.svg`` and ``<stem>.csv`` (the plotted
data), returning the three paths. matplotlib is imported lazily, on the Agg backend.

The ``analysis/plot_*.py`` scripts are command lines over these; ``analysis/make_figures.py``
regenerates every figure in ``docs/img``.
"""

from __future__ import annotations

from simcluster.report.figures.published import busbw, goodput, residuals, validation_scatter
from simcluster.report.figures.step import breakdown_bars, gantt_figure, heatmap
from simcluster.report.figures.sweep import pareto, planning

__all__ = ["breakdown_bars", "busbw", "gantt_figure", "goodput", "heatmap", "pareto", "planning",
           "residuals", "validation_scatter"]
