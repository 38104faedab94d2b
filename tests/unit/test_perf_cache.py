"""The analytical model's caches change no number (issue 12, perf-speed).

Pinned: over ~200 layouts of six base scenarios, ``estimate_step`` and ``estimate_memory`` equal,
bit for bit, the values the code gave before any cache existed (``tests/golden/
layouts_analytical.json``, see :mod:`tests.golden.layouts_analytical`).
"""

from __future__ import annotations

import json

import pytest

from simcluster.spec.scenario import Scenario
from tests.golden.layouts_analytical import FIXTURE, case_scenario, evaluate

CASES = json.loads(FIXTURE.read_text())
_BASES: dict[str, Scenario] = {}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['base']}-{c['layout']['tp']}x"
                         f"{c['layout']['pp']}x{c['layout']['cp']}-{c['layout']['schedule']}")
def test_layout_matches_pre_cache_values(case: dict[str, object]) -> None:
    assert evaluate(case_scenario(case, _BASES)) == case["expected"]
