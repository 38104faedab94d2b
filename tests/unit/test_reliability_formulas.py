"""Closed forms of ``simcluster.perf.reliability`` against their published values.

Young 1974, Daly 2006 (Figs 3-5 captions: 117, 57 and 9.1 min for delta = 5 min, R = 10 min),
Kokolis et al. 2025 E[ETTR] (arXiv 2410.21680; 0.931 and 0.676 worked out by hand below) and the
checkpoint sizes at 14 B/param, ZeRO's 16 bytes of model state less the 16-bit gradients
(Rajbhandari et al. SC'20 section 3.1; 70B: 0.98 TB, 405B: 5.67 TB).
"""

from __future__ import annotations

import math

import pytest

from simcluster.perf import reliability as rel

MIN, HOUR, DAY = 60.0, 3600.0, 86400.0


@pytest.mark.parametrize(("mtbf_s", "published_min"), [(24 * HOUR, 117.0), (6 * HOUR, 57.0),
                                                       (15 * MIN, 9.1)])
def test_daly_optimum_matches_published(mtbf_s: float, published_min: float) -> None:
    tau = rel.daly_interval_s(5 * MIN, mtbf_s) / MIN
    assert tau == pytest.approx(published_min, abs=0.5 if published_min > 50 else 0.05)


@pytest.mark.parametrize("mtbf_s", [24 * HOUR, 6 * HOUR, 15 * MIN])
def test_daly_higher_order_close_to_numeric_minimum_of_eq9(mtbf_s: float) -> None:
    numeric = rel.daly_optimal_interval_numeric_s(5 * MIN, 10 * MIN, mtbf_s)
    assert rel.daly_interval_s(5 * MIN, mtbf_s) == pytest.approx(numeric, rel=0.02)


def test_young_is_limit_of_daly_for_small_checkpoint_cost() -> None:
    delta, mtbf = 1.0, 1e4
    young = rel.young_interval_s(delta, mtbf)
    assert young == pytest.approx(math.sqrt(2e4))
    assert rel.daly_interval_s(delta, mtbf) == pytest.approx(young, rel=0.01)
    assert rel.daly_optimal_interval_numeric_s(delta, 0.0, mtbf) == pytest.approx(young, rel=0.02)


def test_daly_beyond_two_mtbf_is_mtbf() -> None:
    assert rel.daly_interval_s(3.0, 1.0) == 1.0


def test_eq9_reduces_to_work_plus_checkpoints_without_failures() -> None:
    wall = rel.daly_expected_wall_s(1000.0, 100.0, 5.0, 10.0, 1e12)
    assert wall == pytest.approx(1000.0 + 10 * 5.0, rel=1e-6)


def test_meta_ettr_worked_example() -> None:
    """Kokolis et al. (HPCA 2025) worked example, 0.931 at N = 2048, r_f = 6.5e-3 per node-day,
    u0 = 5 min, dt = 5 min, w = 0. By hand: N r_f = 13.312 per day; 1 - 13.312 x (5 + 5/2) / 1440
    = 0.9307; with dt = 60 min, 1 - 13.312 x (5 + 30) / 1440 = 0.6764."""
    rate = 6.5e-3 / DAY
    assert rel.meta_expected_ettr(2048, rate, 5 * MIN, 5 * MIN, 0.0) == pytest.approx(
        1 - 13.312 * 7.5 / 1440, rel=1e-12)
    assert rel.meta_expected_ettr(2048, rate, 5 * MIN, 60 * MIN, 0.0) == pytest.approx(
        1 - 13.312 * 35 / 1440, rel=1e-12)
    assert round(rel.meta_expected_ettr(2048, rate, 5 * MIN, 5 * MIN, 0.0), 3) == 0.931


def test_first_order_waste_minimum_is_young() -> None:
    delta, mtbf = 30.0, 20000.0
    tau = rel.young_interval_s(delta, mtbf)
    best = rel.first_order_waste(delta, tau, 0.0, mtbf)
    assert best < rel.first_order_waste(delta, 0.9 * tau, 0.0, mtbf)
    assert best < rel.first_order_waste(delta, 1.1 * tau, 0.0, mtbf)
    assert best == pytest.approx(math.sqrt(2 * delta / mtbf))


@pytest.mark.parametrize(("params", "tb"), [(70e9, 0.98), (405e9, 5.67)])
def test_checkpoint_size_14_bytes_per_param(params: float, tb: float) -> None:
    assert rel.checkpoint_bytes(params) / 1e12 == pytest.approx(tb, abs=0.005)


def test_checkpoint_write_time_at_llama3_bandwidth() -> None:
    assert rel.transfer_time_s(rel.checkpoint_bytes(405e9), 2e12) == pytest.approx(2.8, abs=0.05)


def test_per_gpu_share_shrinks_with_zero_sharding() -> None:
    plain = rel.checkpoint_bytes_per_gpu(405e9, 128, 128, zero_stage=0)
    zero = rel.checkpoint_bytes_per_gpu(405e9, 128, 128, zero_stage=1)
    assert plain == pytest.approx(14 * 405e9 / 128)
    assert zero == pytest.approx(2 * 405e9 / 128 + 12 * 405e9 / 128 / 128)


def test_mtbf_infinite_without_failures() -> None:
    assert rel.mtbf_s(100, 0.0) == math.inf
    assert rel.mtbf_s(2048, 3.79e-3 / DAY) / HOUR == pytest.approx(3.09, abs=0.01)
