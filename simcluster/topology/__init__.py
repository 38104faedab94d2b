"""Cluster topology as a networkx link graph: builders, routing, rings and trees, metrics, DOT.

* :mod:`.node` and :mod:`.fabric` build the node model and the scale-out fabric;
  :func:`build_graph` assembles them (vertex naming and edge attributes in :mod:`.node`).
* :mod:`.routing`: deterministic GPU-to-GPU routes (scale-up, PCIe, NIC and fabric, ECMP by hash).
* :mod:`.collective_groups`: NCCL-style ring order and double binary tree over ranks.
* :mod:`.metrics`: :class:`TopologySummary` with bisection bandwidth as a max-flow min cut.
* :mod:`.render`: Graphviz DOT text.

networkx is used at build time only; the simulation works on precomputed routes.
"""

from simcluster.topology.collective_groups import double_binary_tree, gpu_vertex, ring_order
from simcluster.topology.fabric import leaf_of
from simcluster.topology.graph import build_graph, check_nodes
from simcluster.topology.metrics import TopologySummary, bisection_Bps, min_cut_Bps, summarize
from simcluster.topology.node import LINK_KINDS, Vertex, nic_of
from simcluster.topology.render import to_dot
from simcluster.topology.routing import Edge, path_bandwidth_Bps, path_latency_s, route

__all__ = [
    "LINK_KINDS",
    "Edge",
    "TopologySummary",
    "Vertex",
    "bisection_Bps",
    "build_graph",
    "check_nodes",
    "double_binary_tree",
    "gpu_vertex",
    "leaf_of",
    "min_cut_Bps",
    "nic_of",
    "path_bandwidth_Bps",
    "path_latency_s",
    "ring_order",
    "route",
    "summarize",
    "to_dot",
]
