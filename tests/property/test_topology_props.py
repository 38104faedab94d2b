"""Topology properties over random small clusters (1-16 nodes, 1/2/4/8 GPUs, every fabric).

* Reachability: every GPU routes to every other; routes start and end right, are chains of graph
  edges, never transit a GPU, and are deterministic.
* Bandwidth bounds: an inter-node route never beats the NIC, an intra-node one never beats the
  faster of scale-up and PCIe.
* Bisection oracle: with whole nodes on each side and PCIe able to feed the NICs, the min cut is
  ``injection / 2`` on a non-blocking tree or when the halves share a leaf's non-blocking
  crossbar, and exactly ``injection / (2 * oversubscription)`` when the halves share no leaf.
* Rings visit each rank once with one hop per node boundary; double binary trees are trees.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.spec.hardware import TopologySpec
from simcluster.spec.loader import load_topology
from simcluster.topology import (
    build_graph,
    double_binary_tree,
    gpu_vertex,
    path_bandwidth_Bps,
    path_latency_s,
    ring_order,
    route,
    summarize,
)

EXAMPLES = 40


@st.composite
def clusters(draw: st.DrawFn, domains: bool = True) -> tuple[TopologySpec, int]:
    """A random small topology (NICs <= GPUs, NIC rate <= PCIe rate) and a node count."""
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    kinds = ["nvswitch", "pcie"] + (["nvlink-bridge"] if gpus >= 2 else [])
    kind = draw(st.sampled_from([*kinds, "nvl-domain"] if domains else kinds))
    scale_up: dict[str, Any] = {"kind": kind, "bandwidth_GBps": 300, "latency_us": 2}
    if kind == "nvlink-bridge":
        scale_up["bridge_gpus"] = draw(st.sampled_from([b for b in (2, 4) if gpus % b == 0]))
    if kind == "nvl-domain":
        scale_up["domain_gpus"] = gpus * draw(st.sampled_from([1, 2, 4]))
    divisors = [d for d in (1, 2, 4, 8) if gpus % d == 0]
    spec = {
        "name": "random",
        "accelerator": {"memory_GiB": 80, "memory_bandwidth_GBps": 2000,
                        "peak_TFLOPS": {"bf16": 312}},
        "gpus_per_node": gpus, "scale_up": scale_up,
        "host": {"pcie_GBps": 64, "gpus_per_pcie_switch": draw(st.sampled_from(divisors)),
                 "cpu_sockets": draw(st.sampled_from([1, 2]))},
        "scale_out": {"nics_per_node": draw(st.sampled_from(divisors)),
                      "nic_Gbps": draw(st.sampled_from([100, 200, 400])),
                      "fabric": draw(st.sampled_from(["fat-tree", "rail-optimized",
                                                      "single-switch"])),
                      "oversubscription": draw(st.sampled_from([1, 2, 4])),
                      "switch_radix": draw(st.sampled_from([4, 8, 16, 64]))},
    }
    return load_topology(spec), draw(st.integers(1, 16))


def halves_share_a_leaf(topo: TopologySpec, nodes: int) -> bool:
    """Whether some leaf has NICs of both rank halves (``nodes`` even), from the placement rules."""
    out, ports = topo.scale_out, topo.scale_out.switch_radix // 2
    if out.fabric == "single-switch":
        return True
    if out.fabric == "rail-optimized":
        return (nodes // 2) % ports != 0
    return out.nics_per_node <= ports and (nodes // 2) % (ports // out.nics_per_node) != 0


def check_route(graph: Any, topo: TopologySpec, src: int, dst: int) -> None:
    a, b = gpu_vertex(topo, src), gpu_vertex(topo, dst)
    path = route(graph, a, b)
    if src == dst:
        assert path == []
        return
    assert path[0][0] == a
    assert path[-1][1] == b
    assert all(e1[1] == e2[0] for e1, e2 in itertools.pairwise(path))
    assert all(graph.has_edge(*e) for e in path)
    assert all(graph.nodes[v]["kind"] != "gpu" for _, v in path[:-1])
    same_domain = graph.nodes[a]["nvswitch"] is not None and (
        graph.nodes[a]["nvswitch"] == graph.nodes[b]["nvswitch"])
    bandwidth = path_bandwidth_Bps(graph, path)
    if a[1] != b[1] and not same_domain:
        assert bandwidth <= topo.scale_out.nic_Bps
        assert path_latency_s(graph, path) >= topo.scale_out.latency_s
    else:
        assert bandwidth <= max(topo.scale_up.bandwidth_Bps, topo.host.pcie_Bps)
    assert bandwidth > 0


@settings(deadline=None, max_examples=EXAMPLES)
@given(clusters(), st.data())
def test_every_gpu_reaches_every_other(cluster: tuple[TopologySpec, int], data: st.DataObject,
                                       ) -> None:
    topo, nodes = cluster
    graph = build_graph(topo, nodes)
    n = nodes * topo.gpus_per_node
    pairs = [(0, d) for d in range(n)] + [(s, n - 1) for s in range(n)]
    pairs += data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                                max_size=20))
    for src, dst in pairs:
        check_route(graph, topo, src, dst)
    src, dst = pairs[-1]
    again = build_graph(topo, nodes)
    assert route(again, gpu_vertex(topo, src), gpu_vertex(topo, dst)) == route(
        graph, gpu_vertex(topo, src), gpu_vertex(topo, dst))


@settings(deadline=None, max_examples=EXAMPLES)
@given(clusters(domains=False), st.integers(1, 8))
def test_bisection_matches_injection_over_oversubscription(
        cluster: tuple[TopologySpec, int], half_nodes: int) -> None:
    topo, _ = cluster
    nodes = 2 * half_nodes
    summary = summarize(topo, nodes)
    k = topo.scale_out.oversubscription
    if k == 1 or (halves_share_a_leaf(topo, nodes) and topo.scale_out.fabric == "single-switch"):
        assert summary.bisection_Bps == pytest.approx(summary.injection_Bps / 2, rel=1e-9)
    elif halves_share_a_leaf(topo, nodes):
        assert summary.injection_Bps / (2 * k) * (1 - 1e-9) <= summary.bisection_Bps
        assert summary.bisection_Bps <= summary.injection_Bps / 2 * (1 + 1e-9)
    else:
        assert summary.bisection_Bps == pytest.approx(summary.injection_Bps / (2 * k), rel=1e-9)


@settings(deadline=None, max_examples=EXAMPLES)
@given(clusters(), st.lists(st.integers(0, 127), unique=True, min_size=1, max_size=40))
def test_ring_visits_each_rank_once_and_crosses_each_boundary_once(
        cluster: tuple[TopologySpec, int], ranks: list[int]) -> None:
    topo, _ = cluster
    order = ring_order(topo, ranks)
    assert sorted(order) == sorted(ranks)
    nodes = [r // topo.gpus_per_node for r in order]
    hops = sum(a != b for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True))
    distinct = len(set(nodes))
    assert hops == (distinct if distinct > 1 else 0)


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.integers(1, 1000))
def test_double_binary_tree_every_rank_reaches_its_roots(n: int) -> None:
    for tree in double_binary_tree(n):
        assert tree.count(-1) == 1
        for rank in range(n):
            steps = 0
            while tree[rank] != -1 and steps <= n:
                rank, steps = tree[rank], steps + 1
            assert steps <= n  # no cycle
