"""Properties of the DES link sharing (hypothesis): max-min fair, as the Tier B solver computes it.

The DES's pure-Python progressive filling (``sim.network.max_min_shares``) is checked against the
independent numpy solver of Tier B (``flows.maxmin.max_min_rates``, unit weights and
multiplicities), and against the definition: feasible, and every transfer has a bottleneck link,
saturated, on which no other transfer gets more (Bertsekas and Gallager, *Data Networks*, 2nd ed.,
section 6.5.2). Max-min never gives a transfer less than an equal share of its busiest link.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simcluster.flows.maxmin import max_min_rates
from simcluster.sim.network import max_min_shares

LINKS = ["a", "b", "c", "d", "e"]

Problem = tuple[list[tuple[str, ...]], dict[str, float]]


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    paths = draw(st.lists(st.sets(st.sampled_from(LINKS), min_size=1, max_size=3)
                          .map(lambda links: tuple(sorted(links))), min_size=1, max_size=8))
    caps = draw(st.lists(st.floats(0.05, 4.0), min_size=len(LINKS), max_size=len(LINKS)))
    return paths, dict(zip(LINKS, caps, strict=True))


def _loads(paths: list[tuple[str, ...]], rates: list[float]) -> dict[str, float]:
    load = dict.fromkeys(LINKS, 0.0)
    for path, rate in zip(paths, rates, strict=True):
        for link in path:
            load[link] += rate
    return load


@given(problems())
def test_equals_the_tier_b_solver(problem: Problem) -> None:
    paths, caps = problem
    rows = [LINKS.index(link) for path in paths for link in path]
    cols = [i for i, path in enumerate(paths) for _ in path]
    numpy_rates = max_min_rates(np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp),
                                np.ones(len(rows)), np.array([caps[x] for x in LINKS]),
                                np.ones(len(paths)))
    assert np.allclose(max_min_shares(paths, caps), numpy_rates, rtol=1e-9)


@given(problems())
def test_feasible_fair_and_never_below_an_equal_share(problem: Problem) -> None:
    paths, caps = problem
    rates = max_min_shares(paths, caps)
    load = _loads(paths, rates)
    users = {x: [i for i, p in enumerate(paths) if x in p] for x in LINKS}
    assert all(load[x] <= caps[x] * (1 + 1e-9) for x in LINKS)
    for i, path in enumerate(paths):
        assert any(load[x] >= caps[x] * (1 - 1e-9)
                   and rates[i] >= max(rates[j] for j in users[x]) * (1 - 1e-9) for x in path)
        assert rates[i] >= min(caps[x] / len(users[x]) for x in path) * (1 - 1e-9)
