"""Tiny scenarios for the DES tests (unit, property, golden)."""

from __future__ import annotations

from typing import Any

from simcluster.spec import Scenario, load_scenario


def tiny(nodes: int = 2, tp: int = 2, pp: int = 2, batch: int = 16, schedule: str = "1f1b",
         execution: dict[str, Any] | None = None, topology: str = "box-4x3090ti-nvlink",
         **par: Any) -> Scenario:
    """A ~13M-parameter GPT on ``nodes`` boxes of four RTX 3090 Ti (one DP bucket per stage)."""
    model = {"name": "tiny-gpt", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1024,
             "seq_len": 256}
    return load_scenario({
        "name": "tiny", "model": model, "precision": "bf16",
        "cluster": {"topology": topology, "nodes": nodes},
        "execution": {"overlap_grad_reduce": False, **(execution or {})},
        "parallelism": {"tp": tp, "pp": pp, "global_batch": batch, "micro_batch": 1,
                        "schedule": schedule, "zero_stage": 0, **par}})
