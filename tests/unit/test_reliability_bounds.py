"""Bounded reliability evaluations: refusals up front (exit 2, keys and limit named), streaming draws.

Each refused case used to hang or crash (issue 11): a checkpoint write longer than the time between
failures, 10 failures per node-day, 1e9 failures per node-day (a 33 TiB allocation), 1e8 replicas.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.horizon import CheckpointPlan, FailureClass, HorizonConfig, simulate_config
from simcluster.horizon.bounds import (
    MAX_EVENTS_PER_REPLICA,
    MAX_REPLICAS,
    MIN_WORK_FRACTION,
    check_bounds,
    check_progress,
    replica_cost,
)
from simcluster.horizon.sampling import (
    CHUNK_EVENTS,
    CHUNK_S,
    MAX_BATCH,
    BufferedPoisson,
    SamplePath,
    chunk_span_s,
)
from simcluster.perf.reliability import daly_expected_wall_s, daly_work_fraction
from simcluster.rng import generator

ROOT = Path(__file__).resolve().parents[2]
BIG = str(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml")
SMALL = str(ROOT / "scenarios" / "1k-h100-reliability.yaml")


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["reliability", *argv, "--fast", "--replicas", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("override", "words"), [
    ("checkpoint.storage_write_GBps=0.001", ["checkpoint.storage_write_GBps", "cannot make progress",
                                             "MTBF", "write+persist", "0.001"]),
    ("reliability.failure_rate_per_node_day=10", ["reliability.failure_rate_per_node_day",
                                                  "cannot make progress", "recovery"]),
    ("reliability.failure_rate_per_node_day=1e9", ["reliability.failure_rate_per_node_day",
                                                   "cannot make progress"]),
])
def test_no_progress_is_refused(capsys: pytest.CaptureFixture[str], override: str,
                                words: list[str]) -> None:
    err = _refused(capsys, BIG, "--set", override)
    for word in words:
        assert word in err


def test_too_many_events_per_replica_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, BIG, "--set", "reliability.failure_rate_per_node_day=10",
                   "--set", "reliability.horizon_days=54")
    assert "reliability.failure_rate_per_node_day" in err
    assert f"{MAX_EVENTS_PER_REPLICA:.0e}" in err


def test_huge_rate_with_a_horizon_is_refused_not_allocated(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, BIG, "--set", "reliability.failure_rate_per_node_day=1e9",
                   "--set", "reliability.horizon_days=1")
    assert "expected failures" in err


def test_replicas_beyond_the_limit_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reliability", BIG, "--replicas", "100000000"]) == 2
    assert f"the limit is {MAX_REPLICAS}" in capsys.readouterr().err


def test_replicas_times_events_beyond_the_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reliability", BIG, "--fast", "--replicas", str(MAX_REPLICAS)]) == 2
    assert "units of work" in capsys.readouterr().err


def _cfg(**kw: object) -> HorizonConfig:
    base: dict[str, object] = {
        "nodes": 10, "work_s": 1e6,
        "classes": (FailureClass(name="f", rate_per_node_s=1e-5, detect_s=0.0, replace=False),),
        "checkpoint": CheckpointPlan(mode="sync", interval_s=600.0, blocking_s=10.0)}
    base.update(kw)
    return HorizonConfig(**base)  # type: ignore[arg-type]


def test_progress_floor_matches_daly() -> None:
    """The fraction is 1 / Daly Eq. 9 per unit work, and its log form does not overflow."""
    assert daly_work_fraction(600.0, 10.0, 0.0, 1e4) == pytest.approx(
        1.0 / daly_expected_wall_s(1.0, 600.0, 10.0, 0.0, 1e4), rel=1e-12)
    assert daly_work_fraction(600.0, 1e9, 0.0, 10.0) == 0.0
    cost = replica_cost(_cfg())
    assert cost.work_fraction == pytest.approx(daly_work_fraction(600.0, 10.0, 0.0, 1e4))
    assert cost.events == pytest.approx(1e-4 * 1e6 / cost.work_fraction)


def test_slow_dump_refused_only_without_a_horizon() -> None:
    slow = _cfg(checkpoint=CheckpointPlan(mode="sync", interval_s=600.0, blocking_s=1e6))
    assert replica_cost(slow).work_fraction < MIN_WORK_FRACTION
    with pytest.raises(SpecError, match="cannot make progress"):
        check_bounds((slow,), 1)
    check_bounds((replace(slow, horizon_s=86400.0),), 1)  # bounded by the horizon: allowed


def test_no_checkpoint_endless_run_is_refused_and_says_so() -> None:
    none = _cfg(checkpoint=CheckpointPlan(mode="none", interval_s=math.inf), work_s=1e7)
    with pytest.raises(SpecError, match="no checkpoints"):
        check_bounds((none,), 1)


def test_simpy_loop_and_in_memory_count_stepped_cycles() -> None:
    cfg = _cfg(classes=(), work_s=1e9, checkpoint=CheckpointPlan(mode="in-memory", interval_s=10.0))
    check_bounds((replace(cfg, checkpoint=CheckpointPlan(mode="sync", interval_s=10.0)),), 100)
    with pytest.raises(SpecError, match="units of work"):
        check_bounds((cfg,), 100)


def test_simulate_config_checks_bounds() -> None:
    with pytest.raises(SpecError, match="limit"):
        simulate_config(_cfg(), replicas=MAX_REPLICAS + 1)


def test_chunks_shrink_only_for_high_rates() -> None:
    assert chunk_span_s(_cfg()) == CHUNK_S
    fast = _cfg(classes=(FailureClass(name="f", rate_per_node_s=1.0, detect_s=0.0),), horizon_s=1e5)
    assert chunk_span_s(fast) == pytest.approx(CHUNK_EVENTS / 10.0)
    path = SamplePath(fast, 0, 0)
    events = path.events()
    first = [next(events) for _ in range(3 * CHUNK_EVENTS)]
    times = [e[0] for e in first]
    assert times == sorted(times)
    assert times[-1] < 1e5


def test_buffered_poisson_streams_in_bounded_blocks() -> None:
    """A span of 1e9 expected arrivals is refused by the bounds; the source itself draws in blocks,
    and splitting a span gives the same arrivals (prefix-stable) as one call."""
    a = BufferedPoisson(100.0, generator(1, 0, "x"))
    b = BufferedPoisson(100.0, generator(1, 0, "x"))
    whole = a.until(2000.0)
    parts = np.concatenate([b.until(700.0), b.until(2000.0)])
    assert whole.size == parts.size
    assert np.allclose(whole, parts, rtol=1e-12)


class _Recorder:
    """A generator proxy recording the size of every block of gaps drawn."""

    def __init__(self) -> None:
        self.rng, self.sizes = generator(0, 0, "x"), list[int]()

    def standard_exponential(self, size: int | None = None) -> object:
        self.sizes.append(1 if size is None else size)
        return self.rng.standard_exponential(size)


def test_gap_blocks_are_capped_whatever_the_expected_count() -> None:
    rec = _Recorder()
    source = BufferedPoisson(1e6, rec)  # type: ignore[arg-type]
    arrivals = source.until(1.0)  # about 1e6 arrivals: drawn in blocks of at most MAX_BATCH
    assert arrivals.size > 900_000
    assert max(rec.sizes) <= MAX_BATCH
    assert len(rec.sizes) > 2


@pytest.mark.parametrize("override", [
    ["reliability.replace_s=7.2e9", "--seed", "7"],  # hung: the pool ran dry, a 228-year wait
    ["reliability.replace_s=1e40"],
    # 128 failures a day against 2 spares and 2 h replacements: every wait re-triggered (hung)
    ["reliability.failure_rate_per_node_day=1.00379"],
])
def test_replacement_wait_counts_in_the_progress_floor(capsys: pytest.CaptureFixture[str],
                                                       override: list[str]) -> None:
    argv = ["reliability", SMALL, "--replicas", "2", "--loop", "simpy", "--interval-sweep", "20:40:20",
            "--set", *override]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    for word in ("reliability.replace_s", "reliability.spares", "cannot make progress", "spares"):
        assert word in err


def test_effective_recovery_weighs_a_rare_wait_by_its_exponential() -> None:
    from simcluster.horizon.bounds import effective_recovery_s, poisson_tail, pool_short_probability
    assert poisson_tail(0.1, 2) == pytest.approx(1.0 - math.exp(-0.1) * 1.1)
    assert poisson_tail(5.0, 0) == 1.0
    assert poisson_tail(0.0, 1) == 0.0
    assert poisson_tail(1.0, 1000) < 1e-300
    assert poisson_tail(1e6, 10**6) == pytest.approx(0.5, abs=1e-3)
    gpu = FailureClass(name="gpu", rate_per_node_s=1e-6, detect_s=30.0)
    cfg = _cfg(classes=(gpu,), spares=2, replace_s=7200.0)
    short = pool_short_probability(cfg, 1)
    assert short == pytest.approx(poisson_tail(10 * 1e-6 * 14400.0 * math.exp(0.5), 2))
    mtbf = 1.0 / cfg.failure_rate_s
    base = effective_recovery_s(replace(cfg, replace_s=0.0), mtbf)
    assert base == pytest.approx(30.0)
    mean = base + short * 7200.0
    assert mean < effective_recovery_s(cfg, mtbf) < 1.05 * mean  # W << M: near the mean, above it
    huge = replace(cfg, replace_s=1e3 * mtbf)
    assert effective_recovery_s(huge, mtbf) > 0.9e3 * mtbf  # W >> M: the exponential dominates
    assert replica_cost(huge).work_fraction == 0.0


@pytest.mark.parametrize(("override", "key"), [
    ("reliability.diagnose_s=3e42", "reliability.diagnose_s"),  # was an OverflowError
    ("reliability.maintenance_s=1e40", "reliability.maintenance_s"),
    ("reliability.planned_per_day=1e39", "reliability.failure_rate_per_node_day"),  # numpy ValueError
])
def test_long_recoveries_are_refused_naming_their_keys(capsys: pytest.CaptureFixture[str], override: str,
                                                       key: str) -> None:
    assert main(["reliability", SMALL, "--replicas", "2", "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert key in err
    assert "cannot make progress" in err


def test_each_replica_costs_its_fixed_overhead() -> None:
    """100,000 replicas of a quiet run (about 15 events each) took 26 s: the replica cost counts."""
    from simcluster.horizon.bounds import MAX_TOTAL_WORK, REPLICA_COST
    quiet = _cfg(classes=(), work_s=1e5)
    assert replica_cost(quiet).events == 0.0
    many = int(MAX_TOTAL_WORK / (REPLICA_COST + 1.0)) + 1
    check_bounds((quiet,), many - 2)
    with pytest.raises(SpecError, match="units of work"):
        check_bounds((quiet,), many)


@pytest.mark.parametrize("sweep", [["--interval-sweep", "20:60:20"], ["--optimize-interval"]])
def test_sweep_and_base_are_checked_together_before_any_replica_runs(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, sweep: list[str]) -> None:
    import simcluster.horizon as horizon

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a replica ran before the limits were checked")

    monkeypatch.setattr(horizon, "simulate_reliability", never)
    assert main(["reliability", SMALL, "--replicas", "20000", *sweep]) == 2
    assert "units of work" in capsys.readouterr().err


def test_simpy_stepped_cycles_cost_less_than_simpy_events() -> None:
    """Measured: a stepped cycle ~3 us, a SimPy event ~13 us; the benchmark's 20 SimPy replicas of
    the 16k-GPU run (22,650 cycles each) stay within the limit, ten times as many do not."""
    from simcluster.horizon.bounds import REPLICA_COST, SIMPY_COST, STEP_COST
    assert STEP_COST < 1.0 < SIMPY_COST
    cfg = _cfg(classes=(), work_s=600.0 * 22650)
    cycles = replica_cost(cfg).stepped_cycles
    check_bounds((cfg,), 20, "simpy")
    with pytest.raises(SpecError, match="units of work"):
        check_bounds((cfg,), int(1e6 / (STEP_COST * cycles + SIMPY_COST + REPLICA_COST)) + 1, "simpy")


def test_many_replicas_of_a_cheap_run_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """100,000 replicas of the 1k-H100 run (16 events each, 0.29 ms a replica) would take about
    30 s: refused with the flag named; 1000 of them run."""
    small = str(Path(BIG).with_name("1k-h100-reliability.yaml"))
    assert main(["reliability", small, "--fast", "--replicas", "100000"]) == 2
    assert "--replicas" in capsys.readouterr().err
    assert main(["reliability", small, "--fast", "--replicas", "1000"]) == 0


def test_worker_processes_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    from simcluster.cli_args import MAX_JOBS

    with pytest.raises(SystemExit) as info:
        main(["reliability", BIG, "--jobs", str(MAX_JOBS + 1)])
    assert info.value.code == 2
    assert f"--jobs: at most {MAX_JOBS}" in capsys.readouterr().err


STRAGGLERS = str(ROOT / "scenarios" / "seed-degraded-stragglers.yaml")


def test_straggler_evictions_count_as_interruptions_oracle() -> None:
    """An episode longer than the detection time is evicted: a lognormal length of median m and
    sigma s exceeds d with probability erfc(ln(d/m) / (s sqrt 2)) / 2 (here d = m: one half)."""
    from simcluster.horizon.bounds import interruption_rate_s
    from simcluster.horizon.config import StragglerPlan

    cfg = HorizonConfig(nodes=10, work_s=86400.0, stragglers=StragglerPlan(
        rate_per_node_s=1e-4, slowdown=2.0, median_s=600.0, sigma=1.0, detect_s=600.0))
    assert interruption_rate_s(cfg) == pytest.approx(10 * 1e-4 * 0.5)


def test_a_run_interrupted_by_evictions_faster_than_it_checkpoints_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25's hang: 50 straggler episodes per node-day, each evicted after detection, and a
    100-day checkpoint interval never finish a segment; refused up front, naming the straggler
    keys first."""
    assert main(["run", "--fast", STRAGGLERS, "--set", "reliability.stragglers_per_node_day=50",
                 "--set", "checkpoint.interval_min=145194"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simcluster: error: reliability.stragglers_per_node_day / "
                          "reliability.straggler_detect_s / ")
    assert "cannot make progress" in err


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 1e9), st.floats(1.0, 1e7), st.floats(0.0, 1e6),
       st.sampled_from(["sync", "async", "in-memory"]), st.integers(1, 16384))
def test_a_run_nothing_interrupts_is_never_refused_as_stuck(work: float, tau: float, delta: float,
                                                             mode: str, nodes: int) -> None:
    """Issue 25 item 5, property: with no failures, planned stops or stragglers the run finishes,
    so the progress guard never refuses it, whatever its dump against its interval (Daly's
    fraction tau / (tau + delta) can be tiny); the work limit alone bounds it."""
    ck = CheckpointPlan(mode=mode, interval_s=tau, blocking_s=delta, write_s=delta,
                        persist_s=0.0 if mode == "sync" else 2 * delta)
    cfg = HorizonConfig(nodes=nodes, work_s=work, checkpoint=ck)
    cost = replica_cost(cfg)
    check_progress(cfg, cost)
    key = None
    try:
        check_bounds((cfg,), 1)
    except SpecError as err:
        key = err.key
    assert key in (None, "--replicas")  # the work limit, never "cannot make progress"


def test_a_long_dump_without_failures_runs() -> None:
    """1,001 s per 1 s of work (sync): refused before as 'cannot make progress' (fraction 1e-3 ...);
    it finishes: 1e6 s of work and 1e6 dumps of 1,000 s."""
    ck = CheckpointPlan(mode="sync", interval_s=1.0, blocking_s=1000.0, write_s=1000.0)
    cfg = HorizonConfig(nodes=8, work_s=1e6, checkpoint=ck)
    record = simulate_config(cfg, replicas=1, seed=0).records[0]
    assert record.completed
    assert record.elapsed_s == pytest.approx(1e6 + 1e6 * 1000.0, rel=1e-9)
