"""MosaicML LLM Foundry's MPT throughput tables (A100 40/80GB and H100, 512 to 65,536 tokens) as
simcluster scenarios.

Source: ``tests/validation/data/llm_foundry_mpt.yaml``, copied from mosaicml/llm-foundry
``scripts/train/benchmarking/README.md`` @8c8dd48f (its header says what each column is). Every row
is MPT (``llmfoundry/models/mpt``): learned position embeddings, LayerNorm
(``low_precision_layernorm``: one bf16 kernel), biases in every linear layer (the NumParams column
counts them), GELU FFN of 4x, tied embeddings, dropout probability 0 (``resid_pdrop``,
``emb_pdrop``, ``attn_pdrop`` default 0.0 in ``configuration_mpt.py``; PyTorch skips a
``p = 0`` dropout, so no kernel runs), vocabulary 50,368, trained with PyTorch FSDP (composer),
``amp_bf16``.

The stack, described once per table from the repository at the commit that produced it (not per
row), is the ``llm-foundry-2023`` preset refined by:

- the attention kernel: ``scripts/train/benchmarking/submit_benchmarks.py`` sets
  ``attn_impl`` from ``--attn_impl``, default ``triton`` (LLM Foundry's Triton FlashAttention) at
  every commit that produced the tables; ``sweep.sh`` never passes it, except the large-scale
  H100 table's ``sweep.py`` @5e85bd62 (2024-01-06), which passes ``--attn_impl flash`` for 1b,
  3b, 7b and 70b (flash-attn 2.x, the ``gpu-flash2`` extra) and ``triton`` for 13b and 30b;
- FSDP's gradient reduction dtype: composer's ``mixed_precision: DEFAULT`` reduces in fp32 from
  composer 0.16.4 (commit d745fcb, "patch default"); before, it left ``reduce_dtype`` unset and
  reduced in bf16, as ``PURE`` always does. The A100 tables ran LLM Foundry with
  ``composer>=0.14.1,<0.15`` (``setup.py`` @a7d6a447), the H100 tables with ``>=0.16.4``
  (@b2a43a14) and ``>=0.17.2`` (@5e85bd62);
- the sharding strategy of the row: ``FULL_SHARD`` (ZeRO-3: parameters gathered for the forward
  and again for the backward) or ``SHARD_GRAD_OP`` (ZeRO-2), and activation checkpointing of
  every block (``full``) or none.

Clusters: the A100 sections are titled "with 1600 Gbps node-node interconnect (RoCE)", 8 x 200G
per node, the DGX A100 40/80 GB presets; the H100 tables do not state theirs: MosaicML's H100
platform is taken as DGX H100 nodes with 8 x 400G (Databricks trained DBRX on "3072 NVIDIA H100s
connected by 3.2Tbps Infiniband", the same company's H100 fleet months later). An assumption, said
again in docs/validation.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

DATA = Path(__file__).resolve().parent / "data" / "llm_foundry_mpt.yaml"
LARGE_SCALE_H100 = "H100 80GB BF16 (Large Scale, >= 128 GPUs)"
#: Section -> (topology preset, FSDP gradient reduction in fp32 under mixed precision DEFAULT).
SECTIONS: dict[str, tuple[str, bool]] = {
    LARGE_SCALE_H100: ("dgx-h100", True),
    "H100 80GB BF16": ("dgx-h100", True),
    "H100 80GB FP8": ("dgx-h100", True),
    "A100 80GB with 1600 Gbps node-node interconnect (RoCE)": ("dgx-a100-80gb", False),
    "A100 40GB with 1600 Gbps node-node interconnect (RoCE)": ("dgx-a100-40gb", False),
}
#: sweep.py @5e85bd62: the large-scale H100 runs of these sizes passed --attn_impl flash.
FLASH2_LARGE_SCALE = ("MPT-1b", "MPT-3b", "MPT-7b", "MPT-70b")
GPUS_PER_NODE = 8
LONG_SEQUENCE = 16384  # the "seq >= 16k" subset


@dataclass(frozen=True)
class MptRow:
    """One published row (the data file's columns)."""

    id: str
    section: str
    gpu: str
    model: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    params: int
    gpus: int
    global_batch: int
    micro_batch: int
    grad_accum: int
    activation_checkpointing: bool
    sharding: str
    mp_mode: str
    precision: str
    mfu_pct: float
    hfu_pct: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float

    @property
    def attention(self) -> str:
        """The kernel the row ran (module docstring)."""
        if self.section == LARGE_SCALE_H100 and self.model in FLASH2_LARGE_SCALE:
            return "flash2"
        return "triton-flash"

    @property
    def long(self) -> bool:
        return self.seq_len >= LONG_SEQUENCE


def load_rows(path: Path = DATA) -> list[MptRow]:
    """Every row of the data file, in table order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [MptRow(**dict(zip(data["columns"], row, strict=True))) for row in data["rows"]]


ROWS = load_rows()
BF16 = [r for r in ROWS if r.precision in ("amp_bf16", "bf16")]  # bf16: FSDP PURE (A100 40GB)
#: composer's ``amp_fp8``: Transformer Engine FP8 with delayed scaling on MPT's te.Linear modules
#: (the ``llm-foundry-2023`` stack's fp8_recipe and unfused casts).
FP8 = [r for r in ROWS if r.precision == "amp_fp8"]


def scenario(row: MptRow) -> Scenario:
    """The simcluster scenario of ``row`` (module docstring)."""
    topology, fp32_reduce = SECTIONS[row.section]
    model: dict[str, Any] = {
        "name": row.model, "layers": row.layers, "hidden": row.hidden, "heads": row.heads,
        "ffn_hidden": row.ffn_hidden, "vocab": row.vocab, "seq_len": row.seq_len,
        "ffn_act": "gelu", "tied_embeddings": True, "bias": True, "dropout": False,
        "position": "learned", "norm": "layernorm"}
    reduce_fp32 = fp32_reduce and row.mp_mode == "DEFAULT"
    return load_scenario({
        "name": row.id, "model": model, "precision": "fp8" if row.precision == "amp_fp8" else "bf16",
        "execution": {"stack": "llm-foundry-2023", "attention": row.attention,
                      "fp32_grad_buffer": reduce_fp32},
        "cluster": {"topology": topology, "nodes": max(row.gpus // GPUS_PER_NODE, 1)},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": row.global_batch,
                        "micro_batch": row.micro_batch,
                        "zero_stage": 3 if row.sharding == "FULL_SHARD" else 2,
                        "recompute": "full" if row.activation_checkpointing else "none"}})


def predicted_tokens_per_gpu(row: MptRow, engine: str = "analytical") -> float:
    """simcluster's tokens per second per GPU for ``row``."""
    s = scenario(row)
    step = simulate(s, engine=engine).step
    return s.parallelism.global_batch * s.model.seq_len / step.iteration_time_s / row.gpus


def error(row: MptRow, engine: str = "analytical") -> float:
    """Predicted over published tokens/s/GPU, minus 1 (positive: simcluster is too fast)."""
    return predicted_tokens_per_gpu(row, engine) / row.tokens_per_s_per_gpu - 1.0


@dataclass(frozen=True)
class Subset:
    """A validation subset of the issue's table: its rows and its median bound."""

    name: str
    rows: tuple[MptRow, ...]
    median_bound: float


SUBSETS = (
    Subset("MPT bf16 on A100, seq <= 8k",
           tuple(r for r in BF16 if r.gpu.startswith("a100") and not r.long), 0.08),
    Subset("MPT bf16 on H100, seq <= 8k",
           tuple(r for r in BF16 if r.gpu.startswith("h100") and not r.long), 0.10),
    Subset("MPT bf16, seq >= 16k (A100 and H100)", tuple(r for r in BF16 if r.long), 0.12),
)


#: Issue 23's subset: the amp_fp8 rows (H100 80GB FP8 table).
FP8_SUBSET = Subset("MPT amp_fp8 (H100)", tuple(FP8), 0.10)


def summary(errors: Iterable[float]) -> tuple[float, float]:
    """(median, p90) of the absolute errors; p90 is the nearest-rank 90th percentile."""
    ordered = sorted(abs(e) for e in errors)
    rank = max(0, -(-9 * len(ordered) // 10) - 1)  # ceil(0.9 n) - 1
    return statistics.median(ordered), ordered[rank]
