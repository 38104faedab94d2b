"""analysis/plot_planning.py: each option's best layout and the Pareto front on a hand-made sweep
CSV (answers computed by hand), the PNG it writes, and one-line errors for bad input."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import import_script

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"
HEADER = ("option,cluster.nodes,gpus,tp,pp,cp,dp,micro_batch,schedule,recompute,zero_stage,fits,"
          "step_time_s,tokens_per_s,mfu,time_to_train_days,cost_usd,capital_usd")
ROWS: list[tuple[object, ...]] = [  # option, nodes, gpus, tp, pp, cp, dp, mb, fits, days, cost, capital
    ("3090ti-nvlink-boxes", 16, 64, 2, 4, 1, 8, 1, "true", 90.0, 28000, 143968),
    ("3090ti-nvlink-boxes", 32, 128, 2, 4, 1, 16, 1, "true", 46.0, 29000, 287936),
    ("3090ti-nvlink-boxes", 32, 128, 4, 2, 1, 16, 2, "true", 50.0, 27500, 287936),
    ("3090ti-pcie-boxes", 16, 64, 1, 8, 1, 8, 1, "true", 120.0, 30000, 143968),
    ("3090ti-pcie-boxes", 8, 32, 2, 4, 1, 4, 1, "true", 200.0, 29500, 71984),
    ("3090ti-pcie-boxes", 4, 16, 2, 4, 1, 2, 1, "false", 400.0, 100, 35992),   # ignored: no fit
    ("dgx-a100", 1, 8, 2, 4, 1, 1, 1, "true", 190.0, 40000, 199000),
    ("dgx-a100", 2, 16, 2, 4, 1, 2, 1, "true", 100.0, 41000, 398000),
    ("rented-h100", 2, 16, 2, 2, 1, 4, 1, "true", 37.0, 174000, ""),
    ("rented-h100", 8, 64, 1, 1, 2, 32, 1, "true", 9.7, 183000, ""),
]


def _csv(path: Path, rows: list[tuple[object, ...]] = ROWS, drop: str = "") -> Path:
    """The sweep's CSV for ``rows``, without the column ``drop`` when given."""
    columns = HEADER.split(",")
    table = []
    for (option, nodes, gpus, tp, pp, cp, dp, mb, fits, days, cost, capital) in rows:
        values = [option, nodes, gpus, tp, pp, cp, dp, mb, "1f1b", "full", 1, fits, 10.0, 1000.0,
                  0.4, days, cost, capital]
        table.append({c: v for c, v in zip(columns, values, strict=True) if c != drop})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, [c for c in columns if c != drop])
        writer.writeheader()
        writer.writerows(table)
    return path


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return import_script("analysis", "plot_planning")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = ("import runpy, sys\n"
            f"sys.path.insert(0, {str(ANALYSIS)!r})\n"
            f"sys.argv = ['plot_planning.py', *{list(args)!r}]\n"
            f"runpy.run_path({str(ANALYSIS / 'plot_planning.py')!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)


def test_best_per_option_is_the_cheapest_fitting_layout(script: ModuleType, tmp_path: Path) -> None:
    layouts = script.read_layouts(_csv(tmp_path / "results.csv"))
    assert len(layouts) == 9  # the row that does not fit is left out
    best = script.best_per_option(layouts)
    assert {k: (v.label, v.cost_usd) for k, v in best.items()} == {
        "3090ti-nvlink-boxes": ("32 nodes tp4 pp2 mb2", 27500.0),
        "3090ti-pcie-boxes": ("8 nodes tp2 pp4 mb1", 29500.0),
        "dgx-a100": ("1 node tp2 pp4 mb1", 40000.0),
        "rented-h100": ("2 nodes tp2 pp2 mb1", 174000.0),
    }


def test_pareto_front(script: ModuleType, tmp_path: Path) -> None:
    """By hand: 9.7 d $183k, 37 d $174k, 46 d $29k, 50 d $27.5k; every other point is beaten."""
    layouts = script.read_layouts(_csv(tmp_path / "results.csv"))
    front = script.pareto_front(layouts)
    assert [(x.days, x.cost_usd) for x in front] == [(9.7, 183000.0), (37.0, 174000.0),
                                                     (46.0, 29000.0), (50.0, 27500.0)]
    assert front[0].label == "8 nodes tp1 pp1 cp2 mb1"
    for x in layouts:  # off the front means dominated
        dominated = any(f.days <= x.days and f.cost_usd <= x.cost_usd and f != x for f in front)
        assert (x in front) != dominated


def test_writes_a_png_next_to_the_csv(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    done = _run(tmp_path, str(_csv(tmp_path / "out" / "results.csv")))
    assert done.returncode == 0, done.stderr
    png = tmp_path / "out" / "planning.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000
    assert "3090ti-nvlink-boxes      32 nodes tp4 pp2 mb2" in done.stdout
    assert f"wrote {png}" in done.stdout


def test_out_flag(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    done = _run(tmp_path, str(_csv(tmp_path / "r.csv")), "--out", str(tmp_path / "fig" / "p.png"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fig" / "p.png").stat().st_size > 20_000


@pytest.mark.parametrize(("drop", "rows", "message"), [
    ("cost_usd", ROWS, "cost_usd: missing column"),
    ("", [(*ROWS[0][:9], "soon", *ROWS[0][10:])], "line 2.time_to_train_days: expected a number"),
    ("", [(*ROWS[0][:8], "false", *ROWS[0][9:])], "fits: no row fits in memory"),
])
def test_bad_csv_is_one_line_and_exit_2(tmp_path: Path, drop: str,
                                        rows: list[tuple[object, ...]], message: str) -> None:
    path = _csv(tmp_path / "r.csv", rows, drop)
    done = _run(tmp_path, str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
    assert str(path) in done.stderr


def test_missing_results_is_one_line(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("plot_planning.py: runs/sweep/plan-10b-300b/results.parquet")
    assert done.stderr.count("\n") == 1


def test_parquet_and_gzip_tables_read_as_the_csv(script: ModuleType, tmp_path: Path) -> None:
    """The sweep writes ``results.parquet`` by default and ``results.csv.gz`` on request (docs/
    sweep.md): both read to the same layouts as the plain CSV."""
    import gzip

    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    plain = _csv(tmp_path / "results.csv")
    pq.write_table(pcsv.read_csv(plain), tmp_path / "results.parquet")
    (tmp_path / "results.csv.gz").write_bytes(gzip.compress(plain.read_bytes()))
    expected = script.read_layouts(plain)
    assert script.read_layouts(tmp_path / "results.parquet") == expected
    assert script.read_layouts(tmp_path / "results.csv.gz") == expected
