"""torchtitan FSDP2 throughput on 64 A100 80GB as simcluster scenarios (ZeRO-3, eager PyTorch).

Source: pytorch/torchtitan ``docs/performance.md`` @041336434916bdc0f88c1f89fda176fd3c2092e4,
"Llama 3 performance numbers" and "Llama 2 performance numbers": FSDP2 (1D parallelism, full
sharding over the 64 ranks), local batch 1 or 2 of the model's default sequence (Llama 3: 8192
tokens, Llama 2: 4096), bf16, words (tokens) per second per GPU (WPS). The cluster's fabric is not
stated; simcluster takes DGX A100 80GB nodes with 8 x 200 Gb/s HDR (the gathers hide behind
compute in every row, so the fabric barely matters). Only the rows whose activation
checkpointing simcluster models the same way are cases: none, and full (every layer's forward
recomputed). torchtitan's "selective op" policy saves every other matmul output and recomputes
the rest, which is neither Megatron's selective recompute nor full, so those rows (Llama 3 8B,
Llama 2 13B and 70B) are left out. Llama 2 13B has no catalog preset: its shape is from the
Llama 2 paper (40 layers, hidden 5120, 40 heads, FFN 13824, vocab 32000).

These runs are eager PyTorch (no torch.compile): RMSNorm, RoPE, SwiGLU and the loss run as many
small unfused kernels, which the ``fsdp2-eager`` stack counts (``execution.elementwise: eager``);
the GEMMs run at the catalog's A100 tile/wave model, fitted on a published A100 GEMM sweep
(docs/catalog.md); see docs/validation.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

LLAMA2_13B = {"name": "llama-2-13b", "layers": 40, "hidden": 5120, "heads": 40, "kv_heads": 40,
              "ffn_hidden": 13824, "ffn_act": "swiglu", "vocab": 32000, "seq_len": 4096,
              "tied_embeddings": False, "bias": False, "position": "rope", "norm": "rmsnorm"}


@dataclass(frozen=True)
class FsdpCase:
    """One published row: model, local batch, activation checkpointing and WPS per GPU."""

    id: str
    model: str | dict[str, Any]
    batch: int
    recompute: str
    wps: float


CASES = [
    FsdpCase("torchtitan_llama2_13b_b2_no_ac", LLAMA2_13B, 2, "none", 2162),
    FsdpCase("torchtitan_llama3_70b_b1_full", "llama-3-70b", 1, "full", 331),
    FsdpCase("torchtitan_llama2_70b_b2_full", "llama-2-70b", 2, "full", 353),
]
GPUS = 64


def scenario(case: FsdpCase) -> Scenario:
    """The simcluster scenario of ``case``: ZeRO-3 over 64 A100, prefetching, no TP or PP."""
    return load_scenario({
        "name": case.id, "model": case.model, "precision": "bf16",
        "execution": {"stack": "fsdp2-eager"},
        "cluster": {"topology": "dgx-a100-80gb", "nodes": GPUS // 8},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": GPUS * case.batch,
                        "micro_batch": case.batch, "zero_stage": 3,
                        "recompute": case.recompute}})


def predicted_wps(case: FsdpCase, engine: str = "analytical") -> float:
    """simcluster's tokens per second per GPU for ``case``."""
    s = scenario(case)
    step = simulate(s, engine=engine).step
    return s.parallelism.global_batch * s.model.seq_len / step.iteration_time_s / GPUS


def table() -> list[tuple[str, float, float, float]]:
    """(id, published, analytical, DES) tokens per second per GPU for every case."""
    return [(c.id, c.wps, predicted_wps(c), predicted_wps(c, "des")) for c in CASES]
