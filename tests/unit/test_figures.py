"""report.figures and the analysis/plot_*.py scripts: PNG + SVG + CSV from hand-made data, one-line
errors on bad input, and make_figures.py covering every image the docs show."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from simcluster.report import figures

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS = ROOT / "analysis"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

TRACE = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "stage 0"}},
         {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": "compute"}},
         {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "p2p"}},
         {"ph": "X", "pid": 1, "tid": 0, "name": "F c0 mb0", "cat": "compute", "ts": 0, "dur": 500},
         {"ph": "X", "pid": 1, "tid": 1, "name": "send", "cat": "pp_comm", "ts": 500, "dur": 80},
         {"ph": "X", "pid": 1, "tid": 0, "name": "bubble", "cat": "bubble", "ts": 500, "dur": 300},
         {"ph": "X", "pid": 1, "tid": 0, "name": "B c0 mb0", "cat": "compute", "ts": 800,
          "dur": 900}]
BREAKDOWN = [{"label": "tp2-pp2", "compute": 10.3, "tp_comm": 0.97, "pp_comm": 0.11, "bubble": 1.4},
             {"label": "tp1-pp4", "compute": 10.3, "pp_comm": 0.2, "bubble": 3.1, "optimizer": 0.01}]
HEATMAP = [{"tp": 1, "pp": 1, "step_time_s": 10.4, "peak_memory_gib": 76.6},
           {"tp": 2, "pp": 1, "step_time_s": 11.4, "peak_memory_gib": 72.0},
           {"tp": 1, "pp": 2, "step_time_s": 11.4, "peak_memory_gib": 74.0}]
PARETO = [{"label": "tp1 pp1", "time_to_train_days": 10.0, "cost_usd": 900.0, "pareto": True},
          {"label": "tp2 pp1", "time_to_train_days": 6.0, "cost_usd": 1500.0, "pareto": True},
          {"label": "tp2 pp2", "time_to_train_days": 12.0, "cost_usd": 1600.0, "pareto": False}]
PLANNING = [{"option": "boxes", "label": "8 nodes tp2 pp4 mb1", "days": 90.0, "cost_usd": 8e4},
            {"option": "boxes", "label": "16 nodes tp2 pp4 mb1", "days": 50.0, "cost_usd": 1.5e5},
            {"option": "cloud", "label": "2 nodes tp1 pp2 mb1", "days": 20.0, "cost_usd": 1.2e5}]
BUSBW = [{"series": "a100 x8", "source": "simcluster", "size_bytes": 2**20, "busbw_GBps": 18.0},
         {"series": "a100 x8", "source": "simcluster", "size_bytes": 2**30, "busbw_GBps": 228.0},
         {"series": "a100 x8", "source": "published", "size_bytes": 2**30, "busbw_GBps": 229.0}]
SCATTER = [{"source": "SC'21", "quantity": "TFLOP/s", "case": "a", "published": 137.0,
            "predicted": 145.0},
           {"source": "vTrain", "quantity": "ms", "case": "row 0", "published": 372.0,
            "predicted": 459.0}]
GOODPUT = {"interval_sweep": [{"interval_min": 5.0, "goodput": 0.95, "ci95": 0.01,
                               "daly_goodput": 0.951, "time_to_train_days": 10.0},
                              {"interval_min": 20.0, "goodput": 0.97, "ci95": 0.01,
                               "daly_goodput": 0.972, "time_to_train_days": 9.8}],
           "optimal_interval_min": 20.0, "young_interval_min": 21.0, "daly_interval_min": 22.0}

Draw = Callable[[Any, Path], list[Path]]
CASES: list[tuple[str, Draw, Any, Sequence[dict[str, Any]]]] = [
    ("gantt", lambda d, p: figures.gantt_figure(d, p, "t"), TRACE,
     [{k: e[k] for k in ("pid", "tid", "name", "cat", "ts", "dur")} for e in TRACE
      if e["ph"] == "X"]),
    ("breakdown", lambda d, p: figures.breakdown_bars(d, p, "t"), BREAKDOWN, BREAKDOWN),
    ("heatmap", lambda d, p: figures.heatmap(d, p, "t"), HEATMAP, HEATMAP),
    ("pareto", lambda d, p: figures.pareto(d, p, "t"), PARETO, PARETO),
    ("planning", lambda d, p: figures.planning(d, p, "t"), PLANNING, PLANNING),
    ("busbw", lambda d, p: figures.busbw(d, p, "t"), BUSBW, BUSBW),
    ("scatter", lambda d, p: figures.validation_scatter(d, p, "t"), SCATTER, SCATTER),
    ("goodput", lambda d, p: figures.goodput(d, p, "t"), GOODPUT, GOODPUT["interval_sweep"]),
]


def _as_text(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """Rows as csv.DictReader gives them back: every column of any row, missing ones empty."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return [{k: str(r[k]) if k in r else "" for k in keys} for r in rows]


@pytest.mark.parametrize(("name", "draw", "data", "expected"), CASES, ids=[c[0] for c in CASES])
def test_figure_writes_png_svg_and_the_plotted_rows(tmp_path: Path, name: str, draw: Draw,
                                                    data: Any, expected: Sequence[dict[str, Any]]
                                                    ) -> None:
    png, svg, table = draw(data, tmp_path / "sub" / f"{name}.png")
    assert (png.suffix, svg.suffix, table.suffix) == (".png", ".svg", ".csv")
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert png.stat().st_size > 5_000
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert "<svg" in svg.read_text(encoding="utf-8")
    with table.open(newline="", encoding="utf-8") as handle:
        assert list(csv.DictReader(handle)) == _as_text(expected)


def test_gantt_csv_holds_only_the_drawn_rows(tmp_path: Path) -> None:
    extra = [{"ph": "X", "pid": 9, "tid": t, "name": "F", "cat": "compute", "ts": 0, "dur": 1}
             for t in range(60)]
    _, _, table = figures.gantt_figure(TRACE + extra, tmp_path / "g.png")
    with table.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 + 48 - 2  # the trace's two rows, then 46 of the 60 extra rows


def test_svg_is_reproducible(tmp_path: Path) -> None:
    a = figures.heatmap(HEATMAP, tmp_path / "a.png")[1].read_bytes()
    b = figures.heatmap(HEATMAP, tmp_path / "b.png")[1].read_bytes()
    assert a == b


def _script(cwd: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ANALYSIS / name), *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


BAD_INPUTS: list[tuple[str, str, str, str]] = [
    ("plot_gantt.py", "t.json", "{not json", "not JSON"),
    ("plot_gantt.py", "t.json", '{"traceEvents": []}', "traceEvents: no X spans"),
    ("plot_breakdown.py", "r.json", '{"iteration_time_s": 1}', "time_breakdown_s: missing key"),
    ("plot_breakdown.py", "r.json", "[1, 2]", "expected a JSON object"),
    ("plot_pareto.py", "r.csv", "tp,pp\n1,1\n", "missing column"),
    ("plot_pareto.py", "r.csv", "", "no rows"),
    ("plot_busbw.py", "c.json", '{"topology": "x", "gpus": 8, "op": "all_reduce", "rows": []}',
     "rows: no sizes"),
    ("plot_heatmap.py", "s.yaml", "schema: nope\n", "s.yaml"),
]


@pytest.mark.parametrize(("script", "file", "text", "message"), BAD_INPUTS,
                         ids=[f"{b[0]}:{b[3]}" for b in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, script: str, file: str, text: str,
                                          message: str) -> None:
    done = _script(tmp_path, script, _write(tmp_path / file, text))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"{script}: ")
    assert message in done.stderr


@pytest.mark.parametrize("script", ["plot_gantt.py", "plot_breakdown.py", "plot_pareto.py",
                                    "plot_busbw.py", "plot_heatmap.py"])
def test_missing_file_is_one_line_and_exit_2(tmp_path: Path, script: str) -> None:
    done = _script(tmp_path, script, "absent.file")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "absent.file" in done.stderr


def test_scripts_write_next_to_their_input(tmp_path: Path) -> None:
    trace = _write(tmp_path / "t.json", json.dumps({"traceEvents": TRACE}))
    run = {"iteration_time_s": 12.0, "time_breakdown_s": {"compute": 10.0, "bubble": 2.0}}
    runs = [_write(tmp_path / f"{n}.json", json.dumps(run)) for n in ("a", "b")]
    assert _script(tmp_path, "plot_gantt.py", trace, "--tail", "0.5").returncode == 0
    assert _script(tmp_path, "plot_breakdown.py", *runs).returncode == 0
    for stem in ("t", "breakdown"):
        assert all((tmp_path / f"{stem}{s}").stat().st_size > 0 for s in (".png", ".svg", ".csv"))
    with (tmp_path / "breakdown.csv").open(newline="", encoding="utf-8") as handle:
        assert [r["label"] for r in csv.DictReader(handle)] == ["a", "b"]


def _listed() -> list[list[str]]:
    done = _script(ROOT, "make_figures.py", "--list")
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def test_make_figures_lists_every_figure_with_its_target_and_page() -> None:
    listed = _listed()
    names = [row[0] for row in listed]
    assert len(names) == len(set(names)) >= 8
    for name, target, page in listed:
        assert target.startswith("img/"), name
        assert target.endswith(".png"), name
        assert (ROOT / page).is_file(), page
        assert target in (ROOT / page).read_text(encoding="utf-8"), f"{page} does not show {target}"


def test_every_image_in_the_docs_is_made_by_make_figures() -> None:
    made = {row[1] for row in _listed()}
    shown = {m for page in (ROOT / "docs").glob("*.md")
             for m in re.findall(r"\]\((img/[^)\s]+\.(?:png|svg))\)", page.read_text("utf-8"))}
    assert shown, "no image found in docs/*.md"
    assert {s.removesuffix(".svg") + ".png" if s.endswith(".svg") else s for s in shown} <= made


def test_make_figures_unknown_name_is_one_line(tmp_path: Path) -> None:
    done = _script(tmp_path, "make_figures.py", "--only", "nope", "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "unknown figure 'nope'" in done.stderr


@pytest.mark.slow
def test_make_figures_regenerates_the_fast_figures(tmp_path: Path) -> None:
    done = _script(tmp_path, "make_figures.py", "--only", "gantt", "breakdown", "busbw", "--out",
                   str(tmp_path / "img"))
    assert done.returncode == 0, done.stderr
    for stem in ("des-default-trace", "breakdown-layouts", "busbw"):
        png = tmp_path / "img" / f"{stem}.png"
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        assert (tmp_path / "img" / f"{stem}.svg").stat().st_size > 0
        assert (tmp_path / "img" / f"{stem}.csv").stat().st_size > 0
