"""The horizon engine against published reliability numbers (each item names its source).

1. Daly 2006 (FGCS 22(3)): Eq. 9 expected wall time at fixed interval, within 1% and within
   3 standard errors; simulated optimum within 10% of Daly's 117, 57 and 9.1 min (delta = 5 min,
   R = 10 min; M = 24 h, 6 h, 15 min). The optimum is the minimum of a least-squares fit of
   ``a/tau + b + c tau + d tau^2 + e tau^3`` (the Taylor form of Eq. 9) to the simulated means on a
   grid of +-50% around it, with common random numbers across the grid.
2. Young's limit (delta/M = 1e-3): simulated optimum within 5% of sqrt(2 delta M).
3. Llama 3 (arXiv 2407.21783 s3.3.4, Table 5; source id
   ``llama3_405b_54day_interruptions``): 419 unexpected interruptions in 54 days on 2048 nodes
   (mean within 1%, ~95% of replicas in the Poisson band [379, 459], class counts pass a
   chi-square test against Table 5's counts), 466 with planned ones, effective training time > 90%.
   These are SAMPLER tests, not validation: the failure rate and the class shares were derived
   from these very counts (419 / (2048 x 54) per node-day), so they check that the engine draws
   what it is given. The fidelity checks on data the rates were not derived from are 4-6.
4. The first-order ETT figures of s5.4 (0.91 at R = 10 min within 0.02; 0.79 at R = 30 min within
   0.03, see the test) and Daly's renewal form within 0.005.
5. Kokolis et al. E[ETTR] (s5.5): 0.93 +- 0.01 at 5-min checkpoints, 0.71 +- 0.02 at 60 min.
6. DLRover: 1000 GPUs at 0.27% per GPU-day fail within a day with probability 0.933 +- 0.01.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simcluster.horizon import (
    CheckpointPlan,
    FailureClass,
    HorizonConfig,
    simulate_config,
    simulate_reliability,
)
from simcluster.horizon.config import LLAMA3_CLASSES
from simcluster.perf.reliability import daly_expected_wall_s, daly_interval_s, young_interval_s
from simcluster.spec import load_scenario

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MIN, HOUR, DAY = 60.0, 3600.0, 86400.0


def _daly_cfg(mtbf_s: float, interval_s: float, work_s: float, delta_s: float = 5 * MIN,
              restart_s: float = 10 * MIN) -> HorizonConfig:
    """Daly's model: Poisson failures, detection and diagnosis free, restart R (which can fail),
    synchronous dumps of delta, no spares needed."""
    cls = FailureClass(name="any", rate_per_node_s=1.0 / mtbf_s, detect_s=0.0, replace=False)
    return HorizonConfig(nodes=1, work_s=work_s, classes=(cls,), restart_s=restart_s,
                         checkpoint=CheckpointPlan(mode="sync", interval_s=interval_s,
                                                   blocking_s=delta_s))


def _fitted_optimum_s(taus: np.ndarray, means: np.ndarray) -> float:
    basis = lambda x: np.stack([1 / x, np.ones_like(x), x, x**2, x**3], axis=1)  # noqa: E731
    coef, *_ = np.linalg.lstsq(basis(taus), means, rcond=None)
    grid = np.linspace(taus.min(), taus.max(), 20001)
    return float(grid[np.argmin(basis(grid) @ coef)])


def _simulated_optimum_s(mtbf_s: float, tau_s: float, work_s: float, replicas: int,
                         delta_s: float = 5 * MIN, restart_s: float = 10 * MIN) -> float:
    taus = np.linspace(0.5, 1.5, 11) * tau_s
    means = np.array([simulate_config(_daly_cfg(mtbf_s, t, work_s, delta_s, restart_s), replicas,
                                      seed=7).column("elapsed_s").mean() for t in taus])
    return _fitted_optimum_s(taus, means)


@pytest.mark.parametrize(("mtbf_s", "replicas"), [(24 * HOUR, 300), (6 * HOUR, 300), (15 * MIN, 40)])
def test_daly_eq9_expected_wall_time(mtbf_s: float, replicas: int) -> None:
    tau = daly_interval_s(5 * MIN, mtbf_s)
    work = round(500 * HOUR / tau) * tau  # whole segments, as Eq. 9 assumes
    elapsed = simulate_config(_daly_cfg(mtbf_s, tau, work), replicas, seed=1).column("elapsed_s")
    expected = daly_expected_wall_s(work, tau, 5 * MIN, 10 * MIN, mtbf_s)
    error = 3 * elapsed.std(ddof=1) / math.sqrt(replicas)
    assert abs(elapsed.mean() - expected) <= error
    assert abs(elapsed.mean() / expected - 1) <= 0.01


@pytest.mark.parametrize(("nodes", "replicas"), [(1, 4000), (8, 4000), (64, 4000), (512, 4000),
                                                 (2048, 3000)])
def test_daly_exact_on_a_gpu_grid(nodes: int, replicas: int) -> None:
    """Issue 25's independent check, kept: exponential failures at Llama 3's 3.79e-3 per node-day
    on 8 to 16,384 GPUs (1 to 2,048 nodes), sync dumps of 60 s at Daly's interval, a 10-minute
    restart, 30 days of work in whole segments: the simulated mean wall time is Daly's exact Eq. 9
    within 0.1% (and within 3 standard errors, which the replica count keeps below 0.04%); measured
    within 0.005% at every point."""
    mtbf = DAY / (3.79e-3 * nodes)
    tau = daly_interval_s(60.0, mtbf)
    work = round(30 * DAY / tau) * tau
    cfg = _daly_cfg(mtbf, tau, work, delta_s=60.0)
    elapsed = simulate_config(cfg, replicas, seed=3).column("elapsed_s")
    expected = daly_expected_wall_s(work, tau, 60.0, 10 * MIN, mtbf)
    error = 3 * elapsed.std(ddof=1) / math.sqrt(replicas)
    assert error / expected < 4e-4
    assert abs(elapsed.mean() - expected) <= max(error, 1e-9 * expected)
    assert abs(elapsed.mean() / expected - 1) <= 1e-3


@pytest.mark.parametrize(("mtbf_s", "published_min", "work_h", "replicas"),
                         [(24 * HOUR, 117.0, 1000, 150), (6 * HOUR, 57.0, 500, 150),
                          (15 * MIN, 9.1, 100, 20)])
def test_daly_published_optimum(mtbf_s: float, published_min: float, work_h: float,
                                replicas: int) -> None:
    simulated = _simulated_optimum_s(mtbf_s, published_min * MIN, work_h * HOUR, replicas)
    assert simulated / MIN == pytest.approx(published_min, rel=0.10)


def test_young_limit_small_checkpoint_cost() -> None:
    mtbf, delta = 10 * HOUR, 36.0  # delta / M = 1e-3
    young = young_interval_s(delta, mtbf)
    assert daly_interval_s(delta, mtbf) == pytest.approx(young, rel=0.02)
    simulated = _simulated_optimum_s(mtbf, young, 1000 * HOUR, 150, delta_s=delta, restart_s=0.0)
    assert simulated == pytest.approx(young, rel=0.05)


@pytest.fixture(scope="module")
def llama3() -> object:
    scenario = load_scenario(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml",
                             ["reliability.horizon_days=54"])
    return simulate_reliability(scenario, replicas=1000, seed=2024, step_time_s=6.7)


def test_llama3_sampler_reproduces_its_input_counts(llama3: object) -> None:
    """A sampler test (the rate is 419 / (2048 x 54) per node-day, derived from these counts):
    the engine draws the counts it was given, with Poisson spread and Table 5's class mix."""
    result = llama3
    by_class = np.array([r.interruptions for r in result.records])  # type: ignore[attr-defined]
    unexpected = by_class[:, :-2].sum(axis=1)
    assert unexpected.mean() == pytest.approx(419, rel=0.01)
    inside = np.mean((unexpected >= 379) & (unexpected <= 459))
    assert 0.93 <= inside <= 0.97
    # Chi-square of the pooled class counts against Table 5 (6 dof; 0.1% critical value 22.46).
    observed = by_class[:, :-2].sum(axis=0)
    table = np.array([row[0] for row in LLAMA3_CLASSES.values()], dtype=float)
    expected = observed.sum() * table / table.sum()
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < 22.46
    gpu_share = (observed[0] + observed[1]) / observed.sum()
    assert gpu_share == pytest.approx(268 / 419, abs=0.005)


def test_llama3_total_interruptions_and_ett(llama3: object) -> None:
    d = llama3.to_dict()  # type: ignore[attr-defined]
    assert d["interruptions"]["total"] == pytest.approx(466, rel=0.015)
    assert d["effective_training_time_ratio"] > 0.90
    total = sum(d["lost_time_breakdown_h"].values())
    assert total == pytest.approx(d["lost_time_total_h"], rel=1e-9)


@pytest.mark.parametrize(("restart_min", "first_order", "tolerance"), [(10.0, 0.91, 0.02),
                                                                        (30.0, 0.79, 0.03)])
def test_llama3_first_order_ett(restart_min: float, first_order: float, tolerance: float) -> None:
    """2048 nodes, 419 + 47 interruptions in 54 days, tau = 10 min, blocking 0, R in total.

    Checked against Daly's renewal form (Eq. 9 per unit work, times the planned restarts' share)
    within 0.005, and against the first-order figure 1 - 466 (tau/2 + R) / 54 days. At R = 30 min
    the first-order 0.79 is pessimistic by ~0.02: it charges every interruption tau/2 + R, while a
    failure during a restart costs only the restart done so far (Daly's e^{R/M} term).
    """
    cls = FailureClass(name="any", rate_per_node_s=3.79e-3 / DAY, detect_s=0.0, replace=False)
    cfg = HorizonConfig(nodes=2048, work_s=math.inf, horizon_s=54 * DAY, classes=(cls,),
                        planned_per_s=47 / (54 * DAY), restart_s=restart_min * MIN,
                        checkpoint=CheckpointPlan(mode="async", interval_s=10 * MIN))
    goodput = simulate_config(cfg, replicas=100, seed=3).goodput
    renewal = 1.0 / daly_expected_wall_s(1.0, 10 * MIN, 0.0, restart_min * MIN, 1 / cfg.failure_rate_s)
    renewal *= 1.0 - 47 * restart_min * MIN / (54 * DAY)
    assert goodput == pytest.approx(renewal, abs=0.005)
    assert goodput == pytest.approx(first_order, abs=tolerance)


@pytest.mark.parametrize(("interval_min", "ettr", "tolerance"), [(5.0, 0.93, 0.01), (60.0, 0.71, 0.02)])
def test_meta_expected_ettr(interval_min: float, ettr: float, tolerance: float) -> None:
    """N = 2048, r_f = 6.5e-3 per node-day, u0 = 5 min, non-blocking checkpoints."""
    cls = FailureClass(name="any", rate_per_node_s=6.5e-3 / DAY, detect_s=0.0, replace=False)
    cfg = HorizonConfig(nodes=2048, work_s=math.inf, horizon_s=30 * DAY, classes=(cls,),
                        restart_s=5 * MIN,
                        checkpoint=CheckpointPlan(mode="sync", interval_s=interval_min * MIN))
    assert simulate_config(cfg, replicas=100, seed=4).goodput == pytest.approx(ettr, abs=tolerance)


def test_dlrover_daily_failure_probability() -> None:
    cls = FailureClass(name="gpu", rate_per_node_s=8 * 0.0027 / DAY, detect_s=0.0, replace=False)
    cfg = HorizonConfig(nodes=125, work_s=math.inf, horizon_s=DAY, classes=(cls,),
                        checkpoint=CheckpointPlan(mode="none", interval_s=math.inf))
    result = simulate_config(cfg, replicas=4000, seed=5)
    hit = np.mean([r.interruptions[0] >= 1 for r in result.records])
    assert hit == pytest.approx(1 - (1 - 0.0027) ** 1000, abs=0.01)
