"""The scale-out part of the link graph: NIC-to-leaf links, leaf and spine switches.

Three fabrics (``scale_out.fabric``):

* ``single-switch``: every NIC on one switch ``("switch", 0)`` (radix and oversubscription unused:
  a chassis with enough ports).
* ``fat-tree``: leaves with ``switch_radix / 2`` downlink ports; contiguous nodes fill a leaf
  (``("leaf", j)``), or a node wider than a leaf spans several leaves.
* ``rail-optimized``: NIC ``i`` of every node goes to a rail-``i`` leaf ``("leaf", i, j)``; with
  more nodes than ports, rail ``i`` has several leaves of contiguous nodes (NCCL 2.12 PXN blog,
  Fig. 1).

With two or more leaves, every leaf is joined to every spine ``("spine", j)``. A full leaf of
``p = switch_radix / 2`` ports and oversubscription ``k`` has ``p / k`` uplinks at the NIC rate,
one per spine; so the graph has ``ceil(a / k)`` spines, ``a`` the most NICs on any leaf (``p``
once a leaf is full). Each leaf's uplink capacity is its attached NIC capacity divided by ``k``,
spread evenly over the spines (``bandwidth_Bps = attached * nic_Bps / k / spines`` per edge): a
full non-blocking leaf has exactly as much uplink as downlink, each uplink at ``nic_Bps``.

A two-level tree of radix-``r`` switches joins at most ``r`` leaves. Beyond that the spine layer is
*aggregated*: spine vertex ``j`` stands for plane ``j`` of a three-level Clos (all the spine and
core switches that uplink ``j`` of every leaf reaches), modelled as one non-blocking vertex. That
keeps the graph at ``leaves * spines`` fabric links (2048 DGX H100 nodes: 512 leaves, 16 384 links)
and keeps the leaf uplinks, where oversubscription sits, exact; it ignores congestion in a plane.
Such spine vertices carry ``aggregated=True``. Switch-to-switch hops add no latency: the NIC edges
carry half of ``scale_out.latency_s`` each, so any NIC-to-NIC path costs ``scale_out.latency_s``.
"""

from __future__ import annotations

import math

import networkx as nx

from simcluster.spec.hardware import TopologySpec
from simcluster.topology.node import Vertex, add_link


def leaf_ports(topo: TopologySpec) -> int:
    """Downlink (NIC-facing) ports of a leaf: half of ``switch_radix``, at least 1."""
    return max(1, topo.scale_out.switch_radix // 2)


def spine_count(topo: TopologySpec, most_attached: int) -> int:
    """Spines of a tree whose fullest leaf has ``most_attached`` NICs: ``ceil(most_attached / k)``.

    That is the number of uplinks such a leaf has at the NIC rate (``radix / 2 / k`` when full),
    ``k`` the oversubscription.
    """
    return max(1, math.ceil(most_attached / topo.scale_out.oversubscription))


def leaf_of(topo: TopologySpec, node: int, nic: int) -> Vertex:
    """The switch that NIC ``nic`` of node ``node`` plugs into.

    Parameters
    ----------
    topo : TopologySpec
        Gives the fabric, ``nics_per_node`` and ``switch_radix``.
    node, nic : int
        Node index and NIC index inside the node.

    Returns
    -------
    Vertex
        ``("switch", 0)``, ``("leaf", j)`` (fat-tree) or ``("leaf", rail, j)`` (rail-optimized).
    """
    out = topo.scale_out
    ports = leaf_ports(topo)
    if out.fabric == "single-switch":
        return ("switch", 0)
    if out.fabric == "rail-optimized":
        return ("leaf", nic, node // ports)
    if out.nics_per_node <= ports:
        return ("leaf", node // (ports // out.nics_per_node))
    leaves_per_node = math.ceil(out.nics_per_node / ports)
    return ("leaf", node * leaves_per_node + nic // ports)


def add_scale_out(graph: nx.DiGraph, topo: TopologySpec, nodes: int) -> None:
    """Add the NIC-leaf links and, with two or more leaves, the spines of ``nodes`` nodes.

    NIC-leaf links run at ``nic_Bps`` with half of ``scale_out.latency_s`` each.
    """
    out = topo.scale_out
    attached: dict[Vertex, int] = {}
    for node in range(nodes):
        for nic in range(out.nics_per_node):
            leaf = leaf_of(topo, node, nic)
            if leaf not in attached:
                _add_switch(graph, leaf)
            attached[leaf] = attached.get(leaf, 0) + 1
            add_link(graph, ("nic", node, nic), leaf, out.nic_Bps, out.latency_s / 2, "nic")
    if len(attached) > 1:
        _add_spines(graph, topo, attached)


def _add_switch(graph: nx.DiGraph, switch: Vertex) -> None:
    rail = switch[1] if len(switch) == 3 else None
    graph.add_node(switch, kind=switch[0], node=None, rail=rail)


def _add_spines(graph: nx.DiGraph, topo: TopologySpec, attached: dict[Vertex, int]) -> None:
    spines = spine_count(topo, max(attached.values()))
    aggregated = len(attached) > topo.scale_out.switch_radix
    per_nic_Bps = topo.scale_out.nic_Bps / topo.scale_out.oversubscription / spines
    for j in range(spines):
        graph.add_node(("spine", j), kind="spine", node=None, aggregated=aggregated)
    for leaf, count in attached.items():
        for j in range(spines):
            add_link(graph, leaf, ("spine", j), count * per_nic_Bps, 0.0, "fabric")
