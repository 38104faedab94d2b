"""Contention factors (Tier B) of a scenario: oversubscribed spine vs rings kept under one leaf.

The cluster: two DGX A100 nodes (8 GPUs, 8 x 200G HDR NICs at 25 GB/s each), TP = 4, so DP = 4
groups ``{o, o+4, o+8, o+12}``, two members per node. Each DP ring has C = 2 channels; each channel
leaves node 0 once and node 1 once, through different NICs, so a group alone uses 2 of a leaf's
uplinks' worth of traffic, all 4 groups together 8.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from simcluster import catalog
from simcluster.flows import contention, dp_groups, efficiencies, pp_pairs
from simcluster.spec import load_scenario, load_topology
from simcluster.spec.scenario import Scenario

NIC_Bps = 25e9


def _scenario(switch_radix: int, oversubscription: float, pp: int = 1, nodes: int = 2) -> Scenario:
    topo = copy.deepcopy(yaml.safe_load(catalog.topology_path("dgx-a100-80gb").read_text()))
    topo["scale_out"].update(switch_radix=switch_radix, oversubscription=oversubscription)
    raw: dict[str, Any] = {
        "schema": "simcluster/scenario/v1", "name": "two-leaves", "model": "gpt3-1.7b",
        "cluster": {"topology": topo, "nodes": nodes},
        "parallelism": {"tp": 4, "pp": pp, "micro_batch": 1, "global_batch": 64},
        "precision": "bf16"}
    return load_scenario(raw)


def test_groups_follow_megatron_order() -> None:
    s = _scenario(16, 2.0)
    assert dp_groups(s) == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert pp_pairs(_scenario(16, 2.0, pp=2, nodes=4)) == [(r, r + 16) for r in range(16)]


def test_two_to_one_spine_halves_every_ring() -> None:
    """Radix 16: 8 ports per leaf, one node per leaf. Oversubscription 2: ceil(8/2) = 4 spines,
    each leaf->spine link 8 x 25 / 2 / 4 = 25 GB/s, so 100 GB/s of uplink per leaf (x efficiency e).

    Alone, a channel is limited by its NIC: r = 25e. Together, 4 groups x 2 channels = 8 flows leave
    each leaf: the sprayed uplink gives 100e / 8 = 12.5e each (< 25e, so it binds). Slowdown 2.
    """
    e = efficiencies(load_topology("dgx-a100-80gb"))["nic"]
    alone = NIC_Bps * e
    together = 4 * (8 * NIC_Bps / 2 / 4) * e / 8
    factors = contention(_scenario(16, 2.0))
    assert factors["dp_comm"] == pytest.approx(alone / together, rel=1e-9)
    assert factors["dp_comm"] == pytest.approx(2.0, rel=1e-9)
    assert factors["pp_comm"] == 1.0


def test_rings_under_one_leaf_are_unaffected() -> None:
    """Radix 32: 16 ports, both nodes under one leaf, no spine to share: factor 1."""
    assert contention(_scenario(32, 2.0))["dp_comm"] == pytest.approx(1.0)


def test_non_blocking_spine_is_unaffected() -> None:
    """Oversubscription 1: 8 spines of 25 GB/s per leaf carry the 8 channel flows at NIC rate."""
    assert contention(_scenario(16, 1.0))["dp_comm"] == pytest.approx(1.0)


def test_ecmp_hashing_is_never_better_than_spraying() -> None:
    s = _scenario(16, 2.0)
    assert contention(s, spray=False)["dp_comm"] >= contention(s)["dp_comm"] - 1e-9


def test_degraded_node_nics_slow_dp_by_the_factor() -> None:
    s = _scenario(32, 1.0)
    assert contention(s, degraded_nodes={1: 0.5})["dp_comm"] == pytest.approx(2.0)


def test_pipeline_sends_across_an_oversubscribed_spine() -> None:
    """PP = 2 on 4 nodes (2 per stage), radix 16: each stage-0 node sends 8 flows into a 4-uplink
    leaf: 2:1, so the sends take twice as long as one alone.
    """
    factors = contention(_scenario(16, 2.0, pp=2, nodes=4))
    assert factors["pp_comm"] == pytest.approx(2.0)
