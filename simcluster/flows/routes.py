"""Memoised GPU-to-GPU routes for Tier B and C, equal to :func:`simcluster.topology.route`.

:func:`~simcluster.topology.route` runs a networkx shortest path for every GPU-to-NIC leg, about
50 us a route: too slow for the 131 072 ring hops of a 16 384-GPU all-reduce. :class:`Router`
computes the same routes (pinned by ``tests/unit/test_flows_routes.py``) from cached pieces: the
GPU-NIC legs are computed once per local GPU index and translated to other nodes (precomputed
paths; docs/collectives.md, "Routes"), and the fabric part follows the leaf/spine rule of
:mod:`simcluster.topology.routing` with its :func:`~simcluster.topology.routing.ecmp_index`.

With ``spray=True`` a flow between two leaves is spread evenly over every equal-cost spine
(packet spraying or adaptive routing) instead of hashed onto one: each spine path carries ``1/s``
of the flow. That removes ECMP hash collisions, so the leaf uplink capacity, where
oversubscription sits, is shared exactly. When the spines between two leaves are all the spines
of both, :meth:`Router.usage` writes the ``s`` uplinks of a leaf as one bundle edge
``(leaf, SPINES)`` (and ``(SPINES, leaf)`` down), whose capacity is ``s`` times the smallest
member's (:func:`simcluster.flows.capacity.link_capacities`): with an even split the smallest
member binds first and the other members' rows are dominated, so the bundle is exact, and a
16 384-GPU ring has 2 fabric edges per leaf crossing instead of 64.
"""

from __future__ import annotations

import networkx as nx

from simcluster.errors import SpecError
from simcluster.flows.plan import SPINES, Usage
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
        self._info: dict[Vertex, tuple[object, object, Vertex | None, Vertex | None]] = {}

    def usage(self, src: Vertex, dst: Vertex) -> Usage:
        """Edges from ``src`` to ``dst`` with crossings per flow (``1/s`` per spine path)."""
        key = (src, dst)
        found = self._usage.get(key)
        if found is None:
            found = _usage_of(self._paths(src, dst, self.spray))
            self._usage[key] = found
        return found

    def fabric_usage(self, src: Vertex, dst: Vertex) -> Usage | None:
        """The part of the route between GPUs of different nodes that no node owns.

        That is the switch-to-switch edges (leaf -> spine -> leaf), with spray weights; empty for
        scale-up routes and routes inside one leaf. None when the route is not GPU -> NIC -> fabric
        (then use :meth:`usage`). Used to leave out the per-node edges of nodes that another node
        stands for (:func:`simcluster.flows.decompose.symmetric_skip`).
        """
        skind, snode, snic, sswitch = self._vertex(src)
        dkind, dnode, dnic, dswitch = self._vertex(dst)
        if skind != "gpu" or dkind != "gpu" or snode == dnode:
            return None
        if (sswitch is not None and sswitch == dswitch) or self.graph.has_edge(src, dst):
            return ()
        if snic is None or dnic is None:
            return None
        fabric = self._fabric(snic, dnic, (src, dst), self.spray)
        if fabric is None:
            return None
        return _usage_of(tuple(path[1:-1] for path in fabric))

    def node_of(self, vertex: Vertex) -> object:
        """The ``node`` attribute of ``vertex`` (None for shared switches and :data:`SPINES`)."""
        return None if vertex == SPINES else self._vertex(vertex)[1]

    def _vertex(self, v: Vertex) -> tuple[object, object, Vertex | None, Vertex | None]:
        """(kind, node, nic, nvswitch) of ``v``, cached (networkx attribute access is slow)."""
        info = self._info.get(v)
        if info is None:
            if v not in self.graph:
                raise SpecError("route", f"{v} is not a vertex of this cluster")
            d = self.graph.nodes[v]
            info = (d["kind"], d["node"], d.get("nic"), d.get("nvswitch"))
            self._info[v] = info
        return info

    def paths(self, src: Vertex, dst: Vertex) -> tuple[Path, ...]:
        """The route, or with ``spray`` the equal-cost alternatives across the spines."""
        return self._paths(src, dst, False)

    def _paths(self, src: Vertex, dst: Vertex, bundle: bool) -> tuple[Path, ...]:
        if src == dst:
            return ((),)
        skind, snode, snic, sswitch = self._vertex(src)
        dkind, dnode, dnic, dswitch = self._vertex(dst)
        if skind != "gpu" or dkind != "gpu":
            return (tuple(route(self.graph, src, dst)),)
        if sswitch is not None and sswitch == dswitch:
            return (((src, sswitch), (sswitch, dst)),)
        if self.graph.has_edge(src, dst):
            return (((src, dst),),)
        if snode == dnode or snic is None or dnic is None:
            return (tuple(route(self.graph, src, dst)),)
        fabric = self._fabric(snic, dnic, (src, dst), bundle)
        if fabric is None:
            return (tuple(route(self.graph, src, dst)),)
        head, tail = self._leg(src, snic), self._leg(dnic, dst)
        return tuple(head + middle + tail for middle in fabric)

    def _fabric(self, snic: Vertex, dnic: Vertex, flow: tuple[Vertex, Vertex],
                bundle: bool = False) -> tuple[Path, ...] | None:
        """NIC -> leaf [-> spine -> leaf] -> NIC, as ``routing._fabric_route``; None: no spine.

        With ``bundle`` (spray only) the spines are one bundle edge each way when they are all the
        spines of both leaves.
        """
        sleaf, dleaf = self._leaf_of(snic), self._leaf_of(dnic)
        if sleaf == dleaf:
            return (((snic, sleaf), (sleaf, dnic)),)
        spines = self._spines_between(sleaf, dleaf)
        if not spines:
            return None
        if bundle and spines == self._spines_between(sleaf, sleaf) == self._spines_between(dleaf, dleaf):
            return (((snic, sleaf), (sleaf, SPINES), (SPINES, dleaf), (dleaf, dnic)),)
        chosen = spines if self.spray else (spines[ecmp_index(*flow, len(spines))],)
        return tuple(((snic, sleaf), (sleaf, s), (s, dleaf), (dleaf, dnic)) for s in chosen)

    def _leaf_of(self, nic: Vertex) -> Vertex:
        leaf = self._leaf.get(nic)
        if leaf is None:
            leaf = next(v for v in self.graph.successors(nic) if self.graph.edges[nic, v]["link"] == "nic")
            self._leaf[nic] = leaf
        return leaf

    def _spines_between(self, sleaf: Vertex, dleaf: Vertex) -> tuple[Vertex, ...]:
        """Spines joined to both leaves, sorted; ``(leaf, leaf)``: every spine of the leaf."""
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
    if len(paths) == 1:
        return tuple((edge, 1.0) for edge in paths[0])
    share = 1.0 / len(paths)
    total: dict[Edge, float] = {}
    for path in paths:
        for edge in path:
            total[edge] = total.get(edge, 0.0) + share
    return tuple(total.items())
