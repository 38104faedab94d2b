"""Deterministic routes on the link graph, and the bandwidth and latency of a route.

GPU-to-GPU routes follow what NCCL does on such hardware (NVIDIA/nccl @5067397
``src/graph/paths.cc``; rail-optimised fabrics as in NVIDIA's blog "Doubling all2all Performance
with NVIDIA Collective Communication Library 2.12", 2022, Fig. 1):

1. the scale-up fabric when both GPUs are on it (GPU -> NVSwitch -> GPU, or a direct NVLink bridge);
2. otherwise, inside a node, the PCIe tree (GPU -> PCIe switch [-> CPU [-> CPU] -> PCIe switch]
   -> GPU);
3. otherwise GPU -> its own rail-aligned NIC over PCIe -> leaf [-> spine -> leaf] -> NIC -> GPU.

GPUs never forward traffic for others (no PXN). Among the equal-cost spines between two leaves the
route picks one by a CRC-32 of ``(src, dst)``, as ECMP hashes a flow onto one path: deterministic
across processes (unlike Python's salted ``hash``) and spread evenly over the spines. Routes between
other vertices are minimum-hop paths that do not transit GPUs.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Sequence

import networkx as nx

from simcluster.errors import SpecError
from simcluster.topology.node import Vertex

Edge = tuple[Vertex, Vertex]
"""A directed edge ``(u, v)`` of the link graph."""


def route(graph: nx.DiGraph, src: Vertex, dst: Vertex) -> list[Edge]:
    """The route from ``src`` to ``dst`` as a list of directed edges (empty when ``src == dst``).

    Parameters
    ----------
    graph : networkx.DiGraph
        A graph from :func:`~simcluster.topology.graph.build_graph`.
    src, dst : Vertex
        End points, usually GPUs (``("gpu", node, local)``).

    Returns
    -------
    list of (Vertex, Vertex)
        Consecutive edges: the first starts at ``src``, the last ends at ``dst``.

    Raises
    ------
    SpecError
        ``route`` when an end point is not in the graph or no route exists.
    """
    for end in (src, dst):
        if end not in graph:
            raise SpecError("route", f"{end} is not a vertex of this cluster")
    if src == dst:
        return []
    if _kind(graph, src) == "gpu" and _kind(graph, dst) == "gpu":
        return _gpu_route(graph, src, dst)
    return _hop_route(graph, src, dst)


def path_bandwidth_Bps(graph: nx.DiGraph, path: Sequence[Edge]) -> float:
    """Bottleneck bandwidth of ``path``: the least ``bandwidth_Bps`` of its edges (inf if empty)."""
    return min((float(graph.edges[e]["bandwidth_Bps"]) for e in path), default=math.inf)


def path_latency_s(graph: nx.DiGraph, path: Sequence[Edge]) -> float:
    """One-way latency of ``path``: the sum of ``latency_s`` over its edges, seconds."""
    return sum(float(graph.edges[e]["latency_s"]) for e in path)


def ecmp_index(src: Vertex, dst: Vertex, choices: int) -> int:
    """ECMP pick among ``choices`` equal-cost paths: ``crc32(repr((src, dst))) % choices``."""
    return zlib.crc32(repr((src, dst)).encode()) % choices


def _kind(graph: nx.DiGraph, vertex: Vertex) -> str:
    return str(graph.nodes[vertex]["kind"])


def _gpu_route(graph: nx.DiGraph, src: Vertex, dst: Vertex) -> list[Edge]:
    scale_up = _scale_up_route(graph, src, dst)
    if scale_up is not None:
        return scale_up
    if graph.nodes[src]["node"] == graph.nodes[dst]["node"]:
        return _hop_route(graph, src, dst)
    src_nic, dst_nic = graph.nodes[src]["nic"], graph.nodes[dst]["nic"]
    if src_nic is None or dst_nic is None:
        raise SpecError("route", f"no route from {src} to {dst}: the nodes have no NICs")
    return [*_hop_route(graph, src, src_nic), *_fabric_route(graph, src_nic, dst_nic, (src, dst)),
            *_hop_route(graph, dst_nic, dst)]


def _scale_up_route(graph: nx.DiGraph, src: Vertex, dst: Vertex) -> list[Edge] | None:
    """GPU -> NVSwitch -> GPU on a shared switch, or the direct bridge edge; None otherwise."""
    if graph.has_edge(src, dst):
        return [(src, dst)]
    switch = graph.nodes[src]["nvswitch"]
    if switch is not None and switch == graph.nodes[dst]["nvswitch"]:
        return [(src, switch), (switch, dst)]
    return None


def _fabric_route(graph: nx.DiGraph, src_nic: Vertex, dst_nic: Vertex,
                  flow: tuple[Vertex, Vertex]) -> list[Edge]:
    """NIC -> leaf [-> spine -> leaf] -> NIC, the spine chosen by :func:`ecmp_index` of ``flow``."""
    src_leaf, dst_leaf = _leaf(graph, src_nic), _leaf(graph, dst_nic)
    if src_leaf == dst_leaf:
        return [(src_nic, src_leaf), (src_leaf, dst_nic)]
    spines = sorted(v for v in graph.successors(src_leaf)
                    if _kind(graph, v) == "spine" and graph.has_edge(v, dst_leaf))
    if not spines:
        return _hop_route(graph, src_nic, dst_nic)
    spine = spines[ecmp_index(*flow, len(spines))]
    return [(src_nic, src_leaf), (src_leaf, spine), (spine, dst_leaf), (dst_leaf, dst_nic)]


def _leaf(graph: nx.DiGraph, nic: Vertex) -> Vertex:
    return next(v for v in graph.successors(nic) if graph.edges[nic, v]["link"] == "nic")


def _hop_route(graph: nx.DiGraph, src: Vertex, dst: Vertex) -> list[Edge]:
    """Minimum-hop path that does not pass through any GPU other than the end points."""
    def allowed(v: Vertex) -> bool:
        return v in (src, dst) or graph.nodes[v]["kind"] != "gpu"

    view = nx.subgraph_view(graph, filter_node=allowed)
    try:
        vertices = nx.shortest_path(view, src, dst)
    except nx.NetworkXNoPath:
        raise SpecError("route", f"no route from {src} to {dst}") from None
    return list(itertools.pairwise(vertices))
