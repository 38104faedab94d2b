"""Assemble the link graph of a cluster: nodes (:mod:`.node`) and scale-out (:mod:`.fabric`).

See :mod:`.node` for the vertex naming and edge attributes.
"""

from __future__ import annotations

import networkx as nx

from simcluster.errors import SpecError
from simcluster.spec.hardware import TopologySpec
from simcluster.topology.fabric import add_scale_out
from simcluster.topology.node import add_host, add_scale_up, nodes_per_domain


def check_nodes(topo: TopologySpec, nodes: int) -> None:
    """Raise ``SpecError("cluster.nodes", ...)`` unless ``nodes`` nodes of ``topo`` can be joined.

    Without NICs (``nics_per_node == 0``) only the nodes of one scale-up domain are joined.
    """
    if nodes < 1:
        raise SpecError("cluster.nodes", f"must be >= 1, got {nodes}")
    joined = nodes_per_domain(topo)
    if topo.scale_out.nics_per_node == 0 and nodes > joined:
        raise SpecError("cluster.nodes",
                        f"topology {topo.name} has no NICs (scale_out.nics_per_node: 0), so "
                        f"at most {joined} node(s) can be joined; got {nodes}")


def build_graph(topo: TopologySpec, nodes: int) -> nx.DiGraph:
    """The directed link graph of ``nodes`` nodes of ``topo``.

    Parameters
    ----------
    topo : TopologySpec
        Node design and scale-out fabric.
    nodes : int
        Number of nodes, >= 1.

    Returns
    -------
    networkx.DiGraph
        Vertices as described in the module docstring; graph attributes ``topology`` (the spec)
        and ``nodes``. Edges carry ``bandwidth_Bps``, ``latency_s`` and ``link``.

    Raises
    ------
    SpecError
        ``cluster.nodes`` when ``nodes < 1`` or the nodes cannot be joined (no NICs).
    """
    check_nodes(topo, nodes)
    graph = nx.DiGraph(topology=topo, nodes=nodes)
    for node in range(nodes):
        add_host(graph, topo, node)
        add_scale_up(graph, topo, node)
    add_scale_out(graph, topo, nodes)
    return graph
