"""Unit tests of simcluster.topology.collective_groups: rank vertices, rings, double binary tree.

Pinned here: the node-major rank numbering, rings that cross each node boundary once and stay
rail-aligned, NCCL's tree shapes for small n (transcribed from ``ncclGetBtree``/``ncclGetDtree``),
and the complementary-leaf property of the double binary tree.
"""

from __future__ import annotations

import pytest

from simcluster.errors import SpecError
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.loader import load_topology
from simcluster.topology import double_binary_tree, gpu_vertex, ring_order


@pytest.fixture
def topo() -> TopologySpec:
    """Eight GPUs per node; only ``gpus_per_node`` matters here."""
    return load_topology({
        "name": "t",
        "accelerator": {"memory_GiB": 80, "memory_bandwidth_GBps": 2000,
                        "peak_TFLOPS": {"bf16": 312}},
        "gpus_per_node": 8, "scale_up": {"kind": "nvswitch", "bandwidth_GBps": 300},
        "scale_out": {"nics_per_node": 8, "nic_Gbps": 200, "fabric": "fat-tree"},
    })


def crossings(order: list[int], gpus_per_node: int) -> int:
    """Ring hops (wrap-around included) whose ends are on different nodes."""
    nodes = [r // gpus_per_node for r in order]
    return sum(a != b for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True))


def is_tree(parent: list[int]) -> bool:
    """One root (-1) and every rank reaches it without revisiting a rank."""
    if parent.count(-1) != 1:
        return False
    for rank in range(len(parent)):
        seen: set[int] = set()
        while rank != -1:
            if rank in seen or not -1 <= parent[rank] < len(parent):
                return False
            seen.add(rank)
            rank = parent[rank]
    return True


def inner(parent: list[int]) -> set[int]:
    return {p for p in parent if p >= 0}


def test_gpu_vertex_is_node_major(topo: TopologySpec) -> None:
    assert gpu_vertex(topo, 0) == ("gpu", 0, 0)
    assert gpu_vertex(topo, 13) == ("gpu", 1, 5)
    with pytest.raises(SpecError, match="ranks"):
        gpu_vertex(topo, -1)


def test_ring_order_snakes_through_nodes(topo: TopologySpec) -> None:
    order = ring_order(topo, range(24))
    assert order == [*range(8), *range(15, 7, -1), *range(16, 24)]
    assert crossings(order, 8) == 3


def test_ring_hops_between_nodes_are_rail_aligned(topo: TopologySpec) -> None:
    order = ring_order(topo, range(32))  # even number of nodes: wrap-around aligned too
    pairs = zip(order, order[1:] + order[:1], strict=True)
    assert all(a % 8 == b % 8 for a, b in pairs if a // 8 != b // 8)


def test_ring_order_of_a_subset(topo: TopologySpec) -> None:
    ranks = [17, 3, 9, 1, 30]
    order = ring_order(topo, ranks)
    assert sorted(order) == sorted(ranks)
    assert crossings(order, 8) == 4
    assert ring_order(topo, [5, 2, 7]) == [2, 5, 7]  # one node: a chain, no crossing


def test_ring_order_rejects_repeats_and_negatives(topo: TopologySpec) -> None:
    with pytest.raises(SpecError, match="ranks"):
        ring_order(topo, [1, 1, 2])
    with pytest.raises(SpecError, match="ranks"):
        ring_order(topo, [-1, 2])


def test_double_binary_tree_known_shapes() -> None:
    assert double_binary_tree(1) == ([-1], [-1])
    assert double_binary_tree(4) == ([-1, 2, 0, 2], [1, 3, 1, -1])
    assert double_binary_tree(8)[0] == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert double_binary_tree(5) == ([-1, 2, 4, 2, 0], [1, -1, 3, 0, 3])  # odd n: shifted by one


@pytest.mark.parametrize("n", range(1, 70))
def test_double_binary_tree_trees_and_complementary_leaves(n: int) -> None:
    tree1, tree2 = double_binary_tree(n)
    assert is_tree(tree1)
    assert is_tree(tree2)
    assert tree1.index(-1) == 0
    assert all(sum(1 for p in tree if p == r) <= 2 for tree in (tree1, tree2) for r in range(n))
    both = inner(tree1) & inner(tree2)
    # Even n: every rank is a leaf in at least one tree. Odd n >= 3: all but rank 0.
    assert both == (set() if n % 2 == 0 or n == 1 else {0})


def test_double_binary_tree_rejects_empty() -> None:
    with pytest.raises(SpecError):
        double_binary_tree(0)
