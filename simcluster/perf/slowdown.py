"""Slow GPUs (``perturbations.gpu_slowdown``) as per-stage compute speeds of DP replicas.

Megatron's rank order places GPU ``node * gpus_per_node + local`` at TP/CP fastest, then DP, then
PP, so each slow GPU belongs to one (DP replica, pipeline stage) TP group. A TP group runs at its
slowest member's pace (every layer ends in a collective over the group), so the group's compute
runs at the smallest speed of its members. The iteration engine (``simcluster.sim.perturb``) and
the closed forms (:mod:`simcluster.perf.step`) both use :func:`placements` and
:func:`replica_stage_speeds`.
"""

from __future__ import annotations

from collections.abc import Iterator

from simcluster.spec.scenario import ParallelismSpec, Scenario


def placements(par: ParallelismSpec, gpus_per_node: int, node: int, gpu: int | None
               ) -> Iterator[tuple[int, int]]:
    """(DP replica, pipeline stage) of GPU ``gpu`` of ``node`` (every GPU of it when None)."""
    locals_ = range(gpus_per_node) if gpu is None else (gpu,)
    group = par.tp * par.cp
    for local in locals_:
        rank = node * gpus_per_node + local
        yield (rank // group) % par.dp, rank // (group * par.dp)


def replica_stage_speeds(s: Scenario) -> dict[int, tuple[float, ...]]:
    """Perturbed DP replica -> compute speed of each of its pipeline stages (1.0 = nominal).

    Replicas with no slow GPU are left out (empty without ``perturbations.gpu_slowdown``).
    """
    par, gpn = s.parallelism, s.cluster.topology.gpus_per_node
    speeds: dict[int, list[float]] = {}
    for slow in s.perturbations.gpu_slowdown:
        for replica, stage in placements(par, gpn, slow.node, slow.gpu):
            row = speeds.setdefault(replica, [1.0] * par.pp)
            row[stage] = min(row[stage], slow.factor)
    return {replica: tuple(row) for replica, row in sorted(speeds.items())}
