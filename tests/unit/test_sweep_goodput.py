"""The reliability pass: a checkpoint-interval axis on common random numbers, and the optimiser."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

import simcluster
from simcluster.horizon import simulate_reliability
from simcluster.horizon.optimize import optimize_interval
from simcluster.spec import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "1k-h100-reliability.yaml"
# Two layouts (cp 1 and 2) of Llama 3 70B on 128 DGX H100.
SEARCH = ("tp=8", "pp=4", "cp=1,2", "micro_batch=1", "recompute=selective", "schedule=1f1b",
          "zero_stage=1", "sequence_parallel=true")
REPLICAS = 20


@functools.cache
def _interval_sweep() -> pd.DataFrame:
    return simcluster.sweep(SCENARIO, search=SEARCH, vary=["checkpoint.interval_min=10,30,90"],
                            goodput=1, objective="goodput", replicas=REPLICAS)


def _layout_overrides(row: pd.Series) -> list[str]:
    return [f"parallelism.cp={row['cp']}", *(f"parallelism.{s}" for s in SEARCH if "cp=" not in s)]


def test_every_interval_of_the_best_layout_is_simulated() -> None:
    frame = _interval_sweep()
    done = frame[frame["goodput"].notna()]
    assert sorted(done["checkpoint.interval_min"]) == [10, 30, 90]
    assert done["cp"].nunique() == 1  # one configuration, all its intervals
    days = list(done["goodput_time_to_train_days"])
    assert days == sorted(days)  # ranked by the goodput objective first
    assert list(frame["rank"][:3]) == [1, 2, 3]


def test_intervals_share_sample_paths_with_the_reliability_command() -> None:
    """Each interval's goodput equals a standalone simulate_reliability at that interval (same
    seed, same step): the sweep adds no randomness of its own, so the intervals are compared on
    common random numbers."""
    frame = _interval_sweep()
    for _, row in frame[frame["goodput"].notna()].iterrows():
        items = [*_layout_overrides(row), f"checkpoint.interval_min={row['checkpoint.interval_min']}"]
        s = load_scenario(SCENARIO, items)
        alone = simulate_reliability(s, REPLICAS, step_time_s=row["step_time_s"]).to_dict()
        assert alone["goodput"] == row["goodput"]


def test_without_an_interval_axis_the_optimiser_picks_the_interval() -> None:
    frame = simcluster.sweep(SCENARIO, search=SEARCH, goodput=1, replicas=REPLICAS)
    row = frame.iloc[0]
    s = load_scenario(SCENARIO, _layout_overrides(row))
    best = optimize_interval(s, REPLICAS, step_time_s=row["step_time_s"])
    assert row["checkpoint_interval_min"] == best.optimal_interval_min
    assert 0 < row["goodput"] <= 1
    assert row["goodput_time_to_train_days"] >= row["time_to_train_days"]
