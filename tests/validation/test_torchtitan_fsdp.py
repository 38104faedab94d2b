"""torchtitan FSDP2 on 64 A100 (eager PyTorch): a known miss, and how far simcluster is optimistic.

Source and fixed choices: ``tests/validation/torchtitan.py`` (pytorch/torchtitan
docs/performance.md @04133643). Two tests, both engines:

- accuracy, within 10% per row (the issue-13 target; today +4% to +7%). The cases run the
  ``fsdp2-eager`` stack, so the eager RMSNorm, RoPE, SwiGLU, ``repeat_kv`` and loss chains,
  FSDP2's all-gather copy-out and reduce-scatter copy-in and the SMs the overlapped collectives
  hold are counted (before them: +28% to +36%), and the A100 GEMMs run at the tile/wave model
  fitted on the EleutherAI cookbook A100 sweeps (before it, at the MAMF best-shape rate: +13% to
  +15%, a strict expected failure).
- bounds, one-sided each with its argument (today 1.04-1.07x the published rate):
  * never slower than the eager run (ratio >= 1.0): everything simcluster models (GEMMs at the
    best-shape rate, the eager element-wise chains, the ZeRO-3 gathers) happens in the real run as
    well, and what it leaves out (the HBM bandwidth the collectives take, allocator stalls, the
    slower of the per-call GEMM timings) only adds time;
  * never faster than the linear layers alone at the A100's maximum achievable matmul rate
    (MAMF, 0.869 x 312 = 271.1 TFLOP/s, docs/catalog.md): 6 FLOPs per linear weight per token
    (8 with full recompute: one more forward), weights counted by hand from the model shapes
    below. Attention, norms and communication only add time, so this is a loose but physical
    ceiling (1.40-1.63x the published rate). The old upper bound, 1.25x, was fitted around
    the output of the time (1.19-1.22x) and is gone.
"""

from __future__ import annotations

import pytest

from simcluster.perf.memory import estimate_memory
from tests.validation.torchtitan import CASES, FsdpCase, predicted_wps, scenario

TOLERANCE = 0.10
MAMF_FLOPS_PER_S = 0.869 * 312e12  # A100 bf16 best-shape matmul (docs/catalog.md, MAMF)


def _linear_weights(layers: int, hidden: int, kv_dim: int, ffn: int, vocab: int) -> int:
    """Weights of every GEMM per token: Q and O (h x h), K and V (h x kv_dim), SwiGLU's three
    h x ffn matrices, and the untied output head (the embedding lookup is no GEMM)."""
    return layers * (2 * hidden**2 + 2 * hidden * kv_dim + 3 * hidden * ffn) + hidden * vocab


# Hand counts from the published shapes (Llama 2 paper Table 1 / Llama 3 model card):
# 13B: 40 x 5120, MHA, FFN 13824, vocab 32000; 70B: 80 x 8192, 8 KV heads of 128, FFN 28672,
# vocab 32000 (Llama 2) or 128256 (Llama 3).
LINEAR_WEIGHTS = {
    "torchtitan_llama2_13b_b2_no_ac": _linear_weights(40, 5120, 5120, 13824, 32000),
    "torchtitan_llama3_70b_b1_full": _linear_weights(80, 8192, 1024, 28672, 128256),
    "torchtitan_llama2_70b_b2_full": _linear_weights(80, 8192, 1024, 28672, 32000),
}


def _matmul_ceiling_wps(case: FsdpCase) -> float:
    """Tokens per second per GPU if only the linear layers ran, at the MAMF rate."""
    flops_per_weight = 8 if case.recompute == "full" else 6
    return MAMF_FLOPS_PER_S / (flops_per_weight * LINEAR_WEIGHTS[case.id])


@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fsdp_throughput_within_10_percent(case: FsdpCase, engine: str) -> None:
    assert predicted_wps(case, engine) == pytest.approx(case.wps, rel=TOLERANCE)


@pytest.mark.parametrize("engine", ["analytical", "des"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fsdp_throughput_is_an_optimistic_bound(case: FsdpCase, engine: str) -> None:
    predicted = predicted_wps(case, engine)
    assert predicted >= case.wps, f"{case.id}: {predicted / case.wps:.2f}x the published WPS"
    assert predicted <= _matmul_ceiling_wps(case), f"{case.id}: above the matmul-only ceiling"


def test_the_matmul_ceiling_counts_the_published_parameters() -> None:
    # The hand count against the models' published sizes (13.0B, 70.6B and 69.0B parameters,
    # of which the embedding lookups are h x vocab): within 1%.
    published = {"torchtitan_llama2_13b_b2_no_ac": (13.016e9, 5120 * 32000),
                 "torchtitan_llama3_70b_b1_full": (70.554e9, 8192 * 128256),
                 "torchtitan_llama2_70b_b2_full": (68.977e9, 8192 * 32000)}
    for case_id, (total, embedding) in published.items():
        assert LINEAR_WEIGHTS[case_id] + embedding == pytest.approx(total, rel=0.01), case_id


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_published_runs_fit_in_80_gb(case: FsdpCase) -> None:
    """Each row ran on 80 GB A100, so the (conservative) memory model must say it fits: today
    74.1 GiB for Llama 2 13B without checkpointing at batch 2, the tightest, 46-69 GiB for the
    70B rows with full recompute. (The source's OOM statement, Llama 2 70B at batch 2 with its
    "selective op" checkpointing, is not a case: that policy is not modelled; simcluster's
    selective and no recompute need 241 GiB there, but they keep more than selective op does.)"""
    assert estimate_memory(scenario(case)).fits_in_memory
