"""Ranking, constraints and the Pareto front."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from simcluster.sweep.config import Constraints
from simcluster.sweep.rank import broken_constraint, eligible, objective_value, pareto_front, rank
from simcluster.sweep.space import Rejections

coords = st.floats(0, 100, allow_nan=False).map(lambda x: round(x, 1))
points_st = st.lists(st.tuples(coords, coords), min_size=0, max_size=60)


def _dominates(q: tuple[float, float], p: tuple[float, float]) -> bool:
    return q[0] <= p[0] and q[1] <= p[1] and q != p


@given(points_st)
def test_pareto_front_properties(points: list[tuple[float, float]]) -> None:
    front = pareto_front(points)
    on = set(front)
    assert len(front) == len(on)
    for i in front:  # no point on the front is dominated
        assert not any(_dominates(q, points[i]) for q in points)
    for i in set(range(len(points))) - on:  # every point off it is dominated by one on it
        assert any(_dominates(points[j], points[i]) for j in front)


def test_pareto_front_oracle() -> None:
    points = [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0), (2.0, 3.0), (3.0, 3.0), (1.0, 3.0)]
    assert sorted(pareto_front(points)) == [0, 1, 2, 5]


def _row(i: int, **kw: object) -> dict[str, object]:
    return {"status": "ok", "gpus": 8, "step_time_s": 10.0 - i, "time_to_train_days": 5.0,
            "cost_usd": 100.0, "mfu": 0.1 * i, **kw}


def test_rank_by_objective_with_ties_in_enumeration_order() -> None:
    rows = [_row(0), _row(1), _row(2), _row(3, step_time_s=8.0)]
    assert rank(rows, range(4), "step_time_s") == [2, 3, 1, 0]  # 8.0 twice: index order
    assert rank(rows, range(4), "mfu") == [3, 2, 1, 0]  # larger is better
    assert objective_value({"mfu": None}, "mfu") == math.inf


def test_constraints_and_rejection_counts() -> None:
    rows = [_row(0), _row(1, cost_usd=1e9), _row(2, time_to_train_days=400.0),
            {"status": "memory", "reason": "needs 90 GiB"},
            {"status": "rule", "reason": "parallelism.tp: 3 does not divide heads=8"}]
    c = Constraints(max_cost_usd=1e6, max_days=365.0)
    assert broken_constraint(rows[1], c) == "constraint.max_cost_usd"
    rejections = Rejections()
    assert eligible(rows, c, rejections) == [0]
    counts = {(lv, key): n for lv, key, n, _ in rejections.rows()}
    assert counts == {("layout", "constraint.max_cost_usd"): 1,
                      ("layout", "constraint.max_days"): 1, ("layout", "memory"): 1,
                      ("variant", "parallelism.tp"): 1}
