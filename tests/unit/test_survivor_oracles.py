"""Oracles for survivors of the mutmut benchmark (benchmarks/README.md, "Mutation score"): each
checks a formula by hand where the suite did not, at a point that separates it from the mutant.

Sources: the first-order waste of Young (CACM 1974), Kokolis et al. HPCA 2025 (E[ETTR]),
the zero-bubble pipeline README (ZB-H1 bubble ``(p-1)(T_F + T_B - T_W)``).
"""

from __future__ import annotations

import math

import pytest

from simcluster.horizon.sampling import WeibullSource
from simcluster.perf.pipeline import pipeline_time_s
from simcluster.perf.reliability import first_order_waste, meta_expected_ettr
from simcluster.rng import generator


def test_first_order_waste_adds_the_recovery_to_the_rework() -> None:
    """C = 60 s every 30 min, R = 10 min, M = 10 h: 60/1800 + (900 + 600)/36000 = 0.075 (a sign
    slip on R gives 0.0417, dropping it 0.0583)."""
    assert first_order_waste(60.0, 1800.0, 600.0, 36000.0) == pytest.approx(0.075, rel=1e-12)
    # an asynchronous checkpoint's persist lag adds to the rework like R: + 300/36000
    assert first_order_waste(60.0, 1800.0, 600.0, 36000.0, persist_s=300.0) == \
        pytest.approx(0.075 + 300.0 / 36000.0, rel=1e-12)


def test_meta_ettr_divides_by_one_plus_the_checkpoint_share() -> None:
    """Kokolis et al.: N = 2048, r_f = 6.5e-3 per node-day, u0 = dt = 5 min, and a 1-minute
    checkpoint: (1 - 2048 x 6.5e-3/86400 x 450) / (1 + 60/300) = 0.93067 / 1.2 = 0.77556."""
    numerator = 1.0 - 2048 * 6.5e-3 / 86400.0 * (300.0 + 150.0)
    assert numerator == pytest.approx(0.930667, abs=1e-6)
    assert meta_expected_ettr(2048, 6.5e-3 / 86400.0, 300.0, 300.0, 60.0) == \
        pytest.approx(numerator / 1.2, rel=1e-12)


def test_zb_h1_bubble_subtracts_the_weight_gradient() -> None:
    """p = 4, m = 8, t_f = 1, full backward t_b = 2 of which t_w = 0.8: work 8 x 3 = 24 and bubble
    3 x (1 + 2 - 2 x 0.8) = 4.2 (ZB notation: T_B = 1.2 without W, T_F + T_B - T_W = 1.4)."""
    assert pipeline_time_s("zb-h1", 4, 8, 1.0, 2.0, t_w=0.8) == pytest.approx(28.2, rel=1e-12)
    assert pipeline_time_s("1f1b", 4, 8, 1.0, 2.0) == pytest.approx(24.0 + 9.0, rel=1e-12)


def test_a_zero_weibull_rate_never_fails() -> None:
    source = WeibullSource(100, 0.0, 0.7, generator(0, 0, "zero-rate"))
    assert source.scale == math.inf
    assert source.until(1e12).size == 0
