"""Range check against Llama 3 405B pre-training throughput on H100 (secondary source).

Source: Llama Team, "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 4, as presented by
P. Balaji, "Herding Llamas", SC'24, and transcribed at glennklockwood.com/garden/llama-3.1:
8,192 GPUs TP8 CP1 PP16, 16M tokens per batch: 430 TFLOP/s per GPU; 16,384 GPUs TP8 CP1 PP16:
400; 16,384 GPUs TP8 CP16 PP16 (128K sequence): 380 (BF16 MFU 43/41/38%).

Confidence: secondary (the primary table was not read here) and the FLOP convention is not stated
(causal attention may be halved at 128K), so this is a range check (calibration/README.md
section 3): within 20% for every row, both engines. Today: +13-15% / +0-3% / +15-17%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster.run.single import simulate
from simcluster.spec import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "llama3-405b-16k-h100.yaml"
ROWS = [
    ("8192 GPUs, 8K", ["cluster.nodes=1024"], 430.0),
    ("16384 GPUs, 8K", [], 400.0),
    ("16384 GPUs, CP16, 128K", ["model.seq_len=131072", "parallelism.cp=16",
                                "parallelism.global_batch=128"], 380.0),
]
TOLERANCE = 0.20


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize(("label", "overrides", "published"), ROWS, ids=[r[0] for r in ROWS])
def test_llama3_405b_throughput_in_range(label: str, overrides: list[str], published: float,
                                         engine: str) -> None:
    s = load_scenario(SCENARIO, overrides)
    tflops = simulate(s, engine=engine).to_dict()["model_tflops_per_gpu"]
    assert tflops == pytest.approx(published, rel=TOLERANCE), label
