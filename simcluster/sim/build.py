"""Build the step plan of a scenario: schedule order x durations x replica classes.

Virtual stage ``vs = chunk * p + stage`` (Megatron's interleaved placement). A forward of
``vs > 0`` waits for the activations of ``vs - 1``; a backward of ``vs < V - 1`` waits for the
gradients of ``vs + 1``; each sends to its neighbour when it ends. The op that finishes a chunk's
gradients (its last ``B``, or ``W`` under ZB-H1) releases the chunk's DP buckets progressively
when ``execution.overlap_grad_reduce`` is on; otherwise every bucket is released when the stage's
last op ends (Megatron-LM of 2021: all-reduce after the backward pass). Under ZeRO-2 every earlier
gradient op also releases its micro-batch's reduce-scatter.
"""

from __future__ import annotations

from simcluster.perf import comm_plan
from simcluster.perf.kernels.comm_sms import overlap_share
from simcluster.perf.memory import stage_chunks
from simcluster.perf.stage_work import scenario_layer_times
from simcluster.sim.durations import Parts, StageDurations, degraded, stage_durations
from simcluster.sim.perturb import Perturbations, ReplicaClass, replica_classes, uniform_link_factors
from simcluster.sim.plan import GroupPlan, MsgKey, Op, Send, StagePlan, StepPlan, Zero3Pass
from simcluster.sim.schedules import SchedOp, stage_order
from simcluster.spec.scenario import Scenario

_GRAD_KINDS = ("B", "W")  # op kinds that complete a chunk's weight gradients

#: Builds an :class:`Op` (or :class:`Send`) from its fields in order, without the keyword
#: handling of ``Op(...)`` (one per op of every stage).
_new = tuple.__new__


def _scaled(parts: Parts, speed: float) -> Parts:
    return tuple((cat, sec / speed if cat == "compute" else sec) for cat, sec in parts)


def _kind_parts(d: StageDurations, sop: SchedOp) -> Parts:
    chunk = d.chunks[sop.chunk]
    return {"F": chunk.forward, "B": chunk.backward, "Bi": chunk.backward_input,
            "W": chunk.wgrad}[sop.kind]


def _links(sop: SchedOp, vs: int, n_virtual: int, p: int) -> tuple[MsgKey | None,
                                                                    tuple[MsgKey, int] | None]:
    """(message to wait for, (message to send, destination stage)) of one op."""
    if sop.kind == "F":
        recv = ("a", vs, sop.mb) if vs > 0 else None
        send = (("a", vs + 1, sop.mb), (vs + 1) % p) if vs < n_virtual - 1 else None
        return recv, send
    if sop.kind in ("B", "Bi"):
        recv = ("g", vs, sop.mb) if vs < n_virtual - 1 else None
        send = (("g", vs - 1, sop.mb), (vs - 1) % p) if vs > 0 else None
        return recv, send
    return None, None


#: (op index, bucket works, final) of every op of a stage that releases DP buckets.
Releases = list[tuple[int, tuple[float, ...], bool]]


def _releases(order: list[SchedOp],
              d: StageDurations) -> Releases:
    """(op index, bucket works, final) of every op that releases DP buckets, in op order.

    The op completing a chunk's gradients (its last ``B`` or ``W``) releases the step's
    reduction (``final``); under ZeRO-2 each earlier one releases its micro-batch's
    reduce-scatter.
    """
    grads: dict[int, list[int]] = {}
    for idx, sop in enumerate(order):
        if sop.kind in _GRAD_KINDS:
            grads.setdefault(sop.chunk, []).append(idx)
    out = [(idx, d.scatters[chunk], False) for chunk, ops in grads.items() for idx in ops[:-1]
           if d.scatters[chunk]]
    out += [(ops[-1], d.buckets[chunk], True) for chunk, ops in grads.items()]
    return sorted(out)


def _bucket_slots(releases: Releases, n_ops: int,
                  overlap: bool) -> dict[int, tuple[tuple[int, float], ...]]:
    """Op index -> (bucket index, ready fraction) for the ops that release DP buckets.

    With overlap the buckets become ready progressively during the op; without it the step's
    reduction waits for the stage's last op, ZeRO-2's earlier reduce-scatters for their op's end.
    """
    slots: dict[int, tuple[tuple[int, float], ...]] = {}
    bucket = 0
    for idx, works, final in releases:
        count = len(works)
        target = n_ops - 1 if final and not overlap else idx
        fractions = [(k + 1) / count if overlap else 1.0 for k in range(count)]
        slots[target] = slots.get(target, ()) + tuple(
            (bucket + k, f) for k, f in enumerate(fractions))
        bucket += count
    return slots


def _zero3_pass(s: Scenario, d: StageDurations, sop: SchedOp) -> Zero3Pass | None:
    """The ZeRO-3 collectives of ``sop`` (gather before F, B, Bi; scatter after B, W), pp = 1."""
    if d.zero3 is None:
        return None
    gather = d.zero3.gather_s if sop.kind != "W" else 0.0
    scatter = d.zero3.scatter_s if sop.kind in ("B", "W") else 0.0
    layers = stage_chunks(s.parallelism, s.model.layers)[0][sop.chunk]
    return Zero3Pass(layers, gather, scatter, s.execution.zero3_prefetch)


def _first_forward_gathers(s: Scenario, d: StageDurations, stage: int
                           ) -> tuple[Zero3Pass | None, ...]:
    """Per local chunk, the overlapped ZeRO-1/2 parameter gathers its first forward waits for,
    layer by layer (:mod:`simcluster.perf.param_gather`); empty unless they are overlapped."""
    if d.gather is None or not d.gather.overlapped:
        return ()
    chunks = stage_chunks(s.parallelism, s.model.layers)[stage]
    starts = [sum(chunks[:c]) for c in range(len(chunks))]
    return tuple(Zero3Pass(k, d.gather.layer_s, 0.0, True, first) if k else None
                 for k, first in zip(chunks, starts, strict=True))


def _param_gathers(s: Scenario, d: StageDurations, stage: int) -> tuple[float, tuple[float, int]]:
    """The stage's ZeRO-1/2 parameter gather as :class:`StagePlan` holds it: the synchronous
    gather's seconds (0: none), and the overlapped per-layer gathers (seconds each, count)."""
    if d.gather is None:
        return 0.0, (0.0, 0)
    if not d.gather.overlapped:
        return d.gather.total_s, (0.0, 0)
    return 0.0, (d.gather.layer_s, sum(stage_chunks(s.parallelism, s.model.layers)[stage]))


def _stage_ops(s: Scenario, cls: ReplicaClass, stage: int, order: list[SchedOp],
               durs: dict[int, tuple[StageDurations, ...]],
               variant: dict[tuple[int, int], int], releases: Releases) -> tuple[Op, ...]:
    par = s.parallelism
    p, v = par.pp, par.virtual_stages
    d = durs[variant[(id(cls), stage)]][stage]
    speed = cls.local(stage).speed
    slots = _bucket_slots(releases, len(order), s.execution.overlap_grad_reduce)
    table = {(k, c): _scaled(_kind_parts(d, SchedOp(k, c, 0)), speed)
             for k in ("F", "B", "Bi", "W") for c in range(v)}
    totals = {key: sum(sec for _, sec in parts) for key, parts in table.items()}
    messages = {dst: max(d.pp_message_s, durs[variant[(id(cls), dst)]][dst].pp_message_s)
                for dst in ((stage - 1) % p, (stage + 1) % p)}
    # Per (kind, chunk): what does not depend on the micro-batch, looked up once per op.
    shape: dict[tuple[str, int], tuple[tuple[str, int] | None, tuple[str, int, int, float] | None,
                                       Zero3Pass | None]] = {}
    for key in table:
        sop = SchedOp(key[0], key[1], 0)
        recv, send = _links(sop, key[1] * p + stage, p * v, p)
        shape[key] = ((recv[0], recv[1]) if recv is not None else None,
                      (send[0][0], send[0][1], send[1], messages[send[1]])
                      if send is not None else None,
                      _zero3_pass(s, d, sop))
    first = _first_forward_gathers(s, d, stage)
    ops = []
    for idx, (kind, chunk, mb) in enumerate(order):
        key = (kind, chunk)
        r, snd, z3 = shape[key]
        if kind == "F" and mb == 0 and first:
            z3 = first[chunk]
        ops.append(_new(Op, (f"{kind} c{chunk} mb{mb}", kind, totals[key], table[key],
                             (r[0], r[1], mb) if r is not None else None,
                             _new(Send, ((snd[0], snd[1], mb), snd[2], snd[3]))
                             if snd is not None else None,
                             z3, slots.get(idx, ()))))
    return tuple(ops)


def build_plan(s: Scenario, pert: Perturbations | None = None) -> StepPlan:
    """The step plan of ``s`` under ``pert`` (none: one nominal replica class)."""
    pert = pert or Perturbations()
    out_f, up_f = uniform_link_factors(pert)
    base = degraded(s, out_f, up_f)
    classes = replica_classes(base, pert)
    durs: dict[int, tuple[StageDurations, ...]] = {}
    keys: dict[tuple[float, float], int] = {}
    variant: dict[tuple[int, int], int] = {}
    for cls in classes:
        for stage in range(s.parallelism.pp):
            local = cls.local(stage)
            key = (local.scale_out, local.scale_up)
            if key not in keys:
                keys[key] = len(keys)
                durs[keys[key]] = stage_durations(degraded(base, *key))
            variant[(id(cls), stage)] = keys[key]
    par = s.parallelism
    orders = [stage_order(par.schedule, par.pp, par.micro_batches, i, par.virtual_stages)
              for i in range(par.pp)]
    # (class, stage) -> its DP bucket releases, shared by the op slots and the joint buckets
    releases = {(id(c), i): _releases(orders[i], durs[variant[(id(c), i)]][i])
                for c in classes for i in range(par.pp)}
    stages = tuple(StagePlan(cls.name, i, _stage_ops(base, cls, i, orders[i], durs, variant,
                                                     releases[(id(cls), i)]),
                             durs[variant[(id(cls), i)]][i].optimizer_s / cls.local(i).speed
                             + durs[variant[(id(cls), i)]][i].host_s,
                             *_param_gathers(base, durs[variant[(id(cls), i)]][i], i))
                   for cls in classes for i in range(s.parallelism.pp))
    return StepPlan(pp=s.parallelism.pp,
                    groups=tuple(GroupPlan(c.name, c.multiplicity) for c in classes),
                    stages=stages, dp_buckets=_dp_buckets(par.pp, classes, releases),
                    link_capacity={},
                    comm_sm_share=overlap_share(s, comm_plan.groups(s).dp, scenario_layer_times(s)))


def _dp_buckets(pp: int, classes: tuple[ReplicaClass, ...],
                released: dict[tuple[int, int], Releases]) -> tuple[tuple[float, ...], ...]:
    """Per stage, the joint DP collective of each bucket: the slowest class's time (a ring runs
    at its slowest edge), in the order the schedule releases them."""
    out = []
    for stage in range(pp):
        per_class = [released[(id(c), stage)] for c in classes]
        works: list[float] = []
        for releases in zip(*per_class, strict=True):
            works += [max(col) for col in zip(*(w for _, w, _ in releases), strict=True)]
        out.append(tuple(works))
    return tuple(out)


def uniform_plan(schedule: str, p: int, m: int, t_f: float, t_b: float, v: int = 1,
                 t_w: float = 0.0, message_s: float = 0.0) -> StepPlan:
    """A plan of ``p`` equal stages, no DP and no optimizer: the closed forms' setting.

    ``t_f``/``t_b``/``t_w`` are per micro-batch per stage (all chunks), as in
    :func:`simcluster.perf.pipeline.bubble_time_s`; each chunk gets ``1/v`` of them. ``t_b`` is the
    full backward; under zb-h1 it splits into ``t_b - t_w`` (Bi) and ``t_w`` (W).
    """
    per = {"F": t_f / v, "B": t_b / v, "Bi": (t_b - t_w) / v, "W": t_w / v}
    stages = []
    for stage in range(p):
        ops = []
        for sop in stage_order(schedule, p, m, stage, v):
            recv, send = _links(sop, sop.chunk * p + stage, p * v, p)
            out = Send(send[0], send[1], message_s) if send is not None else None
            ops.append(Op(name=f"{sop.kind} c{sop.chunk} mb{sop.mb}", kind=sop.kind,
                          duration_s=per[sop.kind], parts=(("compute", per[sop.kind]),),
                          recv=recv, send=out))
        stages.append(StagePlan("nominal", stage, tuple(ops), 0.0))
    return StepPlan(pp=p, groups=(GroupPlan("nominal", 1),), stages=tuple(stages),
                    dp_buckets=((),) * p, link_capacity={})
