"""NVIDIA's NeMo 24.07 and Megatron-Bridge performance summaries: tokens/s/GPU on H100, B200,
GB200 and GB300 in FP8, MXFP8 and NVFP4 (issue 23), and MPT's ``amp_fp8`` rows.

Source and fixed choices: ``tests/validation/nvidia.py`` (the rows copied in
``tests/validation/data/nvidia_perf_summaries.yaml`` with their citations; the recipe labels and
the stack per release in ``tests/validation/data/nvidia_stack_notes.md``). Compared: tokens per
second per GPU, never NVIDIA's "model TFLOP/s" (their own accounting).

Per subset of the issue's table, both engines: the median |error| within the issue's bound. A
subset the model does not reach yet is a strict expected failure whose reason says what is
missing (docs/validation.md, "FP8 and Blackwell"). Every row is either mapped to a scenario or
listed with the reason it cannot be expressed: no silent skips (checked, with the subsets' row
counts, by ``tests/unit/test_nvidia_models.py``).
"""

from __future__ import annotations

import pytest

from tests.validation import mpt, nvidia

CASES, UNEXPRESSIBLE = nvidia.mapped_rows()
#: Issue 23's bounds per subset.
BOUNDS = {nvidia.SUBSET_H100: 0.10, nvidia.SUBSET_BLACKWELL: 0.12, nvidia.SUBSET_LONG: 0.12,
          nvidia.SUBSET_MOE: 0.15}
#: Subsets whose median is still above the bound, and why (docs/validation.md).
NOT_YET: dict[str, str] = {}


def _subset(name: str) -> list[nvidia.NvidiaCase]:
    return [c for c in CASES if c.subset == name]


def _case(name: str, engine: str) -> object:
    reason = NOT_YET.get(name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, engine, id=f"{name} [{engine}]", marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "engine"),
                         [_case(n, e) for n in nvidia.SUBSETS for e in ("analytical", "des")])
def test_median_error_within_the_issue_bound(name: str, engine: str) -> None:
    median, _ = nvidia.summary(nvidia.error(c, engine) for c in _subset(name))
    assert median <= BOUNDS[name], f"{name} [{engine}]: median |error| {median:.1%}"


#: Rows where the closed form and the DES differ by more than 3%, and why (left open in issue 23's
#: note): deep interleaving (10-20 one- or two-layer chunks per stage) with FP8's short chunks on
#: H100, where the DES exposes 0.3 s more of the pipeline sends than the closed form counts.
ENGINE_GAPS = {
    "nemo2407_nemo24_07_pretrain_llama2_70b_dgx_h100_64_fp8_main": "VP20: DES 6.3% slower",
    "nemo2407_nemo24_07_pretrain_nemotron_22b_dgx_h100_64_fp8_main": "VP10: DES 3.6% slower",
}


def _agree(case: nvidia.NvidiaCase) -> bool:
    fast = nvidia.predicted_tokens_per_gpu(case, "analytical")
    return nvidia.predicted_tokens_per_gpu(case, "des") == pytest.approx(fast, rel=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("name", nvidia.SUBSETS)
def test_both_engines_agree_on_every_row(name: str) -> None:
    for case in _subset(name):
        if case.id not in ENGINE_GAPS:
            assert _agree(case), case.id


@pytest.mark.slow
@pytest.mark.parametrize("row", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=why))
                                 for r, why in ENGINE_GAPS.items()])
def test_known_engine_gaps(row: str) -> None:
    assert _agree(next(c for c in CASES if c.id == row))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["analytical", "des"])
def test_mpt_amp_fp8_within_the_issue_bound(engine: str) -> None:
    """MPT's seven ``amp_fp8`` rows (H100, 1B and 3B, 512 to 32,768 tokens): 10%."""
    sub = mpt.FP8_SUBSET
    median, _ = mpt.summary(mpt.error(r, engine) for r in sub.rows)
    assert median <= sub.median_bound, f"{sub.name} [{engine}]: median |error| {median:.1%}"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["analytical", "des"])
def test_moe_rows_the_host_time_fit_did_not_see(engine: str) -> None:
    """``megatron-core-2024``'s ``host_op_us`` (45 us per kernel call) was fitted on the EVEN rows
    of the MoE subset (analysis/calibrate_megatron_host.py); the ODD rows, held out, meet the
    issue's 15% on their own (13.0%), and without the host time they do not (23.2%)."""
    held = _subset(nvidia.SUBSET_MOE)[1::2]
    median, _ = nvidia.summary(nvidia.error(c, engine) for c in held)
    assert median <= BOUNDS[nvidia.SUBSET_MOE], f"held-out MoE rows [{engine}]: {median:.1%}"



@pytest.mark.slow
def test_the_stacks_host_time_is_the_even_rows_fit() -> None:
    """``megatron-core-2024``'s ``host_op_us`` is what analysis/calibrate_megatron_host.py fits:
    the grid value with the smallest median |error| on the even MoE rows (ties: the smallest)."""
    import sys
    from pathlib import Path

    from simcluster.spec import load_scenario

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    import calibrate_megatron_host as calibration
    from _split_fit import best_on_even

    best = best_on_even(_subset(nvidia.SUBSET_MOE), calibration.median_abs, calibration.GRID_US)
    stack = load_scenario("scenarios/default.yaml", ["execution=megatron-core-2024"])
    assert stack.execution.host_op_s == pytest.approx(best * 1e-6)
