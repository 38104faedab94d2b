"""Per-stage pieces of the memory model: layer split, parameters, micro-batches in flight, activations.

Split out of :mod:`.memory` (which re-exports every name here): which layers each pipeline stage
holds (:func:`stage_chunks`), the parameters one GPU of a stage holds (:func:`stage_params`,
Megatron's layout), how many micro-batches a stage keeps in flight under each schedule
(:func:`in_flight_units`) and the activation bytes (Korthikanti et al. 2022 Table 2, generalised;
see :mod:`.memory` for the stated simplifications). The step model (:mod:`.step`) uses the first
two as well. The pure functions a sweep repeats per layout are memoised (:mod:`.cache`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.cache import memoised
from simcluster.perf.kernels.lowp import recipe_of, saved_input_bytes
from simcluster.perf.params import count_params, shared_ffn_hidden
from simcluster.perf.pipeline import in_flight_chunks
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import ParallelismSpec, Scenario


def stage_chunks(par: ParallelismSpec, layers: int) -> tuple[tuple[int, ...], ...]:
    """Layers of each virtual chunk held by each pipeline stage.

    Even split unless ``stage_layers`` is given; with ``interleaved``, stage ``i`` holds chunks
    ``i, i+p, i+2p, ...`` (Narayanan et al. SC'21 s2.2.2).
    """
    return _chunks(par.pp, par.virtual_stages, par.stage_layers, layers)


def stage_layer_counts(par: ParallelismSpec, layers: int) -> tuple[int, ...]:
    """Layers each pipeline stage holds: the sums of :func:`stage_chunks`."""
    return _layer_counts(par.pp, par.virtual_stages, par.stage_layers, layers)


@memoised()
def _layer_counts(pp: int, virtual_stages: int, stage_layers: tuple[int, ...] | None,
                  layers: int) -> tuple[int, ...]:
    return tuple(sum(chunks) for chunks in _chunks(pp, virtual_stages, stage_layers, layers))


@memoised()
def _chunks(pp: int, virtual_stages: int, stage_layers: tuple[int, ...] | None,
            layers: int) -> tuple[tuple[int, ...], ...]:
    chunks = pp * virtual_stages
    sizes = stage_layers or (layers // chunks,) * chunks
    return tuple(tuple(sizes[i::pp]) for i in range(pp))


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """Parameters on one GPU of a stage, split by how ZeRO shards them."""

    dense: float
    expert: float


def stage_params(model: ModelSpec, par: ParallelismSpec, stage: int, layers: int) -> StageParams:
    """Parameters one GPU of ``stage`` holds, given the stage's ``layers`` (Megatron layout).

    Per layer: attention and dense MLP / tp, norms replicated; MoE experts / (etp*ep), shared
    experts / tp, router replicated; a model's leading dense blocks (``moe.dense_layers``) are
    spread over the layers pro rata (a stated simplification: Megatron puts them on the first
    stage, a difference of their FFN's parameters there). First stage: word embedding V*h / tp
    (vocab-parallel), learned positions replicated. Last stage: final norm, and the output layer
    V*h / tp when untied, or a copy of the tied word embedding when pp > 1 (Megatron keeps one
    there to reduce its gradient).
    """
    return _stage_params(model, par.tp, par.etp * par.ep, stage == 0, stage == par.pp - 1,
                         par.pp > 1, layers)


def all_stage_params(model: ModelSpec, par: ParallelismSpec) -> tuple[StageParams, ...]:
    """:func:`stage_params` of every pipeline stage, for the layers :func:`stage_chunks` gives it."""
    return _all_stage_params(model, par.tp, par.etp * par.ep, par.pp,
                             stage_layer_counts(par, model.layers))


@memoised()
def _all_stage_params(model: ModelSpec, tp: int, ep: int, pp: int,
                      counts: tuple[int, ...]) -> tuple[StageParams, ...]:
    return tuple(_stage_params(model, tp, ep, i == 0, i == pp - 1, pp > 1, n)
                 for i, n in enumerate(counts))


@memoised()
def _stage_params(model: ModelSpec, tp: int, ep: int, first: bool, last: bool, pipelined: bool,
                  layers: int) -> StageParams:
    """:func:`stage_params` on the layout values it reads (``pipelined``: ``pp > 1``; ``ep``: the
    GPUs one expert's weights are split over, ``expert_tp * ep``)."""
    pc = count_params(model)
    word = model.vocab * model.hidden
    moe_share = 1.0 - pc.dense_layers / pc.layers  # the MoE blocks' share, spread over stages
    layer_dense = (pc.per_layer_attention / tp + pc.per_layer_norm
                   + moe_share * (pc.router + pc.shared_mlp / tp)
                   + (1.0 - moe_share) * pc.dense_mlp / tp)
    dense = layers * (layer_dense + (0 if model.moe else pc.routed_mlp / tp))
    expert = layers * moe_share * pc.routed_mlp / ep if model.moe else 0.0
    if first:
        dense += word / tp + (pc.embedding - word)  # vocab-parallel words, replicated positions
    if last:
        final_norm = pc.final - (0 if model.tied_embeddings else word)
        output_copy = not model.tied_embeddings or pipelined
        dense += final_norm + (word / tp if output_copy else 0)
        if pc.mtp:  # the prediction modules beside the loss: their routed experts over etp*ep
            routed = model.mtp_layers * pc.routed_mlp if model.moe else 0
            dense += (pc.mtp - routed) / tp
            expert += routed / ep
    return StageParams(dense=dense, expert=expert)


def all_chunk_params(model: ModelSpec, par: ParallelismSpec) -> tuple[tuple[float, ...], ...]:
    """Per stage, the parameters (dense + expert) of each local virtual chunk: its layers pro
    rata, the embedding on the first virtual chunk and the output layer on the last (the
    discrete-event engine's DP buckets reduce them chunk by chunk)."""
    return _all_chunk_params(model, par.tp, par.etp * par.ep, par.pp, par.virtual_stages,
                             par.stage_layers)


@memoised()
def _all_chunk_params(model: ModelSpec, tp: int, ep: int, pp: int, virtual_stages: int,
                      stage_layers: tuple[int, ...] | None) -> tuple[tuple[float, ...], ...]:
    kinds: dict[tuple[bool, bool], tuple[float, float]] = {}
    out = []
    for i, chunks in enumerate(_chunks(pp, virtual_stages, stage_layers, model.layers)):
        kind = (i == 0, i == pp - 1)
        if kind not in kinds:
            empty = _stage_params(model, tp, ep, kind[0], kind[1], pp > 1, 0)
            one = _stage_params(model, tp, ep, kind[0], kind[1], pp > 1, 1)
            extras = empty.dense + empty.expert
            kinds[kind] = (one.dense + one.expert - extras, extras)
        per_layer, extras = kinds[kind]
        params = [n * per_layer for n in chunks]
        if i == 0:
            params[0] += extras  # the first virtual chunk (with pp = 1 also the last)
        elif i == pp - 1:
            params[-1] += extras
        out.append(tuple(params))
    return tuple(out)


def in_flight_units(par: ParallelismSpec, stage: int) -> tuple[int, ...]:
    """Micro-batches in flight on each virtual chunk of ``stage`` at its peak.

    Interleaved 1F1B (Megatron ``schedules.py``): the
    :func:`~simcluster.perf.pipeline.in_flight_chunks` forward units that run before the first
    backward, in groups of ``p`` micro-batches per chunk; for the first
    stage with an even split this gives Megatron's ``p*(1 + (p-1)/(p*v))`` micro-batches of ``L/p``
    layers (``theoretical_memory_usage.py``). Other schedules: one chunk holding
    :func:`~simcluster.perf.pipeline.in_flight_chunks` micro-batches.
    """
    return _in_flight_units(par.schedule, par.pp, par.virtual_stages, par.micro_batches, stage)


def all_in_flight_units(par: ParallelismSpec) -> tuple[tuple[int, ...], ...]:
    """:func:`in_flight_units` of every pipeline stage."""
    return _all_in_flight(par.schedule, par.pp, par.virtual_stages, par.micro_batches)


@memoised()
def _all_in_flight(schedule: str, p: int, v: int, m: int) -> tuple[tuple[int, ...], ...]:
    return tuple(_in_flight_units(schedule, p, v, m, stage) for stage in range(p))


@memoised()
def _in_flight_units(schedule: str, p: int, v: int, m: int, stage: int) -> tuple[int, ...]:
    units = in_flight_chunks(schedule, p, m, v, stage)
    if schedule != "interleaved":
        return (units,)
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


# Activations (Korthikanti et al. 2022, arXiv 2205.05198, Table 2) --------------------------------


@memoised()
def layer_activation_bytes(model: ModelSpec, micro_batch: int, seq_len: int, tp: int,
                           sequence_parallel: bool, recompute: str,
                           flash_attention: bool = True, linear_bytes: float = 2.0,
                           expert_tp: int = 1) -> float:
    """Activation bytes one layer stores for one micro-batch, per GPU.

    Korthikanti Table 2 term by term (16-bit tensors, 1-byte dropout masks), generalised: Q, K, V
    use the GQA widths; the MLP stores its activation input and the down-projection input (gelu
    ``2f + 2f``, swiglu ``4f + 2f`` per token) for each of the ``top_k`` experts, with the
    experts' permuted inputs and the shared experts (:func:`_mlp_saved`); multi-head latent
    attention keeps its own tensors (:func:`_attention_saved`). For plain GPT this
    is ``s*b*h*(34 + 5*a*s/h)`` without parallelism, ``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` with TP and
    ``s*b*h/t*(34 + 5*a*s/h)`` with TP + SP; the SP + selective case is Megatron's
    ``s*b*h*(18 + 4*ffn/h)/t`` for any gelu MHA layer. A model trained without dropout
    (``model.dropout`` false: Llama, MPT) keeps no masks: ``32`` instead of ``34`` and ``2*a*s/h``
    (the softmax output) instead of ``5*a*s/h``. Measured on an H100 with PyTorch 2.11
    (tests/validation/data/h100_measured/memvar.csv): an eager GPT layer keeps 30.0 bytes per
    token and hidden unit besides its input (2), 32.0 with dropout p = 0.1 (the two 1-byte masks).

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
    linear_bytes : float
        Bytes per element a linear layer saves of its input (QKV, projection, MLP and
        down-projection inputs): 2, or the quantized copy under a low-precision format
        (:func:`.kernels.lowp.saved_input_bytes`: Transformer Engine keeps the FP8 copy).
    expert_tp : int
        The routed experts' TP size: each GPU keeps the permuted inputs of the rows its
        expert-TP group gathered, ``expert_tp`` times its own tokens' copies (MoE only).

    Returns
    -------
    float
        Bytes.
    """
    s, b, h = seq_len, micro_batch, model.hidden
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (tp if sequence_parallel else 1)  # checkpointed layer input, 16-bit
    lb = linear_bytes
    mask = 1.0 if model.dropout else 0.0  # a model trained without dropout keeps no masks
    latent, attention = _attention_saved(model, lb)
    replicated = (4 * sbh  # inputs of the two norms
                  + lb * sbh  # QKV projection input
                  + mask * sbh  # attention output dropout mask
                  + lb * sbh  # MLP input
                  + mask * sbh  # MLP output dropout mask
                  + s * b * latent)  # MLA's latents (duplicated on every TP rank)
    sharded = s * b * (attention + _mlp_saved(model, lb, expert_tp))
    scores = 0.0
    if recompute == "none" and not flash_attention:
        # softmax output 2; with dropout its mask 1 and output 2
        scores = (2 + 3 * mask) * model.heads * s * s * b
    if sequence_parallel:
        return (replicated + sharded + scores) / tp
    return replicated + (sharded + scores) / tp


def _attention_saved(model: ModelSpec, lb: float) -> tuple[float, float]:
    """Bytes per token the attention keeps: (replicated over TP, split over TP).

    Q and K for the scores, V for AV (2 bytes each, GQA widths) and the output projection's input;
    multi-head latent attention (:mod:`.mla`) also keeps its two latents, each as its norm's input
    and the up-projection's input, duplicated on every TP rank.
    """
    q = model.heads * model.head_dim
    if model.mla is None:
        kv = model.kv_heads * model.head_dim
        return 0.0, 2 * (q + 2 * kv) + lb * q
    a = model.mla
    v = model.heads * a.v_head_dim
    latents = a.q_lora_rank + a.kv_lora_rank
    return (2 + lb) * latents, 2 * (2 * q + v) + lb * v


def _mlp_saved(model: ModelSpec, lb: float, expert_tp: int = 1) -> float:
    """Bytes per token the FFN keeps: each MLP's activation input (2f; swiglu's two inputs 4f) and
    down-projection input, for the ``top_k`` routed experts (with their permuted inputs) and the
    shared experts of a MoE block (the permuted inputs ``expert_tp`` times: the expert-TP group's
    gathered rows); leading dense blocks averaged in (:mod:`.moe_layer`)."""
    def inner(width: float) -> float:
        return (4 if model.ffn_act == "swiglu" else 2) * width + lb * width
    moe = model.moe
    if moe is None:
        return inner(model.ffn_hidden)
    sparse = (moe.top_k * (inner(model.ffn_hidden) + expert_tp * lb * model.hidden)
              + inner(shared_ffn_hidden(model)))
    dense = moe.dense_layers / model.layers
    return (1 - dense) * sparse + dense * inner(moe.dense_ffn_hidden)


@memoised()
def embedding_activation_bytes(model: ModelSpec, micro_batch: int, seq_len: int, tp: int,
                               sequence_parallel: bool) -> float:
    """First stage, per micro-batch: ``8*s*b`` (token ids) + ``s*b*h`` (embedding dropout mask,
    only for a model trained with dropout).

    Megatron ``theoretical_memory_usage.py``: divided by t with SP (``compute_activation_memory``),
    not without it (``compute_activation_memory_without_sp``).
    """
    s, b = seq_len, micro_batch
    total = 8 * s * b + (s * b * model.hidden if model.dropout else 0)  # int64 ids; dropout mask
    return total / (tp if sequence_parallel else 1)


@memoised()
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


@dataclass(frozen=True, slots=True)
class ActivationPlan:
    """A layout's per-layer activation bytes and its ends; :meth:`stage_bytes` sums a stage.

    ``per_layer`` serves recompute ``none`` and ``selective``; with ``full``, ``stored`` is a
    checkpointed layer input and ``working`` one layer's working set (0.0 where unused).
    """

    full: bool
    per_layer: float
    stored: float
    working: float
    embedding: float
    logits: float
    last_stage: int
    factor: int  # 2 for fp32 training, else 1

    def stage_bytes(self, stage: int, units: int, first_count: int) -> float:
        """Bytes of ``stage`` holding ``units`` layer-micro-batches (:func:`all_stage_units`);
        ``first_count`` is the micro-batches in flight on stage 0's first chunk."""
        if self.full:
            total = (units - 1) * self.stored + self.working if units else 0.0
        else:
            total = units * self.per_layer
        if stage == 0:
            total += first_count * self.embedding
        if stage == self.last_stage:
            total += self.logits
        return total * self.factor


def activation_plan(scenario: Scenario, flash_attention: bool = True) -> ActivationPlan:
    """The :class:`ActivationPlan` of ``scenario``'s layout."""
    m, par = scenario.model, scenario.parallelism
    lb = saved_input_bytes(scenario.precision,
                           recipe_of(scenario.precision, scenario.execution.fp8_recipe))
    return _activation_plan(m, par.micro_batch, m.seq_len // par.cp, par.tp,
                            par.sequence_parallel, par.recompute, flash_attention, par.pp,
                            2 if scenario.precision == "fp32" else 1, lb, par.etp)


@memoised()
def _activation_plan(m: ModelSpec, b: int, s: int, t: int, sp: bool, recompute: str,
                     flash_attention: bool, pp: int, factor: int,
                     linear_bytes: float = 2.0, expert_tp: int = 1) -> ActivationPlan:
    full = recompute == "full"
    return ActivationPlan(
        full=full,
        per_layer=0.0 if full else layer_activation_bytes(m, b, s, t, sp, recompute,
                                                          flash_attention, linear_bytes, expert_tp),
        stored=layer_activation_bytes(m, b, s, t, sp, "full") if full else 0.0,
        working=layer_activation_bytes(m, b, s, t, sp, "none", flash_attention,
                                       linear_bytes, expert_tp) if full else 0.0,
        embedding=embedding_activation_bytes(m, b, s, t, sp),
        logits=logits_activation_bytes(m, b, s, t, sp), last_stage=pp - 1, factor=factor)


def stage_activation_bytes(scenario: Scenario, stage: int, *,
                           flash_attention: bool = True) -> float:
    """Activation bytes one GPU of ``stage`` holds at its peak.

    In-flight layer-micro-batches times the per-layer bytes of the recompute mode; full recompute
    keeps each layer's input and one layer's working set (whose input is that same tensor). Plus
    the embedding on the first stage and the logits and loss on the last (Megatron-LM
    ``theoretical_memory_usage.py``).
    """
    par = scenario.parallelism
    return activation_plan(scenario, flash_attention).stage_bytes(
        stage, all_stage_units(par, scenario.model.layers)[stage], in_flight_units(par, 0)[0])


def all_stage_units(par: ParallelismSpec, layers: int) -> tuple[int, ...]:
    """Layer-micro-batches in flight on each stage at its peak: micro-batches in flight on each
    chunk (:func:`in_flight_units`) times the chunk's layers, summed."""
    return _all_units(par.schedule, par.pp, par.virtual_stages, par.micro_batches,
                      par.stage_layers, layers)


@memoised()
def _all_units(schedule: str, p: int, v: int, m: int, stage_layers: tuple[int, ...] | None,
               layers: int) -> tuple[int, ...]:
    return tuple(sum(c * n for c, n in zip(counts, chunks, strict=True))
                 for counts, chunks in zip(_all_in_flight(schedule, p, v, m),
                                           _chunks(p, v, stage_layers, layers), strict=True))
