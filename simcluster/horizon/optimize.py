"""The checkpoint interval of highest simulated goodput, without a grid: golden-section search.

The search brackets the optimum by the closed forms, ``[Young/4, 4 x max(Young, Daly)]`` (at least
one step), and evaluates every interval on the same sample paths (same seed: common random numbers),
so the goodput curve it climbs is one smooth sample function, not noise. It stops when the bracket
is narrower than ``REL_TOL`` of its middle or one step (intervals are whole steps), or after
``MAX_EVALUATIONS``. Every evaluation is checked against the limits before the search starts
(:func:`simcluster.horizon.bounds.check_bounds`, with ``MAX_EVALUATIONS`` evaluations).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from simcluster.errors import SpecError
from simcluster.horizon.bounds import check_bounds
from simcluster.horizon.config import HorizonConfig, horizon_config
from simcluster.horizon.montecarlo import closed_form_intervals_s, step_and_engine, sweep_point
from simcluster.horizon.records import OptimumResult, SweepPoint
from simcluster.spec.scenario import Scenario

#: Golden ratio conjugate, (sqrt 5 - 1) / 2.
INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0
#: Stop when the bracket is narrower than this fraction of its middle.
REL_TOL = 0.01
#: At most this many distinct intervals are simulated.
MAX_EVALUATIONS = 40


def search_bracket_s(cfg: HorizonConfig) -> tuple[float, float]:
    """``[Young/4, 4 x max(Young, Daly)]`` for ``cfg``'s blocking cost and MTBF, at least one step.

    Refused (``SpecError``) when there is no finite optimum: no failures or no blocking cost.
    """
    young, daly = closed_form_intervals_s(cfg)
    if not (math.isfinite(young) and young > 0.0):
        raise SpecError("reliability.failure_rate_per_node_day / checkpoint.storage_write_GBps",
                        "no finite optimum interval: needs failures (a rate > 0) and a blocking "
                        "checkpoint cost > 0")
    low = max(young / 4.0, cfg.step_s)
    return low, max(4.0 * max(young, daly), 2.0 * low)


def golden_section_max(evaluate: Callable[[float], float], low: float, high: float,
                       tol: Callable[[float, float], bool], max_evaluations: int
                       ) -> tuple[float, int]:
    """The argmax of a unimodal ``evaluate`` on ``[low, high]``; returns (x, evaluations used).

    Stops when ``tol(low, high)`` holds or after ``max_evaluations`` calls (each call counted,
    repeated ``x`` included: the caller caches).
    """
    a, b = high - INV_PHI * (high - low), low + INV_PHI * (high - low)
    fa, fb, used = evaluate(a), evaluate(b), 2
    while not tol(low, high) and used < max_evaluations:
        if fa >= fb:
            high, b, fb = b, a, fa
            a = high - INV_PHI * (high - low)
            fa = evaluate(a)
        else:
            low, a, fa = a, b, fb
            b = low + INV_PHI * (high - low)
            fb = evaluate(b)
        used += 1
    return (a if fa >= fb else b), used


def optimize_configs(make: Callable[[float], HorizonConfig], replicas: int, seed: int,
                     engine: str = "fast", jobs: int = 1) -> OptimumResult:
    """Golden-section search of the interval of highest mean goodput over ``make(interval_s)``.

    ``make`` builds the configuration of one interval (rounded to whole steps inside); evaluations
    of the same rounded interval are cached.
    """
    base = make(3600.0)
    low, high = search_bracket_s(base)
    check_bounds(tuple(make(x) for x in (low, high)) * (MAX_EVALUATIONS // 2), replicas, engine)
    cache: dict[float, SweepPoint] = {}

    def goodput(interval_s: float) -> float:
        cfg = make(interval_s)
        key = cfg.checkpoint.interval_s
        if key not in cache:
            cache[key] = sweep_point(cfg, replicas, seed, engine, jobs)
        return cache[key].goodput

    def narrow(a: float, b: float) -> bool:
        return b - a <= max(REL_TOL * (a + b) / 2.0, base.step_s)

    best_s, _ = golden_section_max(goodput, low, high, narrow, MAX_EVALUATIONS)
    best = cache[make(best_s).checkpoint.interval_s]
    young, daly = closed_form_intervals_s(base)
    points = tuple(cache.values())
    return OptimumResult(points=points, optimal_interval_min=best.interval_min,
                         optimal_goodput=best.goodput, young_interval_min=young / 60.0,
                         daly_interval_min=daly / 60.0, bracket_min=(low / 60.0, high / 60.0),
                         replicas=replicas, warnings=_bracket_warnings(best.interval_min, low, high))


def _bracket_warnings(best_min: float, low_s: float, high_s: float) -> tuple[str, ...]:
    """A warning when the optimum ends within 2% of an end of the bracket."""
    if low_s / 60.0 * 1.02 < best_min < high_s / 60.0 * 0.98:
        return ()
    return (f"the optimum {best_min:.4g} min is at an end of the search bracket "
            f"{low_s / 60.0:.4g}..{high_s / 60.0:.4g} min (Young/4 .. 4 x Daly): the closed forms "
            f"describe this run poorly; check with --interval-sweep",)


def optimize_interval(scenario: Scenario, replicas: int = 100, seed: int | None = None,
                      step_time_s: float | None = None, *, engine: str = "fast", jobs: int = 1
                      ) -> OptimumResult:
    """The checkpoint interval of ``scenario`` with the highest simulated goodput (no grid).

    ``step_time_s`` as in :func:`simcluster.horizon.simulate_reliability` (default: analytical).
    """
    step, _ = step_and_engine(scenario, step_time_s, None)

    def make(interval_s: float) -> HorizonConfig:
        return horizon_config(scenario, step, interval_s=interval_s)

    return optimize_configs(make, replicas, scenario.seed if seed is None else seed, engine, jobs)
