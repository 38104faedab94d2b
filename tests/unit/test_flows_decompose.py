"""Tier B decomposition and capacities: ring channels, Tier A agreement, exact symmetry reduction."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.flows import FlowModel, degrade, efficiencies, link_capacities, nic_edges, ring_channels
from simcluster.flows.decompose import MAX_PAIRWISE_RANKS, Context, decompose, symmetric_skip
from simcluster.flows.routes import Router
from simcluster.perf.collectives import collective_time, comm_group
from simcluster.spec import load_topology
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import build_graph, ring_order

GiB = 2**30


def _topology(name: str, **scale_out: Any) -> TopologySpec:
    raw = copy.deepcopy(yaml.safe_load(catalog.topology_path(name).read_text()))
    raw["scale_out"].update(scale_out)
    return load_topology(raw)


def test_channel_zero_is_ring_order_and_channels_use_distinct_rails() -> None:
    topo = load_topology("dgx-h100")
    ranks = list(range(32))
    channels = ring_channels(topo, ranks)
    assert len(channels) == 8
    assert channels[0] == ring_order(topo, ranks)
    exits = set()
    for order in channels:
        hops = [(a, b) for a, b in zip(order, order[1:] + order[:1], strict=True) if a // 8 != b // 8]
        assert len(hops) == 4  # crosses each node boundary once
        assert all(a % 8 == b % 8 for a, b in hops[:-1])  # rail-aligned
        exits.update((a // 8, a % 8) for a, _ in hops)
    assert len(exits) == 32  # every NIC of every node sends exactly one channel


@pytest.mark.parametrize(("name", "nodes", "op"), [
    ("dgx-a100-80gb", 1, "all_reduce"), ("dgx-a100-80gb", 4, "all_reduce"),
    ("dgx-a100-80gb", 4, "all_gather"), ("dgx-a100-80gb", 1, "broadcast"),
    ("box-2x3090ti-pcie", 1, "all_reduce"), ("dgx-a100-80gb", 2, "all_to_all"),
    ("box-2x3090ti-nvlink", 1, "all_reduce"), ("box-2x3090ti-nvlink", 2, "all_reduce"),
])
def test_uncontended_tier_b_matches_tier_a_at_large_sizes(name: str, nodes: int, op: str) -> None:
    """Capacities are line rate x Tier A efficiency, so a lone ring equals Tier A (1e-9)."""
    topo = load_topology(name)
    n = nodes * topo.gpus_per_node
    algo = "pairwise" if op == "all_to_all" else "ring"
    a = collective_time(op, GiB, comm_group(topo, n, 1), algo)
    b = FlowModel(topo, nodes).collective_time(op, GiB, n, 1, algo, "Simple")
    assert b.time_s == pytest.approx(a.time_s, rel=1e-9)


@pytest.mark.parametrize("algo", ["ring", "tree", "hierarchical"])
def test_symmetric_reduction_is_exact(algo: str) -> None:
    topo = _topology("dgx-a100-80gb", switch_radix=16, oversubscription=2.0)
    reduced = FlowModel(topo, 6, symmetric=True).collective_time("all_reduce", GiB, 48, 1, algo, "Simple")
    full = FlowModel(topo, 6, symmetric=False).collective_time("all_reduce", GiB, 48, 1, algo, "Simple")
    assert reduced.time_s == pytest.approx(full.time_s, rel=1e-12)


def test_degraded_nic_slows_the_ring_by_the_factor() -> None:
    """One node's NICs at half rate: its ring edges bind, so the bandwidth term doubles."""
    topo = load_topology("dgx-a100-80gb")
    graph = build_graph(topo, 4)
    healthy = FlowModel(topo, 4).collective_time("all_reduce", 8 * GiB, 32, 1, "ring", "Simple")
    slow = FlowModel(topo, 4, degraded=degrade(nic_edges(graph, 2), 0.5))
    t = slow.collective_time("all_reduce", 8 * GiB, 32, 1, "ring", "Simple")
    assert t.time_s / healthy.time_s == pytest.approx(2.0, rel=0.01)


def test_capacities_are_line_rate_times_efficiency() -> None:
    topo = load_topology("dgx-a100-80gb")
    graph = build_graph(topo, 2)
    eff = efficiencies(topo)
    nvlink = (("gpu", 0, 0), ("nvswitch", 0))
    nic = (("nic", 0, 0), ("leaf", 0))
    caps = link_capacities(graph, [nvlink, nic])
    assert caps[nvlink] == pytest.approx(300e9 * eff["nvlink"])
    assert caps[nic] == pytest.approx(25e9 * eff["nic"])
    assert eff["pcie"] == 1.0  # PCIe only carries GPUDirect traffic to the NIC here
    assert len(nic_edges(graph, 1)) == 16


def test_bad_inputs_are_spec_errors() -> None:
    topo = load_topology("dgx-a100-80gb")
    with pytest.raises(SpecError, match=r"degrade\.factor"):
        degrade([], 0.0)
    with pytest.raises(SpecError, match="protocol"):
        efficiencies(topo, "NVLS")
    ctx = Context(Router(build_graph(topo, 1)), topo)
    with pytest.raises(SpecError, match=r"collective\.algo"):
        decompose(ctx, "all_gather", "tree", list(range(8)), 1.0)
    with pytest.raises(SpecError, match=r"collective\.op"):
        FlowModel(topo, 1).collective_time("gather", 1.0, 8)
    ranks = list(range(MAX_PAIRWISE_RANKS + 1))  # refused before any route is looked up
    with pytest.raises(SpecError) as refused:
        decompose(ctx, "all_to_all", "pairwise", ranks, 1.0)
    assert refused.value.key == "collective.ranks"
    assert f"at most {MAX_PAIRWISE_RANKS} ranks ({len(ranks)} given); use Tier A" in str(refused.value)


def test_tree_classes_cross_nodes_on_their_channels_rail_at_s_over_2c() -> None:
    """Double binary tree on 4 DGX A100 nodes: 8 channels x 2 trees = 16 classes, each moving
    S / (2C) per edge; channel c's trees link the nodes' c-th GPUs, so every class leaves and
    enters nodes through one NIC index only (rail c), each rail carrying exactly two trees, and
    every node's NIC of that rail is on both trees."""
    topo = load_topology("dgx-a100-80gb")
    ctx = Context(Router(build_graph(topo, 4)), topo)
    (phase,) = decompose(ctx, "all_reduce", "tree", list(range(32)), GiB).phases
    assert len(phase.classes) == 16
    assert {c.bytes_per_flow for c in phase.classes} == {GiB / 16}
    rails = []
    for flow in phase.classes:
        nics = {end for edge, _ in flow.usage for end in edge if end[0] == "nic"}
        assert len({nic[2] for nic in nics}) == 1, nics
        assert {nic[1] for nic in nics} == {0, 1, 2, 3}
        rails.append(next(iter(nics))[2])
    assert sorted(rails) == sorted(2 * sorted(set(rails)))
    assert len(set(rails)) == len(rails) // 2


def test_symmetric_skip_by_hand() -> None:
    """Four full DGX A100 nodes: nodes 2 and 3 repeat nodes 0 and 1 (same parity, same GPUs);
    a node to keep (degraded) neither stands for another nor is left out."""
    topo = load_topology("dgx-a100-80gb")
    assert symmetric_skip(topo, list(range(32))) == {2, 3}
    assert symmetric_skip(topo, list(range(32)), keep=[2]) == {3}
    assert symmetric_skip(topo, [0, 1, 8, 9, 16]) == frozenset()  # node 2 holds GPU 0 only: kept


def test_fabric_usage_is_the_switch_to_switch_part_only() -> None:
    """Between GPUs of one node: None (use the full route); across nodes under one leaf: no
    fabric edges; across leaves: leaf -> spines -> leaf, sprayed."""
    topo = load_topology("dgx-a100-80gb")
    router = Router(build_graph(topo, 64))
    gpu = [("gpu", n, i) for n in (0, 1, 63) for i in (0, 1)]
    assert router.fabric_usage(gpu[0], gpu[1]) is None
    assert router.fabric_usage(gpu[0], gpu[2]) == ()
    assert router.fabric_usage(gpu[0], gpu[4]) == (((("leaf", 0), ("spine", "*")), 1.0),
                                                   ((("spine", "*"), ("leaf", 31)), 1.0))
