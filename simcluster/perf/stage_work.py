"""Per-micro-batch work of a run of layers on one GPU: the one source of both engines' op times.

A *span* is the layers one GPU runs back to back for one micro-batch: a whole pipeline stage (the
analytical engine, :mod:`.step`) or one virtual chunk of it (the discrete-event engine,
:mod:`simcluster.sim.durations`). Its compute is ``n`` layers (:func:`scenario_layer_times`) plus
the embedding on the first span of the model and the logits and loss on the last, plus the unfused
gradient-accumulation pass (:func:`grad_accumulation_s`); its exposed TP, CP and EP communication
is ``n`` times the per-layer cost of :mod:`.comm_plan`. Both engines read these numbers from
:class:`LayerCosts` and :meth:`LayerCosts.span`, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simcluster.perf import comm_plan
from simcluster.perf.cache import Keyed, keyed_accelerator, memoised
from simcluster.perf.compute import (
    LayerTimes,
    embedding_times,
    grad_accumulation_time_s,
    layer_times,
    logits_times,
    memory_operator,
    optimizer_step_time_s,
)
from simcluster.perf.kernels.elementwise import memory_bound_time_s
from simcluster.perf.kernels.lowp import recipe_of, weight_cast_bytes
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.perf.memory import grad_bytes_of, stage_chunks, stage_params
from simcluster.perf.memory_stage import all_chunk_params
from simcluster.perf.mtp import with_mtp
from simcluster.perf.zero3 import (
    copy_in_bytes,
    copy_out_bytes,
    grad_cast_divide_bytes,
    zero3_weight_cast_bytes,
)
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanCompute:
    """Compute seconds of one span for one micro-batch (communication apart)."""

    forward_s: float
    backward_s: float  # full backward: recompute, dgrad and wgrad, plus the accumulation pass
    wgrad_s: float  # the weight-gradient part of backward_s (ZB-H1's W), accumulation included


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCosts:
    """What one micro-batch costs per layer of ``s``, and the two ends of the model.

    ``tp``, ``cp`` and ``ep`` are (forward, backward) exposed seconds per layer.
    """

    scenario: Scenario
    layer: LayerTimes
    embedding: LayerTimes
    logits: LayerTimes
    tp: tuple[float, float]
    cp: tuple[float, float]
    ep: tuple[float, float]

    def span(self, layers: int, first: bool, last: bool, held: float) -> SpanCompute:
        """Compute of ``layers`` layers, with the embedding (``first``) and the logits and loss
        (``last``), on a GPU holding ``held`` parameters (for the accumulation pass)."""
        layer, n = self.layer, layers
        extras = ([self.embedding] if first else []) + ([self.logits] if last else [])
        accumulate = grad_accumulation_s(self.scenario, held)
        return SpanCompute(
            forward_s=n * layer.forward_s + sum(e.forward_s for e in extras),
            backward_s=n * (layer.backward_s + layer.recompute_s)
            + sum(e.backward_s for e in extras) + accumulate,
            wgrad_s=n * layer.wgrad_s + sum(e.wgrad_s for e in extras) + accumulate)


def _per_layer_and_extras(s: Scenario, stage: int) -> tuple[float, float]:
    """(parameters per layer, embedding or output layer) one GPU of ``stage`` holds."""
    par = s.parallelism

    def params(layers: int) -> float:
        p = stage_params(s.model, par, stage, layers)
        return p.dense + p.expert

    extras = params(0)
    return params(1) - extras, extras


def _with_extras(s: Scenario, stage: int, chunks: tuple[int, ...], per_layer: float,
                 extras: float) -> tuple[float, ...]:
    out = [n * per_layer for n in chunks]
    if stage == 0:
        out[0] += extras  # the first virtual chunk (with pp = 1 also the last)
    elif stage == s.parallelism.pp - 1:
        out[-1] += extras
    return tuple(out)


def chunk_params(s: Scenario, stage: int, chunks: tuple[int, ...]) -> tuple[float, ...]:
    """Parameters per local chunk of ``stage``: layers pro rata, embedding on the first virtual
    chunk and the output layer (or tied copy) on the last
    (:func:`simcluster.perf.memory.stage_params`)."""
    return _with_extras(s, stage, chunks, *_per_layer_and_extras(s, stage))


def stage_chunk_params(s: Scenario) -> tuple[tuple[float, ...], ...]:
    """:func:`chunk_params` of every stage
    (:func:`simcluster.perf.memory_stage.all_chunk_params`)."""
    return all_chunk_params(s.model, s.parallelism)


def virtual_stage_times(s: Scenario, costs: LayerCosts, speeds: tuple[float, ...]
                        ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """One micro-batch's forward and full backward on every virtual stage ``vs = c pp + i``
    (chunk ``c`` of stage ``i``), seconds: the discrete-event engine's op durations
    (:func:`simcluster.sim.durations.chunk_times`, the same spans of ``costs``, the scenario's
    :func:`layer_costs`), exposed TP/CP/EP communication included, each stage's compute at its
    ``speeds`` (slow GPUs)."""
    par = s.parallelism
    (tp_f, tp_b), (cp_f, cp_b), (ep_f, ep_b) = costs.tp, costs.cp, costs.ep
    comm_f, comm_b = tp_f + cp_f + ep_f, tp_b + cp_b + ep_b
    n_virtual = par.pp * par.virtual_stages
    forward = [0.0] * n_virtual
    backward = [0.0] * n_virtual
    spans: dict[tuple[int, bool, bool, float, float], tuple[float, float]] = {}
    for i, (chunks, params) in enumerate(zip(stage_chunks(par, s.model.layers),
                                             stage_chunk_params(s), strict=True)):
        for c, (n, held) in enumerate(zip(chunks, params, strict=True)):
            vs = c * par.pp + i
            key = (n, vs == 0, vs == n_virtual - 1, held, speeds[i])
            if key not in spans:  # most chunks are alike
                work = costs.span(n, key[1], key[2], held)
                spans[key] = (work.forward_s / speeds[i] + n * comm_f,
                              work.backward_s / speeds[i] + n * comm_b)
            forward[vs], backward[vs] = spans[key]
    return tuple(forward), tuple(backward)


def layer_costs(s: Scenario, groups: comm_plan.Groups) -> LayerCosts:
    """:class:`LayerCosts` of ``s`` on its communication ``groups``."""
    acc = keyed_accelerator(s.cluster.topology.accelerator)
    par = s.parallelism
    layer = _scenario_layer_times(s, acc)
    first, last = _ends(s.model, acc, s.precision, par.micro_batch, s.model.seq_len, par.tp,
                        par.cp, s.execution.elementwise)
    last = with_mtp(last, layer, first, s.model, acc.value, s.precision,
                    par.micro_batch * s.model.seq_len / par.cp, par.tp)
    attention = sum(o.time_s for o in layer.operators if o.kind == "attention")
    ep = comm_plan.ep_layer_comm_s(s, groups)
    if s.execution.ep_comm_overlap:  # each pass's all-to-alls beside the other micro-batch's
        ep = (max(0.0, ep[0] - layer.backward_s), max(0.0, ep[1] - layer.forward_s))
    return LayerCosts(scenario=s, layer=layer, embedding=first, logits=last,
                      tp=comm_plan.tp_layer_comm_s(s, groups, layer),
                      cp=comm_plan.cp_layer_comm_s(s, groups, attention), ep=ep)


def scenario_layer_times(s: Scenario) -> LayerTimes:
    """One transformer layer of ``s`` per micro-batch on one GPU (its layout and kernels)."""
    return _scenario_layer_times(s, keyed_accelerator(s.cluster.topology.accelerator))


def _scenario_layer_times(s: Scenario, acc: Keyed[AcceleratorSpec]) -> LayerTimes:
    par = s.parallelism
    ex = s.execution
    return _layer_times(s.model, acc, s.precision, par.micro_batch, s.model.seq_len, par.tp,
                        par.cp, par.sequence_parallel, par.recompute, ex.attention,
                        (par.ep, par.etp), ex.elementwise, ex.host_op_s,
                        ex.cp_load_balance,
                        (copy_out_bytes(s), copy_in_bytes(s), zero3_weight_cast_bytes(s),
                         grad_cast_divide_bytes(s)),
                        (ex.fp8_recipe, ex.fp8_cast_fusion), ex.moe_dispatcher)


@memoised()
def _layer_times(model: ModelSpec, acc: Keyed[AcceleratorSpec], dtype: str, micro_batch: int,
                 seq_len: int, tp: int, cp: int, sequence_parallel: bool, recompute: str,
                 attention: str, experts: tuple[int, int], elementwise: str,
                 host_op_s: float,
                 cp_load_balance: bool, copies: tuple[float, float, float, float],
                 lowp: tuple[str, bool], dispatcher: str = "alltoall") -> LayerTimes:
    layer = layer_times(model, acc.value, dtype, micro_batch, seq_len, tp, cp, sequence_parallel,
                        recompute, attention, ep=experts[0], expert_tp=experts[1],
                        elementwise=elementwise,
                        host_op_s=host_op_s, cp_load_balance=cp_load_balance,
                        fp8_recipe=lowp[0], fp8_cast_fusion=lowp[1], moe_dispatcher=dispatcher)
    copy_out, copy_in, cast, prep = copies
    if cast:  # ZeRO-3 under a low-precision format: the gathered weights quantized each pass
        op = memory_operator(acc.value, "weight_cast", cast, backward_factor=1.0)
        layer = dataclasses.replace(layer, forward_s=layer.forward_s + op.time_s,
                                    backward_s=layer.backward_s + op.backward_s,
                                    operators=(*layer.operators, op))
    # FSDP2's copies (perf/zero3.py): the all-gather copy-out once before the forward and once
    # before the backward (the recompute reuses the backward's gathered parameters); the
    # reduce-scatter copy-in once after the backward. FSDP1's gradient cast and pre-division
    # once after the backward.
    ops = [memory_operator(acc.value, "zero3_copy_out", copy_out, backward_factor=1.0)
           ] if copy_out else []
    ops += [_after_backward(acc.value, name, nbytes) for name, nbytes in
            (("zero3_copy_in", copy_in), ("grad_cast_divide", prep)) if nbytes]
    if not ops:
        return layer
    return dataclasses.replace(layer, forward_s=layer.forward_s + sum(o.time_s for o in ops),
                               backward_s=layer.backward_s + sum(o.backward_s for o in ops),
                               operators=(*layer.operators, *ops))


def _after_backward(acc: AcceleratorSpec, name: str, nbytes: float) -> OperatorTime:
    """A memory-bound pass over ``nbytes`` once per backward (none in the forward)."""
    return dataclasses.replace(memory_operator(acc, name, nbytes, backward_factor=1.0),
                               time_s=0.0)


@memoised()
def _ends(model: ModelSpec, acc: Keyed[AcceleratorSpec], dtype: str, micro_batch: int,
          seq_len: int, tp: int, cp: int, elementwise: str) -> tuple[LayerTimes, LayerTimes]:
    """The first stage's embedding and the last stage's logits and loss."""
    args = (model, acc.value, dtype, micro_batch, seq_len)
    return embedding_times(*args, tp, cp), logits_times(*args, tp, cp, elementwise)


def grad_accumulation_s(s: Scenario, params: float) -> float:
    """Unfused gradient accumulation of ``params`` for one micro-batch; 0 with the fusion on.

    The wgrad GEMMs write 16-bit gradients (fp32 in fp32 training). Under ZeRO-2/3 gradients are
    reduce-scattered every micro-batch, so only this rank's shard is accumulated.
    """
    if s.execution.grad_accumulation_fusion:
        return 0.0
    par = s.parallelism
    shard = params / (par.dp * par.cp) if par.zero_stage >= 2 else params
    fresh = 4 if s.precision == "fp32" else 2
    return grad_accumulation_time_s(s.cluster.topology.accelerator, shard, fresh,
                                    grad_bytes_of(s))


def optimizer_s(s: Scenario, held: float, expert: float = 0.0) -> float:
    """The optimizer step of a GPU holding ``held`` parameters, ``expert`` of them MoE experts:
    Adam over its ZeRO shard (from ZeRO-1 on, dense parameters over ``dp * cp``, expert parameters
    over the expert data-parallel size ``tp*cp*dp / (expert_tp*ep)``, as the memory model shards
    them: :mod:`simcluster.perf.memory`;
    :func:`simcluster.perf.compute.optimizer_step_time_s`). Under a low-precision format below
    ZeRO-3 it also quantizes the ``held`` weights once per step (:mod:`.kernels.lowp`: the
    copies are kept across the micro-batches; the embedding and output layer, 16-bit, are counted
    too, a small excess).
    """
    par = s.parallelism
    acc = s.cluster.topology.accelerator
    recipe = recipe_of(s.precision, s.execution.fp8_recipe)
    cast = 0.0
    if recipe != "none" and par.zero_stage < 3:
        cast = memory_bound_time_s(acc, weight_cast_bytes(recipe, held))
    if par.zero_stage == 0:
        return cast + optimizer_step_time_s(acc, held, 1)
    dense = optimizer_step_time_s(acc, held - expert, par.dp * par.cp)
    return cast + dense + (optimizer_step_time_s(acc, expert, par.expert_dp)
                           if expert else 0.0)
