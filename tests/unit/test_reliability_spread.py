"""The spread of a reliability result (issue 25 item 4): percentiles of time to train and goodput,
and the histogram the HTML report draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.horizon.records import HISTOGRAM_BINS, histogram, percentiles
from simcluster.report import html, svg
from simcluster.report.reliability import summary_text


def test_percentiles_oracle() -> None:
    values = np.arange(101, dtype=float)  # 0..100: the q-th percentile is q
    assert percentiles(values) == {"p5": 5.0, "p25": 25.0, "p50": 50.0, "p75": 75.0, "p95": 95.0,
                                   "p99": 99.0}


def test_histogram_oracle() -> None:
    values = np.array([1.0, 1.0, 2.0, 3.0, math.inf])
    hist = histogram(values)
    assert hist is not None
    assert hist["edges_days"][0] == 1.0
    assert hist["edges_days"][-1] == 3.0
    assert len(hist["edges_days"]) == HISTOGRAM_BINS + 1
    assert hist["counts"][0] == 2.0
    assert hist["counts"][-1] == 1.0
    assert sum(hist["counts"]) == 4.0  # the run that never finishes is not in a bin
    assert histogram(np.array([math.inf])) is None


@given(st.lists(st.floats(0.0, 1e6), min_size=1, max_size=200))
def test_spread_properties(values: list[float]) -> None:
    arr = np.array(values)
    p = percentiles(arr)
    assert p["p5"] <= p["p25"] <= p["p50"] <= p["p75"] <= p["p95"] <= p["p99"]
    assert min(values) <= p["p5"]
    assert p["p99"] <= max(values)
    hist = histogram(arr)
    assert hist is not None
    assert sum(hist["counts"]) == len(values)
    assert all(a < b for a, b in zip(hist["edges_days"], hist["edges_days"][1:], strict=False))


def test_the_histogram_figure_has_a_bar_per_bin() -> None:
    figure = svg.histogram([0.0, 1.0, 2.0, 3.0], [1.0, 4.0, 2.0], "days", "ttt <x>")
    assert figure.count("<rect") == 3
    assert 'aria-label="ttt &lt;x&gt;"' in figure


def _result() -> dict[str, object]:
    return {"replicas": 10, "time_to_train_days": {"mean": 2.0, "p5": 1.0, "p50": 2.0,
                                                   "p95": 3.0, "p99": 3.5},
            "time_to_train_histogram": {"edges_days": [1.0, 2.0, 3.0], "counts": [4.0, 6.0]},
            "goodput_percentiles": {"p5": 0.9, "p50": 0.95, "p95": 0.97, "p99": 0.98}}


def test_the_report_section_lists_the_percentiles() -> None:
    part = html.distribution({"reliability": _result()})
    assert part is not None
    assert 'id="distribution"' in part
    assert "Time to train over 10 replicas" in part
    assert "goodput p99" in part
    assert html.distribution({"reliability": None}) is None


def test_the_text_summary_prints_the_spread() -> None:
    d = {**_result(), "loop": "fast", "step_time_s": 1.0, "step_engine": "analytical",
         "goodput": 0.95, "goodput_ci95": 0.01, "effective_training_time_ratio": 0.96,
         "elapsed_days": 2.0, "useful_days": 1.9,
         "interruptions": {"total": 3.0, "unexpected": 2.0, "by_class": {"planned": 1.0}},
         "checkpoint_interval_min": 30.0, "checkpoint_size_tb": 1.0, "young_interval_min": 20.0,
         "daly_interval_min": 21.0, "lost_time_breakdown_h": {"rework": 1.0},
         "lost_time_total_h": 1.0}
    text = summary_text("x", d)
    assert "time to train   p5 1.00, p50 2.00, p95 3.00, p99 3.50 days" in text
    assert "goodput spread  p5 90.00%, p50 95.00%, p95 97.00%, p99 98.00%" in text


def test_the_engine_reports_the_spread_of_its_replicas() -> None:
    from simcluster.horizon import CheckpointPlan, FailureClass, HorizonConfig, simulate_config

    cfg = HorizonConfig(nodes=64, work_s=10 * 86400.0, step_s=10.0, restart_s=600.0,
                        classes=(FailureClass(name="gpu", rate_per_node_s=1e-6, detect_s=60.0),),
                        checkpoint=CheckpointPlan(mode="sync", interval_s=3600.0, blocking_s=60.0,
                                                  load_s=120.0, write_s=60.0))
    result = simulate_config(cfg, replicas=40, seed=3)
    d = result.to_dict()
    days = result.time_to_train_s() / 86400.0
    assert d["time_to_train_days"] == {"mean": pytest.approx(float(days.mean())),
                                       **percentiles(days)}
    assert d["goodput_percentiles"] == percentiles(result.column("goodput"))
    assert sum(d["time_to_train_histogram"]["counts"]) == 40


def test_optimal_interval_range_oracle() -> None:
    """The intervals whose mean goodput is within the optimum's 95% half-width: 0.95 +- 0.01 at
    30 min takes in 20 (0.945) and 40 (0.942), not 10 (0.90) or 60 (0.93)."""
    from simcluster.horizon.records import OptimumResult, SweepPoint

    pts = tuple(SweepPoint(interval_min=m, goodput=g, ci95=0.01, time_to_train_days=None,
                           daly_goodput=g) for m, g in
                ((10.0, 0.90), (20.0, 0.945), (30.0, 0.95), (40.0, 0.942), (60.0, 0.93)))
    result = OptimumResult(points=pts, optimal_interval_min=30.0, optimal_goodput=0.95,
                           young_interval_min=25.0, daly_interval_min=26.0,
                           bracket_min=(5.0, 100.0), replicas=10)
    assert result.interval_range_min() == (20.0, 40.0)
    assert result.to_dict()["optimal_interval_ci95_min"] == [20.0, 40.0]


def test_the_result_states_young_and_daly_in_minutes() -> None:
    """Young (1974): sqrt(2 delta M) with delta the blocking write (60 s) and M the job MTBF
    (1 / (64 nodes x 1e-6 /s) = 15,625 s): 1,369.3 s = 22.82 min; Daly's from the same inputs."""
    import math

    from simcluster.horizon import CheckpointPlan, FailureClass, HorizonConfig, simulate_config
    from simcluster.perf.reliability import daly_interval_s

    cfg = HorizonConfig(nodes=64, work_s=86400.0, step_s=10.0, restart_s=600.0,
                        classes=(FailureClass(name="gpu", rate_per_node_s=1e-6, detect_s=60.0),),
                        checkpoint=CheckpointPlan(mode="sync", interval_s=3600.0, blocking_s=60.0,
                                                  load_s=120.0, write_s=60.0))
    d = simulate_config(cfg, replicas=4, seed=1).to_dict()
    assert d["young_interval_min"] == pytest.approx(math.sqrt(2 * 60.0 * 15_625.0) / 60.0)
    assert d["daly_interval_min"] == pytest.approx(daly_interval_s(60.0, 15_625.0) / 60.0)
