"""Tier B and Tier C of the collective model: flow-level contention and per-chunk validation.

docs/collectives.md (Tier B, Tier C). Tier A (calibrated closed forms, :mod:`simcluster.perf`) prices a
collective alone; this package puts collectives on the link graph of
:func:`simcluster.topology.build_graph`:

* :mod:`.maxmin`: max-min fair rates by progressive filling over a link x class incidence (numpy);
* :mod:`.plan`: flow classes (identical flows with a multiplicity), phases and transfers;
* :mod:`.routes`: memoised routes equal to :func:`simcluster.topology.route`, or sprayed over
  spines;
* :mod:`.capacity`: link capacity = line rate x the Tier A efficiency of the link's class;
  degraded links;
* :mod:`.decompose`: ring, tree, hierarchical, pairwise and p2p collectives as flow classes;
* :mod:`.engine`: the flow-level simulation (closed-form advance, re-solve on change);
* :mod:`.tier_b`: :class:`FlowModel`, Tier B collective times with Tier A's latency terms;
* :mod:`.contention`: :func:`contention`, per-category slowdowns of a scenario's step;
* :mod:`.chunks`: Tier C, a per-chunk SimPy simulation of ring collectives (validation only).
"""

from simcluster.flows.capacity import degrade, efficiencies, link_capacities, nic_edges
from simcluster.flows.chunks import ChunkRing, collective_rings, simulate_collectives, simulate_rings
from simcluster.flows.contention import contention, dp_groups, pp_pairs
from simcluster.flows.decompose import FLOW_ALGOS, Context, decompose, ring_channels
from simcluster.flows.engine import FlowResult, simulate
from simcluster.flows.maxmin import max_min_rates
from simcluster.flows.plan import FlowClass, Phase, Transfer
from simcluster.flows.routes import Router
from simcluster.flows.tier_b import FlowModel

__all__ = [
    "FLOW_ALGOS",
    "ChunkRing",
    "Context",
    "FlowClass",
    "FlowModel",
    "FlowResult",
    "Phase",
    "Router",
    "Transfer",
    "collective_rings",
    "contention",
    "decompose",
    "degrade",
    "dp_groups",
    "efficiencies",
    "link_capacities",
    "max_min_rates",
    "nic_edges",
    "pp_pairs",
    "ring_channels",
    "simulate",
    "simulate_collectives",
    "simulate_rings",
]
