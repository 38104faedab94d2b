"""Durations of the simulated ops, taken from the analytical model (``perf/``), per chunk.

Per virtual chunk and micro-batch: forward, full backward (with recompute), and its split into
input gradient and weight gradient (ZB-H1), each as seconds per ledger category: compute, plus
the layers' TP, CP and EP communication folded in at chunk granularity (exposed, not overlapped,
as in :mod:`simcluster.perf.comm_plan`). The first virtual chunk carries the embedding, the last
the logits and loss. Per stage: the pipeline message, the DP gradient buckets (Megatron-LM
``DistributedDataParallel``: ``max(40M, 1M x dp)`` parameters per bucket; none under ZeRO-3), the
ZeRO-3 per-layer gather and reduce-scatter (:mod:`simcluster.perf.zero3`), the optimizer step and
ZeRO-1/2's parameter all-gather after it (:mod:`simcluster.perf.param_gather`), and the host's part
of an offloaded step (:mod:`simcluster.perf.offload`, as the analytical step prices it).
A link-degraded variant is the same scenario with the topology's bandwidth scaled
(:func:`degraded`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simcluster.perf import comm_plan
from simcluster.perf.memory import grad_bytes_of, stage_chunks, stage_params
from simcluster.perf.offload import host_step_s, offloads_optimizer
from simcluster.perf.param_gather import ParamGather, param_gather
from simcluster.perf.stage_work import LayerCosts, chunk_params, layer_costs, optimizer_s
from simcluster.perf.zero3 import Zero3Layer, zero3_layer
from simcluster.spec.scenario import Scenario

Parts = tuple[tuple[str, float], ...]

@dataclass(frozen=True, slots=True)
class ChunkTimes:
    """One virtual chunk, one micro-batch: seconds per category of each op kind."""

    forward: Parts
    backward: Parts
    backward_input: Parts
    wgrad: Parts


@dataclass(frozen=True, slots=True)
class StageDurations:
    """Everything timed on one pipeline stage (one GPU standing for its TP/CP ranks)."""

    chunks: tuple[ChunkTimes, ...]
    buckets: tuple[tuple[float, ...], ...]  # per chunk: each bucket's DP reduction, seconds
    scatters: tuple[tuple[float, ...], ...]  # per chunk: ZeRO-2 earlier micro-batches' buckets
    pp_message_s: float
    zero3: Zero3Layer | None  # ZeRO-3 per-layer gather and reduce-scatter (None: not ZeRO-3)
    optimizer_s: float
    gather: ParamGather | None = None  # ZeRO-1/2 parameter all-gather after the optimizer step
    host_s: float = 0.0  # the host's part of an offloaded optimizer step (not slowed by the GPU)


def degraded(s: Scenario, scale_out: float, scale_up: float) -> Scenario:
    """``s`` with the NIC bandwidth times ``scale_out`` and the scale-up bandwidth times ``scale_up``."""
    if scale_out == 1.0 and scale_up == 1.0:
        return s
    topo = s.cluster.topology
    topo = dataclasses.replace(
        topo, scale_out=dataclasses.replace(topo.scale_out,
                                            nic_Bps=topo.scale_out.nic_Bps * scale_out),
        scale_up=dataclasses.replace(topo.scale_up,
                                     bandwidth_Bps=topo.scale_up.bandwidth_Bps * scale_up))
    return dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, topology=topo))


def _parts(compute: float, tp: float, cp: float, ep: float) -> Parts:
    return (("compute", compute), ("tp_comm", tp), ("cp_comm", cp), ("ep_comm", ep))


def chunk_times(s: Scenario, groups: comm_plan.Groups,
                params: tuple[tuple[float, ...], ...]) -> tuple[tuple[ChunkTimes, ...], ...]:
    """Per stage, per local chunk: the op durations of one micro-batch (``params``: per stage,
    per local chunk, as :func:`chunk_params`); each chunk is a span of
    :mod:`simcluster.perf.stage_work`, as each stage is in the analytical engine."""
    par = s.parallelism
    costs = layer_costs(s, groups)
    (tp_f, tp_b), (cp_f, cp_b), (ep_f, ep_b) = costs.tp, costs.cp, costs.ep
    n_virtual = par.pp * par.virtual_stages
    out = []
    for i, chunks in enumerate(stage_chunks(par, s.model.layers)):
        row = []
        for c, (n, held) in enumerate(zip(chunks, params[i], strict=True)):
            vs = c * par.pp + i
            work = costs.span(n, vs == 0, vs == n_virtual - 1, held)
            bwd, wgrad = work.backward_s, work.wgrad_s
            tb, cb, eb = n * tp_b, n * cp_b, n * ep_b
            row.append(ChunkTimes(forward=_parts(work.forward_s, n * tp_f, n * cp_f, n * ep_f),
                                  backward=_parts(bwd, tb, cb, eb),
                                  backward_input=_parts(bwd - wgrad, tb, cb, eb),
                                  wgrad=_parts(wgrad, 0.0, 0.0, 0.0)))
        out.append(tuple(row))
    return tuple(out)


def _bucket_works(s: Scenario, groups: comm_plan.Groups, params: float,
                  final: bool = True,
                  seen: dict[tuple[float, bool], tuple[float, ...]] | None = None
                  ) -> tuple[float, ...]:
    """Each DP bucket's collective: the step's reduction (``final``) or ZeRO-2's reduce-scatter
    of an earlier micro-batch (none without ZeRO-2). ``seen`` memoises the answer per
    (params, final) within one scenario (most stages hold the same chunks)."""
    if seen is not None:
        found = seen.get((params, final))
        if found is None:
            found = seen[(params, final)] = _bucket_works(s, groups, params, final)
        return found
    one, count = comm_plan.dp_buckets(s, groups, params, grad_bytes_of(s), final)
    return (one,) * count


def stage_durations(s: Scenario) -> tuple[StageDurations, ...]:
    """Every stage's durations."""
    par = s.parallelism
    groups = comm_plan.groups(s)
    layers = stage_chunks(par, s.model.layers)
    per_stage = tuple(chunk_params(s, i, chunks) for i, chunks in enumerate(layers))
    times = chunk_times(s, groups, per_stage)
    message = comm_plan.pp_message_s(s, groups)
    out = []
    seen: dict[tuple[float, bool], tuple[float, ...]] = {}
    costs = layer_costs(s, groups) if offloads_optimizer(s) else None
    for i, params in enumerate(per_stage):
        total = sum(params)
        expert = stage_params(s.model, par, i, sum(layers[i])).expert
        zero3 = zero3_layer(s, groups, total)
        out.append(StageDurations(
            chunks=times[i], buckets=tuple(() if zero3 else _bucket_works(s, groups, p, True, seen)
                                           for p in params),
            scatters=tuple(_bucket_works(s, groups, p, False, seen) for p in params),
            pp_message_s=message, zero3=zero3,
            optimizer_s=optimizer_s(s, total, expert),
            gather=param_gather(s, groups, total, sum(layers[i])),
            host_s=_host_s(s, costs, i, sum(layers[i]), total, expert)))
    return tuple(out)


def _host_s(s: Scenario, costs: LayerCosts | None, stage: int, layers: int, held: float,
            expert: float) -> float:
    """The host's part of stage ``stage``'s offloaded step, beside the backward of one
    micro-batch over its ``layers`` (the analytical step's span); 0 without offload (``costs``
    None)."""
    if costs is None:
        return 0.0
    last = stage == s.parallelism.pp - 1
    backward = costs.span(layers, stage == 0, last, held).backward_s
    return host_step_s(s, held, expert, grad_bytes_of(s), backward)
