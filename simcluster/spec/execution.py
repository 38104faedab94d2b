"""The training framework's kernel, overlap and memory choices: the scenario's ``execution`` section.

Flag names follow Megatron-LM's where one exists; ``stack`` names the software-stack preset
(``simcluster/catalog/stacks.yaml``, docs/stacks.md) whose flags the loader merges under the ones
given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.errors import SpecError
from simcluster.spec.schema import Context, spec_field

ELEMENTWISE_MODES = ("fused", "eager")
TP_OVERLAP_MODES = ("none", "bulk", "pipelined")
GRAD_COPIES = ("none", "shard", "full")
CP_COMM_TYPES = ("p2p", "all_gather")
#: MoE token dispatchers (Megatron-Core ``--moe-token-dispatcher-type``; docs/moe.md).
MOE_DISPATCHERS = ("alltoall", "allgather", "flex")
#: Attention kernels (simcluster/catalog/attention.yaml, perf/kernels/attention.py); math is
#: the unfused path (scores GEMM, softmax, AV GEMM).
ATTENTION_KERNELS = ("auto", "flash2", "flash3", "cudnn", "triton-flash", "sdpa-flash", "flash1",
                     "xformers", "math")
#: Scaling recipes of ``precision: fp8`` (Transformer Engine ``DelayedScaling``,
#: ``Float8CurrentScaling``, ``Float8BlockScaling``); ``auto``: delayed.
FP8_RECIPES = ("auto", "delayed", "current", "blockwise")
#: The fused kernel ``flash_attention: true`` means when no kernel is named: ``auto``, the fastest
#: published kernel for the accelerator's architecture (perf/kernels/attention.py).
DEFAULT_FLASH_KERNEL = "auto"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSpec:
    """Kernel and overlap choices of the training framework (Megatron-LM flag names in docs).

    ``stack`` names the software-stack preset the flags came from (``simcluster catalog stacks``);
    the loader merges the preset's flags under the keys given with it, so ``{stack:
    megatron-2021, flash_attention: true}`` refines the preset.
    """

    stack: str | None = spec_field(
        None, doc="software-stack preset the flags came from (simcluster catalog stacks); null: "
        "the flags as given")

    @staticmethod
    def derive(values: dict[str, Any], context: Context) -> None:
        """``attention`` and ``flash_attention`` from whichever is given (flash2 / true by
        default); both given must agree (a stack's kernel under a user's ``flash_attention`` is
        resolved by the loader first, :func:`simcluster.spec.loader.resolve_stack`)."""
        del context
        flash = values.get("flash_attention")
        kernel = values.get("attention")
        if kernel is None:
            values["attention"] = DEFAULT_FLASH_KERNEL if flash in (None, True) else "math"
        elif flash is None:
            values["flash_attention"] = kernel != "math"
        elif flash != (kernel != "math"):
            raise SpecError("flash_attention", f"{str(flash).lower()} contradicts attention: "
                            f"{kernel} (math is the unfused path; every other kernel is fused)")
        values.setdefault("flash_attention", values["attention"] != "math")
    flash_attention: bool = spec_field(
        True, derived=True, doc="a fused attention kernel (true: attention is not math); the "
        "older spelling of execution.attention: false means math, true alone means auto, the "
        "stack's kernel or the fastest for the GPU")
    attention: str = spec_field(
        DEFAULT_FLASH_KERNEL, choices=ATTENTION_KERNELS, derived=True,
        doc="attention kernel: auto (the fastest published kernel for the GPU's architecture: "
        "flash3 on Hopper, flash2 elsewhere), flash2, flash3 (Hopper), cudnn (Transformer Engine "
        "fused attention), triton-flash (LLM Foundry's attn_impl: triton), sdpa-flash (PyTorch "
        "SDPA), flash1, xformers, or math (unfused scores GEMM + softmax + AV GEMM); rates by "
        "architecture, head dimension, mask and sequence length from the kernels' published "
        "benchmarks (simcluster catalog attention, docs/stacks.md)")
    overlap_grad_reduce: bool = spec_field(
        True, doc="DP gradient reduction overlaps the last backward (--overlap-grad-reduce)")
    overlap_param_gather: bool = spec_field(
        True, doc="ZeRO-1/2: the all-gather of the updated weights overlaps the next forward, layer "
        "by layer (Megatron-Core --overlap-param-gather); false: the forward waits for all of it "
        "(Megatron-LM's default, DeepSpeed ZeRO-1/2)")
    cp_comm_type: str = spec_field(
        "p2p", choices=CP_COMM_TYPES,
        doc="context-parallel K/V exchange (Megatron-Core --cp-comm-type): p2p, a ring of sends "
        "overlapped with the attention on the current chunk; all_gather, K and V gathered before "
        "the attention and their gradients reduce-scattered after it, exposed (Llama 3)")
    cp_load_balance: bool = spec_field(
        True, doc="causal context parallelism splits the sequence into 2 x cp chunks, rank r "
        "holding r and 2cp-1-r, so every rank computes the same share (Megatron-Core, Llama 3); "
        "false: contiguous chunks, the last rank computes 1 - 1/(2cp) of its rectangle")
    scatter_gather: bool = spec_field(
        True, doc="pipeline sends split over TP ranks, all-gathered over NVLink (SC'21 4.1)")
    grad_accumulation_fusion: bool = spec_field(
        True, doc="weight-gradient GEMMs accumulate into the gradient buffer "
        "(--gradient-accumulation-fusion); false: a separate add per micro-batch")
    zero3_prefetch: bool = spec_field(
        True, doc="ZeRO-3: the next layer's parameter gather is issued when a layer's compute "
        "starts (FSDP forward/backward prefetch); false: every gather and reduce-scatter blocks")
    zero3_copy_out: bool = spec_field(
        False, doc="ZeRO-3: each gathered layer's parameters are copied out of the all-gather "
        "buffer on the compute stream before its forward and its backward (FSDP2's per-parameter "
        "sharding); false: used in place (FSDP1 flat parameters, DeepSpeed)")
    grad_cast_divide: bool = spec_field(
        False, doc="ZeRO-2/3: every micro-batch, each layer's unsharded gradient is cast to the "
        "reduce dtype (when it differs) and pre-divided, one element-wise kernel each, before "
        "its reduce-scatter (PyTorch FSDP1's post-backward hook); false: none (Megatron reduces "
        "from its grad buffer; FSDP2's cast is zero3_copy_out's copy-in). docs/stacks.md")
    elementwise: str = spec_field(
        "fused", choices=ELEMENTWISE_MODES,
        doc="norms, rotary embedding, SwiGLU gate and loss as fused kernels (Megatron, Transformer "
        "Engine), or eager: PyTorch's op chains of torchtitan's Llama code, fp32 casts included "
        "(docs/stacks.md)")
    fp8_recipe: str = spec_field(
        "auto", choices=FP8_RECIPES, doc="scaling of precision fp8 (Transformer Engine): delayed "
        "(scales from the amax history of earlier steps, NeMo's FP8-DS), current (tensorwise "
        "scales from each tensor's own amax, one more read per cast: FP8-CS), blockwise (1x128 "
        "and 128x128 tiles with fp32 scales, DeepSeek-V3); auto: delayed. Ignored unless "
        "precision is fp8: mxfp8 and nvfp4 carry their own block scaling (docs/stacks.md, Low "
        "precision)")
    fp8_cast_fusion: bool = spec_field(
        True, doc="under fp8, mxfp8 or nvfp4, the norm before a linear layer and the MLP's "
        "activation write the quantized copies themselves (Transformer Engine's LayerNormLinear "
        "and LayerNormMLP, Megatron-Core); false: every input and gradient cast is a kernel of "
        "its own (te.Linear modules, torchao)")
    tp_comm_overlap: str = spec_field(
        "none", choices=TP_OVERLAP_MODES,
        doc="TP all-gathers and reduce-scatters overlapped with their GEMMs (Transformer Engine "
        "userbuffers, --tp-comm-overlap; needs sequence_parallel): bulk (backward reduce-scatter "
        "beside the weight-gradient GEMM) or pipelined (every pair, chunked); none: exposed")
    comm_sms: int | None = spec_field(
        None, ge=0, le=1024, doc="SMs a DP or ZeRO collective's kernel holds while it runs beside "
        "compute, which then runs on the SMs left (and its memory-bound kernels on the HBM "
        "bandwidth the collective leaves; NCCL: one CTA per channel); null: NCCL's channels, 24 "
        "inside one node, else 2 per NIC of the node (16 on 8-NIC nodes), 2 to 32; 0: no "
        "contention at all. docs/des.md")
    host_op_s: float = spec_field(
        0.0, unit="us", ge=0, le=10_000, doc="host time per modelled layer operator and pass "
        "(Python, dispatch, launch of its kernels; a grouped expert GEMM counts one call per "
        "local expert): a layer pass takes at least its calls times this (the CPU cannot feed "
        "the GPU faster); 0: GPU-bound, or the whole iteration in a CUDA graph. docs/stacks.md")
    moe_dispatcher: str = spec_field(
        "alltoall", choices=MOE_DISPATCHERS, doc="MoE token dispatcher (Megatron-Core "
        "--moe-token-dispatcher-type): alltoall (each token's top_k copies sent to the experts' "
        "ranks, permuted before and sorted by local expert after), allgather (every rank gathers "
        "the EP group's tokens and keeps its experts' rows), flex (DeepEP / HybridEP: a token "
        "sent once to each rank holding any of its experts, permutation fused into the "
        "dispatch). docs/moe.md")
    ep_comm_overlap: bool = spec_field(
        False, doc="MoE dispatch and combine all-to-alls of one micro-batch overlap the other "
        "micro-batch's compute of the same layer (Megatron-Core --overlap-moe-expert-parallel-comm, "
        "with interleaved pipelining): each pass's all-to-alls are exposed only beyond the "
        "opposite pass of the layer. docs/moe.md")
    # Memory the training process holds besides model state and activations: defaults and their
    # sources in simcluster.perf.memory_overheads (tests/unit/test_memory_overheads.py pins them).
    fp32_grad_buffer: bool | None = spec_field(
        None, doc="gradients accumulate and are reduced in fp32 main-grad buffers (Megatron "
        "--accumulate-allreduce-grads-in-fp32); false: 16-bit; null: Megatron's default (true for "
        "bf16 and fp8, false for fp16)")
    fp32_grad_copy: str = spec_field(
        "none", choices=GRAD_COPIES, doc="the optimizer also keeps fp32 gradients beside the "
        "reduced ones: shard, of its ZeRO shard (DeepSpeed ZeRO-1/2 fp16); full, of every local "
        "parameter (DeepSpeed BF16_Optimizer)")
    cuda_context_bytes: float = spec_field(
        733_741_056.0, unit="GiB", ge=0, doc="CUDA context with its kernels loaded and cuBLAS "
        "workspaces, per GPU (default: PyTorch's measured 666,632,192 B + 2 x 32 MiB)")
    nccl_buffsize_bytes: float = spec_field(
        4194304.0, unit="bytes", gt=0, doc="NCCL_BUFFSIZE; NCCL buffers per communicator scale "
        "with it (default 4 MiB, NCCL's)")
    allocator_fragmentation: float = spec_field(
        0.15, ge=0, le=0.9, doc="caching-allocator fragmentation (reserved - allocated) / reserved "
        "of activations and transients (default: GMLake's measured average on A100; measured "
        "0.04-0.08 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, docs/metrics.md)")

    def __post_init__(self) -> None:
        if self.flash_attention != (self.attention != "math"):
            raise SpecError("flash_attention", f"{str(self.flash_attention).lower()} contradicts "
                            f"attention: {self.attention}")
