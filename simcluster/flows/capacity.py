"""Link capacities for Tier B: line rate x the Tier A efficiency of the link's class.

Each directed edge of the link graph gets ``bandwidth_Bps x efficiency``, the efficiency being the
calibrated fraction of line rate of the edge's class in ``catalog/collectives.yaml`` for the chosen
NCCL protocol (docs/collectives.md, "Tier B": capacities are effective rates, not line rates). So an
uncontended ring in Tier B has Tier A's bandwidth term at large sizes. Classes by link kind:

* ``nvlink``: the scale-up class of the topology (NVSwitch or NVL domain at its line rate);
  ``nvlink-bridge``: the bridge class;
* ``nic`` and ``fabric`` (leaf-spine): the scale-out class of the NIC line rate;
* ``pcie`` and ``upi``: the PCIe class when GPUs talk over PCIe (``scale_up.kind`` ``pcie`` or
  ``nvlink-bridge``); otherwise 1, since they only carry GPUDirect traffic to a NIC whose class
  already holds the path's efficiency.

Degraded links (an 800G -> 400G port, a node's NICs at half rate) scale chosen edges. A sprayed
leaf uplink bundle (:data:`simcluster.flows.plan.SPINES`) gets its member count times its smallest
member's capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import networkx as nx

from simcluster.errors import SpecError
from simcluster.flows.plan import SPINES
from simcluster.perf.collectives_calibration import PROTOCOLS, match_class
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import Edge


def efficiencies(topo: TopologySpec, protocol: str = "Simple") -> dict[str, float]:
    """Fraction of line rate per link kind for ``protocol`` (LL, LL128 or Simple).

    Raises
    ------
    SpecError
        ``protocol`` when it is not one of :data:`PROTOCOLS`.
    """
    if protocol not in PROTOCOLS:
        raise SpecError("protocol", f"unknown {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    index = PROTOCOLS.index(protocol)
    up, out = topo.scale_up, topo.scale_out
    pcie = match_class("scale_up", "pcie", topo.host.pcie_Bps).protocols[index].efficiency
    eff = {"pcie": 1.0, "upi": 1.0}
    if up.kind in ("pcie", "nvlink-bridge"):
        eff = {"pcie": pcie, "upi": pcie}
    if up.kind in ("nvswitch", "nvl-domain", "nvlink-bridge"):
        kind = "nvlink-bridge" if up.kind == "nvlink-bridge" else "nvlink"
        eff[kind] = match_class("scale_up", up.kind, up.bandwidth_Bps).protocols[index].efficiency
    if out.nics_per_node > 0:
        nic = match_class("scale_out", "nic", out.nic_Bps).protocols[index].efficiency
        eff.update(nic=nic, fabric=nic)
    return eff


def link_capacities(graph: nx.DiGraph, edges: Iterable[Edge], protocol: str = "Simple",
                    degraded: Mapping[Edge, float] | None = None) -> dict[Edge, float]:
    """Effective capacity of each of ``edges``, bytes/s: line rate x class efficiency x degradation.

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`simcluster.topology.build_graph` (graph attribute ``topology``).
    edges : iterable of Edge
        The directed edges wanted (usually those a set of transfers uses).
    protocol : str
        NCCL protocol whose efficiencies apply.
    degraded : mapping of Edge to float, optional
        Capacity factors of degraded edges (see :func:`degrade`).
    """
    eff = efficiencies(graph.graph["topology"], protocol)
    factors = degraded or {}
    out = {}
    for edge in edges:
        members = bundle_members(graph, edge)
        if members is None:
            out[edge] = _effective(graph, edge, eff, factors)
        else:  # an even split over the members: the smallest binds (routes.py)
            out[edge] = len(members) * min(_effective(graph, e, eff, factors) for e in members)
    return out


def _effective(graph: nx.DiGraph, edge: Edge, eff: Mapping[str, float],
               factors: Mapping[Edge, float]) -> float:
    data = graph.succ[edge[0]][edge[1]]
    return float(data["bandwidth_Bps"]) * eff.get(data["link"], 1.0) * factors.get(edge, 1.0)


def bundle_members(graph: nx.DiGraph, edge: Edge) -> list[Edge] | None:
    """The leaf-spine edges a bundle edge ``(leaf, SPINES)`` or ``(SPINES, leaf)`` stands for.

    None for an ordinary edge of the graph.
    """
    u, v = edge
    if v == SPINES:
        return [(u, s) for s in graph.successors(u) if graph.nodes[s]["kind"] == "spine"]
    if u == SPINES:
        return [(s, v) for s in graph.predecessors(v) if graph.nodes[s]["kind"] == "spine"]
    return None


def degrade(edges: Iterable[Edge], factor: float,
            degraded: Mapping[Edge, float] | None = None) -> dict[Edge, float]:
    """Capacity factors with ``edges`` scaled by ``factor`` (on top of ``degraded``).

    Example: ``degrade(nic_edges(graph, 3), 0.5)`` runs node 3's NICs at half rate (400G -> 200G).

    Raises
    ------
    SpecError
        ``degrade.factor`` unless ``0 < factor``.
    """
    if not factor > 0:
        raise SpecError("degrade.factor", f"must be > 0, got {factor}")
    out = dict(degraded or {})
    for edge in edges:
        out[edge] = out.get(edge, 1.0) * factor
    return out


def nic_edges(graph: nx.DiGraph, node: int) -> list[Edge]:
    """Both directions of every NIC-to-switch link of ``node``."""
    nics = [v for v, data in graph.nodes(data=True) if data["kind"] == "nic" and data["node"] == node]
    return [e for nic in nics for leaf in graph.successors(nic)
            if graph.edges[nic, leaf]["link"] == "nic" for e in ((nic, leaf), (leaf, nic))]
