"""Stationary Weibull failures (issue 25 item 1): node clocks start in equilibrium, so the expected
count in any window is rate x node-time for every shape and run length; ``infant_mortality``
starts a fresh fleet at age 0 instead."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.horizon.config import horizon_config
from simcluster.horizon.sampling import (
    FAILURE,
    SamplePath,
    WeibullSource,
    equilibrium_first,
    weibull_scale,
)
from simcluster.rng import generator
from simcluster.spec import load_scenario
from tests.tiny import tiny_scenario

DAY = 86400.0


def test_scale_keeps_the_mean_oracle() -> None:
    for shape in (0.3, 0.8, 1.0, 3.0):
        scale = weibull_scale(1.0 / 86400.0, shape)
        assert scale * math.gamma(1.0 + 1.0 / shape) == pytest.approx(86400.0, rel=1e-12)


@pytest.mark.parametrize("shape", [0.5, 1.0, 2.0])
def test_forward_recurrence_time_has_its_mean_oracle(shape: float) -> None:
    """The equilibrium time to the next failure has mean E[X^2] / (2 E[X]) (Cox 1962), which for
    Weibull gaps is scale x Gamma(1 + 2/k) / (2 Gamma(1 + 1/k)): at k = 1 the gap's own mean."""
    scale = 1.0
    draws = equilibrium_first(scale, shape, 400_000, generator(3, 0, "fr"))
    expected = scale * math.gamma(1 + 2 / shape) / (2 * math.gamma(1 + 1 / shape))
    sem = float(np.std(draws)) / math.sqrt(draws.size)
    assert abs(float(np.mean(draws)) - expected) < 5 * sem


@settings(max_examples=20, deadline=None)
@given(st.floats(0.3, 3.0), st.floats(2.0, 200.0), st.integers(0, 10_000))
def test_the_count_in_any_window_is_rate_times_node_time(shape: float, days: float,
                                                         seed: int) -> None:
    """Short windows included (the old age-0 start gave 1.6-3.2x the rate at shape 0.8): the mean
    count per node is within 5 standard errors of rate x days (independent nodes)."""
    nodes, rate = 20_000, 1.0 / (50 * DAY)
    source = WeibullSource(nodes, rate, shape, generator(seed, 0, "w"))
    times = source.until(days * DAY)
    assert times.size == pytest.approx(nodes * rate * days * DAY,
                                       abs=5 * math.sqrt(_count_variance(nodes, rate, days, shape)))


def _count_variance(nodes: int, rate: float, days: float, shape: float) -> float:
    """An upper bound of Var N(T) over ``nodes`` stationary renewal processes: rate T (1 + CV^2),
    plus one, so that short windows keep a Poisson-like band."""
    cv2 = math.gamma(1 + 2 / shape) / math.gamma(1 + 1 / shape) ** 2 - 1
    return nodes * (rate * days * DAY * (1 + cv2) + 1)


def test_a_fresh_fleet_fails_more_early_when_the_shape_is_below_one() -> None:
    """``infant_mortality``: at shape 0.8 a new fleet's first 5 days bring more failures than the
    stationary rate, at shape 2 fewer (wear-out has not started)."""
    nodes, rate, days = 50_000, 1.0 / (100 * DAY), 5.0
    expected = nodes * rate * days * DAY
    for shape, more in ((0.8, True), (2.0, False)):
        fresh = WeibullSource(nodes, rate, shape, generator(1, 0, "n"), new=True)
        count = fresh.until(days * DAY).size
        assert (count > 1.2 * expected) == more
        assert (count < 0.8 * expected) == (not more)


def _scenario(**reliability: object) -> object:
    base = tiny_scenario("w", reliability={"inter_arrival": "weibull", **reliability},
                         training={"tokens": 1e9})
    return load_scenario(base)


@pytest.mark.parametrize("infant", [False, True])
def test_the_scenario_key_reaches_the_sample_path(infant: bool) -> None:
    s = _scenario(weibull_shape=0.8, infant_mortality=infant,
                  failure_rate_per_node_day=5.0)
    cfg = horizon_config(s, 1.0)
    assert cfg.infant_mortality is infant
    path = SamplePath(cfg, 0, 0)
    first = next(e for e in path.events() if e[1] == FAILURE)
    assert first[0] >= 0.0


@pytest.mark.parametrize("shape", [0.001, 0.02, 25.0])
def test_shapes_outside_the_published_range_are_refused(shape: float) -> None:
    with pytest.raises(SpecError, match=r"reliability\.weibull_shape"):
        _scenario(weibull_shape=shape)
