"""Validation against vTrain's single-node ground truth: 1440 Megatron-DeepSpeed iteration times.

Source rows and fixed choices: ``tests/validation/vtrain.py`` (VIA-Research/vTrain
``data/ground_truth_single.csv`` @f8dda847, 2 to 8 A100 in one node). Both engines run on every
row (about 1 s each). Comparison: iteration time, directly.

Tolerances are today's level, the measured value rounded up to the next whole percent; the target
is 10%, issue 13 (strict xfail below, so reaching it is visible):

- analytical: median |error| 18.5% -> 19%, p90 |error| 62.5% -> 63%;
- DES: median |error| 19.0% -> 19%, p90 |error| 62.9% -> 63%;
- TP > 1 with PP = DP = 1 (compute plus intra-node TP all-reduces), both engines: median |error|
  45.0% -> 46%; simcluster is faster than measured on these rows.

simcluster is optimistic where the per-GPU work per micro-batch is small (micro-batch 1, TP 4-8,
hidden 1024: up to -81%): the measured time per layer and micro-batch never falls below about
3.5 ms, a fixed host/launch cost that simcluster does not model (docs/validation.md).
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
MEDIAN_TOLERANCE = {"analytical": 0.19, "des": 0.19}
P90_TOLERANCE = {"analytical": 0.63, "des": 0.63}
TP_ONLY_MEDIAN_TOLERANCE = 0.46
TARGET = 0.10


@cache
def _errors(engine: str) -> tuple[float, ...]:
    return tuple(signed_errors(load_rows(), engine))


def _summary(engine: str, keep: str = "all") -> ErrorSummary:
    rows = load_rows()
    errors = _errors(engine)
    chosen = [e for row, e in zip(rows, errors, strict=True) if keep == "all" or tp_only(row)]
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
    """TP > 1, PP = DP = 1: today's level, and simcluster is faster than measured there."""
    summary = _summary(engine, keep="tp_only")
    assert summary.rows == 240
    assert summary.median_abs <= TP_ONLY_MEDIAN_TOLERANCE
    assert summary.median_signed < 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.xfail(strict=True, reason="issue 13 target not met: per-kernel host overhead not modelled")
def test_median_error_within_the_10_percent_target(engine: str) -> None:
    assert _summary(engine).median_abs <= TARGET
