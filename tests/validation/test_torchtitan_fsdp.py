"""torchtitan FSDP2 on 64 A100 (eager PyTorch): a known miss, and how far simcluster is optimistic.

Source and fixed choices: ``tests/validation/torchtitan.py`` (pytorch/torchtitan
docs/performance.md @04133643). Two tests, both engines:

- accuracy, within 10% per row: strict expected failure today (+19% to +22%). The cases run the
  ``fsdp2-eager`` stack, so the eager RMSNorm, RoPE, SwiGLU, ``repeat_kv`` and loss chains are
  counted (issue 13; before them: +28% to +36%); the A100 GEMMs still run at the best-shape rate
  curve and FSDP2's copy-in/copy-out is not modelled. The mark flips when the rest is modelled.
- bound, range check: simcluster is never slower than the eager run and at most 1.25 times as
  fast (calibration/README.md section 3 range check; the band states today's optimism, 1.19-1.22).
"""

from __future__ import annotations

import pytest

from tests.validation.torchtitan import CASES, FsdpCase, predicted_wps

TOLERANCE = 0.10
OPTIMISM = (1.0, 1.25)


@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.xfail(strict=True, reason="eager-mode kernels and typical GEMM rates not modelled")
def test_fsdp_throughput_within_10_percent(case: FsdpCase, engine: str) -> None:
    assert predicted_wps(case, engine) == pytest.approx(case.wps, rel=TOLERANCE)


@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fsdp_throughput_is_an_optimistic_bound(case: FsdpCase, engine: str) -> None:
    ratio = predicted_wps(case, engine) / case.wps
    assert OPTIMISM[0] <= ratio <= OPTIMISM[1], f"{case.id}: {ratio:.2f}x the published WPS"
