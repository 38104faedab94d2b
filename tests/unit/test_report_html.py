"""``simcluster report``: the page of a scenario run and of sweep results (sections, numbers equal
to ``run --json``'s and to the results table, figures embedded, user strings escaped), and bad
inputs exiting 2 with one line."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import simcluster
from simcluster.cli import main
from simcluster.report.html_sweep import rejections, tp_pp_cells
from tests.tiny import tiny_scenario

NAME = 'tiny <script>alert("x")</script> & co'
SCENARIO: dict[str, Any] = tiny_scenario(NAME)
RELIABILITY = {"reliability": {"failure_rate_per_node_day": 0.5, "restart_s": 300},
               "checkpoint": {"interval_min": 5, "mode": "sync", "storage_write_GBps": 10}}
SEARCH = ["tp=1,2,4", "pp=1,2", "recompute=none,full", "zero_stage=0,1", "micro_batch=1,2"]
SUMMARY_KEYS = ("iteration_time_s", "tokens_per_s", "mfu", "hfu", "model_tflops_per_gpu",
                "peak_memory_gib", "bubble_fraction", "time_to_train_days", "gpu_hours", "cost_usd")


def _write(directory: Path, doc: dict[str, Any]) -> Path:
    path = directory / "s.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _report(capsys: pytest.CaptureFixture[str], source: Path, out: Path, *args: str) -> str:
    assert main(["report", str(source), "-o", str(out), *args]) == 0
    assert capsys.readouterr().out.strip() == f"written: {out / 'index.html'}"
    return (out / "index.html").read_text(encoding="utf-8")


def _run_json(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> dict[str, Any]:
    assert main(["run", str(path), "--json", *args]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _data_values(html: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r'data-key="([^"]+)" data-value="([^"]+)"', html)}


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', html)


def _assert_self_contained(html: str) -> None:
    links = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', html, flags=re.IGNORECASE)
    assert all(link.startswith("data:") for link in links), links
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    assert "url(" not in html


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("report"), SCENARIO)


def test_scenario_page_sections_and_numbers_equal_run_json(
        tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, tiny, tmp_path / "r")
    run = _run_json(capsys, tiny)
    assert _sections(html) == ["summary", "breakdown", "memory", "gantt", "scenario"]
    values = _data_values(html)
    for key in SUMMARY_KEYS:
        assert values[key] == run[key], key
    for category, seconds in run["time_breakdown_s"].items():
        assert f"<td class=\"t\">{category}</td><td>{seconds:.4g}</td>" in html
    for part, gib in run["memory_gib"]["overhead_parts"].items():
        assert f"<td class=\"t\">{part}</td><td>{gib:.4g}</td>" in html
    assert html.count("data:image/png;base64,") == 1  # the Gantt
    assert html.count("<svg") == 2  # breakdown and memory bars
    _assert_self_contained(html)


def test_user_strings_are_escaped(tiny: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, tiny, tmp_path / "r", "--fast")
    assert "alert" in html
    assert '<script>alert' not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in html
    resolved = re.search(r"<pre>(.*)</pre>", html, flags=re.DOTALL)
    assert resolved is not None
    assert "&lt;script&gt;" in resolved.group(1)


def test_fast_engine_says_why_there_is_no_gantt(tiny: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, tiny, tmp_path / "r", "--fast", "--set", "parallelism.tp=4")
    run = _run_json(capsys, tiny, "--fast", "--set", "parallelism.tp=4")
    assert "gantt" not in _sections(html)
    assert "no pipeline Gantt: the analytical engine" in html
    assert _data_values(html)["iteration_time_s"] == run["iteration_time_s"]
    assert "tp: 4" in html  # the override reaches the resolved scenario


def test_reliability_scenario_has_the_goodput_figure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {**SCENARIO, **RELIABILITY, "parallelism": {"tp": 2, "global_batch": 64}})
    html = _report(capsys, path, tmp_path / "r", "--replicas", "8")
    run = _run_json(capsys, path)
    assert _sections(html) == ["summary", "breakdown", "memory", "distribution", "goodput",
                               "scenario"]
    assert "time to train histogram" in html
    assert html.count("data:image/png;base64,") == 1
    assert "Daly Eq. 9" in html
    values = _data_values(html)
    assert values["iteration_time_s"] == run["iteration_time_s"]
    assert "goodput" in values
    assert 0 < values["goodput"] < 1
    _assert_self_contained(html)


@pytest.fixture(scope="module")
def sweep_dir(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "out"
    simcluster.sweep(tiny, search=SEARCH, out=out, results="csv")
    return out


def _csv_rows(directory: Path) -> list[dict[str, str]]:
    with (directory / "results.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_sweep_page_top_pareto_rejections_heatmap(
        sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, sweep_dir, tmp_path / "r")
    assert _sections(html) == ["top", "pareto", "rejections", "heatmap"]
    rows = _csv_rows(sweep_dir)
    ranked = sorted((r for r in rows if r["rank"]), key=lambda r: int(r["rank"]))
    top = html.split('<section id="top">')[1].split("</section>")[0]
    assert top.count("<tr>") == 11  # header and ten rows
    for r in ranked[:10]:
        assert f"<td>{float(r['step_time_s']):.4g}</td>" in top
    front = sum(r["pareto"] == "true" for r in rows)
    assert f"{front} layouts on the front, {len(ranked)} eligible" in html
    assert html.count("<svg") == 2  # Pareto scatter and heatmap
    _assert_self_contained(html)


def test_rejections_recomputed_from_status_and_reason(sweep_dir: Path) -> None:
    rows = _csv_rows(sweep_dir)
    expected = Counter(r["reason"].split(":")[0] for r in rows if r["status"] == "rule")
    got = {key: n for status, key, n, _ in rejections([{**r, "rank": r["rank"] or None}
                                                      for r in rows]) if status == "rule"}
    assert got == dict(expected)
    assert sum(got.values()) > 0


def test_heatmap_cells_are_the_best_step_time_per_tp_pp(
        sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = _report(capsys, sweep_dir, tmp_path / "r")
    heatmap = html.split('<section id="heatmap">')[1]
    shown = dict(re.findall(r"<title>(tp \d+, pp \d+): ([^<]+)</title>", heatmap))
    rows = [r for r in _csv_rows(sweep_dir) if r["rank"]]
    best: dict[str, float] = {}
    for r in rows:
        key = f"tp {r['tp']}, pp {r['pp']}"
        best[key] = min(best.get(key, float("inf")), float(r["step_time_s"]))
    assert {k: v for k, v in shown.items() if v != "-"} == {k: f"{v:.4g} s" for k, v in best.items()}
    assert len({r["tp"] for r in rows}) > 1
    assert len({r["pp"] for r in rows}) > 1
    parsed = [{"tp": float(r["tp"]), "pp": float(r["pp"]), "step_time_s": float(r["step_time_s"])}
              for r in rows]
    assert {f"tp {t}, pp {p}": v for (t, p), v in tp_pp_cells(parsed).items()} == best


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["report", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("simcluster: error: ")
    return lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    out = str(tmp_path / "r")
    assert str(tmp_path / "nope.yaml") in _fails(capsys, str(tmp_path / "nope.yaml"), "-o", out)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "results.csv" in _fails(capsys, str(empty), "-o", out)
    (empty / "results.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    assert "missing status" in _fails(capsys, str(empty), "-o", out)
    bad = _write(tmp_path, {**SCENARIO, "modle": {}})
    assert "modle" in _fails(capsys, str(bad), "-o", out)
    good = _write(empty, SCENARIO)
    assert "parallelism.tp" in _fails(capsys, str(good), "-o", out, "--set", "parallelism.tp=3")
    assert "--set" in _fails(capsys, str(empty), "-o", out, "--set", "parallelism.tp=2")
    assert not (tmp_path / "r").exists()


def test_csv_only_directory_gives_the_same_page(
        sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep's Parquet (read first) and its ``--results csv`` copy draw the same page."""
    only = tmp_path / "csv"
    only.mkdir()
    (only / "results.csv").write_bytes((sweep_dir / "results.csv").read_bytes())
    from_parquet = _report(capsys, sweep_dir, tmp_path / "a")
    from_csv = _report(capsys, only, tmp_path / "b")

    def body(html: str) -> str:  # the results path and the title's directory name differ
        return html.split('<section id="top">')[1]

    assert body(from_parquet) == body(from_csv)


def test_a_large_sweep_says_what_it_reads(sweep_dir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 5: reading and drawing a large sweep took seconds in silence; above
    ``PROGRESS_BYTES`` two lines on stderr say what happens (here the limit is lowered to 0)."""
    from simcluster import cli_report

    monkeypatch.setattr(cli_report, "PROGRESS_BYTES", 0)
    assert main(["report", str(sweep_dir), "-o", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"simcluster report: reading the sweep's results in {sweep_dir}"
    assert err[1].startswith("simcluster report: ")
    assert err[1].endswith(" rows read from results.parquet; drawing the page")


def test_one_heatmap_per_hardware_option() -> None:
    """Issue 24 item 8: the TP x PP heatmap no longer mixes hardware options: one per option,
    each with its own rows' best step time."""
    from simcluster.report.html_sweep import heatmap_figures

    rows = [{"option": "a", "tp": 1, "pp": 1, "step_time_s": 3.0},
            {"option": "b", "tp": 1, "pp": 1, "step_time_s": 1.0},
            {"option": "a", "tp": 2, "pp": 1, "step_time_s": 2.0}]
    first, second = heatmap_figures(rows)
    assert '<section id="heatmap">' in first
    assert '<section id="heatmap-1">' in second
    assert "TP x PP (s): a<" in first
    assert "TP x PP (s): b<" in second
    assert "tp 1, pp 1: 3 s" in first
    assert "tp 2, pp 1: 2 s" in first
    assert "tp 1, pp 1: 1 s" in second
    assert "tp 2" not in second  # option b has no tp 2 row


def test_log_log_scatter_labels_in_original_units() -> None:
    """A point 1,000x away no longer squeezes the rest: decades are evenly spaced, ticks and
    titles are in the original units, and non-positive points are left out."""
    from simcluster.report import svg

    page = svg.scatter([(1.0, 10.0), (1000.0, 1e4), (0.0, 5.0)], [(1.0, 10.0)], ("days", "usd"),
                       "p", log=True)
    assert "days (log)" in page
    assert "usd (log)" in page
    assert "<title>days 1, usd 10</title>" in page
    assert page.count('fill="#bbb"') == 2


@pytest.mark.parametrize(("drop", "why"), [
    ("training", "no goodput figure: the reliability section needs training.tokens"),
    ("checkpoint", "no goodput figure: the scenario takes no checkpoints"),
])
def test_a_reliability_scenario_without_a_goodput_figure_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], drop: str, why: str) -> None:
    doc = {**SCENARIO, **RELIABILITY, "parallelism": {"tp": 2, "global_batch": 64}}
    del doc[drop]
    html = _report(capsys, _write(tmp_path, doc), tmp_path / "r", "--fast", "--replicas", "8")
    assert "goodput" not in _sections(html)
    assert f'<p class="note">{why}</p>' in html


def test_the_top_table_heads_its_columns_and_ranks_rows_in_order() -> None:
    """The sweep page's best layouts: the fixed columns, then one per numeric field any row has;
    the rank in the first cell, a missing option as '-'."""
    from simcluster.report.html_sweep import top_table

    rows = [{"rank": 1.0, "topology": "dgx-h100", "gpus": 16.0, "tp": 2, "pp": 1, "dp": 8,
             "step_time_s": 1.5},
            {"rank": 2.0, "option": "b", "topology": "dgx-h100", "gpus": 16.0, "tp": 4, "pp": 1,
             "dp": 4, "step_time_s": 1.75}]
    part = top_table(rows)
    heads = re.findall(r"<th>([^<]*)</th>", part)
    assert heads[:6] == ["#", "option", "topology", "GPUs", "layout", "engine"]
    assert "Best 2 of 2 eligible layouts" in part
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", part)
    width = len(heads)
    assert cells[0] == "1"
    assert cells[1] == "-"
    assert cells[width] == "2"
    assert cells[width + 1] == "b"
