"""Tier B max-min solver (progressive filling) against hand-computed allocations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simcluster.flows.maxmin import max_min_rates


def _solve(paths: list[list[tuple[int, float]]], capacity: list[float], mult: list[float],
           active: list[bool] | None = None) -> list[float]:
    links = np.array([link for path in paths for link, _ in path], dtype=np.intp)
    classes = np.array([k for k, path in enumerate(paths) for _ in path], dtype=np.intp)
    weights = np.array([w for path in paths for _, w in path], dtype=np.float64)
    mask = None if active is None else np.array(active)
    return list(max_min_rates(links, classes, weights, np.array(capacity, dtype=np.float64),
                              np.array(mult, dtype=np.float64), mask))


def test_textbook_allocation_by_hand() -> None:
    """L0 = 10 carries A and B; L1 = 6 carries B and 2 flows of C.

    All rise together: L1 saturates first at r = 6 / 3 = 2 (B, C frozen at 2); A takes what is left
    of L0: 10 - 2 = 8.
    """
    rates = _solve([[(0, 1.0)], [(0, 1.0), (1, 1.0)], [(1, 1.0)]], [10.0, 6.0], [1, 1, 2])
    assert rates == pytest.approx([8.0, 2.0, 2.0], rel=1e-12)


def test_weight_counts_crossings() -> None:
    """A ring channel crossing a 10 B/s link twice moves at 5 B/s per hop."""
    assert _solve([[(0, 2.0)]], [10.0], [1]) == pytest.approx([5.0])


def test_multiplicity_shares_like_separate_flows() -> None:
    """k identical flows in one class get what k separate classes would."""
    merged = _solve([[(0, 1.0)], [(0, 1.0), (1, 1.0)]], [12.0, 100.0], [3, 1])
    split = _solve([[(0, 1.0)]] * 3 + [[(0, 1.0), (1, 1.0)]], [12.0, 100.0], [1, 1, 1, 1])
    assert merged == pytest.approx([3.0, 3.0])
    assert split == pytest.approx([3.0] * 4)


def test_spray_fractions() -> None:
    """A flow split 1/2-1/2 over two 5 B/s links gets 10 B/s; a second flow on one of them shares.

    Flow A: 0.5 on L0 and L1; flow B: 1 on L0. L0: 0.5 a + b <= 5 with a = b = r -> r = 10/3;
    then L1 (0.5 a <= 5) is not tight, so A is frozen by L0 as well: both 10/3.
    """
    rates = _solve([[(0, 0.5), (1, 0.5)], [(0, 1.0)]], [5.0, 5.0], [1, 1])
    assert rates == pytest.approx([10 / 3, 10 / 3])


def test_inactive_and_linkless_classes() -> None:
    rates = _solve([[(0, 1.0)], [(0, 1.0)], []], [10.0], [1, 1, 1], active=[True, False, True])
    assert rates[0] == pytest.approx(10.0)
    assert math.isnan(rates[1])
    assert rates[2] == math.inf
