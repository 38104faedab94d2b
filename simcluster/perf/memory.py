"""Memory per GPU on each pipeline stage: weights, gradients, optimizer, activations, overhead.

The analytical pre-filter behind ``fits_in_memory`` and ``peak_memory_gib``. Parameters per stage
follow Megatron-LM's layout (TP shards attention and MLP, norms are replicated, the word embedding
is vocab-parallel on the first stage and the output layer on the last); bytes per parameter follow
mixed-precision Adam (network.md s6.3, Megatron ``theoretical_memory_usage.py``) with ZeRO sharding
over data parallelism; activations follow Korthikanti et al. 2022 Table 2 (network.md s6.2),
generalised to GQA, SwiGLU, MoE and flash attention; micro-batches in flight per stage follow the
pipeline schedule (network.md s5).

Simplifications, stated once:
- Everything TP shards (weights and biases of attention and MLP, vocab) is divided by ``tp``;
  norms, learned position embeddings and the MoE router are replicated on every TP rank.
- ZeRO shards dense parameters over ``dp*cp`` ranks and expert parameters over ``dp*cp/ep`` (the
  expert-data-parallel group); experts are replicated ``dp*cp/ep`` times. ZeRO-3 also holds the
  units in flight unsharded (:func:`zero3_units_in_flight` of :func:`zero3_unit_params`).
- Activations are 16-bit (Korthikanti's byte counts); fp32 training doubles them.
- Sequence length is divided by ``cp`` in every activation term.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.params import count_params
from simcluster.perf.pipeline import in_flight_microbatches
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import ParallelismSpec, Scenario
from simcluster.units import GiB

#: Allowance, not a measurement: CUDA context with cuBLAS/cuDNN workspaces (~0.5-1 GiB on A100/H100)
#: plus NCCL buffers for the TP, PP and DP communicators (a few hundred MiB at default
#: NCCL_BUFFSIZE), per GPU.
OVERHEAD_FIXED_BYTES = 1.5 * GiB
#: Allowance, not a measurement: caching-allocator fragmentation and temporaries, as a fraction of
#: weights + gradients + optimizer + activations (Megatron ``theoretical_memory_usage.py`` adds the
#: same 5% to activations).
OVERHEAD_FRACTION = 0.05

#: Megatron default: gradients accumulate in fp32 ``main_grad`` buffers.
DEFAULT_GRAD_BYTES = 4


def grad_bytes_for(precision: str) -> int:
    """Bytes per gradient element Megatron-LM keeps and reduces for ``precision``.

    bf16 (and fp8, whose master weights are bf16) needs fp32 gradient accumulation
    (``--accumulate-allreduce-grads-in-fp32`` is forced for bf16 in Megatron-LM ``arguments.py``);
    fp16 keeps and all-reduces 16-bit gradients by default; fp32 trains in fp32.
    """
    return 2 if precision == "fp16" else DEFAULT_GRAD_BYTES
#: Adam in mixed precision: fp32 master weights + first and second moments (ZeRO's K = 12).
ADAM_MIXED_BYTES = 12
#: Adam in fp32: the weights are the master copy, so only the two moments.
ADAM_FP32_BYTES = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    """Memory per GPU on one pipeline stage, bytes."""

    stage: int
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float

    @property
    def total_bytes(self) -> float:
        """Sum of the five parts."""
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes
                + self.activations_bytes + self.overhead_bytes)

    @property
    def dominant(self) -> str:
        """Name of the largest part: ``weights``, ``grads``, ``optimizer``, ``activations`` or
        ``overhead``."""
        parts = {"weights": self.weights_bytes, "grads": self.grads_bytes,
                 "optimizer": self.optimizer_bytes, "activations": self.activations_bytes,
                 "overhead": self.overhead_bytes}
        return max(parts, key=parts.__getitem__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Memory per GPU of every pipeline stage against the accelerator's capacity."""

    stages: tuple[StageMemory, ...]
    capacity_bytes: float

    @property
    def peak_stage(self) -> int:
        """Index of the stage with the most memory (the first one on a tie)."""
        return max(range(len(self.stages)), key=lambda i: self.stages[i].total_bytes)

    @property
    def peak_bytes(self) -> float:
        """Largest per-GPU total over stages."""
        return self.stages[self.peak_stage].total_bytes

    @property
    def fits_in_memory(self) -> bool:
        """Whether the peak stage fits in the accelerator's memory."""
        return self.peak_bytes <= self.capacity_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class BytesPerParam:
    """Bytes per parameter of weights, gradients and optimizer state before any sharding."""

    weights: float
    grads: float
    optimizer: float


def bytes_per_param(precision: str, grad_bytes: float = DEFAULT_GRAD_BYTES) -> BytesPerParam:
    """Mixed-precision Adam bytes per parameter (network.md s6.3; Megatron 18 bytes = 2 + 4 + 12).

    Weights are 16-bit for fp16/bf16 and also for fp8 training (fp8 is a GEMM input format; the
    weights stay bf16 as in Transformer Engine); fp32 keeps 4-byte weights and no master copy.
    """
    if precision == "fp32":
        return BytesPerParam(weights=4, grads=4, optimizer=ADAM_FP32_BYTES)
    return BytesPerParam(weights=2, grads=grad_bytes, optimizer=ADAM_MIXED_BYTES)


def zero_bytes_per_param(zero_stage: int, dp: int, per_param: BytesPerParam) -> BytesPerParam:
    """Shard ``per_param`` over ``dp`` ranks as ZeRO stage ``zero_stage`` does.

    Rajbhandari et al. SC'20 s5 (network.md s6.3): stage 1 shards the optimizer state (Megatron
    distributed optimizer: ``6 + 12/d`` with 4-byte gradients), 2 also gradients, 3 also weights.
    """
    if not 0 <= zero_stage <= 3:
        raise ValueError(f"zero_stage must be 0..3, got {zero_stage}")
    return BytesPerParam(
        weights=per_param.weights / (dp if zero_stage >= 3 else 1),  # P_p
        grads=per_param.grads / (dp if zero_stage >= 2 else 1),  # P_g
        optimizer=per_param.optimizer / (dp if zero_stage >= 1 else 1),  # P_os
    )


def zero3_unit_params(scenario: Scenario) -> float:
    """Parameters of the largest unit ZeRO-3 gathers whole (pp = 1): a transformer layer or the
    embedding and output layer together."""
    model, par = scenario.model, scenario.parallelism
    extras = stage_params(model, par, 0, 0)
    layer = stage_params(model, par, 0, 1)
    return max(layer.dense + layer.expert - extras.dense - extras.expert,
               extras.dense + extras.expert)


def zero3_units_in_flight(scenario: Scenario) -> int:
    """Units held unsharded at once under ZeRO-3: the running one, plus the prefetched one.

    PyTorch FSDP's ``limit_all_gathers`` (default since pytorch#104900) keeps the memory of two
    consecutive units: the one computing and the one whose all-gather is prefetched (FSDP API
    documentation); without prefetching only the running unit is gathered. Each holds its 16-bit
    parameters and, in backward, its unsharded gradients until the reduce-scatter.
    """
    return 2 if scenario.execution.zero3_prefetch else 1


def stage_chunks(par: ParallelismSpec, layers: int) -> tuple[tuple[int, ...], ...]:
    """Layers of each virtual chunk held by each pipeline stage.

    Even split unless ``stage_layers`` is given; with ``interleaved``, stage ``i`` holds chunks
    ``i, i+p, i+2p, ...`` (Narayanan et al. SC'21 s2.2.2).
    """
    chunks = par.pp * par.virtual_stages
    sizes = par.stage_layers or (layers // chunks,) * chunks
    return tuple(tuple(sizes[i::par.pp]) for i in range(par.pp))


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """Parameters on one GPU of a stage, split by how ZeRO shards them."""

    dense: float
    expert: float


def stage_params(model: ModelSpec, par: ParallelismSpec, stage: int, layers: int) -> StageParams:
    """Parameters one GPU of ``stage`` holds, given the stage's ``layers`` (Megatron layout).

    Per layer: attention and dense MLP / tp, norms replicated; MoE experts / (tp*ep), router
    replicated. First stage: word embedding V*h / tp (vocab-parallel), learned positions
    replicated. Last stage: final norm, and the output layer V*h / tp when untied, or a copy of the
    tied word embedding when pp > 1 (Megatron keeps one there to reduce its gradient).
    """
    pc = count_params(model)
    tp, ep = par.tp, par.ep
    word = model.vocab * model.hidden
    router = model.hidden * model.moe.experts if model.moe else 0
    mlp = pc.per_layer_mlp - router
    layer_dense = pc.per_layer_attention / tp + pc.per_layer_norm + router
    dense = layers * (layer_dense + (0 if model.moe else mlp / tp))
    expert = layers * mlp / (tp * ep) if model.moe else 0.0
    if stage == 0:
        dense += word / tp + (pc.embedding - word)  # vocab-parallel words, replicated positions
    if stage == par.pp - 1:
        final_norm = pc.final - (0 if model.tied_embeddings else word)
        output_copy = not model.tied_embeddings or par.pp > 1
        dense += final_norm + (word / tp if output_copy else 0)
    return StageParams(dense=dense, expert=expert)


def in_flight_micro_batches(schedule: str, pp: int, stage: int, micro_batches: int) -> int:
    """Micro-batches whose activations a stage holds at its peak (network.md s5).

    GPipe: all ``m``. 1F1B and ZB-H1: ``min(p - stage, m)`` (Megatron ``schedules.py`` warm-up
    ``p - stage - 1`` plus the one in steady state). Interleaved: see :func:`in_flight_units`.
    """
    if schedule == "interleaved":
        raise ValueError("schedule 'interleaved' has no single in-flight count; use in_flight_units")
    return int(in_flight_microbatches(schedule, pp, micro_batches, stage=stage))


def in_flight_units(par: ParallelismSpec, stage: int) -> tuple[int, ...]:
    """Micro-batches in flight on each virtual chunk of ``stage`` at its peak.

    Interleaved 1F1B (Megatron ``schedules.py``): ``2(p - stage - 1) + (v - 1)p + 1`` forward
    units run before the first backward, in groups of ``p`` micro-batches per chunk; for the first
    stage with an even split this gives Megatron's ``p*(1 + (p-1)/(p*v))`` micro-batches of ``L/p``
    layers (``theoretical_memory_usage.py``). Other schedules: one chunk.
    """
    p, v, m = par.pp, par.virtual_stages, par.micro_batches
    if par.schedule != "interleaved":
        return (in_flight_micro_batches(par.schedule, p, stage, m),)
    units = min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v)
    counts = [0] * v
    for first in range(0, m, p):
        if units == 0:  # nothing left to place: the rest of the m/p groups add nothing
            break
        group = min(p, m - first)
        for chunk in range(v):
            take = min(group, units)
            counts[chunk] += take
            units -= take
    return tuple(counts)


# Activations (Korthikanti et al. 2022, arXiv 2205.05198, Table 2; network.md s6.2) -------------


def layer_activation_bytes(model: ModelSpec, micro_batch: int, seq_len: int, tp: int,
                           sequence_parallel: bool, recompute: str,
                           flash_attention: bool = True) -> float:
    """Activation bytes one layer stores for one micro-batch, per GPU.

    Korthikanti Table 2 term by term (16-bit tensors, 1-byte dropout masks), generalised: Q, K, V
    use the GQA widths; the MLP stores its activation input and the down-projection input (gelu
    ``2f + 2f``, swiglu ``4f + 2f`` per token) for each of the ``top_k`` experts. For plain GPT this
    is ``s*b*h*(34 + 5*a*s/h)`` without parallelism, ``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` with TP and
    ``s*b*h/t*(34 + 5*a*s/h)`` with TP + SP; the SP + selective case is Megatron's
    ``s*b*h*(18 + 4*ffn/h)/t`` for any gelu MHA layer.

    Parameters
    ----------
    model : ModelSpec
        Layer shape.
    micro_batch, seq_len : int
        ``b`` and the per-GPU sequence length ``s`` (already divided by cp).
    tp : int
        Tensor-parallel size ``t``.
    sequence_parallel : bool
        Shard the otherwise replicated norm and dropout activations over ``t`` too.
    recompute : str
        ``none``: everything; ``selective``: no attention scores, softmax or its dropout mask
        (recomputed); ``full``: only the layer input ``2*s*b*h`` (``/t`` with SP).
    flash_attention : bool
        Scores, softmax and its dropout mask are never materialised (default True).

    Returns
    -------
    float
        Bytes.
    """
    s, b, h = seq_len, micro_batch, model.hidden
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (tp if sequence_parallel else 1)  # checkpointed layer input, 16-bit
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    top_k = model.moe.top_k if model.moe else 1
    mlp_inner = (6 if model.ffn_act == "swiglu" else 4) * model.ffn_hidden
    replicated = (4 * sbh  # inputs of the two norms
                  + 2 * sbh  # QKV projection input
                  + sbh  # attention output dropout mask
                  + 2 * sbh  # MLP input
                  + sbh)  # MLP output dropout mask
    sharded = (2 * s * b * (q + 2 * kv)  # Q and K for the scores, V for AV
               + 2 * s * b * q  # output projection input
               + s * b * top_k * mlp_inner)  # activation input and down-projection input
    scores = 0.0
    if recompute == "none" and not flash_attention:
        scores = 5 * model.heads * s * s * b  # softmax output 2, dropout mask 1, dropout output 2
    if sequence_parallel:
        return (replicated + sharded + scores) / tp
    return replicated + (sharded + scores) / tp


def embedding_activation_bytes(model: ModelSpec, micro_batch: int, seq_len: int, tp: int,
                               sequence_parallel: bool) -> float:
    """First stage, per micro-batch: ``8*s*b`` (token ids) + ``s*b*h`` (embedding dropout mask).

    Megatron ``theoretical_memory_usage.py``: divided by t with SP (``compute_activation_memory``),
    not without it (``compute_activation_memory_without_sp``).
    """
    s, b = seq_len, micro_batch
    total = 8 * s * b + s * b * model.hidden  # int64 ids; dropout mask
    return total / (tp if sequence_parallel else 1)


def logits_activation_bytes(model: ModelSpec, micro_batch: int, seq_len: int, tp: int,
                            sequence_parallel: bool) -> float:
    """Last stage, one micro-batch: final-norm output and logits kept for the loss.

    With SP, Megatron's ``4*s*b*h*(1 + V/h)/t`` (fp32 final-norm output and logits); without SP,
    its ``2*(s*b*V/t + s*b*h)`` (``theoretical_memory_usage.py``).
    """
    sb, h, V = seq_len * micro_batch, model.hidden, model.vocab
    if sequence_parallel:
        return 4 * sb * h * (1 + V / h) / tp
    return 2 * (sb * V / tp + sb * h)


def stage_activation_bytes(scenario: Scenario, stage: int, *,
                           flash_attention: bool = True) -> float:
    """Activation bytes one GPU of ``stage`` holds at its peak.

    In-flight layer-micro-batches times the per-layer bytes of the recompute mode; full recompute
    keeps each layer's input and one layer's working set (whose input is that same tensor). Plus
    the embedding on the first stage and the logits and loss on the last (network.md s6.2).
    """
    m, par = scenario.model, scenario.parallelism
    b, s, t, sp = par.micro_batch, m.seq_len // par.cp, par.tp, par.sequence_parallel
    chunks = stage_chunks(par, m.layers)[stage]
    counts = in_flight_units(par, stage)
    units = sum(c * n for c, n in zip(counts, chunks, strict=True))
    if par.recompute == "full":
        stored = layer_activation_bytes(m, b, s, t, sp, "full")
        working = layer_activation_bytes(m, b, s, t, sp, "none", flash_attention)
        total = (units - 1) * stored + working if units else 0.0
    else:
        total = units * layer_activation_bytes(m, b, s, t, sp, par.recompute, flash_attention)
    if stage == 0:
        total += counts[0] * embedding_activation_bytes(m, b, s, t, sp)
    if stage == par.pp - 1:
        total += logits_activation_bytes(m, b, s, t, sp)
    return total * (2 if scenario.precision == "fp32" else 1)


def stage_memory(scenario: Scenario, stage: int, *, grad_bytes: float | None = None,
                 flash_attention: bool = True) -> StageMemory:
    """Memory per GPU of one pipeline stage.

    Parameters
    ----------
    scenario : Scenario
        Model, layout and precision.
    stage : int
        Pipeline stage, 0 .. pp-1.
    grad_bytes : float
        Bytes per gradient element (4: fp32 main grads, Megatron; 2: ZeRO paper's fp16).
    flash_attention : bool
        Attention scores are not stored (default True).

    Returns
    -------
    StageMemory
        Bytes by part.
    """
    par = scenario.parallelism
    layers = sum(stage_chunks(par, scenario.model.layers)[stage])
    params = stage_params(scenario.model, par, stage, layers)
    if grad_bytes is None:
        grad_bytes = grad_bytes_for(scenario.precision)
    per_param = bytes_per_param(scenario.precision, grad_bytes)
    dense = zero_bytes_per_param(par.zero_stage, par.dp * par.cp, per_param)
    expert = zero_bytes_per_param(par.zero_stage, par.dp * par.cp // par.ep, per_param)
    weights = params.dense * dense.weights + params.expert * expert.weights
    grads = params.dense * dense.grads + params.expert * expert.grads
    if par.zero_stage >= 3:
        unit = zero3_unit_params(scenario) * zero3_units_in_flight(scenario)
        weights += unit * per_param.weights
        grads += unit * per_param.grads
    optimizer = params.dense * dense.optimizer + params.expert * expert.optimizer
    activations = stage_activation_bytes(scenario, stage, flash_attention=flash_attention)
    parts = weights + grads + optimizer + activations
    overhead = OVERHEAD_FIXED_BYTES + OVERHEAD_FRACTION * parts
    return StageMemory(stage=stage, weights_bytes=weights, grads_bytes=grads,
                       optimizer_bytes=optimizer, activations_bytes=activations,
                       overhead_bytes=overhead)


def estimate_memory(scenario: Scenario, *, grad_bytes: float | None = None,
                    flash_attention: bool = True) -> MemoryEstimate:
    """Memory per GPU of every pipeline stage of ``scenario``.

    Parameters
    ----------
    scenario : Scenario
        Model, layout, precision and cluster (for the accelerator's memory).
    grad_bytes : float
        Bytes per gradient element (default :func:`grad_bytes_for` the precision).
    flash_attention : bool
        Attention scores, softmax and its dropout mask are not stored (default True).

    Returns
    -------
    MemoryEstimate
        Per-stage breakdown, peak and whether it fits.
    """
    stages = tuple(stage_memory(scenario, i, grad_bytes=grad_bytes,
                                flash_attention=flash_attention)
                   for i in range(scenario.parallelism.pp))
    capacity = scenario.cluster.topology.accelerator.memory_bytes
    return MemoryEstimate(stages=stages, capacity_bytes=capacity)
