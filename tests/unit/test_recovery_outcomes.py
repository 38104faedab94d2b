"""horizon.bounds.recovery_outcomes by hand: which recoveries wait for a spare node."""

from __future__ import annotations

import math

import pytest

from simcluster.horizon import CheckpointPlan, FailureClass, HorizonConfig
from simcluster.horizon.bounds import poisson_tail, pool_short_probability, recovery_outcomes

CK = CheckpointPlan(mode="sync", interval_s=3600.0, blocking_s=60.0, load_s=120.0, write_s=60.0)


def _cfg(*classes: FailureClass, spares: int = 0, replace_s: float = 0.0) -> HorizonConfig:
    return HorizonConfig(nodes=10, work_s=86400.0, step_s=10.0, restart_s=300.0, classes=classes,
                         checkpoint=CK, spares=spares, replace_s=replace_s, diagnose_s=30.0,
                         warmup_s=50.0)


def test_a_restart_in_place_never_waits_for_a_spare() -> None:
    """replace=False: one outcome, detect + diagnose + restart + load + warm-up, at the full rate,
    however long a replacement would take."""
    soft = FailureClass(name="soft", rate_per_node_s=1e-5, detect_s=20.0, replace=False)
    assert recovery_outcomes(_cfg(soft, replace_s=7200.0)) == [
        (pytest.approx(1e-4), 20.0 + 30.0 + 300.0 + 120.0 + 50.0)]


def test_a_replaced_node_waits_in_proportion_to_a_short_pool() -> None:
    """replace=True, 1 spare: the wait replace_s weighs by P(pool short) (Poisson tail)."""
    hard = FailureClass(name="gpu", rate_per_node_s=1e-5, detect_s=20.0)
    cfg = _cfg(hard, spares=1, replace_s=7200.0)
    short = pool_short_probability(cfg, 1)
    away = 10 * 1e-5 * cfg.repair_median_s * math.exp(cfg.repair_sigma ** 2 / 2)
    assert short == pytest.approx(poisson_tail(away, 1))
    base = 20.0 + 30.0 + 300.0 + 120.0 + 50.0
    assert recovery_outcomes(cfg) == [(pytest.approx(1e-4 * (1 - short)), base),
                                      (pytest.approx(1e-4 * short), base + 7200.0)]
    assert recovery_outcomes(_cfg(hard, spares=1)) == [(pytest.approx(1e-4), base)]
