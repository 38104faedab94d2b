"""Render the link graph as Graphviz DOT text (no graphviz dependency; pipe it to ``dot -Tsvg``).

Each node's vertices (GPUs, PCIe switches, CPUs, NICs, its NVSwitch) are drawn inside a
``cluster_node_<n>`` subgraph; shared switches (NVL-domain NVSwitches, leaves, spines) sit outside.
Each physical link is drawn once, undirected, labelled with its kind and per-direction GB/s.
"""

from __future__ import annotations

import networkx as nx

from simcluster.topology.node import Vertex

_SHAPES = {"gpu": "box", "nvswitch": "hexagon", "pcie": "diamond", "cpu": "box3d",
           "nic": "ellipse", "leaf": "trapezium", "spine": "invtrapezium", "switch": "octagon"}


def vertex_id(vertex: Vertex) -> str:
    """The DOT identifier of ``vertex``: its items joined by ``/``, quoted (``"gpu/0/3"``)."""
    return '"' + "/".join(str(item) for item in vertex) + '"'


def to_dot(graph: nx.DiGraph, name: str = "cluster") -> str:
    """Graphviz DOT text of ``graph``, with one cluster subgraph per node.

    Parameters
    ----------
    graph : networkx.DiGraph
        A graph from :func:`~simcluster.topology.graph.build_graph`.
    name : str
        The DOT graph name.

    Returns
    -------
    str
        A ``graph`` (undirected) document: vertices labelled by kind and index, each physical link
        once with label ``"<link> <GB/s>"`` (GB = 1e9 bytes).
    """
    lines = [f'graph "{name}" {{', "  node [fontsize=10];"]
    by_node: dict[int | None, list[Vertex]] = {}
    for vertex, node in graph.nodes(data="node"):
        by_node.setdefault(node, []).append(vertex)
    for node in sorted(n for n in by_node if n is not None):
        lines.append(f'  subgraph "cluster_node_{node}" {{')
        lines.append(f'    label="node {node}";')
        lines.extend("    " + _vertex_line(graph, v) for v in by_node[node])
        lines.append("  }")
    lines.extend("  " + _vertex_line(graph, v) for v in by_node.get(None, []))
    lines.extend("  " + _edge_line(graph, u, v) for u, v in _links(graph))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _vertex_line(graph: nx.DiGraph, vertex: Vertex) -> str:
    kind = str(graph.nodes[vertex]["kind"])
    label = kind + " " + ".".join(str(item) for item in vertex[1:])
    return f'{vertex_id(vertex)} [label="{label}", shape={_SHAPES.get(kind, "box")}];'


def _links(graph: nx.DiGraph) -> list[tuple[Vertex, Vertex]]:
    """One ``(u, v)`` per physical link: the first direction met in edge order."""
    seen: set[tuple[Vertex, Vertex]] = set()
    links = []
    for u, v in graph.edges():
        if (v, u) not in seen:
            seen.add((u, v))
            links.append((u, v))
    return links


def _edge_line(graph: nx.DiGraph, u: Vertex, v: Vertex) -> str:
    data = graph.edges[u, v]
    label = f"{data['link']} {data['bandwidth_Bps'] / 1e9:g}"
    return f'{vertex_id(u)} -- {vertex_id(v)} [label="{label}"];'
