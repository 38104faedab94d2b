"""Unit tests of simcluster.topology: graph builders, routing, metrics and DOT rendering.

Pinned here: vertex and edge counts of small clusters, the bandwidth of each link kind, leaf
placement per fabric, route shapes (hop counts, NIC choice, ECMP determinism), bisection values
that follow from the construction, and the speed budget at 2048 and 128 nodes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.loader import load_topology
from simcluster.topology import (
    LINK_KINDS,
    bisection_Bps,
    build_graph,
    gpu_vertex,
    leaf_of,
    path_bandwidth_Bps,
    path_latency_s,
    route,
    summarize,
    to_dot,
)

GB = 1e9


def make_topology(gpus: int = 8, kind: str = "nvswitch", nics: int = 8, fabric: str = "fat-tree",
                  oversubscription: float = 1.0, radix: int = 64, **extra: Any) -> TopologySpec:
    """A topology from a mapping: 300 GB/s scale-up, 200 Gb/s NICs, PCIe 64 GB/s, 1 socket."""
    scale_up: dict[str, Any] = {"kind": kind, "bandwidth_GBps": 300, "latency_us": 3}
    scale_up.update(extra.pop("scale_up", {}))
    host: dict[str, Any] = {"pcie_GBps": 64, "pcie_latency_us": 1, "gpus_per_pcie_switch": 1,
                            "cpu_sockets": 1, "inter_socket_GBps": 40}
    host.update(extra.pop("host", {}))
    return load_topology({
        "name": "t",
        "accelerator": {"memory_GiB": 80, "memory_bandwidth_GBps": 2000,
                        "peak_TFLOPS": {"bf16": 312}},
        "gpus_per_node": gpus, "scale_up": scale_up, "host": host,
        "scale_out": {"nics_per_node": nics, "nic_Gbps": 200, "fabric": fabric,
                      "oversubscription": oversubscription, "latency_us": 5,
                      "switch_radix": radix},
    })


def kinds(graph: Any) -> Counter[str]:
    return Counter(kind for _, kind in graph.nodes(data="kind"))


def links(graph: Any, link: str) -> list[tuple[Any, Any]]:
    return [(u, v) for u, v, kind in graph.edges(data="link") if kind == link]


# ------------------------------------------------------------------------------------ graph


def test_dgx_like_node_vertices_and_nvlink_bandwidth() -> None:
    graph = build_graph(make_topology(), 1)
    assert kinds(graph) == {"gpu": 8, "nvswitch": 1, "pcie": 8, "cpu": 1, "nic": 8, "leaf": 1}
    nvlink = links(graph, "nvlink")
    assert len(nvlink) == 16  # 8 GPUs x 2 directions
    assert {graph.edges[e]["bandwidth_Bps"] for e in nvlink} == {300 * GB}
    assert graph.edges[("gpu", 0, 3), ("nvswitch", 0)]["latency_s"] == pytest.approx(1.5e-6)


def test_every_link_is_two_directed_edges_with_attributes() -> None:
    graph = build_graph(make_topology(host={"cpu_sockets": 2, "gpus_per_pcie_switch": 2}), 3)
    for u, v, data in graph.edges(data=True):
        assert set(data) == {"bandwidth_Bps", "latency_s", "link"}
        assert data["link"] in LINK_KINDS
        assert graph.edges[v, u] == data
    for vertex, kind in graph.nodes(data="kind"):
        assert vertex[0] == kind


def test_nvlink_bridge_pairs_and_no_nvswitch() -> None:
    graph = build_graph(make_topology(gpus=4, kind="nvlink-bridge", nics=1,
                                      scale_up={"bandwidth_GBps": 56.25}), 1)
    bridges = {(u[2], v[2]) for u, v in links(graph, "nvlink-bridge")}
    assert bridges == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert graph.edges[("gpu", 0, 0), ("gpu", 0, 1)]["bandwidth_Bps"] == 56.25 * GB
    assert kinds(graph)["nvswitch"] == 0


def test_pcie_box_two_sockets() -> None:
    topo = make_topology(kind="pcie", nics=1, host={"gpus_per_pcie_switch": 4, "cpu_sockets": 2})
    graph = build_graph(topo, 1)
    assert not links(graph, "nvlink")
    assert not links(graph, "nvlink-bridge")
    assert graph.has_edge(("pcie", 0, 0), ("cpu", 0, 0))
    assert graph.has_edge(("pcie", 0, 1), ("cpu", 0, 1))
    assert graph.edges[("cpu", 0, 0), ("cpu", 0, 1)]["bandwidth_Bps"] == 40 * GB
    assert set(graph.successors(("gpu", 0, 5))) == {("pcie", 0, 1)}


def test_nics_hang_off_the_pcie_switch_of_their_gpu() -> None:
    graph = build_graph(make_topology(nics=4, host={"gpus_per_pcie_switch": 2}), 1)
    for i in range(4):  # NIC i sits by GPU 2i, on PCIe switch i
        assert graph.has_edge(("nic", 0, i), ("pcie", 0, i))
    assert graph.nodes[("gpu", 0, 3)]["nic"] == ("nic", 0, 1)


def test_rail_optimized_leaf_assignment() -> None:
    topo = make_topology(fabric="rail-optimized", radix=8)  # 4 ports per leaf
    graph = build_graph(topo, 10)
    for node in range(10):
        for nic in range(8):
            leaf = ("leaf", nic, node // 4)
            assert leaf_of(topo, node, nic) == leaf
            assert graph.has_edge(("nic", node, nic), leaf)
    assert kinds(graph)["leaf"] == 8 * 3


def test_fat_tree_contiguous_nodes_and_wide_nodes() -> None:
    narrow = make_topology(nics=8, radix=64)  # 32 ports: 4 nodes per leaf
    assert [leaf_of(narrow, n, 7) for n in (0, 3, 4, 9)] == [("leaf", 0), ("leaf", 0),
                                                              ("leaf", 1), ("leaf", 2)]
    wide = make_topology(nics=8, radix=4)  # 2 ports: 4 leaves per node
    assert [leaf_of(wide, 1, i) for i in (0, 1, 2, 7)] == [("leaf", 4), ("leaf", 4),
                                                           ("leaf", 5), ("leaf", 7)]


def test_oversubscribed_leaf_uplinks() -> None:
    graph = build_graph(make_topology(oversubscription=2), 8)  # 2 full leaves of 32 NICs
    assert kinds(graph)["spine"] == 16
    up = [graph.edges[e]["bandwidth_Bps"] for e in links(graph, "fabric") if e[0] == ("leaf", 0)]
    assert sum(up) == pytest.approx(32 * 25 * GB / 2)
    assert set(up) == {25 * GB}  # each uplink at the NIC rate


def test_single_switch_takes_every_nic() -> None:
    graph = build_graph(make_topology(nics=2, fabric="single-switch", radix=4), 5)
    assert kinds(graph)["switch"] == 1
    assert kinds(graph)["spine"] == 0
    assert graph.in_degree(("switch", 0)) == 10


def test_nvl_domain_shares_one_switch() -> None:
    topo = make_topology(gpus=4, kind="nvl-domain", nics=4, scale_up={"domain_gpus": 8})
    graph = build_graph(topo, 3)
    assert graph.nodes[("gpu", 1, 2)]["nvswitch"] == ("nvswitch", 0)
    assert graph.nodes[("gpu", 2, 0)]["nvswitch"] == ("nvswitch", 1)
    assert graph.in_degree(("nvswitch", 0)) == 8


@pytest.mark.parametrize("nodes", [0, -3])
def test_nodes_below_one_rejected(nodes: int) -> None:
    with pytest.raises(SpecError, match=r"cluster\.nodes"):
        build_graph(make_topology(), nodes)


def test_no_nics_means_one_node_or_one_domain() -> None:
    build_graph(make_topology(nics=0), 1)
    with pytest.raises(SpecError, match=r"cluster\.nodes"):
        build_graph(make_topology(nics=0), 2)
    domain = make_topology(gpus=4, kind="nvl-domain", nics=0, scale_up={"domain_gpus": 8})
    assert build_graph(domain, 2).number_of_nodes() > 0
    with pytest.raises(SpecError, match=r"cluster\.nodes"):
        build_graph(domain, 3)


def test_large_cluster_builds() -> None:
    """16,384 GPUs (its speed, target 2 s, is in benchmarks/bench_flows.py, not timed here)."""
    graph = build_graph(make_topology(fabric="rail-optimized"), 2048)
    assert kinds(graph)["gpu"] == 16384
    assert all(graph.nodes[("spine", j)]["aggregated"] for j in range(32))


@pytest.mark.skipif("dgx-h100" not in catalog.names("topologies"), reason="preset not written yet")
def test_dgx_h100_preset() -> None:
    graph = build_graph(load_topology("dgx-h100"), 2)
    assert kinds(graph)["gpu"] == 16
    path = route(graph, ("gpu", 0, 5), ("gpu", 1, 5))
    assert path_bandwidth_Bps(graph, path) == 50 * GB  # 400 Gb/s NIC


# ---------------------------------------------------------------------------------- routing


def test_route_inside_node_over_nvswitch() -> None:
    graph = build_graph(make_topology(), 2)
    path = route(graph, ("gpu", 0, 1), ("gpu", 0, 6))
    assert path == [(("gpu", 0, 1), ("nvswitch", 0)), (("nvswitch", 0), ("gpu", 0, 6))]
    assert path_bandwidth_Bps(graph, path) == 300 * GB
    assert path_latency_s(graph, path) == pytest.approx(3e-6)


def test_route_between_nodes_under_one_leaf_uses_own_nic() -> None:
    graph = build_graph(make_topology(), 2)
    path = route(graph, ("gpu", 0, 3), ("gpu", 1, 5))
    hops = [v for _, v in path]
    assert hops == [("pcie", 0, 3), ("nic", 0, 3), ("leaf", 0), ("nic", 1, 5), ("pcie", 1, 5),
                    ("gpu", 1, 5)]
    assert path_bandwidth_Bps(graph, path) == 25 * GB
    assert path_latency_s(graph, path) == pytest.approx(2 * 1e-6 + 5e-6)


def test_route_across_leaves_goes_through_one_spine_deterministically() -> None:
    graph = build_graph(make_topology(fabric="rail-optimized"), 2)
    path = route(graph, ("gpu", 0, 2), ("gpu", 1, 6))
    assert len(path) == 8
    assert path[3][1][0] == "spine"
    assert route(build_graph(make_topology(fabric="rail-optimized"), 2),
                 ("gpu", 0, 2), ("gpu", 1, 6)) == path


def test_ecmp_spreads_over_spines() -> None:
    graph = build_graph(make_topology(radix=8), 8)  # 4 ports: 2 nodes per leaf
    src, dst = gpu_vertex(make_topology(), 0), ("gpu", 7, 0)
    spines = {route(graph, src, (dst[0], dst[1], i))[3][1] for i in range(8)}
    spines |= {route(graph, ("gpu", 0, i), dst)[3][1] for i in range(8)}
    assert len(spines) > 1


def test_pcie_route_crosses_sockets() -> None:
    topo = make_topology(kind="pcie", nics=1, host={"gpus_per_pcie_switch": 4, "cpu_sockets": 2})
    graph = build_graph(topo, 1)
    hops = [v for _, v in route(graph, ("gpu", 0, 0), ("gpu", 0, 7))]
    assert hops == [("pcie", 0, 0), ("cpu", 0, 0), ("cpu", 0, 1), ("pcie", 0, 1), ("gpu", 0, 7)]
    assert [v for _, v in route(graph, ("gpu", 0, 0), ("gpu", 0, 3))] == [("pcie", 0, 0),
                                                                          ("gpu", 0, 3)]


def test_bridge_route_direct_else_pcie() -> None:
    topo = make_topology(gpus=4, kind="nvlink-bridge", nics=1)
    graph = build_graph(topo, 1)
    assert route(graph, ("gpu", 0, 2), ("gpu", 0, 3)) == [(("gpu", 0, 2), ("gpu", 0, 3))]
    assert all(graph.edges[e]["link"] == "pcie" for e in route(graph, ("gpu", 0, 1), ("gpu", 0, 2)))


def test_nvl_domain_route_stays_on_nvlink_across_nodes() -> None:
    topo = make_topology(gpus=4, kind="nvl-domain", nics=4, scale_up={"domain_gpus": 8})
    graph = build_graph(topo, 4)
    assert len(route(graph, ("gpu", 0, 0), ("gpu", 1, 3))) == 2
    assert any(graph.edges[e]["link"] == "nic" for e in route(graph, ("gpu", 0, 0), ("gpu", 2, 0)))


def test_route_edge_cases() -> None:
    graph = build_graph(make_topology(), 1)
    assert route(graph, ("gpu", 0, 0), ("gpu", 0, 0)) == []
    assert path_bandwidth_Bps(graph, []) == float("inf")
    with pytest.raises(SpecError, match="route"):
        route(graph, ("gpu", 0, 0), ("gpu", 5, 0))
    hops = route(graph, ("nic", 0, 0), ("nic", 0, 1))  # non-GPU ends: minimum hops, no GPU transit
    assert len(hops) == 2


# ---------------------------------------------------------------------------------- metrics


def test_summary_of_dgx_like_cluster() -> None:
    summary = summarize(make_topology(), 8)
    assert (summary.gpus, summary.nodes) == (64, 8)
    assert summary.scale_up_Bps_per_gpu == 300 * GB
    assert summary.scale_out_Bps_per_gpu == 25 * GB
    assert summary.injection_Bps == 64 * 25 * GB
    assert summary.bisection_Bps == pytest.approx(summary.injection_Bps / 2)
    assert summary.switches == 8 + 2 + 32  # NVSwitches, leaves, spines
    assert summary.links == build_graph(make_topology(), 8).number_of_edges() // 2


def test_oversubscribed_bisection() -> None:
    summary = summarize(make_topology(oversubscription=2), 8)  # halves = leaf 0 | leaf 1
    assert summary.bisection_Bps == pytest.approx(summary.injection_Bps / 4)


def test_one_node_bisection_is_half_the_gpus() -> None:
    # GPUs 0-3 reach 4-7 over 4 NVLinks and 4 PCIe uplinks through the root complex.
    assert summarize(make_topology(nics=0), 1).bisection_Bps == pytest.approx(4 * 300 * GB +
                                                                              4 * 64 * GB)
    pcie = make_topology(gpus=2, kind="pcie", nics=0, host={"gpus_per_pcie_switch": 2})
    assert summarize(pcie, 1).bisection_Bps == pytest.approx(64 * GB)
    assert bisection_Bps(build_graph(make_topology(gpus=1, nics=1), 1)) == 0.0


def test_bridge_scale_up_per_gpu() -> None:
    topo = make_topology(gpus=4, kind="nvlink-bridge", nics=1, scale_up={"bridge_gpus": 4})
    assert summarize(topo, 1).scale_up_Bps_per_gpu == 3 * 300 * GB


def test_summary_at_128_nodes() -> None:
    """Full bisection of a rail-optimized fabric (its speed is in benchmarks/bench_flows.py)."""
    summary = summarize(make_topology(fabric="rail-optimized"), 128)
    assert summary.bisection_Bps == pytest.approx(summary.injection_Bps / 2)


# ----------------------------------------------------------------------------------- render


def test_dot_output_names_every_gpu_and_link() -> None:
    graph = build_graph(make_topology(gpus=4, nics=2, radix=4), 3)
    dot = to_dot(graph)
    assert dot.startswith('graph "cluster" {')
    assert dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    for node in range(3):
        assert f'subgraph "cluster_node_{node}"' in dot
        for local in range(4):
            assert f'"gpu/{node}/{local}" [' in dot
    assert dot.count(" -- ") == graph.number_of_edges() // 2
    assert 'label="nvlink 300"' in dot
