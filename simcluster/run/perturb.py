"""Perturbations the closed-form engine can express: uniform link degradation and slow GPUs.

A ``perturbations.link_bandwidth`` entry on every node (``node: null``) changes the fabric itself,
so it becomes a topology with scaled bandwidth; an entry on one node breaks symmetry and is priced
by Tier B contention (:func:`degraded_nodes`). Slow GPUs are handled per pipeline stage by
:func:`stage_slowdowns`.
"""

from __future__ import annotations

from simcluster.sim.durations import degraded
from simcluster.sim.perturb import perturbations_of, uniform_link_factors
from simcluster.spec.scenario import Scenario


def with_uniform_links(s: Scenario) -> Scenario:
    """``s`` with every ``node: null`` link degradation folded into the topology's bandwidths."""
    return degraded(s, *uniform_link_factors(perturbations_of(s)))


def degraded_nodes(s: Scenario) -> dict[int, float]:
    """Node -> NIC bandwidth factor for scale-out degradations of single nodes."""
    out: dict[int, float] = {}
    for link in s.perturbations.link_bandwidth:
        if link.node is not None and link.layer == "scale_out":
            out[link.node] = out.get(link.node, 1.0) * link.factor
    return out


def needs_contention(s: Scenario, degraded: bool) -> bool:
    """Whether Tier B can differ from Tier A: an oversubscribed fabric, or ``degraded`` nodes.

    On a non-blocking fabric with adaptive routing, concurrent DP rings and PP sends of a
    Megatron layout use disjoint NIC shares and full-bisection spines, so the factors are exactly 1
    and the (slow, at 16k GPUs) flow solve is skipped.
    """
    return s.cluster.nodes > 1 and (s.cluster.topology.scale_out.oversubscription > 1.0 or degraded)
