"""Llama 3 405B pre-training throughput on H100 against the source's own precision.

Source: Llama Team, "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 4, as presented by
P. Balaji, "Herding Llamas", SC'24, and transcribed at glennklockwood.com/garden/llama-3.1:
8,192 GPUs TP8 CP1 PP16, 16M tokens per batch: 430 TFLOP/s per GPU; 16,384 GPUs TP8 CP1 PP16:
400; 16,384 GPUs TP8 CP16 PP16 (128K sequence): 380 (BF16 MFU 43/41/38%; the paper's text: "38-43%").

The band is what the source leaves open, nothing fitted (the former +-20% was wide enough for
today's +13-14% / -0-2% / +13-15%):

- precision: MFU is given in whole percent, so each row is known to +-0.5 percentage point,
  a relative +-0.5/MFU (1.2%, 1.2%, 1.3%);
- FLOP convention: not stated. simcluster does not halve causal attention; if Meta did, its
  figure in simcluster's convention is larger by (6N + 12 L s h) / (6N + 6 L s h), computed below
  from the shapes (N = 405e9, L = 126, h = 16384): 1.040 at 8K tokens, 1.401 at 128K.

So a row passes when  published x (1 - 0.5/MFU) <= simcluster <= published x convention x
(1 + 0.5/MFU). simcluster predicts a 17% drop from 8K to 16K GPUs where Meta reports 7% (a model
finding), so at most one of the two 8K rows can pass. Until issue 22 the 8,192-GPU row failed
(+14% / +13%, band [425, 452]); with the H100's GEMMs at the level they sustain at 700 W
(docs/catalog.md) and the scenario's default attention kernel on Hopper, FlashAttention-3 (Meta
does not state its kernel; `execution.attention: auto`, docs/stacks.md), it passes (443) and the
16,384-GPU row fails (366 / 365, band [395, 421]): a strict expected failure, the same finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster.run.single import simulate
from simcluster.spec import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "llama3-405b-16k-h100.yaml"
PARAMS, LAYERS, HIDDEN = 405e9, 126, 16384  # Llama 3 paper Table 3


def causal_convention_factor(seq_len: int) -> float:
    """Per-token FLOPs without / with causal halving of the attention scores and values:
    6N for the weights plus 12 L s h (Q K^T and A V, forward and backward, Narayanan et al.
    SC'21 Eq. 3's s/6h term), halved when causal."""
    weights, attention = 6 * PARAMS, 12 * LAYERS * seq_len * HIDDEN
    return (weights + attention) / (weights + attention / 2)


ROWS = [
    # label, overrides, published TFLOP/s, published MFU %, sequence
    pytest.param("16384 GPUs, 8K", [], 400.0, 41, 8192, marks=pytest.mark.xfail(
        strict=True, reason="model finding: -8.5% / -8.7%, below the source's band (simcluster "
        "drops 17% from 8K to 16K GPUs, Meta 7%; docs/validation.md)")),
    ("16384 GPUs, CP16, 128K", ["model.seq_len=131072", "parallelism.cp=16",
                                "parallelism.global_batch=128"], 380.0, 38, 131072),
    ("8192 GPUs, 8K", ["cluster.nodes=1024"], 430.0, 43, 8192),
]


def test_the_convention_factor_by_hand() -> None:
    # 6N = 2.430e12; 12 L s h = 2.029e11 at 8K and 3.247e12 at 128K.
    assert causal_convention_factor(8192) == pytest.approx(2.6329 / 2.5315, rel=1e-3)
    assert causal_convention_factor(131072) == pytest.approx(5.677 / 4.053, rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize(("label", "overrides", "published", "mfu_pct", "seq"), ROWS,
                         ids=["16384 GPUs, 8K", "16384 GPUs, CP16, 128K", "8192 GPUs, 8K"])
def test_llama3_405b_throughput_within_the_source_precision(
        label: str, overrides: list[str], published: float, mfu_pct: int, seq: int,
        engine: str) -> None:
    s = load_scenario(SCENARIO, overrides)
    tflops = simulate(s, engine=engine).to_dict()["model_tflops_per_gpu"]
    rounding = 0.5 / mfu_pct
    low = published * (1 - rounding)
    high = published * causal_convention_factor(seq) * (1 + rounding)
    assert low <= tflops <= high, f"{label}: {tflops:.0f} outside [{low:.0f}, {high:.0f}]"
