"""A tiny scenario mapping shared by tests (two DGX A100 nodes, an 8-layer 1024-wide model):
everything on it runs in milliseconds."""

from __future__ import annotations

from typing import Any


def tiny_scenario(name: str, **sections: Any) -> dict[str, Any]:
    """The tiny scenario named ``name``, with ``sections`` added or replaced."""
    return {
        "name": name,
        "model": {"name": "tiny", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096,
                  "vocab": 32000, "seq_len": 1024},
        "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
        "parallelism": {"tp": 2, "pp": 2, "global_batch": 64},
        "training": {"tokens": 1.0e9},
        "cost": {"rent_per_gpu_hour_usd": 2.0},
        **sections,
    }
