"""Tier B routes: the memoised router equals simcluster.topology.route; spray splits evenly."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
import yaml

from simcluster import catalog
from simcluster.flows.capacity import bundle_members, link_capacities
from simcluster.flows.plan import SPINES
from simcluster.flows.routes import Router
from simcluster.spec import load_topology
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import build_graph, gpu_vertex, route


def _topology(name: str, **scale_out: Any) -> TopologySpec:
    raw = yaml.safe_load(catalog.topology_path(name).read_text())
    raw = copy.deepcopy(raw)
    raw["scale_out"].update(scale_out)
    return load_topology(raw)


CASES = [
    (_topology("dgx-a100-80gb", switch_radix=16, oversubscription=2.0), 4),
    (_topology("dgx-h100"), 3),
    (_topology("dgx-h100", fabric="fat-tree", switch_radix=16), 3),
    (_topology("dgx-a100-80gb", fabric="single-switch"), 2),
    (_topology("box-4x3090ti-pcie"), 2),
    (_topology("box-4x3090ti-nvlink"), 2),
    (_topology("gb200-nvl72"), 20),
]


@pytest.mark.parametrize(("topo", "nodes"), CASES)
def test_router_equals_topology_route(topo: TopologySpec, nodes: int) -> None:
    graph = build_graph(topo, nodes)
    router = Router(graph, spray=False)
    gpus = [gpu_vertex(topo, r) for r in range(0, nodes * topo.gpus_per_node, 3)]
    for src, dst in itertools.permutations(gpus, 2):
        assert list(router.paths(src, dst)[0]) == route(graph, src, dst)
        assert dict(router.usage(src, dst)) == dict.fromkeys(route(graph, src, dst), 1.0)


def test_spray_uses_every_spine_evenly_and_bundles_them() -> None:
    topo = _topology("dgx-a100-80gb", switch_radix=16, oversubscription=2.0)
    graph = build_graph(topo, 2)
    router = Router(graph, spray=True)
    src, dst = gpu_vertex(topo, 0), gpu_vertex(topo, 8)
    paths = router.paths(src, dst)
    assert len(paths) == 4  # ceil(8 NICs / 2) spines
    usage = dict(router.usage(src, dst))
    leaf0, leaf1 = ("leaf", 0), ("leaf", 1)
    assert usage[(leaf0, SPINES)] == 1.0
    assert usage[(SPINES, leaf1)] == 1.0
    members = bundle_members(graph, (leaf0, SPINES))
    assert members is not None
    assert len(members) == 4
    caps = link_capacities(graph, [(leaf0, SPINES), members[0]])
    assert caps[(leaf0, SPINES)] == pytest.approx(4 * caps[members[0]])


def test_unknown_vertex_is_a_spec_error() -> None:
    topo = load_topology("dgx-a100-80gb")
    router = Router(build_graph(topo, 1))
    with pytest.raises(Exception, match="not a vertex"):
        router.usage(gpu_vertex(topo, 0), gpu_vertex(topo, 9))
