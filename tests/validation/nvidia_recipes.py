"""What the NVIDIA rows' recipes set, per section and release: the ``megatron-core-2024`` stack's
refinements and the notes the presets cannot express (``tests/validation/nvidia.py`` maps the rows
with these; the sources are in ``data/nvidia_stack_notes.md``)."""

from __future__ import annotations

from typing import Any

MEGATRON_BRIDGE = "megatron_bridge_perf_summary"
NEMO_2407 = "nemo_2407_perf_summary"
LONG_SEQUENCE = "nemo_long_sequence_cp"
STACK = "megatron-core-2024"

#: Releases run through NeMo-Framework-Launcher, whose ``launcher_scripts/conf/config.yaml``
#: (tags 24.03.01 @5c7e280a and 24.07 @8325688d) sets ``NVTE_FUSED_ATTN: 0 # Disable cudnn FA until
#: we've tested it more`` for every job: Transformer Engine's DotProductAttention then runs its
#: flash-attn 2 backend, not cuDNN (TE v1.4 attention.py: with fused attention off, FlashAttention
#: is the remaining fused backend). NeMo 25.04's scripts/performance/utils.py @19fadb67 sets
#: ``NVTE_FUSED_ATTN: 1`` and Megatron-Bridge sets neither (TE's default: cuDNN on Hopper+).
LAUNCHER_RELEASES = ("NeMo24.03.01.framework", "NeMo24.07")
#: Expert TP of every Megatron-Bridge MoE recipe: whole experts on each GPU, the EP group folded over
#: the TP ranks. The workload base configs set ``expert_tensor_parallel_size=1`` for DeepSeek-V3,
#: GPT-OSS and Qwen3 at every tag that publishes a table (v0.2.1
#: ``scripts/performance/configs/{deepseek,gpt_oss,qwen3}/workload_base_configs.py``; v0.3.0 to
#: v0.5.0 ``*_workload_base_configs.py``; v0.6.0 ``src/megatron/bridge/perf_recipes/*``).
#: NeMo 24.07 (Megatron-Core 0.8) has no expert TP option: its experts split like TP.
BRIDGE_MOE_EXPERT_TP = 1
#: (model, release) whose MXFP8 preset captures the whole iteration in one CUDA graph, so the host
#: issues no kernel during the step: Qwen3-30B-A3B at 26.06 and 26.06.01 (Megatron-Bridge v0.5.0
#: and v0.5.1 ``qwen3_workload_base_configs.py``: ``cuda_graph_impl="full_iteration"`` on B300,
#: GB200 and GB300) and 26.08 (v0.6.0 ``src/megatron/bridge/perf_recipes/qwen/{gb200,gb300}/
#: qwen3_moe.py``: ``_enable_hybridep_full_iteration_mxfp8``); nvidia_stack_notes.md, "What the MoE
#: recipes set". Every other row runs the stack's host time per kernel call (its router and
#: preprocessing graphs are a few of them).
FULL_ITERATION_GRAPHS = {("qwen3-30b-a3b", "26.06"), ("qwen3-30b-a3b", "26.06.01"),
                         ("qwen3-30b-a3b", "26.08")}


def execution_of(section: str, release: str, model: str, precision: str, fp8_recipe: str | None,
               tp: int, fsdp: bool) -> dict[str, Any]:
    """The ``megatron-core-2024`` stack refined by what the row's recipe sets (nvidia_stack_notes)."""
    ex: dict[str, Any] = {"stack": STACK}
    if release in LAUNCHER_RELEASES:
        ex["attention"] = "flash2"
    if (model, release) in FULL_ITERATION_GRAPHS and precision == "mxfp8":
        ex["host_op_us"] = 0.0
    if fp8_recipe is not None:
        ex["fp8_recipe"] = fp8_recipe
    if section == MEGATRON_BRIDGE:
        ex["fp32_grad_buffer"] = False  # perf recipes: ddp.grad_reduce_in_fp32 = False
        if precision == "nvfp4" and tp > 1:
            ex["tp_comm_overlap"] = "none"  # llama3_llm_pretrain.py: off for nvfp4
        if fsdp:
            ex["zero3_prefetch"] = True  # Megatron-FSDP overlaps its gathers with compute
            if release != "25.09":
                ex["grad_accumulation_fusion"] = False  # "Disabled to avoid functional errors"
    if section == NEMO_2407 and model == "nemotron-4-340b":
        ex["tp_comm_overlap"] = "none"  # launcher nemotron_340b.yaml: ub_tp_comm_overlap False
    return ex


def notes_of(section: str, row: dict[str, Any], release: str, system: str, model: str,
           fsdp: bool) -> list[str]:
    """What the stack presets cannot say about a row, kept as notes on it (module docstring)."""
    notes: list[str] = []
    if section == MEGATRON_BRIDGE and release == "25.11" and system == "DGX-H100" \
            and model == "llama-3-8b":
        notes.append("recipe recomputes 5 of 32 layers (full, block); modelled without recompute")
    if fsdp and system != "DGX-H100":
        notes.append("Megatron-FSDP preset offloads activations of 5-95 layers to the host "
                     "(cpu_offloading_num_layers): not modelled")
    if fsdp:
        notes.append("FSDP column > 0: Megatron-FSDP optim_grads_params as ZeRO-3")
    if section == LONG_SEQUENCE:
        notes.append("micro-batch and recompute not printed: 1 and none assumed")
        if "inconsistent" in str(row.get("confidence", "")):
            notes.append(f"#GPUs printed {row['hardware']['num_gpus']} = 4 x TP x PP x DP x CP: "
                         "#GPUs taken as TP x PP x DP x CP (module docstring)")
    if section == NEMO_2407 and model == "gpt3-175b":
        notes.append("gpt3-175b preset vocab 51200 (SC'21) vs NeMo's padded GPT-2 BPE 50688")
    return notes
