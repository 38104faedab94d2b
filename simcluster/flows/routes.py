"""Memoised GPU-to-GPU routes for Tier B and C, equal to :func:`simcluster.topology.route`.

:func:`~simcluster.topology.route` runs a networkx shortest path for every GPU-to-NIC leg, about
50 us a route: too slow for the 131 072 ring hops of a 16 384-GPU all-reduce. :class:`Router`
computes the same routes (pinned by ``tests/unit/test_flows_routes.py``) from cached pieces: the
GPU-NIC legs are computed once per local GPU index and translated to other nodes (network.md 7.2
item 5, precomputed paths), and the fabric part follows the leaf/spine rule of
:mod:`simcluster.topology.routing` with its :func:`~simcluster.topology.routing.ecmp_index`.

With ``spray=True`` a flow between two leaves is spread evenly over every equal-cost spine
(packet spraying or adaptive routing) instead of hashed onto one: each spine path carries ``1/s``
of the flow. That removes ECMP hash collisions, so the leaf uplink capacity, where
oversubscription sits, is shared exactly.
"""

from __future__ import annotations

import networkx as nx

from simcluster.flows.plan import Usage
from simcluster.topology import Edge, Vertex, route
from simcluster.topology.routing import ecmp_index

Path = tuple[Edge, ...]


class Router:
    """Routes of one link graph, memoised (not thread-safe; one per simulation).

    Parameters
    ----------
    graph : networkx.DiGraph
        From :func:`simcluster.topology.build_graph`.
    spray : bool
        Spread inter-leaf flows over all spines (default) instead of ECMP hashing.
    """

    def __init__(self, graph: nx.DiGraph, spray: bool = True) -> None:
        self.graph = graph
        self.spray = spray
        self._usage: dict[tuple[Vertex, Vertex], Usage] = {}
        self._legs: dict[tuple[Vertex, Vertex], Path] = {}
        self._templates: dict[tuple[object, ...], tuple[int, Path]] = {}
        self._leaf: dict[Vertex, Vertex] = {}
        self._spines: dict[tuple[Vertex, Vertex], tuple[Vertex, ...]] = {}

    def usage(self, src: Vertex, dst: Vertex) -> Usage:
        """Edges from ``src`` to ``dst`` with crossings per flow (``1/s`` per spine path)."""
        key = (src, dst)
        found = self._usage.get(key)
        if found is None:
            found = _usage_of(self.paths(src, dst))
            self._usage[key] = found
        return found

    def paths(self, src: Vertex, dst: Vertex) -> tuple[Path, ...]:
        """The route, or with ``spray`` the equal-cost alternatives across the spines."""
        nodes = self.graph.nodes
        if src == dst:
            return ((),)
        if nodes[src]["kind"] != "gpu" or nodes[dst]["kind"] != "gpu":
            return (tuple(route(self.graph, src, dst)),)
        direct = _scale_up(self.graph, src, dst)
        if direct is not None:
            return (direct,)
        snic, dnic = nodes[src]["nic"], nodes[dst]["nic"]
        if nodes[src]["node"] == nodes[dst]["node"] or snic is None or dnic is None:
            return (tuple(route(self.graph, src, dst)),)
        fabric = self._fabric(snic, dnic, (src, dst))
        if fabric is None:
            return (tuple(route(self.graph, src, dst)),)
        head, tail = self._leg(src, snic), self._leg(dnic, dst)
        return tuple(head + middle + tail for middle in fabric)

    def _fabric(self, snic: Vertex, dnic: Vertex,
                flow: tuple[Vertex, Vertex]) -> tuple[Path, ...] | None:
        """NIC -> leaf [-> spine -> leaf] -> NIC, as ``routing._fabric_route``; None: no spine."""
        sleaf, dleaf = self._leaf_of(snic), self._leaf_of(dnic)
        if sleaf == dleaf:
            return (((snic, sleaf), (sleaf, dnic)),)
        spines = self._spines_between(sleaf, dleaf)
        if not spines:
            return None
        chosen = spines if self.spray else (spines[ecmp_index(*flow, len(spines))],)
        return tuple(((snic, sleaf), (sleaf, s), (s, dleaf), (dleaf, dnic)) for s in chosen)

    def _leaf_of(self, nic: Vertex) -> Vertex:
        leaf = self._leaf.get(nic)
        if leaf is None:
            leaf = next(v for v in self.graph.successors(nic) if self.graph.edges[nic, v]["link"] == "nic")
            self._leaf[nic] = leaf
        return leaf

    def _spines_between(self, sleaf: Vertex, dleaf: Vertex) -> tuple[Vertex, ...]:
        key = (sleaf, dleaf)
        if key not in self._spines:
            g = self.graph
            self._spines[key] = tuple(sorted(v for v in g.successors(sleaf)
                                             if g.nodes[v]["kind"] == "spine" and g.has_edge(v, dleaf)))
        return self._spines[key]

    def _leg(self, a: Vertex, b: Vertex) -> Path:
        """Route between a GPU and a NIC of the same node, translated from a cached template."""
        key = (a, b)
        leg = self._legs.get(key)
        if leg is None:
            leg = self._translated(a, b)
            self._legs[key] = leg
        return leg

    def _translated(self, a: Vertex, b: Vertex) -> Path:
        node = int(self.graph.nodes[a]["node"])
        shape = (a[0], a[2:], b[0], b[2:])
        found = self._templates.get(shape)
        if found is not None:
            leg = _move(self.graph, found[1], found[0], node)
            if leg is not None:
                return leg
        leg = tuple(route(self.graph, a, b))
        self._templates[shape] = (node, leg)
        return leg


def _scale_up(graph: nx.DiGraph, src: Vertex, dst: Vertex) -> Path | None:
    """Direct bridge edge or GPU -> NVSwitch -> GPU, as ``routing._scale_up_route``."""
    if graph.has_edge(src, dst):
        return ((src, dst),)
    switch = graph.nodes[src]["nvswitch"]
    if switch is not None and switch == graph.nodes[dst]["nvswitch"]:
        return ((src, switch), (switch, dst))
    return None


def _move(graph: nx.DiGraph, leg: Path, old: int, new: int) -> Path | None:
    """``leg`` of node ``old`` with that node's vertices renamed to node ``new``; None if absent.

    Per-node vertices are ``(kind, node, ...)`` with attribute ``node`` (topology/node.py).
    """
    nodes = graph.nodes

    def move(v: Vertex) -> Vertex:
        return (v[0], new, *v[2:]) if nodes[v]["node"] == old else v

    moved = tuple((move(u), move(v)) for u, v in leg)
    return moved if all(graph.has_edge(u, v) for u, v in moved) else None


def _usage_of(paths: tuple[Path, ...]) -> Usage:
    """Crossings per flow when the flow is split evenly over ``paths``."""
    share = 1.0 / len(paths)
    total: dict[Edge, float] = {}
    for path in paths:
        for edge in path:
            total[edge] = total.get(edge, 0.0) + share
    return tuple(sorted(total.items()))
