"""The data-parallel reduction beside a step: what stays exposed, and what takes SMs from compute.

The discrete-event engine reduces each virtual chunk's gradients in Megatron-LM's buckets
(:func:`simcluster.perf.comm_plan.dp_buckets`), released while the op completing the chunk's
gradients runs, on one serial DP stream per stage (docs/des.md, "DP reduction"); ZeRO-1/2 gather
the updated weights after the optimizer step (:mod:`.param_gather`). This module is the closed
form of that for :mod:`.step`: per stage, the reduction left after its last op (less the drain
that stage ``i`` waits for stage 0 by), and the reduction beside compute on the critical path,
which runs slower for the SMs and HBM bandwidth the collectives take (:mod:`.kernels.comm_sms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simcluster.perf import comm_plan
from simcluster.perf.memory import grad_bytes_of, stage_chunks
from simcluster.perf.param_gather import ParamGather, gather_exposed_s, gather_total_s, param_gather
from simcluster.perf.stage_work import stage_chunk_params
from simcluster.spec.scenario import Scenario

if TYPE_CHECKING:
    from simcluster.perf.step import StageTimes


#: Extensions of a compute op per check of the collectives beside it (the DES's
#: ``sim.commclock.MAX_EXTENSIONS``): they bound the stretch when a collective holds every SM.
MAX_PASSES = 4


@dataclass(frozen=True, slots=True)
class StageShape:
    """What a pipeline stage's times depend on: its layers, ends and parameters held."""

    layers: int
    first: bool
    last: bool
    held: float  # dense + expert parameters on one GPU
    expert: float = 0.0  # the expert parameters among them


def _dp_collectives_s(s: Scenario, groups: comm_plan.Groups, params: tuple[tuple[float, ...], ...]
                      ) -> dict[float, tuple[float, float, int]]:
    """Parameters of a chunk -> (its final DP reduction, its ZeRO-2 scatter) seconds in
    Megatron-LM's buckets (:func:`simcluster.perf.comm_plan.dp_buckets`), and the final
    reduction's bucket count, once per distinct count."""
    grad = grad_bytes_of(s)
    zero2 = s.parallelism.zero_stage == 2
    out = {}
    for held in {x: None for chunks in params for x in chunks}:
        final, finals = comm_plan.dp_buckets(s, groups, held, grad)
        scatter, scatters = (comm_plan.dp_buckets(s, groups, held, grad, final=False) if zero2
                             else (0.0, 0))
        out[held] = (final * finals, scatter * scatters, finals)
    return out


def _gathers(s: Scenario, groups: comm_plan.Groups,
             shapes: tuple[StageShape, ...]) -> dict[tuple[float, int], ParamGather | None]:
    """(parameters held, layers) -> the stage's ZeRO-1/2 parameter all-gather."""
    return {key: param_gather(s, groups, *key)
            for key in {(shape.held, shape.layers): None for shape in shapes}}


def chunk_release_s(reduces: tuple[float, ...], buckets: tuple[int, ...], layers: tuple[int, ...],
                    backward: float, release_op: float | None, p: int, share: float = 0.0
                    ) -> tuple[float, float]:
    """(reduction left after the stage's last op, reduction beside the ops releasing it).

    Each chunk's ``buckets`` (``reduces`` seconds per local chunk) are released while the op
    completing its gradients runs, bucket ``k`` of ``n`` at ``(k+1)/n`` of it (its last backward,
    or ``release_op`` seconds under ZB-H1: sim/build.py), and reduced on one serial DP stream: of
    an op of ``D`` seconds the stream spends ``min(R, D) (n-1)/n`` beside it, and it cannot end
    before the op's end plus the last bucket, ``R/n``. Interleaved 1F1B completes chunk ``v-1``
    first and chunk 0 last, each chunk's last backward followed by ``p`` backwards of every chunk
    after it (the last micro-batch group), so the stream that starts at chunk ``c`` ends
    ``sum_{c'<=c} R_c' - D_c (n_c-1)/n_c - sum_{c'<c} p B_c'`` after the stage's compute; the
    reduction left is the latest of these. ``backward``: one micro-batch's backward over the stage
    (``layers`` per chunk), communication included.

    A releasing op beside its stream runs ``1 / (1 - share)`` times longer (:mod:`.kernels.comm_sms`:
    ``W + O share`` seconds when it overlaps the stream for ``O`` of them) and releases bucket
    ``k`` once ``(k+1)/n`` of its work is done (sim/stream.py), so ``D`` above is the stretched
    ``D / (1 - share)`` wherever the stream keeps up with it; the reduction left is then counted
    from the stretched op's end, and ``min(R, D)`` is the wall time beside it, whose ``share``
    is the op's extension (exact for one chunk whether the stream backs up, ``R (1-share) >= D``,
    or waits for each bucket).
    """
    late, done, after, beside = 0.0, 0.0, 0.0, 0.0
    stretch = 1.0 / (1.0 - share) if share < 1.0 else 1.0 + MAX_PASSES
    total_layers = sum(layers) or 1
    for reduce, count, n in zip(reduces, buckets, layers, strict=True):
        chunk_backward = backward * n / total_layers
        op = (chunk_backward if release_op is None else release_op) * stretch
        if count:
            ahead = op * (count - 1) / count  # the op's part after its first bucket is ready
            done += reduce
            late = max(late, done - ahead - after, reduce / count - after)
            beside += min(reduce, op) * (count - 1) / count
        after += p * chunk_backward
    return late, beside


def dp_exposed_s(s: Scenario, groups: comm_plan.Groups, stages: tuple[StageTimes, ...],
                  shapes: tuple[StageShape, ...], share: float) -> tuple[float, float, float, float]:
    """(exposed, total on the critical stage, hidden, hidden beside compute on the critical
    path) data-parallel seconds.

    The reduction hidden beside compute takes SMs and HBM bandwidth from it: ``share`` extra
    compute seconds per second beside it (:func:`.kernels.comm_sms.overlap_share`). With the
    buckets overlapping the backward (``execution.overlap_grad_reduce``) each virtual chunk's
    reduction runs beside the op that releases it, and every one of those ops lies on the
    critical path: the last micro-batch's backward crosses every virtual stage in turn (the
    pipeline's drain), each op releasing its chunk's gradients as it runs. So the contention is
    summed over every stage's releasing ops (only the critical stage's under ZB-H1, whose
    releasing ops are the deferred weight-gradient ops, off that chain). What the drain or the
    wait for the first activation hides runs beside an idle GPU and takes nothing.
    """
    par = s.parallelism
    overlapped, gpipe = s.execution.overlap_grad_reduce, par.schedule == "gpipe"
    zb = par.schedule == "zb-h1"
    earlier = par.micro_batches - 1
    gathers = _gathers(s, groups, shapes)
    chunks = stage_chunks(par, s.model.layers)
    params = stage_chunk_params(s)
    collectives = _dp_collectives_s(s, groups, params)
    best = (0.0, 0.0, 0.0, 0.0)
    chain = 0.0  # reduction beside the releasing ops of every stage
    i, count = 0, len(stages)
    while i < count:
        shape, st, layers, held = shapes[i], stages[i], chunks[i], params[i]
        run = i + 1  # stages alike in a row (the middle ones) release alike; the first of them
        while (run < count and stages[run] is st and shapes[run] == shape  # waits the longest
               and chunks[run] == layers and params[run] == held):
            run += 1
        reduces = tuple(collectives[x][0] for x in held)
        final, scatter = sum(reduces), sum(collectives[x][1] for x in held)
        late, beside = (chunk_release_s(reduces, tuple(collectives[x][2] for x in held), layers,
                                 st.backward_compute_s + st.backward_comm_s,
                                 st.wgrad_s if zb else None, par.pp, share)
                        if overlapped else (final, 0.0))
        chain += beside * (run - i)
        gather = gathers[(shape.held, shape.layers)]
        # stage i ends its last backward earlier than stage 0 by the drain: i chunk backwards
        slack = i * st.backward_compute_s / par.virtual_stages
        exposed = max(0.0, late - slack)
        behind = beside if zb else 0.0
        # ZeRO-2 (pp = 1): each earlier micro-batch's reduce-scatter runs behind the next one's
        # compute (only its backward under GPipe, whose forwards all come first) on the serial DP
        # stream; what outruns the compute is a backlog at the end.
        window = st.total_s
        if gpipe:
            window -= st.forward_compute_s + (st.tp_s + st.cp_s + st.ep_s) / 3
        exposed += earlier * max(0.0, scatter - window)
        behind += earlier * min(scatter, window)
        total = final + earlier * scatter
        if gather is not None:  # after the optimizer step: nothing of this step hides it
            # the forward ops the gathers run beside, their TP/CP/EP communication included
            forward = st.forward_compute_s + st.tp_s + st.cp_s + st.ep_s - st.backward_comm_s
            gather_exposed = gather_exposed_s(gather, layers, forward, i, share)
            gather_total = gather_total_s(gather, sum(layers))
            exposed += gather_exposed
            total += gather_total
            if gather.overlapped:  # the part the wait for the first activation hides is idle
                slack_f = i * forward / len(layers)
                behind += max(0.0, gather_total - gather_exposed - slack_f)
        if i == 0 or exposed > best[0]:  # the first stage with the most exposed, as max() picks
            best = (exposed, total, total - exposed, behind)
        i = run
    exposed, total, hidden, behind = best
    return exposed, total, hidden, behind if zb else behind + chain
