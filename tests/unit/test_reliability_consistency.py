"""``run`` and ``reliability`` share the step engine's step time; warnings: no checkpoint section,
an interval-sweep optimum on an edge of its grid; the golden-section interval search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcluster.cli import main
from simcluster.cli_reliability import checkpoint_warnings
from simcluster.horizon import CheckpointPlan, FailureClass, HorizonConfig
from simcluster.horizon.config import horizon_config
from simcluster.horizon.optimize import golden_section_max, optimize_configs
from simcluster.perf.reliability import daly_interval_s, daly_optimal_interval_numeric_s
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
BIG = str(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml")
SMALL = str(ROOT / "scenarios" / "1k-h100-reliability.yaml")


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict)
    return out


@pytest.mark.parametrize("fast", [False, True])
def test_run_and_reliability_agree_on_step_and_days(capsys: pytest.CaptureFixture[str],
                                                    fast: bool) -> None:
    flag = ["--fast"] if fast else []
    run = _json(capsys, "run", SMALL, *flag)
    rel = _json(capsys, "reliability", SMALL, "--replicas", "100", *flag)
    engine = "analytical" if fast else "des"
    assert rel["step_engine"] == engine == run["engine"]
    assert rel["step_time_s"] == run["iteration_time_s"]
    assert rel["time_to_train_days"]["mean"] == run["expected_time_to_train_days"]  # type: ignore[index]
    nested = run["reliability"]
    assert isinstance(nested, dict)
    assert nested["step_time_s"] == rel["step_time_s"]
    assert nested["step_engine"] == engine


def test_des_is_the_default_and_old_engine_spelling_still_works(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["reliability", SMALL, "--replicas", "5", "--set", "reliability.horizon_days=5"]
    assert _json(capsys, *base)["step_engine"] == "des"
    old = _json(capsys, *base, "--engine", "simpy", "--fast")
    assert (old["loop"], old["engine"], old["step_engine"]) == ("simpy", "simpy", "analytical")
    assert main([*base, "--engine", "des", "--fast"]) == 2


def test_text_names_the_step_engine_and_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reliability", SMALL, "--replicas", "5", "--fast"]) == 0
    assert "(analytical engine)" in capsys.readouterr().out


def _without_checkpoint(tmp_path: Path) -> str:
    text = Path(SMALL).read_text()
    path = tmp_path / "no-ckpt.yaml"
    path.write_text(text[:text.index("checkpoint:")] + "  horizon_days: 5\n")
    return str(path)


def test_missing_checkpoint_section_warns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _without_checkpoint(tmp_path)
    assert main(["reliability", path, "--replicas", "3", "--fast", "--json"]) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert len(warnings) == 1
    assert "no checkpoints are taken" in warnings[0]
    assert "checkpoint.interval_min" in warnings[0]
    assert "checkpoint: none" in warnings[0]
    assert captured.err.startswith("warning: no checkpoint")
    assert main(["reliability", SMALL, "--replicas", "3", "--fast", "--json",
                 "--set", "reliability.horizon_days=5"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["warnings"] == []
    assert captured.err == ""


def test_explicit_checkpoint_none_never_checkpoints_and_does_not_warn(tmp_path: Path) -> None:
    absent = load_scenario(_without_checkpoint(tmp_path))
    explicit = load_scenario(_without_checkpoint(tmp_path), ["checkpoint=none"])
    assert checkpoint_warnings(absent)
    assert checkpoint_warnings(explicit) == []
    assert checkpoint_warnings(load_scenario(SMALL)) == []
    plan = horizon_config(explicit, 10.0).checkpoint
    assert plan.mode == "none"
    assert plan.interval_s == float("inf")
    assert horizon_config(explicit, 10.0, interval_s=600.0).checkpoint.mode == "sync"


def test_sweep_edge_warning_fires_on_the_readme_grid(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "reliability", BIG, "--fast", "--replicas", "10", "--interval-sweep", "5:60:5")
    assert d["optimal_interval_min"] == pytest.approx(5.0, abs=0.1)
    warnings = d["warnings"]
    assert isinstance(warnings, list)
    edges = [w for w in warnings if "edge of the grid" in w]
    assert len(edges) == 1
    assert "lower edge" in edges[0]
    assert any(w.startswith("the layout does not fit") for w in warnings)  # 96.2 GiB of 80


def test_no_edge_warning_when_the_grid_holds_the_optimum(capsys: pytest.CaptureFixture[str]) -> None:
    # Young's interval is 1.2 min here: the 0.24 s snapshot of a 6.6 GB shard over PCIe 5.0
    # (two GPUs per switch) against a 16K-GPU MTBF of about 50 min.
    d = _json(capsys, "reliability", BIG, "--fast", "--replicas", "10", "--interval-sweep",
              "0.4:3.2:0.4")
    assert [w for w in d["warnings"] if "edge of the grid" in w] == []  # type: ignore[union-attr]
    assert 0.4 < float(d["optimal_interval_min"]) < 3.2  # type: ignore[arg-type]


def test_golden_section_finds_the_maximum_of_a_parabola() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return -(x - 3.7) ** 2

    best, used = golden_section_max(f, 0.0, 10.0, lambda a, b: b - a < 1e-6, 100)
    assert best == pytest.approx(3.7, abs=1e-5)
    assert used == len(calls) < 100


def test_search_finds_dalys_optimum_for_exponential_sync_checkpoints() -> None:
    """Exponential failures (M = 1 h), sync checkpoints of 5 min, no detection, restart or load: the
    expected wall time is Daly's Eq. 9, minimised at 1276.9 s (Eq. 37: 1276.5 s). Tolerance 10%:
    20 replicas of 500 h of work (about 10,000 failures in all) on common random numbers."""
    mtbf, dump = 3600.0, 300.0

    def make(tau: float) -> HorizonConfig:
        return HorizonConfig(
            nodes=1, work_s=500 * 3600.0, step_s=10.0,
            classes=(FailureClass(name="f", rate_per_node_s=1 / mtbf, detect_s=0.0, replace=False),),
            checkpoint=CheckpointPlan(mode="sync", interval_s=max(1, round(tau / 10.0)) * 10.0,
                                      blocking_s=dump, write_s=dump))

    exact = daly_optimal_interval_numeric_s(dump, 0.0, mtbf)
    assert exact == pytest.approx(daly_interval_s(dump, mtbf), rel=1e-3)
    result = optimize_configs(make, replicas=20, seed=0)
    assert result.optimal_interval_min * 60.0 == pytest.approx(exact, rel=0.10)
    assert result.daly_interval_min * 60.0 == pytest.approx(daly_interval_s(dump, mtbf))
    assert 5 <= len(result.points) <= 40
    assert result.warnings == ()
    assert optimize_configs(make, replicas=20, seed=0) == result  # same seed, same search


def test_optimize_interval_cli(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "reliability", SMALL, "--fast", "--replicas", "10", "--interval-sweep", "auto",
              "--set", "reliability.horizon_days=30")
    for key in ("optimal_interval_min", "young_interval_min", "daly_interval_min", "evaluations",
                "interval_search", "search_bracket_min"):
        assert key in d
    low, high = d["search_bracket_min"]  # type: ignore[misc]
    assert low <= float(d["optimal_interval_min"]) <= high  # type: ignore[arg-type]
    assert main(["reliability", SMALL, "--fast", "--replicas", "10", "--optimize-interval",
                 "--set", "reliability.horizon_days=30"]) == 0
    assert "golden-section search" in capsys.readouterr().out
