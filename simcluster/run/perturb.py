"""Perturbations the closed-form engine can express: uniform link degradation and slow GPUs.

A ``perturbations.link_bandwidth`` entry on every node (``node: null``) changes the fabric itself,
so it becomes a topology with scaled bandwidth; an entry on one node breaks symmetry and is priced
by Tier B contention (:func:`degraded_nodes`). Slow GPUs slow their stage's compute in
:func:`simcluster.perf.step.estimate_step`. What the closed forms cannot express is rejected by
:func:`check_analytical`.
"""

from __future__ import annotations

from simcluster.errors import SpecError
from simcluster.sim.durations import degraded
from simcluster.sim.perturb import perturbations_of, uniform_link_factors
from simcluster.spec.scenario import Scenario


def with_uniform_links(s: Scenario) -> Scenario:
    """``s`` with every ``node: null`` link degradation folded into the topology's bandwidths."""
    return degraded(s, *uniform_link_factors(perturbations_of(s)))


def check_analytical(s: Scenario, contention: str) -> None:
    """Raise a SpecError for a link degradation the analytical engine cannot honour.

    One node's scale-up degradation slows only the TP groups on that node, which the closed forms
    (one replica, no per-node links) do not model; one node's NIC degradation is priced by Tier B
    alone, which ``contention="off"`` turns off. The DES models both.
    """
    for i, link in enumerate(s.perturbations.link_bandwidth):
        key = f"perturbations.link_bandwidth[{i}]"
        if link.node is not None and link.layer == "scale_up":
            raise SpecError(f"{key}.node", "one node's scale_up degradation is not modelled by "
                            "the analytical engine (--fast): use the DES, or node: null")
        if link.node is not None and contention == "off":
            raise SpecError(f"{key}.node", "one node's scale_out degradation needs Tier B "
                            "contention in the analytical engine (--fast): use --contention "
                            "auto or on, or the DES")


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
