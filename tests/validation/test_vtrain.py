"""Validation against vTrain's single-node ground truth: 1440 Megatron-DeepSpeed iteration times.

Source rows and fixed choices: ``tests/validation/vtrain.py`` (VIA-Research/vTrain
``data/ground_truth_single.csv`` @f8dda847, 2 to 8 A100 in one node). Both engines run on every
row (about 1 s each). Comparison: iteration time, directly.

The rows run the ``deepspeed-megatron-2022`` stack, whose host time per layer operator
(``execution.host_op_us = 53``) was fitted on the EVEN rows of this file
(``analysis/calibrate_host_overhead.py``): the issue-13 target (median |error| <= 10%) is asserted
on the held-out ODD rows. Before that host floor the median was 18.5% / 19.0% (analytical / DES):
the small steps (micro-batch 1, TP 4-8, hidden 1024) never ran faster than about 3.5 ms per layer
and micro-batch, the host's pace, while the GPU work counted was three times less.

Other tolerances are today's level, rounded up to the next whole percent:

- all rows: median |error| 6.0% / 5.9% -> 6%; p90 |error| 21.8% / 21.5% -> 22% (21% until the
  A100 tile/wave GEMM model of issue 13, fitted on the EleutherAI cookbook sweeps: 20.5% / 20.1%
  then; the tail is now mostly micro-batch 8 at hidden 2048, predicted 20% slow);
- TP > 1 with PP = DP = 1 (compute plus intra-node TP all-reduces): median |error| 6.3% (7.2%
  before the A100 tile/wave model; the 8% bound is kept), median signed error +2.1% (within +-5%).
"""

from __future__ import annotations

from functools import cache

import pytest

from tests.validation.vtrain import (
    DATA,
    ErrorSummary,
    load_rows,
    padded_vocab,
    scenario,
    signed_errors,
    summarise,
    tp_only,
    unmappable,
)

ENGINES = ["analytical", "des"]
MEDIAN_TOLERANCE = {"analytical": 0.06, "des": 0.06}
# The analytical p90 moved from 0.218 to 0.220 when the closed form began to price the DP
# reduction in Megatron's buckets as the DES does (issue: closed form vs DES on sweeps): its
# median distance to the DES on these rows fell from 0.5% to 0.03%.
P90_TOLERANCE = {"analytical": 0.225, "des": 0.22}
TP_ONLY_MEDIAN_TOLERANCE = 0.08
TP_ONLY_BIAS = 0.05
TARGET = 0.10


@cache
def _errors(engine: str) -> tuple[float, ...]:
    return tuple(signed_errors(load_rows(), engine))


def _summary(engine: str, keep: str = "all") -> ErrorSummary:
    rows = load_rows()
    errors = _errors(engine)
    keeps = {"all": lambda i, row: True, "tp_only": lambda i, row: tp_only(row),
             "held_out": lambda i, row: i % 2 == 1}
    chosen = [e for i, (row, e) in enumerate(zip(rows, errors, strict=True)) if keeps[keep](i, row)]
    return summarise(chosen)


def test_the_data_is_the_published_file_and_every_row_maps() -> None:
    assert DATA.read_bytes().startswith(b"\xef\xbb\xbf")  # kept byte for byte (UTF-8 BOM)
    rows = load_rows()
    assert len(rows) == 1440
    assert [r.index for r in rows if unmappable(r)] == []


def test_vocabulary_is_padded_as_megatron_pads_it() -> None:
    assert [padded_vocab(tp) for tp in (1, 2, 4, 8)] == [50304, 50432, 50688, 51200]


def test_rows_below_eight_gpus_run_on_a_node_of_that_size() -> None:
    row = next(r for r in load_rows() if r.gpus == 2)
    s = scenario(row)
    assert s.cluster.topology.gpus_per_node == 2
    assert s.cluster.nodes == 1
    assert (s.parallelism.tp, s.parallelism.pp, s.parallelism.dp) == (row.tp, row.pp, row.dp)


@pytest.mark.parametrize("engine", ENGINES)
def test_median_error_at_todays_level(engine: str) -> None:
    """Today's level; the target is 10%, issue 13."""
    assert _summary(engine).median_abs <= MEDIAN_TOLERANCE[engine]


@pytest.mark.parametrize("engine", ENGINES)
def test_p90_error_at_todays_level(engine: str) -> None:
    """Today's level (the tail is the small-work rows: micro-batch 1, TP 4-8)."""
    assert _summary(engine).p90_abs <= P90_TOLERANCE[engine]


@pytest.mark.parametrize("engine", ENGINES)
def test_intra_node_tp_rows_at_todays_level(engine: str) -> None:
    """TP > 1, PP = DP = 1: today's level, without a bias either way beyond 5%."""
    summary = _summary(engine, keep="tp_only")
    assert summary.rows == 240
    assert summary.median_abs <= TP_ONLY_MEDIAN_TOLERANCE
    assert abs(summary.median_signed) <= TP_ONLY_BIAS


@pytest.mark.parametrize("engine", ENGINES)
def test_held_out_rows_meet_the_10_percent_target(engine: str) -> None:
    """The odd rows, which the host-time fit did not see: median |error| <= 10% (issue 13)."""
    summary = _summary(engine, keep="held_out")
    assert summary.rows == 720
    assert summary.median_abs <= TARGET
