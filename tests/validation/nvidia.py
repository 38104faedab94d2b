"""NVIDIA's published NeMo / Megatron-Bridge training throughput as simcluster scenarios.

Source: ``tests/validation/data/nvidia_perf_summaries.yaml`` (328 rows; its header cites the
upstream tables: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` and its archive
@067f987, releases 25.09 to 26.08; NVIDIA/NeMo @8e3d65d, the NeMo 24.07 table; NVIDIA/NeMo
@19fadb67, the long-sequence context-parallel table). What each precision label means, release by
release, and what the performance recipes set is in ``data/nvidia_stack_notes.md``, with the file
and commit of every finding; this module applies it.

:func:`mapped_rows` returns every dense pre-training row as a :class:`NvidiaCase` (scenario
mapping, measured tokens/s per GPU, subset) and every other row as an :class:`Unexpressible` with
its reason: no row is dropped silently (``len(mapped) + len(unexpressible) == 328``).

The mapping, fixed for every row of a table (nothing fitted per row):

- model: the catalog preset of the published name (:data:`MODELS`). Llama 3.1 8B/70B/405B have the
  Llama 3 shapes (HF meta-llama/Llama-3.1-405B config.json: 126 layers, hidden 16384, 128 heads,
  8 KV heads, FFN 53248, vocab 128256, as Meta-Llama-3 except rope_scaling and the 128k context),
  so ``LLAMA3.1_405B`` maps to ``llama-3-405b``: the catalog has no aliases, and the
  ``llama-3-405b`` entry already cites the 3.1 config. The row's sequence length overrides the
  preset's.
- cluster: DGX-H100 -> ``dgx-h100``, DGX-B200 -> ``dgx-b200`` (8 GPUs per node), DGX-GB200 ->
  ``gb200-nvl72`` (4 GPUs per compute-tray node, one 72-GPU NVLink domain per 18 trays),
  DGX-B300 -> ``dgx-b300``, DGX-GB300 -> ``gb300-nvl72``; nodes = #GPUs / the row's GPUs per node.
  A row whose topology file is not in ``topologies/`` yet is *pending* (mapped, not evaluated).
- layout: TP, PP, CP, virtual stages (interleaved 1F1B when > 1), micro and global batch as
  printed; DP = #GPUs / (TP x PP x CP) (simcluster derives it), except the long-sequence B200
  table, whose printed #GPUs is 4x its TP x PP x DP x CP on every row: there the printed layout
  (DP included) is kept and #GPUs = TP x PP x DP x CP, the only reading that divides its global
  batch (GBS 4 with DP 4 at 1M tokens; DP 16 would not). Sequence parallelism with TP > 1
  (Megatron-Bridge ``WorkloadBaseConfig.sequence_parallel``, the NeMo launcher configs). Megatron's
  distributed optimizer is ZeRO-1; a row with FSDP > 0 runs Megatron-FSDP
  (``data_parallel_sharding_strategy: optim_grads_params``), ZeRO-3 with prefetching. Llama 3.1 405B
  and Qwen3-235B-A22B run ``account_for_embedding_in_pipeline_split`` and
  ``account_for_loss_in_pipeline_split``: the 126 (94) layers plus the embedding and the loss are
  split evenly over the virtual stages (``stage_layers``,
  :func:`stage_layers_with_embedding_and_loss`). MoE rows carry their EP; a MoE layout simcluster
  refuses is listed with the reason (:func:`_layout_problem`).
- precision: :func:`precision_of` (``nvidia_stack_notes.md``, "Precision labels"): Megatron-Bridge
  ``FP8`` (26.02 onward), ``FP8-CS`` and the unlabelled 25.09 main values are per-tensor current
  scaling; ``MXFP8``/``FP8-MX`` and the 25.09 parenthesised values on B200/GB200 are MXFP8;
  parenthesised values on H100 are blockwise (1x128 / 128x128); ``NVFP4`` is NVFP4; NeMo 24.07
  and the long-sequence tables are Transformer Engine delayed scaling.
- stack: ``megatron-core-2024`` (Transformer Engine, cuDNN fused attention, distributed optimizer
  with overlapped gradient reduce-scatter and parameter all-gather, userbuffers TP overlap) refined
  per row by what the recipes set (``nvidia_recipes.execution_of``): gradients reduced in bf16 in every
  Megatron-Bridge perf recipe (``grad_reduce_in_fp32 = False``), no TP overlap for NVFP4 (the
  recipes turn it off), none for Nemotron-4 340B in NeMo 24.07 (its launcher config), gradient-
  accumulation fusion off on Megatron-FSDP rows from 25.11, selective recompute for Nemotron-4
  340B, and FlashAttention-2 for the releases run through NeMo-Framework-Launcher (NeMo 24.07 and
  the H100 long-sequence table, NeMo 24.03.01), whose configuration turns cuDNN's fused attention
  off (``LAUNCHER_RELEASES``), and no host time for the presets that capture the whole iteration
  in one CUDA graph (``FULL_ITERATION_GRAPHS``); both in ``nvidia_recipes.py``.

What the stack presets cannot say, kept as a note on the row (``NvidiaCase.notes``): the partial
full recompute of Llama 3 8B on H100 in 25.11 (5 of 32 layers; modelled without recompute); host
offloading of activations on the Megatron-FSDP Blackwell rows (20 to 95 layers); CUDA graphs
(simcluster's ``megatron-core-2024`` is GPU-bound, ``host_op_us: 0``, which is what graphs buy);
the FP8 / MXFP8 parameter all-gather (``fp8_param_gather``) where the low-precision model does
not price it.

Measured value: tokens/s per GPU as printed. The long-sequence table prints only model TFLOP/s per
GPU; its tokens/s per GPU are derived with NeMo's own FLOPs formula for the family
(:func:`nemo_flops_per_token`, NVIDIA/NeMo @19fadb67 ``nemo/utils/flops_formulas.py``, the commit
that published the table), exact arithmetic, flagged ``derived``. That formula counts the full
(non-causal) attention square; it reproduces NeMo 24.07's printed TFLOP/s-to-tokens ratio on every
row to 0.1% (Llama 2 7B: 780 TFLOP/s at 16,934 tokens/s), whereas Megatron-Bridge's tables count
causal attention (their ratio matches the half square to 1.3%; nvidia_stack_notes.md). Predicted:
``global_batch * seq_len / step_time / #GPUs``.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario
from tests.validation.nvidia_recipes import (
    BRIDGE_MOE_EXPERT_TP,
    LONG_SEQUENCE,
    MEGATRON_BRIDGE,
    NEMO_2407,
    execution_of,
    notes_of,
)

DATA = Path(__file__).resolve().parent / "data" / "nvidia_perf_summaries.yaml"
SECTIONS = (MEGATRON_BRIDGE, NEMO_2407, LONG_SEQUENCE)

SUBSET_H100 = "dense FP8, H100"
SUBSET_BLACKWELL = "dense FP8/MXFP8/NVFP4, Blackwell"
SUBSET_LONG = "long sequence, context parallel"
SUBSET_MOE = "MoE, any GPU and precision"
SUBSETS = (SUBSET_H100, SUBSET_BLACKWELL, SUBSET_LONG, SUBSET_MOE)

#: Published model name -> catalog preset (module docstring: Llama 3.1 uses the Llama 3 presets).
MODELS = {
    "LLAMA3_8B": "llama-3-8b", "LLAMA3-8B": "llama-3-8b", "LLAMA3-8B (FP8) - B200": "llama-3-8b",
    "LLAMA3_70B": "llama-3-70b", "LLAMA3-70B": "llama-3-70b",
    "LLAMA3.1_405B": "llama-3-405b",
    "LLAMA2-7B": "llama-2-7b", "LLAMA2-7B (FP8) - H100": "llama-2-7b",
    "LLAMA2-13B": "llama-2-13b", "LLAMA2-70B": "llama-2-70b",
    "GPT3-5B": "gpt3-5b", "GPT3-20B": "gpt3-20b", "GPT3-175B": "gpt3-175b",
    "Nemotron-8B": "nemotron-8b", "Nemotron-22B": "nemotron-22b",
    "Nemotron-340B": "nemotron-4-340b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
    "DeepSeekV3": "deepseek-v3", "DeepSeekV3 (w/ MTP)": "deepseek-v3",
    "DeepSeekV3 (w/o MTP)": "deepseek-v3", "DeepSeekV3 (dropless)": "deepseek-v3",
}
#: DeepSeek-V3's pipeline layouts by (PP, VP): decoder blocks per virtual stage, the embedding on
#: the first and the multi-token-prediction module and the loss on the last (Megatron-Bridge
#: ``recipes/deepseek/h100/deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout`` @067f987d).
DEEPSEEK_V3_LAYOUTS: dict[tuple[int, int], list[int]] = {
    (4, 1): [16, 16, 16, 13], (8, 1): [8] * 7 + [5], (4, 2): [8] * 7 + [5],
    (16, 1): [4] * 15 + [1], (8, 2): [4] * 15 + [1], (4, 4): [4] * 15 + [1],
}
#: NVIDIA system (the parenthesis of ``hardware.gpu``) -> topology preset.
SYSTEMS = {"DGX-H100": "dgx-h100", "DGX-B200": "dgx-b200", "DGX-GB200": "gb200-nvl72",
           "DGX-B300": "dgx-b300", "DGX-GB300": "gb300-nvl72"}
HOPPER = ("DGX-H100",)

#: Why a model family cannot be expressed (first matching prefix of the published name).
UNEXPRESSIBLE_MODELS = (
    ("DeepSeekV4", "mixture-of-experts model whose architecture simcluster does not describe; the "
     "table gives no dimensions"),
    ("Kimi_K2", "the kimi-k2 preset has the architecture (the DeepSeek-V3 design; docs/moe.md), "
     "but its recipe trains with Muon (recipes/kimi/h100/kimi_k2.py, distributed_muon), an "
     "optimizer simcluster does not price (it prices Adam), and the rows "
     "place EP groups of 64 GPUs across the 72-GPU NVLink domains of GB300 racks"),
    ("GPT OSS", "the gpt-oss-120b preset has the architecture (sliding-window attention on half "
     "the blocks, attention sinks, biases; docs/moe.md), but which attention kernel the runs used "
     "for the sink layers is not settled: Transformer Engine runs a learnable softmax in cuDNN's "
     "fused attention only from cuDNN 9.13.1 (common/fused_attn/fused_attn.cpp), else unfused, "
     "and the containers' cuDNN is not published with the rows. Priced with cuDNN's kernel the "
     "31 rows are +5% to +217% (median 60%), with the unfused path -53% to +67% "
     "(median 15.6%; docs/validation.md); "
     "picking the path by its fit would be fitting to the rows"),
    ("Nemotron_3", "hybrid Mamba-2 / attention (mixture-of-experts) model: simcluster models "
     "attention-only decoders"),
)


@dataclass(frozen=True)
class NvidiaCase:
    """One mapped row: the scenario mapping, the measured value and where it belongs."""

    id: str
    section: str
    subset: str
    model: str
    system: str
    gpus: int
    release: str
    label: str
    precision: str
    fp8_recipe: str | None
    layout: str
    scenario: dict[str, Any]
    tokens_per_s_per_gpu: float
    derived: bool = False
    pending: str | None = None
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Unexpressible:
    """A row simcluster cannot describe, with the reason."""

    id: str
    section: str
    model: str
    reason: str


def load_rows(path: Path = DATA) -> list[tuple[str, dict[str, Any]]]:
    """(section, row) for every row of the data file, in file order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [(section, row) for section in SECTIONS for row in data[section]]


def system_of(row: dict[str, Any]) -> str:
    """``DGX-H100`` from ``NVIDIA H100 SXM 80GB (DGX-H100)``."""
    match = re.search(r"\((DGX-[A-Z0-9]+)\)", row["hardware"]["gpu"])
    if match is None:
        raise ValueError(f"{row['id']}: no system in {row['hardware']['gpu']!r}")
    return match.group(1)


def release_of(row: dict[str, Any]) -> str:
    """The container release: ``25.09``, ``NeMo24.07``, ``NeMo25.04.rc2`` ..."""
    return str(row["stack"]["version"])


def precision_of(section: str, row: dict[str, Any]) -> tuple[str, str | None]:
    """(simcluster precision, fp8 recipe or None) of a row's label (nvidia_stack_notes.md)."""
    label = str(row["parallelism"]["precision"])
    if section != MEGATRON_BRIDGE:
        # NeMo 24.07 launcher configs and the long-sequence tables: Transformer Engine
        # DelayedScaling (NeMo 1.0 had no other recipe; NeMo 25.04's --fp8_recipe default ds).
        if label.lower() != "fp8":
            raise ValueError(f"{row['id']}: unexpected label {label!r}")
        return "fp8", "delayed"
    if label.startswith("fp8 [parenthesised"):
        # 25.09 note: B200/GB200 "32x32 for weights and activations" (MXFP8), H100 128x128
        # weights, 1x128 activations (blockwise, DeepSeek-V3's).
        return ("fp8", "blockwise") if system_of(row) in HOPPER else ("mxfp8", None)
    mapping: dict[str, tuple[str, str | None]] = {
        "fp8": ("fp8", "current"),  # 25.09 main values: the fp8_cs perf-matrix entries
        "FP8": ("fp8", "current"),  # 26.02 onward: the perf scripts have no other FP8 tensor scaling
        "FP8-CS": ("fp8", "current"),
        "FP8-DS": ("fp8", "delayed"),
        "FP8-MX": ("mxfp8", None),
        "MXFP8": ("mxfp8", None),
        "NVFP4": ("nvfp4", None),
        "BF16": ("bf16", None),
    }
    if label not in mapping:
        raise ValueError(f"{row['id']}: unknown precision label {label!r}")
    return mapping[label]


def nemo_flops_per_token(model: str, seq_len: int) -> float:
    """Model FLOPs per token in NeMo's accounting (NVIDIA/NeMo @19fadb67
    ``nemo/utils/flops_formulas.py`` ``llama2``/``llama3``: ``L h^2 (12 + 12 g/a + 18 f/h +
    12 s/h + 6 V/(L h))``, vocabulary from ``LLM_VOCAB_SIZE_MAP``: 32000 and 128256)."""
    m = catalog.entry("models", model)
    vocab = {"llama-2-7b": 32000, "llama-3-8b": 128256}[model]
    L, h = m["layers"], m["hidden"]
    return float(L * h * h * (12 + 12 * m["kv_heads"] / m["heads"] + 18 * m["ffn_hidden"] / h
                              + 12 * seq_len / h + 6 * vocab / (L * h)))


def stage_layers_with_embedding_and_loss(layers: int, chunks: int) -> list[int]:
    """Layers per virtual stage with the embedding and the loss counted as one layer each
    (Megatron-Bridge ``llama31_405b_pretrain_config`` and the Qwen3-235B-A22B recipes,
    ``recipes/qwen/h100/qwen3_moe.py`` @067f987d lines 261-262:
    ``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split``):
    ``(layers + 2) / chunks`` each, one fewer on the first and the last."""
    per, rest = divmod(layers + 2, chunks)
    if rest:
        raise ValueError(f"{layers} + 2 layers do not split over {chunks} virtual stages")
    return [per - 1] + [per] * (chunks - 2) + [per - 1]


def _unexpressible(row: dict[str, Any]) -> str | None:
    name = str(row["model"]["name"])
    task = row.get("task") or "pretrain"
    if task != "pretrain":
        frozen = ", frozen base weights and adapters" if task == "LoRA" else ""
        return (f"{task} fine-tuning (packed SQuAD sequences{frozen}): simcluster prices "
                "pre-training steps only")
    for prefix, reason in UNEXPRESSIBLE_MODELS:
        if name.startswith(prefix):
            return reason
    if "tokendrop" in name:
        return ("mixture of experts with token dropping (a capacity factor): simcluster's "
                "experts are dropless")
    if row["model"].get("moe") and name not in MODELS:
        return "mixture-of-experts model without published dimensions"
    if name not in MODELS:
        return f"no catalog preset for {name!r}"
    return None


def _topology_names() -> set[str]:
    return set(catalog.names("topologies"))


def _layout(par: dict[str, Any], tp: int, pp: int, cp: int, vp: int, fsdp: bool) -> str:
    text = f"TP{tp} PP{pp}" + (f" VP{vp}" if vp > 1 else "") + (f" CP{cp}" if cp > 1 else "")
    return text + (" FSDP" if fsdp else "") + f" mbs{par['micro_batch']} gbs{par['global_batch']}"


def _mbs(row: dict[str, Any]) -> int:
    """Micro-batch size, with the one printed value that contradicts its own row corrected."""
    if row["id"] == "mbps_25_09_pretrain_llama3_70b_dgx_gb200_64_fp8_alt":
        # archive line 608: MBS 2 printed once for both variants, but GA "1 (16)" with
        # GBS 128 and DP 8 is micro-batch 1, the fp8_mx perf-matrix entry's (mbs 1).
        return 1
    return int(row["parallelism"]["micro_batch"] or 1)


def _case(section: str, row: dict[str, Any], topologies: set[str]) -> NvidiaCase:
    name = str(row["model"]["name"])
    model = MODELS[name]
    system = system_of(row)
    release = release_of(row)
    precision, fp8_recipe = precision_of(section, row)
    par = row["parallelism"]
    gpus = int(row["hardware"]["num_gpus"])
    tp, pp, cp = (int(par[k] or 1) for k in ("tp", "pp", "cp"))
    vp_raw = par.get("virtual_stages")
    vp = int(vp_raw) if isinstance(vp_raw, int) else 1
    fsdp = bool(par.get("fsdp"))
    if section == LONG_SEQUENCE and par.get("dp") and tp * pp * cp * int(par["dp"]) != gpus:
        gpus = tp * pp * cp * int(par["dp"])  # the B200 table: see _notes
    seq = int(row["model"]["seq_len"])
    per_node = int(row["hardware"]["gpus_per_node"])
    topology: str | dict[str, Any] = SYSTEMS[system]
    pending = None
    if topology not in topologies:
        pending = f"topology {topology} not in topologies/ yet"
    nodes = gpus // per_node
    if gpus < per_node:  # the 4-GPU long-sequence row: part of one DGX H100
        topology, nodes = {"preset": topology, "gpus_per_node": gpus}, 1
    parallelism: dict[str, Any] = {
        "tp": tp, "pp": pp, "cp": cp, "global_batch": int(par["global_batch"]),
        "micro_batch": _mbs(row), "sequence_parallel": tp > 1, "zero_stage": 3 if fsdp else 1,
        "ep": int(par.get("ep") or 1)}
    if row["model"].get("moe") and section == MEGATRON_BRIDGE:
        parallelism["expert_tp"] = BRIDGE_MOE_EXPERT_TP
    if vp > 1:
        parallelism.update(schedule="interleaved", virtual_stages=vp)
    split = {"llama-3-405b": 126, "qwen3-235b-a22b": 94}  # recipes that count embedding and loss
    if model in split and section == MEGATRON_BRIDGE and pp > 1:
        parallelism["stage_layers"] = stage_layers_with_embedding_and_loss(split[model], pp * vp)
    if model == "deepseek-v3" and (pp, vp) in DEEPSEEK_V3_LAYOUTS:
        parallelism["stage_layers"] = DEEPSEEK_V3_LAYOUTS[(pp, vp)]
    if section == NEMO_2407 and model == "nemotron-4-340b":
        parallelism["recompute"] = "selective"  # launcher: activations_checkpoint_granularity
    scenario = {
        "name": row["id"], "model": {"preset": model, "name": model, "seq_len": seq,
                                     **({"mtp_layers": 0} if "w/o MTP" in name else {})},
        "precision": precision,
        "execution": execution_of(section, release, model, precision, fp8_recipe, tp, fsdp),
        "cluster": {"topology": topology, "nodes": nodes}, "parallelism": parallelism}
    if section == LONG_SEQUENCE:
        measured = row["measured"]["tflops_per_gpu"] * 1e12 / nemo_flops_per_token(model, seq)
        subset = SUBSET_LONG
    else:
        measured = float(row["measured"]["tokens_per_s_per_gpu"])
        subset = SUBSET_H100 if system in HOPPER else SUBSET_BLACKWELL
        if row["model"].get("moe"):
            subset = SUBSET_MOE
    return NvidiaCase(
        id=row["id"], section=section, subset=subset, model=model, system=system, gpus=gpus,
        release=release, label=str(row["parallelism"]["precision"]).split(" [")[0]
        + (" (alt)" if row["id"].endswith("_alt") else ""),
        precision=precision, fp8_recipe=fp8_recipe,
        layout=_layout(parallelism, tp, pp, cp, vp, fsdp), scenario=scenario,
        tokens_per_s_per_gpu=measured, derived=section == LONG_SEQUENCE, pending=pending,
        notes=tuple(notes_of(section, row, release, system, model, fsdp)))


def mapped_rows(path: Path = DATA) -> tuple[list[NvidiaCase], list[Unexpressible]]:
    """Every row of the data file: mapped to a scenario, or unexpressible with its reason."""
    topologies = _topology_names()
    cases: list[NvidiaCase] = []
    left: list[Unexpressible] = []
    for section, row in load_rows(path):
        reason = _unexpressible(row)
        name = str(row["model"]["name"])
        if reason is None:
            case = _case(section, row, topologies)
            reason = _layout_problem(case)
            if reason is None:
                cases.append(case)
                continue
        left.append(Unexpressible(row["id"], section, name, reason))
    return cases, left


def _layout_problem(case: NvidiaCase) -> str | None:
    """Why a MoE row's published layout does not load, or None. Dense rows all load (their
    loading errors fail the tests instead)."""
    if case.subset != SUBSET_MOE or case.pending is not None:
        return None
    try:
        load_scenario(case.scenario)
    except SpecError as err:
        if "does not divide layers" in str(err):
            return (f"uneven pipeline split of {case.scenario['parallelism'].get('pp')} x VP "
                    "stages: the recipe's per-stage layer counts are not published (for "
                    "DeepSeek-V3: not in the recipe's table of pipeline layouts)")
        if "scale-up domain" in str(err):
            return ("EP groups that straddle the 72-GPU NVLink domains of a 256-GPU GB200/GB300 "
                    "run: how the run placed its ranks in racks is not published")
        raise
    return None


def scenario(case: NvidiaCase) -> Scenario:
    """The loaded scenario (raises ``SpecError`` where simcluster cannot express it yet)."""
    return load_scenario(case.scenario)


#: Predictions already made in this process, by (row id, engine): the median and the engines'
#: agreement read the same DES runs (same seed, same result), which cost half a minute per subset.
_PREDICTED: dict[tuple[str, str], float] = {}


def predicted_tokens_per_gpu(case: NvidiaCase, engine: str = "analytical") -> float:
    """simcluster's tokens per second per GPU for ``case`` (computed once per row and engine)."""
    key = (case.id, engine)
    if key not in _PREDICTED:
        _PREDICTED[key] = tokens_per_gpu(scenario(case), engine)
    return _PREDICTED[key]


def tokens_per_gpu(s: Scenario, engine: str = "analytical") -> float:
    """``global_batch * seq_len / step time / #GPUs`` of ``s`` (not cached)."""
    step = simulate(s, engine=engine).step
    return s.parallelism.global_batch * s.model.seq_len / step.iteration_time_s / s.cluster.gpus


def error(case: NvidiaCase, engine: str = "analytical") -> float:
    """Predicted over published tokens/s/GPU, minus 1 (positive: simcluster is too fast)."""
    return predicted_tokens_per_gpu(case, engine) / case.tokens_per_s_per_gpu - 1.0


def summary(errors: Iterable[float]) -> tuple[float, float]:
    """(median, p90) of the absolute errors; p90 is the nearest-rank 90th percentile."""
    ordered = sorted(abs(e) for e in errors)
    rank = max(0, -(-9 * len(ordered) // 10) - 1)  # ceil(0.9 n) - 1
    return statistics.median(ordered), ordered[rank]
