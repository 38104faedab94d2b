"""Properties of the Tier B solver and flow simulation (hypothesis).

Max-min fairness is characterised by feasibility plus a bottleneck for every flow: a saturated link
on which no other flow gets more (Bertsekas and Gallager, Data Networks, section 6.5.2).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simcluster.flows.engine import simulate
from simcluster.flows.maxmin import max_min_rates
from simcluster.flows.plan import FlowClass, Phase, Transfer

LINKS = 5


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    classes = draw(st.integers(1, 6))
    rows, cols, weights = [], [], []
    for k in range(classes):
        used = draw(st.sets(st.integers(0, LINKS - 1), min_size=1, max_size=LINKS))
        for link in sorted(used):
            rows.append(link)
            cols.append(k)
            weights.append(draw(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0])))
    caps = draw(st.lists(st.floats(1.0, 100.0), min_size=LINKS, max_size=LINKS))
    mult = draw(st.lists(st.integers(1, 4), min_size=classes, max_size=classes))
    return (np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp), np.array(weights),
            np.array(caps), np.array(mult, dtype=np.float64))


def _loads(p: tuple[np.ndarray, ...], rate: np.ndarray) -> np.ndarray:
    rows, cols, weights, caps, mult = p
    return np.bincount(rows, weights=weights * mult[cols] * rate[cols], minlength=caps.size)


@given(problems())
def test_feasible_and_every_class_has_a_bottleneck(p: tuple[np.ndarray, ...]) -> None:
    rows, cols, weights, caps, mult = p
    rate = max_min_rates(rows, cols, weights, caps, mult)
    load = _loads(p, rate)
    assert np.all(load <= caps * (1 + 1e-9))
    saturated = load >= caps * (1 - 1e-9)
    for k in range(mult.size):
        links = rows[cols == k]
        assert any(saturated[link] and rate[k] >= rate[cols[rows == link]].max() * (1 - 1e-9)
                   for link in links)


@given(problems(), st.floats(0.1, 10.0))
def test_scaling_capacities_scales_rates(p: tuple[np.ndarray, ...], k: float) -> None:
    rows, cols, weights, caps, mult = p
    base = max_min_rates(rows, cols, weights, caps, mult)
    scaled = max_min_rates(rows, cols, weights, caps * k, mult)
    assert np.allclose(scaled, base * k, rtol=1e-9)


@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=5), st.floats(1.0, 100.0))
def test_flows_on_one_link_finish_by_total_bytes_over_capacity(sizes: list[float], cap: float) -> None:
    """Work conservation: the link never idles, so the last flow ends at sum(bytes)/capacity."""
    edge = (("a", 0), ("b", 0))
    transfers = [Transfer((Phase((FlowClass(((edge, 1.0),), s),),),)) for s in sizes]
    finish = simulate(transfers, {edge: cap}).finish_s
    assert abs(max(finish) * cap - sum(sizes)) <= 1e-9 * sum(sizes)
    order = np.argsort(sizes, kind="stable")
    assert all(finish[order[i]] <= finish[order[i + 1]] * (1 + 1e-12) for i in range(len(sizes) - 1))
