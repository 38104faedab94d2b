"""Validation against Narayanan et al. SC'21 (arXiv 2104.04473), Tables 1 and 2 and section 5 text.

Both engines (the discrete-event simulation and the closed-form model) are held to the same bar.

Source rows: SC'21 Tables 1 and 2, ids ``sc21_table1_*`` and ``sc21_table2_*`` (copied into
``sc21.py`` with their ids; docs/catalog.md). Comparison: simcluster's iteration time converted to
TFLOP/s per GPU with the paper's Eq. 3 (the paper publishes TFLOP/s, not iteration times).
Tolerance: 10% per configuration, 5% on the median (issue 3). Rows the model misses today are
strict xfails, so that an improvement that brings one inside the tolerance fails the run until the
mark is removed.
"""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from simcluster.perf.step import estimate_step
from simcluster.run.single import simulate
from tests.validation.sc21 import CASES, Case, predicted_tflops, scenario

TOLERANCE = 0.10
MEDIAN_TOLERANCE = 0.05

# Known misses (see docs/validation.md): DeepSpeed ZeRO-3 of 2021 ran far below what its
# communication volume and compute explain (per-step time ~66 s at 768 and 1536 GPUs alike, a
# per-GPU cost proportional to the parameters); simcluster models a network-bound ZeRO-3.
KNOWN_MISSES = {c.id for c in CASES if c.zero3}


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason="known miss, see docs/validation.md")] \
        if case.id in KNOWN_MISSES else []
    return pytest.param(case, id=case.id, marks=marks)


ENGINES = ["analytical", "des"]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_sc21_configuration_within_10_percent(case: Case, engine: str) -> None:
    predicted = predicted_tflops(scenario(case), engine)
    assert predicted == pytest.approx(case.tflops, rel=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_sc21_median_error_within_5_percent(engine: str) -> None:
    # All 22 rows, the ZeRO-3 misses included: 2.2% / 2.2% today (6.0% until the A100 tile/wave
    # GEMM model of issue 13, a strict expected failure then).
    errors = [abs(predicted_tflops(scenario(c), engine) / c.tflops - 1) for c in CASES]
    assert statistics.median(errors) <= MEDIAN_TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_sc21_ptd_and_weak_scaling_median_within_5_percent(engine: str) -> None:
    # The median bar on the 16 Megatron (PTD) rows alone: 1.0% (analytical) and 1.0%
    # (DES) today (4.6% and 5.0% with the MAMF best-shape GEMM rate).
    errors = [abs(predicted_tflops(scenario(c), engine) / c.tflops - 1)
              for c in CASES if not c.zero3]
    assert statistics.median(errors) <= MEDIAN_TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.pp > 1 and not c.zero3][:4],
                         ids=lambda c: c.id)
def test_des_never_below_the_compute_lower_bound(case: Case) -> None:
    s = scenario(case)
    des = simulate(s).step
    slowest = max(st.forward_compute_s + st.backward_compute_s for st in estimate_step(s).stages)
    assert des.iteration_time_s >= s.parallelism.micro_batches * slowest * (1 - 1e-9)


# Megatron-LM examples/sc21/run_figure_17.sh: TP 8, PP 16, micro-batch 1, plain 1F1B, local DDP.
RECOMPUTE_145B = Case("sc21_recompute_145B_128gpu", 80, 12288, 96, 128, 8, 16, 16, 1, 0)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [16, 32, 64])
def test_recompute_costs_at_most_a_third(batch: int) -> None:
    """sc21_recompute_145B_128gpu, SC'21 section 5.7 (Figure 17): activation recomputation gives
    "up to 33% lower throughput" at small batch sizes. The same ceiling is physical: recompute
    adds one forward F per micro-batch to a step of at least F + F + B per micro-batch slot
    (1F1B), and a backward is never cheaper than its forward (B >= F: the same TP collectives,
    twice the GEMMs), so the lost share F / (2F + B) is at most 1/3. The floor: recompute only
    adds work, so the loss is above 0. (The former floor, 15%, was fitted; today 24.2-24.3%.)"""
    case = dataclasses.replace(RECOMPUTE_145B, batch=batch)
    with_recompute = simulate(scenario(case), engine="analytical").step.iteration_time_s
    without = simulate(scenario(case, recompute="none"), engine="analytical").step.iteration_time_s
    loss = 1 - without / with_recompute
    assert 0.0 < loss <= 1 / 3


# Megatron-LM examples/sc21/run_figure_18.sh: TP 8, PP 12, 2 layers per virtual stage.
SCATTER_GATHER_175B = Case("sc21_scatter_gather_175B_96gpu", 96, 12288, 96, 96, 8, 12, 12, 1, 0,
                           chunk_layers=2)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [12, 36, 60])
def test_scatter_gather_gains_up_to_11_percent(batch: int) -> None:
    """sc21_scatter_gather_175B_96gpu, SC'21 section 5.8 (Figure 18, batch 12..60): "an
    improvement of up to 11% in throughput" (the ceiling, the paper's own number). The floor is
    physical: scatter/gather sends 1/t of each boundary tensor over InfiniBand and all-gathers it
    over NVLink (t = 8: 8x fewer cross-node bytes on a 12x faster link), so it cannot slow a step
    whose pipeline sends are exposed. Today +5.7% at every batch."""
    case = dataclasses.replace(SCATTER_GATHER_175B, batch=batch)
    on = simulate(scenario(case), engine="analytical").step.iteration_time_s
    without = scenario(case, execution={"scatter_gather": False})
    off = simulate(without, engine="analytical").step.iteration_time_s
    assert 0.0 < off / on - 1 <= 0.11
