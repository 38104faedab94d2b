"""Headline numbers of a cluster topology: per-GPU bandwidths, injection and bisection bandwidth.

Bisection bandwidth is computed on the link graph as a minimum cut (max-flow/min-cut theorem, Ford
and Fulkerson 1956), not from a closed form, so it reflects what :mod:`.graph` actually builds:
host PCIe limits, leaf placement and oversubscription included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
from networkx.algorithms.flow import boykov_kolmogorov

from simcluster.spec.hardware import TopologySpec
from simcluster.topology.graph import build_graph
from simcluster.topology.node import Vertex

SWITCH_KINDS = ("nvswitch", "leaf", "spine", "switch")
"""Vertex kinds counted as switches (PCIe switches and CPU root complexes are host parts)."""

_SOURCE: Vertex = ("source",)
_SINK: Vertex = ("sink",)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySummary:
    """Size and bandwidth figures of ``nodes`` nodes of a topology (all bandwidths per direction).

    Attributes
    ----------
    gpus, nodes : int
        GPUs in the cluster and nodes.
    scale_up_Bps_per_gpu : float
        A GPU's scale-up bandwidth, bytes/s: ``scale_up.bandwidth_Bps`` (times ``bridge_gpus - 1``
        for NVLink bridges, one bridge per pair).
    scale_out_Bps_per_gpu : float
        NIC bandwidth per GPU, ``nics_per_node * nic_Bps / gpus_per_node``, bytes/s.
    injection_Bps : float
        Total NIC bandwidth into the scale-out fabric, ``nodes * nics_per_node * nic_Bps``, bytes/s.
    bisection_Bps : float
        Minimum cut between the first and second half of the GPUs in rank order, bytes/s
        (:func:`bisection_Bps`).
    switches : int
        Switch vertices (NVSwitch, leaf, spine, single switch); an aggregated spine counts once.
    links : int
        Physical (full-duplex) links, i.e. half the directed edges.
    """

    gpus: int
    nodes: int
    scale_up_Bps_per_gpu: float
    scale_out_Bps_per_gpu: float
    injection_Bps: float
    bisection_Bps: float
    switches: int
    links: int


def summarize(topo: TopologySpec, nodes: int) -> TopologySummary:
    """Build the graph of ``nodes`` nodes of ``topo`` and summarize it.

    Raises
    ------
    SpecError
        ``cluster.nodes`` as :func:`~simcluster.topology.graph.build_graph` does.
    """
    graph = build_graph(topo, nodes)
    out = topo.scale_out
    return TopologySummary(
        gpus=nodes * topo.gpus_per_node,
        nodes=nodes,
        scale_up_Bps_per_gpu=scale_up_Bps_per_gpu(topo),
        scale_out_Bps_per_gpu=out.nics_per_node * out.nic_Bps / topo.gpus_per_node,
        injection_Bps=nodes * out.nics_per_node * out.nic_Bps,
        bisection_Bps=bisection_Bps(graph),
        switches=sum(1 for _, kind in graph.nodes(data="kind") if kind in SWITCH_KINDS),
        links=graph.number_of_edges() // 2,
    )


def scale_up_Bps_per_gpu(topo: TopologySpec) -> float:
    """Per-direction scale-up bandwidth of one GPU, bytes/s (see :class:`TopologySummary`)."""
    up = topo.scale_up
    if up.kind == "nvlink-bridge":
        return up.bandwidth_Bps * (up.bridge_gpus - 1)
    return up.bandwidth_Bps


def bisection_Bps(graph: nx.DiGraph) -> float:
    """Minimum cut, one direction, from the first half of the GPUs (rank order) to the second half.

    Why this split: ranks are node-major and every fabric here places nodes contiguously (nodes
    fill leaves in order, each rail's leaves take contiguous node ranges, NVLink domains are
    contiguous nodes). The rank halves are therefore the two halves of the leaf/spine tree: the
    balanced split with the fewest node pairs under a shared (non-blocking) leaf, so the one that
    puts the most traffic on the oversubscribed uplinks. Any other balanced split of whole nodes
    keeps at least as many pairs inside leaves and cannot cut less. On one node the halves are the
    two halves of its GPUs (scale-up and PCIe links are cut).

    With an even number of nodes, NICs fed at full rate by PCIe (``nic_Bps <= pcie_Bps`` and
    ``nics_per_node <= gpus_per_node``) and no NVLink domain spanning both halves, the cut is:

    * ``injection / 2`` for a non-blocking tree (``oversubscription == 1``) or a single switch;
    * exactly ``injection / (2 * oversubscription)`` when no leaf holds NICs of both halves:
      fat-tree with ``nics_per_node > radix/2`` or ``nodes/2`` a multiple of
      ``floor(radix/2 / nics_per_node)`` (nodes per leaf); rail-optimized with ``nodes/2`` a
      multiple of ``radix/2``;
    * in between otherwise (a shared leaf carries part of the traffic without crossing an uplink).

    These are checked against this max-flow in ``tests/property/test_topology_props.py``.

    Parameters
    ----------
    graph : networkx.DiGraph
        A graph from :func:`~simcluster.topology.graph.build_graph`.

    Returns
    -------
    float
        The cut capacity, bytes/s; 0.0 with fewer than two GPUs.
    """
    gpus = sorted((rank, v) for v, rank in graph.nodes(data="rank") if rank is not None)
    half = len(gpus) // 2
    if half == 0:
        return 0.0
    return min_cut_Bps(graph, [v for _, v in gpus[:half]], [v for _, v in gpus[half:]])


def min_cut_Bps(graph: nx.DiGraph, sources: Sequence[Vertex], sinks: Sequence[Vertex]) -> float:
    """Capacity of the minimum cut separating ``sources`` from ``sinks`` (``bandwidth_Bps`` edges).

    Solved as one max-flow from a super source feeding every source to a super sink fed by every
    sink (Boykov-Kolmogorov, which is fast on these shallow, wide graphs). The input is not changed.
    """
    flow = nx.DiGraph()
    flow.add_edges_from((u, v, {"capacity": bw}) for u, v, bw in graph.edges(data="bandwidth_Bps"))
    flow.add_edges_from((_SOURCE, s) for s in sources)  # no capacity attribute: infinite
    flow.add_edges_from((t, _SINK) for t in sinks)
    return float(nx.maximum_flow_value(flow, _SOURCE, _SINK, flow_func=boykov_kolmogorov))
