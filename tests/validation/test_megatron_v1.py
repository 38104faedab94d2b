"""Validation against the Megatron-LM v1 README scaling tables (Sept 2020): measured iteration times.

Source rows: NVIDIA/Megatron-LM ``images/tables.tex`` @5281919, ids ``megatron_v1_*`` (copied into
``megatron_v1.py``; docs/catalog.md). Comparison: iteration time in seconds, directly (every row
publishes one). Tolerance: 10% per run, the bar of the
SC'21 validation, with both engines. Known misses are strict xfails.
"""

from __future__ import annotations

import pytest

from tests.validation.megatron_v1 import CASES, V1Case, predicted_ms

TOLERANCE = 0.10

# Known misses (see docs/validation.md): every DGX-2 V100 run comes out 28-35% slow. The V100
# GEMM-size curve (gemm_half_dim 666, analysis/fit_matmul.py) is fitted with the n = 512 point,
# whose 29 us per call sits on the 21 us launch floor of that benchmark: mid-size GEMMs and the
# head-dim-128 attention GEMMs are predicted far too slow.
KNOWN_MISSES = {c.id for c in CASES if c.topology == "dgx-2"}


def _param(case: V1Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason="known miss, see docs/validation.md")] \
        if case.id in KNOWN_MISSES else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_iteration_time_within_10_percent(case: V1Case, engine: str) -> None:
    assert predicted_ms(case, engine) == pytest.approx(case.iteration_ms, rel=TOLERANCE)


@pytest.mark.slow
def test_data_parallel_runs_are_never_faster_than_one_replica() -> None:
    # 128-way DP adds the gradient all-reduce to the same per-replica work (README: scaling < 100%).
    single = {c.tp: predicted_ms(c) for c in CASES if "mp_weak" in c.id and "a100" in c.id}
    for case in (c for c in CASES if "dp128" in c.id):
        assert predicted_ms(case) >= single[case.tp]
