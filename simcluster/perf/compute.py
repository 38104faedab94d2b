"""Compute time on one GPU: transformer layers, logits, embedding and the Adam step.

The layer model: each layer is the list of its operators with their shapes, and the kernel models
of :mod:`simcluster.perf.kernels` say what each operator costs on this GPU with this stack (GEMMs
by shape, attention by kernel, memory-bound kernels by bytes; their names are re-exported here).
The iteration engine sums these per pipeline stage; nothing here knows about communication.
"""

from __future__ import annotations

import dataclasses
import math

from simcluster.errors import SpecError
from simcluster.perf.flops import window_pairs
from simcluster.perf.kernels import eager
from simcluster.perf.kernels.attention import (
    CAUSAL_WORK_FRACTION,
    FLASH_ATTENTION_BACKWARD_WORK,
    causal_cp_fraction,
    fused_attention_operator,
    resolve_kernel,
)
from simcluster.perf.kernels.elementwise import (
    ADAM_BYTES_PER_PARAM,
    ELEMENTWISE_BACKWARD_BYTES_FACTOR,
    MASK_BYTES,
    memory_bound_time_s,
    memory_operator,
)
from simcluster.perf.kernels.gemm import (
    REFERENCE_GEMM_DIM,
    achievable_matmul_flops_per_s,
    gemm_operator,
    gemm_time_s,
    matmul_efficiency,
    size_factor,
)
from simcluster.perf.kernels.lowp import (
    LinearFormat,
    activation_dtype,
    recipe_of,
)
from simcluster.perf.kernels.operator import (
    DTYPE_BYTES,
    LayerTimes,
    OperatorTime,
    bytes_per_element,
)
from simcluster.perf.layer_ops import Shape, blend, block_shape, linear, norm
from simcluster.perf.mla import mla_core, mla_output, mla_projections
from simcluster.perf.moe_layer import ffn_operators
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import RECOMPUTE

__all__ = [
    "ADAM_BYTES_PER_PARAM", "CAUSAL_WORK_FRACTION", "DTYPE_BYTES", "ELEMENTWISE_BACKWARD_BYTES_FACTOR",
    "FLASH_ATTENTION_BACKWARD_WORK", "REFERENCE_GEMM_DIM", "LayerTimes", "OperatorTime",
    "achievable_matmul_flops_per_s", "embedding_times", "gemm_operator",
    "gemm_time_s", "grad_accumulation_time_s", "layer_times", "logits_times", "matmul_efficiency",
    "memory_bound_time_s", "memory_operator", "optimizer_step_time_s", "size_factor",
]


#: Kernels called on head-major ``[b, h, s, d]`` tensors (PyTorch's SDPA and its math path): eager
#: model code transposes around them and repeats grouped K/V heads. FlashAttention's own API,
#: Transformer Engine and LLM Foundry's Triton kernel take ``[b, s, h, d]`` and grouped heads as
#: they are, so no copies.
HEAD_MAJOR_KERNELS = ("sdpa-flash", "math")


def _attention_core(model: ModelSpec, acc: AcceleratorSpec, dtype: str, sh: Shape,
                    kernel: str, causal: bool, balanced: bool = True) -> list[OperatorTime]:
    """Scores, softmax and AV for ``s/cp`` local queries against all ``s`` keys (CP): one fused
    kernel (its rate by architecture, head dimension, mask and ``s/cp``,
    :mod:`simcluster.perf.kernels.attention`), or the unfused ``math`` path; a causal fused kernel
    computes the busiest rank's share (``balanced``: the CP load balance)."""
    hd, q = model.head_dim, sh.tokens / sh.batch
    if kernel != "math":
        return [_fused_core(model, acc, dtype, sh, kernel, q, causal,
                            causal_cp_fraction(sh.cp, balanced))]
    heads_batch = sh.batch * sh.heads
    scores = heads_batch * q * sh.seq  # elements of the score matrix on this GPU
    result = [gemm_operator(acc, dtype, "scores", (q, sh.seq, hd), heads_batch, weight=False),
              memory_operator(acc, "softmax", 2 * scores * sh.size)]  # read + write, mask fused
    if model.dropout:  # GPT/BERT-style attention dropout: read, write, mask
        result.append(memory_operator(acc, "attn_dropout", scores * (2 * sh.size + MASK_BYTES)))
    result.append(gemm_operator(acc, dtype, "attn_v", (q, hd, sh.seq), heads_batch, weight=False))
    return result


def _fused_core(model: ModelSpec, acc: AcceleratorSpec, dtype: str, sh: Shape, kernel: str,
                rate_seq: float, causal: bool, fraction: float) -> OperatorTime:
    """One fused attention kernel over the ``s/cp`` local queries and all ``s`` keys: QK^T and AV
    (2 FLOPs per multiply-add each) of which it computes ``fraction`` when causal, at its rate for
    a sequence of ``rate_seq``; Q read and O written, K and V of the whole sequence read."""
    hd, q = model.head_dim, sh.tokens / sh.batch
    flops = 4.0 * sh.batch * sh.heads * q * sh.seq * hd
    nbytes = (2 * sh.tokens * sh.heads * hd + 2 * sh.batch * sh.seq * sh.kv_width) * sh.size
    return fused_attention_operator(acc, dtype, kernel, flops, nbytes, hd, rate_seq, causal,
                                    fraction)


def _windowed_core(model: ModelSpec, acc: AcceleratorSpec, dtype: str, sh: Shape,
                   kernel: str) -> OperatorTime:
    """The fused kernel of a sliding-window block: the causal band's pairs
    (:func:`.flops.window_pairs`) of the ``s x s`` square, at the kernel's causal rate for a
    sequence of the window's length (each query block meets about a window of keys). The unfused
    ``math`` path computes the whole masked square either way. Context parallelism splits the
    band like the sequence (no load-balance term)."""
    band = window_pairs(sh.seq, model.window) / (sh.seq * sh.seq)
    return _fused_core(model, acc, dtype, sh, kernel, float(model.window), True, band)


def _residual_block(model: ModelSpec, acc: AcceleratorSpec, tag: str,
                    sh: Shape) -> list[OperatorTime]:
    """Dropout (biased GPT-style models) and residual add after a sub-block, on ``norm_tokens``."""
    act = sh.norm_tokens * model.hidden
    result = []
    if model.dropout:
        result.append(memory_operator(acc, f"dropout{tag}", act * (2 * sh.size + MASK_BYTES)))
    result.append(memory_operator(acc, f"residual{tag}", 3 * act * sh.size))  # 2 reads, 1 write
    return result


def _rope(acc: AcceleratorSpec, sh: Shape, head_dim: int) -> OperatorTime:
    """Rotary embedding of the queries and keys (Su et al. arXiv 2104.09864), one fused kernel
    (Megatron-LM / Transformer Engine ``fused_rope``): read and write q and k; the backward rotates
    their gradients back, the same bytes."""
    nbytes = 2 * sh.tokens * (sh.heads * head_dim + sh.kv_width) * sh.size
    return memory_operator(acc, "rope", nbytes, backward_factor=1.0)


def _layer_operators(model: ModelSpec, acc: AcceleratorSpec, lin: LinearFormat, sh: Shape, tp: int,
                     experts: tuple[int, int | None], kernel: str, causal: bool,
                     eager_ops: bool = False, balanced: bool = True,
                     dispatcher: str = "alltoall") -> list[OperatorTime]:
    h = model.hidden
    dtype = activation_dtype(lin.dtype)  # attention and element-wise kernels
    result = [norm(model, acc, "norm1", sh.norm_tokens * h, sh.size, eager_ops)]
    if model.mla is not None:
        if kernel == "math":
            raise SpecError("execution.attention", "multi-head latent attention (model.mla) is "
                            "priced with a fused kernel; math is not modelled for it")
        result += mla_projections(model, model.mla, acc, lin, sh, eager_ops)
        result.append(mla_core(model, model.mla, acc, dtype, sh, kernel, causal, balanced))
        result += mla_output(model, model.mla, acc, lin, sh)
    else:
        result += _attention(model, acc, lin, sh, kernel, causal, eager_ops, balanced)
    result += _residual_block(model, acc, "1", sh)
    result.append(norm(model, acc, "norm2", sh.norm_tokens * h, sh.size, eager_ops))
    result += ffn_operators(model, acc, lin, sh, tp, experts[0], eager_ops, dispatcher, experts[1])
    return result + _residual_block(model, acc, "2", sh)


def _attention(model: ModelSpec, acc: AcceleratorSpec, lin: LinearFormat, sh: Shape, kernel: str,
               causal: bool, eager_ops: bool, balanced: bool) -> list[OperatorTime]:
    """QKV projection, rotary embedding, the attention core and the output projection."""
    hd = model.head_dim
    result = linear(acc, lin, "qkv", (sh.tokens, sh.heads * hd + 2 * sh.kv_width, model.hidden))
    if model.position == "rope":
        rotated = sh.tokens * (sh.heads * hd + sh.kv_width)
        result.append(eager.rope(acc, rotated) if eager_ops else _rope(acc, sh, hd))
    if eager_ops and kernel in HEAD_MAJOR_KERNELS:
        result += _eager_attention_copies(acc, sh, hd)
    dtype = activation_dtype(lin.dtype)
    core = _attention_core(model, acc, dtype, sh, kernel, causal, balanced)
    if model.window and model.window < sh.seq and kernel != "math":
        core = [blend(core[0], _windowed_core(model, acc, dtype, sh, kernel), model.window_layers)]
    result += core
    return result + linear(acc, lin, "proj", (sh.tokens, model.hidden, sh.heads * hd),
                           input_fused=False)


def _eager_attention_copies(acc: AcceleratorSpec, sh: Shape, hd: int) -> list[OperatorTime]:
    """Eager attention's tensor copies around a head-major kernel: ``repeat_kv`` for grouped-query
    attention, and the output's ``transpose(1, 2).contiguous()`` (torchtitan's Llama around
    ``scaled_dot_product_attention``)."""
    queries = sh.tokens * sh.heads * hd
    copies = [eager.repeat_kv(acc, sh.tokens * sh.kv_width, queries, sh.size),
              eager.output_copy(acc, queries, sh.size)]
    return [op for op in copies if op is not None]


def _times(operators: list[OperatorTime], recompute_s: float) -> LayerTimes:
    return LayerTimes(forward_s=sum(o.time_s for o in operators),
                      backward_s=sum(o.backward_s for o in operators),
                      wgrad_s=sum(o.wgrad_s for o in operators), recompute_s=recompute_s,
                      operators=tuple(operators))


def layer_times(model: ModelSpec, acc: AcceleratorSpec, dtype: str, micro_batch: int,
                seq_len: int, tp: int, cp: int = 1, sequence_parallel: bool = False,
                recompute: str = "none", attention: str = "auto", *, ep: int = 1,
                causal: bool = True, elementwise: str = "fused",
                host_op_s: float = 0.0, cp_load_balance: bool = True,
                fp8_recipe: str = "auto", fp8_cast_fusion: bool = True,
                moe_dispatcher: str = "alltoall", expert_tp: int | None = None) -> LayerTimes:
    """Forward, backward and recompute time of one transformer block on one GPU.

    Multi-head latent attention replaces the QKV projection (:mod:`.mla`); the FFN is a dense MLP
    or a mixture-of-experts layer (:mod:`.moe_layer`).

    Operators follow Megatron-LM's block (Shoeybi et al. arXiv 1909.08053; Korthikanti et al.
    arXiv 2205.05198 for SP and selective recompute): norm, QKV, rotary embedding (RoPE models),
    attention core, projection, dropout + residual, norm, MLP, dropout + residual. GEMMs see
    ``b*s/cp`` tokens and ``1/tp`` of the heads / FFN width; with sequence parallelism the norms,
    dropouts and residuals see ``1/tp`` of the tokens. Each GEMM's backward is two GEMMs of the same FLOPs.

    Parameters
    ----------
    model, acc : ModelSpec, AcceleratorSpec
        The block and the GPU.
    dtype : str
        The scenario precision: the dtype of GEMMs and activations, or a low-precision format
        of the linear layers' GEMMs (fp8, mxfp8, nvfp4; activations and attention in bf16,
        :mod:`.kernels.lowp`).
    micro_batch, seq_len : int
        Sequences per micro-batch and tokens per sequence.
    tp, cp : int
        Tensor- and context-parallel sizes (``tp`` must divide heads and ffn_hidden).
    sequence_parallel : bool
        Megatron sequence parallelism.
    recompute : str
        ``none`` (0), ``selective`` (attention-core forward again) or ``full`` (whole forward).
    attention : str
        The attention kernel (``execution.attention``): a fused kernel priced from its published
        tables (``auto``: the fastest for the architecture), or ``math``: scores GEMM + softmax
        (+ dropout) + AV GEMM.
    ep : int
        Expert-parallel size (MoE only): ``experts/ep`` local experts, balanced routing.
    expert_tp : int or None
        The routed experts' TP size (MoE only; ``parallelism.expert_tp``, None: ``tp``).
    causal : bool
        Causal mask: a flash kernel skips the masked half (unfused attention does not).
    elementwise : str
        ``fused`` kernels (one pass per norm, rotary embedding, gate), or ``eager`` PyTorch's op
        chains (:mod:`.eager`).
    cp_load_balance : bool
        Causal context parallelism with load-balanced chunks (every rank half its rectangle); false:
        contiguous chunks, the busiest rank's share (:func:`.kernels.attention.causal_cp_fraction`).
    host_op_s : float
        Host time per operator and pass: each pass takes at least ``operators x host_op_s``
        (forward and recompute one per operator, backward two: dgrad and wgrad); 0: GPU-bound.
    fp8_recipe : str
        Scaling of ``dtype`` fp8 (``execution.fp8_recipe``: auto, delayed, current, blockwise).
    fp8_cast_fusion : bool
        Norms and the MLP activation write the quantized copies (``execution.fp8_cast_fusion``).
    moe_dispatcher : str
        The MoE token dispatcher (``execution.moe_dispatcher``; :mod:`.moe_layer`).

    Returns
    -------
    LayerTimes
        Seconds; per-operator breakdown of the forward.
    """
    if recompute not in RECOMPUTE:
        raise SpecError("recompute", f"{recompute!r} is not one of {list(RECOMPUTE)}")
    kernel = resolve_kernel(acc, attention)
    sh = block_shape(model, dtype, micro_batch, seq_len, tp, cp, sequence_parallel)
    lin = LinearFormat(dtype, recipe_of(dtype, fp8_recipe), fp8_cast_fusion)
    operators = _layer_operators(model, acc, lin, sh, tp, (ep, expert_tp), kernel, causal,
                                 _eager(elementwise), cp_load_balance, moe_dispatcher)
    core = ("attention", "scores", "softmax", "attn_dropout", "attn_v")
    recompute_s = {"none": 0.0,
                   "selective": sum(o.time_s for o in operators if o.name in core),
                   "full": sum(o.time_s for o in operators)}[recompute]
    recomputed = {"none": 0.0, "selective": sum(o.launches for o in operators if o.name in core),
                  "full": sum(o.launches for o in operators)}[recompute]
    return host_bound(_times(operators, recompute_s), host_op_s, recomputed)


def host_bound(layer: LayerTimes, host_op_s: float, recomputed: float = 0) -> LayerTimes:
    """``layer`` with each pass at least as long as the host takes to issue it.

    The host (Python, the framework, the PyTorch dispatcher, the launch) issues every kernel; when
    the GPU runs them faster than that, the GPU waits and the pass takes the host's time. A pass
    issues each operator's calls forward (its ``launches``: one, or one per local expert for a
    grouped expert GEMM; and those of the recomputed operators), twice as many backward (dgrad and
    wgrad for a GEMM; an element-wise backward reads the saved input and the gradient), and the
    ``recomputed`` operators' calls inside the backward.
    """
    if host_op_s <= 0.0:
        return layer
    n = sum(o.launches for o in layer.operators)
    return dataclasses.replace(layer, forward_s=max(layer.forward_s, n * host_op_s),
                               backward_s=max(layer.backward_s, 2 * n * host_op_s),
                               recompute_s=max(layer.recompute_s, recomputed * host_op_s))


def _eager(elementwise: str) -> bool:
    if elementwise not in eager.ELEMENTWISE_MODES:
        raise SpecError("execution.elementwise", f"{elementwise!r} is not one of "
                        f"{', '.join(eager.ELEMENTWISE_MODES)}")
    return elementwise == "eager"


def logits_times(model: ModelSpec, acc: AcceleratorSpec, dtype: str, micro_batch: int,
                 seq_len: int, tp: int, cp: int = 1, elementwise: str = "fused") -> LayerTimes:
    """Final norm, output GEMM ``[b*s/cp, h] x [h, V/tp]`` and cross-entropy on the last stage.

    Cross-entropy (Megatron's vocab-parallel loss) is memory-bound over ``b*s/cp * V/tp`` fp32
    elements: read the logits and write the softmax kept for backward, 4 B each. ``eager``: the
    final norm and the loss as eager PyTorch chains (:mod:`.eager`).
    """
    tokens = micro_batch * seq_len / cp
    dtype = activation_dtype(dtype)  # Megatron's output layer is not a TE module: 16-bit
    size = bytes_per_element(dtype)
    eager_ops = _eager(elementwise)
    final = norm(model, acc, "final_norm", tokens * model.hidden, size, eager_ops)
    gemm = gemm_operator(acc, dtype, "logits", (tokens, model.vocab / tp, model.hidden))
    logits = tokens * model.vocab / tp
    loss = (eager.loss(acc, logits) if eager_ops
            else memory_operator(acc, "cross_entropy", 2 * logits * 4))
    return _times([final, gemm, loss], 0.0)


def embedding_times(model: ModelSpec, acc: AcceleratorSpec, dtype: str, micro_batch: int,
                    seq_len: int, tp: int = 1, cp: int = 1) -> LayerTimes:
    """Token-embedding gather (memory-bound) on the first stage, plus learned positions and dropout.

    The gather reads ``b*s/cp`` rows of ``h`` and writes them (each TP rank gathers its vocabulary
    shard for every token and masks the rest, so ``tp`` does not shrink the bytes); its backward is
    a scatter-add into the embedding gradient (~2x bytes).
    """
    elements = micro_batch * seq_len / cp * model.hidden
    act = elements * bytes_per_element(activation_dtype(dtype))
    operators = [memory_operator(acc, "embedding", 2 * act)]  # rows read, activations written
    if model.position == "learned":
        operators.append(memory_operator(acc, "position_add", 3 * act))  # 2 reads, 1 write
    if model.dropout:  # GPT-style embedding dropout: read, write, mask
        dropout_bytes = 2 * act + elements * MASK_BYTES
        operators.append(memory_operator(acc, "embedding_dropout", dropout_bytes))
    return _times(operators, 0.0)


def optimizer_step_time_s(acc: AcceleratorSpec, params_on_gpu: float, dp_shards: int = 1) -> float:
    """Adam step time: memory-bound, ``ADAM_BYTES_PER_PARAM`` (30 B) per parameter this GPU updates.

    Parameters
    ----------
    acc : AcceleratorSpec
        The GPU.
    params_on_gpu : float
        Parameters held by this GPU after TP and PP.
    dp_shards : int
        Data-parallel ranks the optimizer state is sharded over (ZeRO >= 1: the DP size; ZeRO-0: 1).

    Returns
    -------
    float
        Seconds for ``params_on_gpu / dp_shards`` parameters at 30 B each.
    """
    if dp_shards < 1 or params_on_gpu < 0:
        raise SpecError("zero", f"need dp_shards >= 1 and params >= 0, got {dp_shards}, "
                        f"{params_on_gpu}")
    updated = math.ceil(params_on_gpu / dp_shards)
    return memory_bound_time_s(acc, updated * ADAM_BYTES_PER_PARAM)


def grad_accumulation_time_s(acc: AcceleratorSpec, params: float, param_bytes: int,
                             grad_bytes: int) -> float:
    """One micro-batch's unfused weight-gradient accumulation over ``params`` parameters (s).

    Without ``--gradient-accumulation-fusion`` the wgrad GEMM writes a fresh gradient and a
    separate elementwise add folds it into the accumulation buffer (Megatron-LM's DDP hook
    ``param.main_grad.add_(param.grad)``, or autograd's ``.grad`` accumulation): read the new
    gradient (``param_bytes``), read and write the buffer (``grad_bytes`` each). Memory-bound.
    """
    if params < 0 or min(param_bytes, grad_bytes) < 1:
        raise SpecError("execution.grad_accumulation_fusion",
                        f"need params >= 0 and byte sizes >= 1, got {params}, {param_bytes}, "
                        f"{grad_bytes}")
    return memory_bound_time_s(acc, params * (param_bytes + 2 * grad_bytes))
