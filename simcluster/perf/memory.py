"""Memory per GPU on each pipeline stage: weights, gradients, optimizer, activations, overhead.

The analytical pre-filter behind ``fits_in_memory`` and ``peak_memory_gib``. Parameters per stage
follow Megatron-LM's layout (TP shards attention and MLP, norms are replicated, the word embedding
is vocab-parallel on the first stage and the output layer on the last); bytes per parameter follow
mixed-precision Adam (Rajbhandari et al., ZeRO, SC'20, arXiv 1910.02054; Megatron-LM
``theoretical_memory_usage.py``) with ZeRO sharding over data parallelism; activations follow
Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, generalised to GQA, SwiGLU, MoE and flash
attention; micro-batches in flight per stage follow the pipeline schedule (Megatron-LM
``schedules.py`` warm-up counts).

Simplifications, stated once:
- Everything TP shards (weights and biases of attention and MLP, vocab) is divided by ``tp``;
  norms, learned position embeddings and the MoE router are replicated on every TP rank.
- ZeRO shards dense parameters over ``dp*cp`` ranks and expert parameters over
  ``tp*cp*dp/(etp*ep)`` (the expert-data-parallel group: ``dp*cp/ep`` with expert TP = TP);
  experts are replicated that many times. ZeRO-3 also holds the
  units in flight unsharded (:func:`zero3_units_in_flight` of :func:`zero3_unit_params`).
- Activations are 16-bit (Korthikanti's byte counts); fp32 training doubles them.
- Sequence length is divided by ``cp`` in every activation term.

The ``overhead`` part is what a training process holds besides those (:mod:`.memory_overheads`,
each term cited there): the CUDA context, NCCL buffers, the logits at the loss, the embedding
gradient, and the caching allocator's reserve on what is allocated and freed every micro-batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simcluster.perf.cache import memoised
from simcluster.perf.kernels.lowp import recipe_of, weight_copy_bytes
from simcluster.perf.memory_overheads import (
    StageOverheads,
    all_stage_nccl_bytes,
    allocator_reserve_bytes,
    embedding_grad_bytes,
    logits_transient_bytes,
)
from simcluster.perf.memory_stage import (
    StageParams,
    activation_plan,
    all_in_flight_units,
    all_stage_params,
    all_stage_units,
    embedding_activation_bytes,
    in_flight_units,
    layer_activation_bytes,
    logits_activation_bytes,
    stage_activation_bytes,
    stage_chunks,
    stage_params,
)
from simcluster.perf.offload import gpu_bytes, host_bytes_per_node
from simcluster.spec.scenario import Scenario

__all__ = [
    "ADAM_FP32_BYTES", "ADAM_MIXED_BYTES", "DEFAULT_GRAD_BYTES", "BytesPerParam", "MemoryEstimate",
    "StageMemory", "StageOverheads", "StageParams", "bytes_per_param", "embedding_activation_bytes",
    "estimate_memory", "fp32_copy_bytes", "grad_bytes_for", "grad_bytes_of",
    "in_flight_units", "layer_activation_bytes",
    "logits_activation_bytes", "stage_activation_bytes", "stage_chunks", "stage_memory",
    "stage_params", "zero3_unit_params", "zero3_units_in_flight", "zero_bytes_per_param",
]

#: Megatron default: gradients accumulate in fp32 ``main_grad`` buffers.
DEFAULT_GRAD_BYTES = 4


def grad_bytes_for(precision: str, fp32_grad_buffer: bool | None = None) -> int:
    """Bytes per gradient element the framework keeps and reduces for ``precision``.

    ``fp32_grad_buffer`` (``execution.fp32_grad_buffer``) states it; None is Megatron-LM's default:
    bf16 (and fp8, whose master weights are bf16) needs fp32 gradient accumulation
    (``--accumulate-allreduce-grads-in-fp32`` is forced for bf16 in Megatron-LM ``arguments.py``);
    fp16 keeps and all-reduces 16-bit gradients by default. fp32 trains in fp32 either way.
    """
    if precision == "fp32":
        return 4
    if fp32_grad_buffer is None:
        return 2 if precision == "fp16" else DEFAULT_GRAD_BYTES
    return 4 if fp32_grad_buffer else 2


def grad_bytes_of(scenario: Scenario) -> int:
    """:func:`grad_bytes_for` the scenario's precision and ``execution.fp32_grad_buffer``."""
    return grad_bytes_for(scenario.precision, scenario.execution.fp32_grad_buffer)


def fp32_copy_bytes(copy: str, zero_stage: int, dp: int) -> float:
    """Bytes per parameter of the optimizer's extra fp32 gradients (``execution.fp32_grad_copy``).

    ``shard``: DeepSpeed's ZeRO-1/2 optimizer gives its fp32 partition an fp32 ``.grad`` of the
    partition's size (``single_grad_partition``, ``deepspeed/runtime/zero/stage_1_and_2.py``),
    ``4/dp`` with ZeRO >= 1, ``4`` without; ``full``: DeepSpeed's ``BF16_Optimizer`` accumulates
    into fp32 gradients the size of every local parameter (``fp32_groups_gradients_flat``,
    ``deepspeed/runtime/bf16_optimizer.py``), ``4``; ``none``: 0.
    """
    if copy == "none":
        return 0.0
    if copy == "full":
        return 4.0
    return 4.0 / (dp if zero_stage >= 1 else 1)
#: Adam in mixed precision: fp32 master weights + first and second moments (ZeRO's K = 12).
ADAM_MIXED_BYTES = 12
#: Adam in fp32: the weights are the master copy, so only the two moments.
ADAM_FP32_BYTES = 8


@dataclass(frozen=True, slots=True)
class _OverheadPlan:
    """A layout's overhead terms shared by its stages (see :mod:`.memory_overheads`)."""

    context: float
    reserve: float  # allocator bytes reserved per dynamic byte, f / (1 - f)
    logits: float
    embedding_grad: float
    last_stage: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    """Memory per GPU on one pipeline stage, bytes."""

    stage: int
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float  # the sum of ``overheads`` (computed once by the memory plan)
    nccl_bytes: float
    dynamic_bytes: float  # allocated and freed every micro-batch: activations and transients
    plan: _OverheadPlan = dataclasses.field(repr=False, compare=False)

    @property
    def overheads(self) -> StageOverheads:
        """The parts of :attr:`overhead_bytes`."""
        p = self.plan
        last = self.stage == p.last_stage
        return StageOverheads(cuda_context=p.context, nccl=self.nccl_bytes,
                              logits=p.logits if last else 0.0,
                              embedding_grad=p.embedding_grad if self.stage == 0 else 0.0,
                              allocator=self.dynamic_bytes * p.reserve)

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
    _peak: int = dataclasses.field(init=False, repr=False, compare=False)
    # host memory per node for the offloaded state (perf/offload.py), and the node's (None: not
    # stated); out of the repr so a scenario without offload prints as before
    host_bytes: float = dataclasses.field(default=0.0, repr=False)
    host_capacity_bytes: float | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Computed once: a sweep reads the peak several times per layout.
        totals = [s.total_bytes for s in self.stages]
        object.__setattr__(self, "_peak", max(range(len(totals)), key=totals.__getitem__))

    @property
    def peak_stage(self) -> int:
        """Index of the stage with the most memory (the first one on a tie)."""
        return self._peak

    @property
    def peak_bytes(self) -> float:
        """Largest per-GPU total over stages."""
        return self.stages[self.peak_stage].total_bytes

    @property
    def fits_in_memory(self) -> bool:
        """Whether the peak stage fits in the accelerator's memory, and any offloaded state in the
        host's."""
        return self.peak_bytes <= self.capacity_bytes and self.fits_in_host

    @property
    def fits_in_host(self) -> bool:
        """Whether the offloaded state fits in the host memory of a node (unstated: it does)."""
        cap = self.host_capacity_bytes
        return cap is None or self.host_bytes <= cap

    def peak_at_fragmentation(self, fragmentation: float) -> float:
        """The largest stage total with the allocator reserve at ``fragmentation`` where that is
        more than the scenario's own (``execution.allocator_fragmentation``), bytes."""
        reserve = allocator_reserve_bytes(1.0, fragmentation)
        return max(s.total_bytes + s.dynamic_bytes * max(0.0, reserve - s.plan.reserve)
                   for s in self.stages)


@dataclass(frozen=True, slots=True, kw_only=True)
class BytesPerParam:
    """Bytes per parameter of weights, gradients and optimizer state before any sharding."""

    weights: float
    grads: float
    optimizer: float


def bytes_per_param(precision: str, grad_bytes: float = DEFAULT_GRAD_BYTES) -> BytesPerParam:
    """Mixed-precision Adam bytes per parameter (Megatron ``theoretical_memory_usage.py``: 18 = 2 + 4 + 12).

    Weights are 16-bit for fp16/bf16 and also for fp8 training (fp8 is a GEMM input format; the
    weights stay bf16 as in Transformer Engine); fp32 keeps 4-byte weights and no master copy.
    """
    if precision == "fp32":
        return BytesPerParam(weights=4, grads=4, optimizer=ADAM_FP32_BYTES)
    return BytesPerParam(weights=2, grads=grad_bytes, optimizer=ADAM_MIXED_BYTES)


def zero_bytes_per_param(zero_stage: int, dp: int, per_param: BytesPerParam) -> BytesPerParam:
    """Shard ``per_param`` over ``dp`` ranks as ZeRO stage ``zero_stage`` does.

    Rajbhandari et al. SC'20 (arXiv 1910.02054) s5: stage 1 shards the optimizer state (Megatron
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



@memoised()
def _sharded_bytes(precision: str, grad_bytes: float, zero_stage: int, dense_dp: int,
                   expert_dp: int, copy: str, offload: str = "none"
                   ) -> tuple[BytesPerParam, BytesPerParam, BytesPerParam]:
    """Bytes per parameter unsharded, and on the GPU sharded for dense and for expert parameters,
    with the optimizer's extra fp32 gradients (:func:`fp32_copy_bytes`) in the sharded gradients
    (in host memory instead under ``parallelism.offload``: :func:`.offload.gpu_bytes`)."""
    per_param = bytes_per_param(precision, grad_bytes)
    return (per_param, _on_gpu(zero_bytes_per_param(zero_stage, dense_dp, per_param), copy,
                               zero_stage, dense_dp, offload),
            _on_gpu(zero_bytes_per_param(zero_stage, expert_dp, per_param), copy, zero_stage,
                    expert_dp, offload))


def _on_gpu(sharded: BytesPerParam, copy: str, zero_stage: int, dp: int,
            offload: str) -> BytesPerParam:
    if offload != "none":
        weights, grads, optimizer = gpu_bytes(sharded.weights, sharded.grads, sharded.optimizer,
                                              offload, zero_stage)
        return BytesPerParam(weights=weights, grads=grads, optimizer=optimizer)
    return BytesPerParam(weights=sharded.weights,
                         grads=sharded.grads + fp32_copy_bytes(copy, zero_stage, dp),
                         optimizer=sharded.optimizer)


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
        Bytes per gradient element (default :func:`grad_bytes_of` the scenario; 4: fp32 main
        grads, Megatron; 2: ZeRO paper's fp16).
    flash_attention : bool
        Attention scores are not stored (default True).

    Returns
    -------
    StageMemory
        Bytes by part.
    """
    return _MemoryPlan(scenario, grad_bytes, flash_attention).stage(stage)


class _MemoryPlan:
    """What every stage of one layout shares, computed once: bytes per parameter after ZeRO, the
    ZeRO-3 units in flight, the activation plan, each stage's parameters and layer-micro-batches in
    flight, and the overhead terms of :mod:`.memory_overheads`."""

    __slots__ = ("activations", "copies", "dense", "expert", "first_count", "nccl", "overheads",
                 "params", "unit_grads", "unit_weights", "units")

    def __init__(self, scenario: Scenario, grad_bytes: float | None,
                 flash_attention: bool) -> None:
        par, ex = scenario.parallelism, scenario.execution
        self.params = all_stage_params(scenario.model, par)
        self.units = all_stage_units(par, scenario.model.layers)
        self.first_count = all_in_flight_units(par)[0][0]
        if grad_bytes is None:
            grad_bytes = grad_bytes_of(scenario)
        per_param, self.dense, self.expert = _sharded_bytes(
            scenario.precision, grad_bytes, par.zero_stage, par.dp * par.cp,
            par.expert_dp, ex.fp32_grad_copy, par.offload)
        self.unit_weights = self.unit_grads = None
        # the quantized weight copies of a low-precision format (kernels/lowp.py): every local
        # weight's, kept across micro-batches; under ZeRO-3 the gathered units' only
        copies = weight_copy_bytes(scenario.precision, recipe_of(scenario.precision, ex.fp8_recipe))
        self.copies = copies if par.zero_stage < 3 else 0.0
        if par.zero_stage >= 3:
            unit = zero3_unit_params(scenario) * zero3_units_in_flight(scenario)
            self.unit_weights = unit * (per_param.weights + copies)
            self.unit_grads = unit * per_param.grads
        self.activations = activation_plan(scenario, flash_attention)
        self.nccl = all_stage_nccl_bytes(scenario)
        m, width = scenario.model, 4 if scenario.precision == "fp32" else 2
        self.overheads = _OverheadPlan(
            context=ex.cuda_context_bytes,
            reserve=allocator_reserve_bytes(1.0, ex.allocator_fragmentation),
            logits=logits_transient_bytes(par.micro_batch, m.seq_len // par.cp, m.vocab, par.tp,
                                          width),
            embedding_grad=embedding_grad_bytes(m.vocab, m.hidden, par.tp, width),
            last_stage=par.pp - 1)

    def stage(self, stage: int) -> StageMemory:
        """The memory of pipeline stage ``stage``."""
        params = self.params[stage]
        dense, expert = self.dense, self.expert
        weights = (params.dense * dense.weights + params.expert * expert.weights
                   + (params.dense + params.expert) * self.copies)
        grads = params.dense * dense.grads + params.expert * expert.grads
        if self.unit_weights is not None and self.unit_grads is not None:
            weights += self.unit_weights
            grads += self.unit_grads
        optimizer = params.dense * dense.optimizer + params.expert * expert.optimizer
        activations = self.activations.stage_bytes(stage, self.units[stage], self.first_count)
        o, nccl = self.overheads, self.nccl[stage]
        dynamic = activations
        if stage == 0:
            dynamic += o.embedding_grad
        if stage == o.last_stage:
            dynamic += o.logits
        # the order of StageOverheads.total: context, nccl, logits, embedding gradient, allocator
        overhead = (o.context + nccl + (o.logits if stage == o.last_stage else 0.0)
                    + (o.embedding_grad if stage == 0 else 0.0) + dynamic * o.reserve)
        return StageMemory(stage=stage, weights_bytes=weights, grads_bytes=grads,
                           optimizer_bytes=optimizer, activations_bytes=activations,
                           overhead_bytes=overhead, nccl_bytes=nccl, dynamic_bytes=dynamic,
                           plan=o)


def estimate_memory(scenario: Scenario, *, grad_bytes: float | None = None,
                    flash_attention: bool = True) -> MemoryEstimate:
    """Memory per GPU of every pipeline stage of ``scenario``.

    Parameters
    ----------
    scenario : Scenario
        Model, layout, precision and cluster (for the accelerator's memory).
    grad_bytes : float
        Bytes per gradient element (default :func:`grad_bytes_of` the scenario).
    flash_attention : bool
        Attention scores, softmax and its dropout mask are not stored (default True).

    Returns
    -------
    MemoryEstimate
        Per-stage breakdown, peak and whether it fits.
    """
    plan = _MemoryPlan(scenario, grad_bytes, flash_attention)
    stages = tuple(plan.stage(i) for i in range(scenario.parallelism.pp))
    topo = scenario.cluster.topology
    return MemoryEstimate(stages=stages, capacity_bytes=topo.accelerator.memory_bytes,
                          host_bytes=host_bytes_per_node(scenario, plan.params),
                          host_capacity_bytes=topo.host.memory_bytes)
