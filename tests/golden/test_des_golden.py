"""Golden event log of the DES on a tiny 2-node scenario (exact, line by line).

Scenario: ``tests.golden.sim_cases.tiny`` with DP overlap on: a 4-layer GPT on two 4 x RTX 3090 Ti boxes,
TP 2 x PP 2 x DP 2, 1F1B, 8 micro-batches. Regenerate only on purpose, and review the diff:
``SIMCLUSTER_REGEN_GOLDEN=1 pytest tests/golden/test_des_golden.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from simcluster.sim import simulate_step
from tests.golden.sim_cases import tiny

GOLDEN = Path(__file__).with_name("des_tiny_2node.log")


def _log() -> str:
    result = simulate_step(tiny(pp=2, execution={"overlap_grad_reduce": True}))
    head = [f"# iteration_time_s {result.iteration_time_s!r}",
            *(f"# {k} {v!r}" for k, v in result.breakdown.as_dict().items())]
    return "\n".join([*head, *result.event_log()]) + "\n"


def test_event_log_matches_golden() -> None:
    got = _log()
    if os.environ.get("SIMCLUSTER_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()
