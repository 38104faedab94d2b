"""What the figures draw, read back from the matplotlib figure itself (captured as it is closed):
the Gantt chart's bars sit at the trace's times in milliseconds and in its category's colour, the
legend's colours are the bars', the axes carry their documented labels, the validation scatter's
y = x line and band, the residuals' groups, and the files' reproducibility (no date in the SVG,
a second figure into the same folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simcluster.report import figures
from simcluster.report.gantt import COLOURS, gantt, gantt_rows

pytest.importorskip("matplotlib")

import matplotlib.pyplot as plt
from matplotlib.colors import to_hex

TRACE = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "stage 0"}},
         {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "compute"}},
         {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "p2p"}},
         {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "stage 1"}},
         {"ph": "X", "pid": 1, "tid": 0, "name": "F", "cat": "compute", "ts": 0, "dur": 500},
         {"ph": "X", "pid": 1, "tid": 1, "name": "send", "cat": "pp_comm", "ts": 500, "dur": 80},
         {"ph": "X", "pid": 1, "tid": 0, "name": "B", "cat": "compute", "ts": 800, "dur": 900},
         {"ph": "X", "pid": 2, "tid": 7, "name": "F", "cat": "compute", "ts": 580, "dur": 500}]


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the code under test closes, in order (closing still happens)."""
    seen: list[Any] = []
    original = plt.close

    def capture(fig: Any = None) -> None:
        seen.append(fig)
        original(fig)

    monkeypatch.setattr(plt, "close", capture)
    return seen


def test_gantt_rows_label_process_and_thread_names() -> None:
    """Names from the M events; a stream without names falls back to its pid and tid numbers."""
    assert gantt_rows(TRACE) == {(1, 0): "stage 0 compute", (1, 1): "stage 0 p2p", (2, 7): "stage 1 7"}
    unnamed = [{"ph": "X", "pid": 3, "tid": 5, "name": "F", "cat": "compute", "ts": 0, "dur": 1}]
    assert gantt_rows(unnamed) == {(3, 5): "3 5"}


def test_gantt_bars_in_ms_coloured_by_category(tmp_path: Path, closed: list[Any]) -> None:
    gantt(TRACE, tmp_path / "g.png", title="step")
    (fig,) = closed
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (ms)"
    assert ax.get_title() == "step"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stage 0 compute", "stage 0 p2p",
                                                            "stage 1 7"]
    bars = {}
    for collection in ax.collections:
        colour = to_hex(collection.get_facecolor()[0])
        for path in collection.get_paths():
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            bars[(round(float(xs.min()), 6), round(float(xs.max() - xs.min()), 6),
                  round(float(ys.min() + ys.max()) / 2, 6))] = colour
    compute, p2p = to_hex(COLOURS["compute"]), to_hex(COLOURS["pp_comm"])
    assert bars == {(0.0, 0.5, 0.0): compute, (0.8, 0.9, 0.0): compute, (0.5, 0.08, 1.0): p2p,
                    (0.58, 0.5, 2.0): compute}
    legend = {t.get_text(): to_hex(h.get_facecolor())
              for t, h in zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles, strict=True)}
    assert legend == {k: to_hex(c) for k, c in COLOURS.items()}


def test_validation_scatter_axes_line_and_band(tmp_path: Path, closed: list[Any]) -> None:
    rows = [{"source": "SC'21", "quantity": "TFLOP/s", "case": "a", "published": 100.0,
             "predicted": 110.0},
            {"source": "vTrain", "quantity": "ms", "case": "b", "published": 400.0,
             "predicted": 380.0}]
    figures.validation_scatter(rows, tmp_path / "s.png", title="validation")
    ax = closed[0].axes[0]
    assert ax.get_title() == "validation"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("published", "simcluster (predicted)")
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    (line,) = ax.get_lines()
    assert line.get_label() == "y = x"
    assert line.get_linewidth() == 1
    low, high = 100.0 / 1.5, 400.0 * 1.5
    assert list(line.get_xdata()) == list(line.get_ydata()) == pytest.approx([low, high])
    assert ax.get_xlim() == pytest.approx((low, high))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["SC'21: TFLOP/s (1)", "vTrain: ms (1)", "y = x", "+-10%"]


def test_residuals_one_series_per_group_in_percent(tmp_path: Path, closed: list[Any]) -> None:
    rows = [{"group": "A100", "error": 0.05, "seq": 2048}, {"group": "H100", "error": -0.2, "seq": 8192},
            {"group": "A100", "error": 0.01, "seq": 4096}]
    figures.residuals(rows, tmp_path / "r.png", x="seq", title="res", x_label="sequence")
    ax = closed[0].axes[0]
    scatters = [c for c in ax.collections if c.get_label() in ("A100 (2)", "H100 (1)")]
    points = {c.get_label(): sorted(map(tuple, c.get_offsets().tolist())) for c in scatters}
    assert points == {"A100 (2)": [(2048.0, 5.0), (4096.0, 1.0)], "H100 (1)": [(8192.0, -20.0)]}
    assert all(list(c.get_sizes()) == [16] for c in scatters)
    assert ax.get_xlabel() == "sequence"
    assert ax.get_ylabel() == "error: predicted / published - 1 (%)"
    assert ax.get_xscale() == "log"


def test_breakdown_bars_stack_in_seconds(tmp_path: Path, closed: list[Any]) -> None:
    rows = [{"label": "a", "compute": 2.0, "bubble": 1.0}, {"label": "b", "compute": 3.0}]
    figures.breakdown_bars(rows, tmp_path / "b.png", title="t")
    ax = closed[0].axes[0]
    assert ax.get_ylabel() == "time per step (s)"
    tops = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    assert tops == {0: 3.0, 1: 3.0}


def test_svg_has_no_date_and_two_figures_share_a_folder(tmp_path: Path) -> None:
    """The SVG is reproducible (matplotlib's Date metadata dropped) and a second figure may be
    written into a folder the first created."""
    rows = [{"label": "a", "compute": 1.0}]
    first = figures.breakdown_bars(rows, tmp_path / "out" / "one.png")
    second = figures.breakdown_bars(rows, tmp_path / "out" / "two.png")
    assert all(p.exists() for p in (*first, *second))
    assert "<dc:date>" not in first[1].read_text(encoding="utf-8")


GOODPUT = {"interval_sweep": [{"interval_min": 5.0, "goodput": 0.95, "ci95": 0.01,
                               "daly_goodput": 0.951},
                              {"interval_min": 20.0, "goodput": 0.97, "ci95": 0.02,
                               "daly_goodput": 0.972}],
           "optimal_interval_min": 20.0, "young_interval_min": 21.0, "daly_interval_min": None}


def test_goodput_band_spans_the_intervals_at_mean_plus_minus_ci(tmp_path: Path,
                                                                closed: list[Any]) -> None:
    from simcluster.report.reliability import plot_goodput_interval

    plot_goodput_interval(dict(GOODPUT), tmp_path / "g.png", "goodput")
    ax = closed[0].axes[0]
    (band,) = [c for c in ax.collections if c.get_label() == "simulated 95% CI"]
    xs, ys = band.get_paths()[0].vertices.T
    assert (float(xs.min()), float(xs.max())) == (5.0, 20.0)
    assert (float(ys.min()), float(ys.max())) == pytest.approx((0.94, 0.99))
    assert 0.0 < band.get_alpha() < 1.0
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["simulated 95% CI", "simulated mean", "Daly Eq. 9 (closed form)",
                      "simulated optimum 20.0 min", "Young 21.0 min"]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("checkpoint interval (min)",
                                                  "goodput (useful / elapsed)")


def test_collective_plot_labels_its_axes(tmp_path: Path, closed: list[Any]) -> None:
    from simcluster.report.collective import CollectiveRow, plot_busbw

    rows = [CollectiveRow(size_bytes=1024.0, count=256, time_us=10.0, algbw_GBps=0.1, busbw_GBps=0.2,
                          algorithm="ring", protocol="simple"),
            CollectiveRow(size_bytes=2048.0, count=512, time_us=12.0, algbw_GBps=0.2, busbw_GBps=0.3,
                          algorithm="ring", protocol="simple")]
    plot_busbw(rows, str(tmp_path / "c.png"), "all_reduce")
    ax = closed[0].axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("size (bytes)", "busbw (GB/s)",
                                                                  "all_reduce")
    assert list(ax.get_lines()[0].get_ydata()) == [0.2, 0.3]


def test_the_report_pages_gantt_carries_the_title(closed: list[Any]) -> None:
    from simcluster.report.html import gantt_figure

    html = gantt_figure(TRACE, "Llama 3 8B, 16 H100")
    assert 'alt="pipeline Gantt chart"' in html
    assert closed[0].axes[0].get_title() == "Llama 3 8B, 16 H100"
