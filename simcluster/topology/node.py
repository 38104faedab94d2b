"""The node model of the link graph: GPUs, scale-up fabric, PCIe switches, CPU sockets and NICs.

:func:`.graph.build_graph` calls this module once per node; :mod:`.fabric` adds the scale-out
switches. Like NCCL's own topology graph (``src/graph/topo.h``: GPU, PCI, NVS, CPU and NIC nodes),
the graph is hierarchical: one NVSwitch vertex per node (or per NVLink domain), one PCIe switch
vertex per ``gpus_per_pcie_switch`` GPUs, one root-complex vertex per CPU socket, one vertex per
NIC. For ``scale_up.kind: pcie`` the GPU links are the host's PCIe links (``host.pcie_Bps``);
``scale_up.bandwidth_Bps`` and ``latency_s`` are then the end-to-end figures the analytical tier
uses, not edges of the graph.

Vertices are tuples whose first item is the vertex kind, also stored as the ``kind`` attribute:

=====================  ============================================================
``("gpu", n, l)``      GPU ``l`` of node ``n`` (global rank ``n * gpus_per_node + l``)
``("nvswitch", n)``    the NVSwitch of node ``n``; for ``nvl-domain``, of domain ``n``
``("pcie", n, i)``     PCIe switch ``i`` of node ``n``
``("cpu", n, s)``      root complex of CPU socket ``s`` of node ``n``
``("nic", n, i)``      NIC ``i`` of node ``n``
``("leaf", ...)``      a leaf switch; ``("spine", j)`` a spine; ``("switch", 0)`` the single switch
=====================  ============================================================

Every physical link is two directed edges with ``bandwidth_Bps`` (per direction, bytes/s),
``latency_s`` (one way, seconds) and ``link`` (one of :data:`LINK_KINDS`). A link's latency is
split evenly over the hops of the path it describes: the GPU-NVSwitch edges carry half of
``scale_up.latency_s`` each, so GPU -> NVSwitch -> GPU adds up to ``scale_up.latency_s``.

Vertex attributes: all have ``kind`` and ``node`` (None for shared switches); GPUs also have
``local``, ``rank``, ``nic`` (the NIC vertex they use, or None) and ``nvswitch`` (or None).
"""

from __future__ import annotations

import math

import networkx as nx

from simcluster.spec.hardware import TopologySpec

Vertex = tuple[str | int, ...]
"""A graph vertex: ``(kind, index, ...)``."""

LINK_KINDS = ("nvlink", "nvlink-bridge", "pcie", "upi", "nic", "fabric")


def add_link(graph: nx.DiGraph, u: Vertex, v: Vertex, bandwidth_Bps: float, latency_s: float,
             link: str) -> None:
    """Add one full-duplex physical link between ``u`` and ``v`` as two directed edges.

    Parameters
    ----------
    graph : networkx.DiGraph
        The graph to extend (mutated).
    u, v : Vertex
        End points; both must already be vertices.
    bandwidth_Bps : float
        Line rate per direction, bytes per second.
    latency_s : float
        One-way latency of the edge, seconds.
    link : str
        Link kind, one of :data:`LINK_KINDS`.
    """
    attrs = {"bandwidth_Bps": bandwidth_Bps, "latency_s": latency_s, "link": link}
    graph.add_edges_from(((u, v, attrs), (v, u, attrs)))  # copies attrs per edge


def nodes_per_domain(topo: TopologySpec) -> int:
    """Nodes sharing one scale-up fabric: ``domain_gpus / gpus_per_node`` (nvl-domain), else 1."""
    if topo.scale_up.kind == "nvl-domain":
        return topo.scale_up.domain_gpus // topo.gpus_per_node
    return 1


def pcie_switch_of(topo: TopologySpec, local: int) -> int:
    """Index of the PCIe switch that GPU ``local`` sits on (``gpus_per_pcie_switch`` per switch)."""
    return local // topo.host.gpus_per_pcie_switch


def nic_of(topo: TopologySpec, local: int) -> int | None:
    """The NIC GPU ``local`` uses: ``floor(local * nics / gpus)`` (rail-aligned); None if no NICs.

    NIC ``i`` sits next to GPU ``floor(i * gpus / nics)``, so with one NIC per GPU GPU ``l`` uses
    NIC ``l`` (rail ``l``); with fewer NICs, neighbouring GPUs share one.
    """
    nics = topo.scale_out.nics_per_node
    if nics == 0:
        return None
    return local * nics // topo.gpus_per_node


def add_host(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    """Add the CPU sockets, PCIe switches, GPUs and NICs of ``node`` with their PCIe/UPI links.

    PCIe switch ``i`` uplinks (one x16 link at ``host.pcie_Bps``) to socket
    ``floor(i * sockets / switches)``; sockets are fully meshed by inter-socket (UPI) links, whose
    latency is not modelled separately (0). NIC ``i`` is on the PCIe switch of GPU
    ``floor(i * gpus / nics)``.
    """
    host = topo.host
    half_lat_s = host.pcie_latency_s / 2
    switches = math.ceil(topo.gpus_per_node / host.gpus_per_pcie_switch)
    for socket in range(host.cpu_sockets):
        graph.add_node(("cpu", node, socket), kind="cpu", node=node)
        for other in range(socket):
            add_link(graph, ("cpu", node, other), ("cpu", node, socket), host.inter_socket_Bps, 0.0,
                     "upi")
    for i in range(switches):
        graph.add_node(("pcie", node, i), kind="pcie", node=node)
        socket = i * host.cpu_sockets // switches
        add_link(graph, ("pcie", node, i), ("cpu", node, socket), host.pcie_Bps, half_lat_s, "pcie")
    _add_gpus(graph, topo, node)
    _add_nics(graph, topo, node)


def _add_gpus(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    half_lat_s = topo.host.pcie_latency_s / 2
    for local in range(topo.gpus_per_node):
        nic = nic_of(topo, local)
        gpu = ("gpu", node, local)
        graph.add_node(gpu, kind="gpu", node=node, local=local,
                       rank=node * topo.gpus_per_node + local,
                       nic=None if nic is None else ("nic", node, nic), nvswitch=None)
        pcie = ("pcie", node, pcie_switch_of(topo, local))
        add_link(graph, gpu, pcie, topo.host.pcie_Bps, half_lat_s, "pcie")


def _add_nics(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    nics = topo.scale_out.nics_per_node
    for i in range(nics):
        anchor = i * topo.gpus_per_node // nics
        graph.add_node(("nic", node, i), kind="nic", node=node, index=i)
        pcie = ("pcie", node, pcie_switch_of(topo, anchor))
        add_link(graph, ("nic", node, i), pcie, topo.host.pcie_Bps, topo.host.pcie_latency_s / 2,
                 "pcie")


def add_scale_up(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    """Add the scale-up links of ``node``: NVSwitch star, NVLink bridges, or nothing for ``pcie``.

    ``nvswitch``: every GPU to the node's NVSwitch at ``scale_up.bandwidth_Bps``. ``nvl-domain``:
    the same, to one NVSwitch vertex per domain of ``domain_gpus`` GPUs (contiguous nodes).
    ``nvlink-bridge``: GPUs in groups of ``bridge_gpus`` (contiguous local indices); every pair in a
    group is joined directly at ``scale_up.bandwidth_Bps`` (one bridge link per pair). ``pcie``:
    GPUs talk over the PCIe tree built by :func:`add_host`.
    """
    kind = topo.scale_up.kind
    if kind in ("nvswitch", "nvl-domain"):
        _add_nvswitch(graph, topo, node)
    elif kind == "nvlink-bridge":
        _add_bridges(graph, topo, node)


def _add_nvswitch(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    up = topo.scale_up
    domain = node // nodes_per_domain(topo)
    switch = ("nvswitch", domain if up.kind == "nvl-domain" else node)
    if switch not in graph:
        graph.add_node(switch, kind="nvswitch", node=None if up.kind == "nvl-domain" else node,
                       domain=domain)
    for local in range(topo.gpus_per_node):
        gpu = ("gpu", node, local)
        graph.nodes[gpu]["nvswitch"] = switch
        add_link(graph, gpu, switch, up.bandwidth_Bps, up.latency_s / 2, "nvlink")


def _add_bridges(graph: nx.DiGraph, topo: TopologySpec, node: int) -> None:
    up = topo.scale_up
    for first in range(0, topo.gpus_per_node, up.bridge_gpus):
        group = range(first, first + up.bridge_gpus)
        for a in group:
            for b in range(a + 1, group.stop):
                add_link(graph, ("gpu", node, a), ("gpu", node, b), up.bandwidth_Bps, up.latency_s,
                         "nvlink-bridge")
