"""Closed-form time of one training step and where it goes.

The fast path of ``simcluster run --fast`` and the oracle of the discrete-event engine. Composition:

1. Per pipeline stage, per micro-batch: forward and backward (with recompute) compute of the
   stage's layers (:mod:`.compute`), the first stage's embedding and the last stage's logits and
   loss, plus the exposed TP, CP and EP communication of those layers (:mod:`.comm_plan`), plus
   the unfused gradient-accumulation pass when ``execution.grad_accumulation_fusion`` is off
   (:mod:`.stage_work`, which times the discrete-event engine's chunks too).
2. Pipeline: ``m`` micro-batches on the critical stage (the most work per micro-batch, its
   blocking sends included), plus the schedule's fill and drain computed with the average stage
   (:mod:`.pipeline`), plus pipeline sends on the critical path (the critical stage's own, one
   each way per micro-batch chunk but none out of the last virtual stage or into the first, and
   one each way per other stage for the fill and drain). Interleaved 1F1B with unequal virtual
   stages (an uneven ``stage_layers``, or a slow GPU's stage) runs in lockstep rounds the closed
   form does not see: its pipeline is the longest path through the op order instead
   (:mod:`.interleave`).
3. Data-parallel reduction (:mod:`.dp_overlap`): each chunk's gradients in Megatron-LM's buckets,
   each bucket paying the collective's latency (:func:`.comm_plan.dp_buckets`), released while
   the op completing them runs (the backward, or ZB-H1's weight-gradient op ``W``) on a serial DP
   stream; exposed is what outlasts the stage's last op less the drain (stage ``i`` ends its
   backward about ``i`` chunk backwards before stage 0). ZeRO-2 adds a reduce-scatter per earlier
   micro-batch, exposed only where it outruns a micro-batch's compute (the DP stream is serial,
   so the excess piles up). ZeRO-3 instead gathers and reduce-scatters layer by layer every
   micro-batch, hidden behind the layers' compute as far as prefetching allows (:mod:`.zero3`;
   under ZB-H1 the reduce-scatters behind ``W`` alone).
   The DP and ZeRO collectives beside compute slow it by the SMs their kernels hold and the HBM
   bandwidth they take (:mod:`.kernels.comm_sms`; ``execution.comm_sms``), charged to compute:
   on the critical path lie the last micro-batch's backward ops on every virtual stage, each
   beside its own chunk's buckets.
4. Optimizer step (memory-bound Adam over this GPU's ZeRO shard; with ``parallelism.offload``,
   the host's: the exposed gradient copies, the CPU's Adam and the copy back, :mod:`.offload`).
5. Slow GPUs (``perturbations.gpu_slowdown``, :mod:`.slowdown`): a slow GPU's TP group runs its
   compute (forward, backward, weight gradient, optimizer) at the GPU's speed; its communication
   is unchanged (links, not SMs, bound it), as in the iteration engine. The slowed stage may
   become the critical stage, and its longer compute enters the fill and drain through the average
   stage (interleaved: through the longest path, item 2). DP replicas run independently until
   the gradient reduction, where every replica waits for the slowest, so the step is the slowest
   perturbed replica's (steps 1-4 with its speeds).

Left out, stated: data loading, logging, kernel launch gaps, host-side jitter (category
``other`` is 0), and contention between concurrent collectives (the flow-level tier models it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from simcluster.perf import comm_plan
from simcluster.perf.cache import memoised
from simcluster.perf.dp_overlap import StageShape, dp_exposed_s
from simcluster.perf.flops import hardware_flops_per_iteration, model_flops_per_iteration
from simcluster.perf.kernels.comm_sms import contention_s, overlap_share
from simcluster.perf.memory import grad_bytes_of, stage_chunks, stage_params
from simcluster.perf.memory_stage import all_stage_params, stage_layer_counts
from simcluster.perf.offload import host_step_s
from simcluster.perf.pipeline import bubble_time_s
from simcluster.perf.slowdown import replica_stage_speeds
from simcluster.perf.stage_work import (
    LayerCosts,
    layer_costs,
    optimizer_s,
    scenario_layer_times,
    virtual_stage_times,
)
from simcluster.perf.zero3 import zero3_layer, zero3_step_s
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBreakdown:
    """Exposed seconds per category on the critical path (docs/metrics.md); sums to the step."""

    compute: float = 0.0
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    pp_comm: float = 0.0
    dp_comm: float = 0.0
    bubble: float = 0.0
    optimizer: float = 0.0
    other: float = 0.0

    @property
    def total_s(self) -> float:
        """The sum of every category."""
        return float(sum(self.as_dict().values()))

    def as_dict(self) -> dict[str, float]:
        """Category -> seconds."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimes:
    """One micro-batch on one pipeline stage, seconds, split into compute and exposed comm."""

    forward_compute_s: float
    backward_compute_s: float
    wgrad_s: float
    tp_s: float
    cp_s: float
    ep_s: float
    backward_comm_s: float = 0.0  # the backward's share of tp_s + cp_s + ep_s

    @property
    def total_s(self) -> float:
        """Forward + backward of one micro-batch, communication included."""
        return self.forward_compute_s + self.backward_compute_s + self.tp_s + self.cp_s + self.ep_s


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEstimate:
    """The analytical step: time, breakdown, FLOPs and the DP overlap stated explicitly."""

    iteration_time_s: float
    breakdown: TimeBreakdown
    stages: tuple[StageTimes, ...]
    model_flops: float
    hardware_flops: float
    dp_total_s: float
    dp_hidden_s: float

    @property
    def bubble_fraction(self) -> float:
        """Pipeline idle share of the step."""
        return self.breakdown.bubble / self.iteration_time_s if self.iteration_time_s else 0.0


def _stages(s: Scenario) -> tuple[StageShape, ...]:
    par = s.parallelism
    last = par.pp - 1
    return tuple(StageShape(n, i == 0, i == last, params.dense + params.expert, params.expert)
                 for i, (n, params) in enumerate(zip(stage_layer_counts(par, s.model.layers),
                                                     all_stage_params(s.model, par),
                                                     strict=True)))


def _stage_times(costs: LayerCosts, stages: tuple[StageShape, ...]) -> tuple[StageTimes, ...]:
    """Per-micro-batch times of every pipeline stage (its chunks as one span,
    :mod:`.stage_work`); stages alike (same layers and ends: the middle ones of an even split)
    share one computed value."""
    (tp_f, tp_b), (cp_f, cp_b), (ep_f, ep_b) = costs.tp, costs.cp, costs.ep
    done: dict[StageShape, StageTimes] = {}
    for stage in stages:
        if stage in done:
            continue
        n = stage.layers
        work = costs.span(n, stage.first, stage.last, stage.held)
        done[stage] = StageTimes(
            forward_compute_s=work.forward_s, backward_compute_s=work.backward_s,
            wgrad_s=work.wgrad_s,
            tp_s=n * (tp_f + tp_b), cp_s=n * (cp_f + cp_b), ep_s=n * (ep_f + ep_b),
            backward_comm_s=n * (tp_b + cp_b + ep_b))
    return tuple(done[stage] for stage in stages)


def _fill_drain_s(s: Scenario, stages: tuple[StageTimes, ...]) -> float:
    """Fill and drain of the schedule, with the average stage standing for every stage."""
    par = s.parallelism
    count = len(stages)
    fwd = sum(st.forward_compute_s + (st.tp_s + st.cp_s + st.ep_s) / 3 for st in stages) / count
    bwd = sum(st.total_s for st in stages) / count - fwd
    wgrad = sum(st.wgrad_s for st in stages) / count
    return bubble_time_s(par.schedule, par.pp, par.micro_batches, fwd, bwd, par.virtual_stages,
                         wgrad if par.schedule == "zb-h1" else 0.0)


def _sends_per_micro_batch(s: Scenario, stage: int) -> int:
    """Pipeline sends a stage makes per micro-batch: one each way per virtual chunk, but the
    first virtual stage sends no input gradient and the last no output (the loss is local)."""
    par = s.parallelism
    if par.pp == 1:
        return 0
    return 2 * par.virtual_stages - (stage == 0) - (stage == par.pp - 1)


def _pp_comm_s(s: Scenario, message: float, stage: int) -> float:
    """Pipeline sends on the critical path through ``stage``: its own for every micro-batch,
    plus one each way per other stage for the fill and the drain."""
    par = s.parallelism
    if par.pp == 1:
        return 0.0
    return message * (par.micro_batches * _sends_per_micro_batch(s, stage) + 2 * (par.pp - 1))


def _pipeline_s(s: Scenario, costs: LayerCosts, stages: tuple[StageTimes, ...],
                speeds: tuple[float, ...], message: float, crit: int) -> tuple[float, float]:
    """(bubble, pipeline sends) on the critical path through stage ``crit``.

    The closed form (:func:`_fill_drain_s`, :func:`_pp_comm_s`), except for interleaved 1F1B
    whose virtual stages are unequal (an uneven ``stage_layers``, or a slow GPU's stage): there
    the pipeline's step is the longest path through the op order (:mod:`.interleave`), and the
    bubble is what it adds to the critical stage's work and sends.
    """
    par = s.parallelism
    if par.pp == 1:
        return 0.0, 0.0
    sends = _pp_comm_s(s, message, crit)
    if par.schedule != "interleaved" or par.micro_batches % par.pp:
        return _fill_drain_s(s, stages), sends
    # numpy, loaded on first use (the CLI starts without it: tests/unit/test_cli_startup.py)
    from simcluster.perf.interleave import interleaved_makespan_s, needs_lattice

    if not (needs_lattice(stage_chunks(par, s.model.layers)) or len(set(speeds)) > 1):
        return _fill_drain_s(s, stages), sends
    forward, backward = virtual_stage_times(s, costs, speeds)
    pipeline = interleaved_makespan_s(par.pp, par.micro_batches, par.virtual_stages, forward,
                                      backward, message, exact=len(set(speeds)) > 1)
    bubble = pipeline - par.micro_batches * stages[crit].total_s - sends
    if bubble < 0.0:  # the critical stage waits less than the fill and drain sends count
        return 0.0, max(0.0, sends + bubble)
    return bubble, sends


def _optimizer_s(s: Scenario, shapes: tuple[StageShape, ...], speeds: tuple[float, ...],
                 nominal: tuple[StageTimes, ...]) -> float:
    """The slowest stage's optimizer step (each at its compute ``speeds``), plus the host's part
    of an offloaded one (:func:`.offload.host_step_s`, beside the ``nominal`` backward; a slow
    GPU does not slow the host)."""
    worst, grad = 0.0, grad_bytes_of(s)
    # distinct (count, speed, backward) keys, first-seen order
    for held, expert, speed, backward in {
            (shape.held, shape.expert, v, st.backward_compute_s): None
            for shape, v, st in zip(shapes, speeds, nominal, strict=True)}:
        worst = max(worst, optimizer_s(s, held, expert) / speed
                    + host_step_s(s, held, expert, grad, backward))
    return worst


def _slowed(stages: tuple[StageTimes, ...], speeds: tuple[float, ...]) -> tuple[StageTimes, ...]:
    """``stages`` with each stage's compute at its speed (1.0: unchanged; comm never scales)."""
    return tuple(st if v == 1.0 else dataclasses.replace(
        st, forward_compute_s=st.forward_compute_s / v,
        backward_compute_s=st.backward_compute_s / v, wgrad_s=st.wgrad_s / v)
        for st, v in zip(stages, speeds, strict=True))


@memoised()
def _model_flops(model: ModelSpec, global_batch: int) -> float:
    return model_flops_per_iteration(model, global_batch)


@memoised()
def _hardware_flops(model: ModelSpec, global_batch: int, recompute: str) -> float:
    return hardware_flops_per_iteration(model, global_batch, recompute)


def estimate_step(s: Scenario) -> StepEstimate:
    """The analytical iteration time of ``s`` with its breakdown (sums exactly to the step).

    With slow GPUs, the step of the slowest perturbed DP replica (every replica waits for it at
    the gradient reduction; item 5 of the module docstring).
    """
    replicas = replica_stage_speeds(s)
    if not replicas:
        return _estimate(s, (1.0,) * s.parallelism.pp)
    return max((_estimate(s, speeds) for speeds in replicas.values()),
               key=lambda est: est.iteration_time_s)


def _estimate(s: Scenario, speeds: tuple[float, ...]) -> StepEstimate:
    """The step of one DP replica whose stages compute at ``speeds``."""
    par = s.parallelism
    groups = comm_plan.groups(s)
    shapes = _stages(s)
    costs = layer_costs(s, groups)
    nominal = _stage_times(costs, shapes)
    stages = _slowed(nominal, speeds)
    message = comm_plan.pp_message_s(s, groups) if par.pp > 1 else 0.0
    # the critical stage: the most work per micro-batch, its blocking sends included (the end
    # stages make one send fewer per micro-batch than the others)
    totals = [st.total_s for st in stages]
    worst = max(range(par.pp), key=totals.__getitem__)
    if par.pp > 1 and worst in (0, par.pp - 1):
        worst = max((0, par.pp - 1, max(range(1, par.pp - 1), key=totals.__getitem__, default=0)),
                    key=lambda i: totals[i] + _sends_per_micro_batch(s, i) * message)
    crit = stages[worst]
    m = par.micro_batches
    bubble, sends = _pipeline_s(s, costs, stages, speeds, message, worst)
    # ZeRO-3 is only allowed with pp = 1 (spec/checks.py), so stage 0 holds every parameter; its
    # gradients are reduce-scattered layer by layer (perf.zero3), not by the DP buckets.
    layer = zero3_layer(s, groups, stage_params(s.model, par, 0, s.model.layers).dense)
    share = overlap_share(s, groups.dp, scenario_layer_times(s))
    if layer is None:
        dp_exposed, dp_total, dp_hidden, behind = dp_exposed_s(s, groups, stages, shapes, share)
    else:  # pp = 1: every hidden gather and reduce-scatter runs beside the layers' compute
        dp_exposed, dp_total = zero3_step_s(s, layer, crit.forward_compute_s,
                                            crit.backward_compute_s, crit.wgrad_s)
        dp_hidden = behind = dp_total - dp_exposed
    breakdown = TimeBreakdown(
        compute=m * (crit.forward_compute_s + crit.backward_compute_s)
        + contention_s(share, behind),
        tp_comm=m * crit.tp_s, cp_comm=m * crit.cp_s, ep_comm=m * crit.ep_s,
        pp_comm=sends, dp_comm=dp_exposed, bubble=bubble,
        optimizer=_optimizer_s(s, shapes, speeds, nominal))
    return StepEstimate(
        iteration_time_s=breakdown.total_s, breakdown=breakdown, stages=stages,
        model_flops=_model_flops(s.model, par.global_batch),
        hardware_flops=_hardware_flops(s.model, par.global_batch, par.recompute),
        dp_total_s=dp_total, dp_hidden_s=dp_hidden)
