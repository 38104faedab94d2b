"""Issue 24 item 4: ``scale_up.latency_us`` and ``scale_out.latency_us`` reach the collective model
(both tiers) and the step: a link slower than the one a calibration class describes pays the
difference on every algorithm step."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.catalog import topology_path
from simcluster.perf.collectives import collective_time
from simcluster.perf.collectives_calibration import link_classes, match_class
from simcluster.perf.collectives_group import comm_group
from simcluster.perf.step import estimate_step
from simcluster.spec import load_scenario
from simcluster.spec.loader import load_topology

DGX = load_topology(topology_path("dgx-h100"))


def _with(topo: object, layer: str, latency_s: float) -> object:
    part = getattr(topo, layer)
    return dataclasses.replace(topo, **{layer: dataclasses.replace(part, latency_s=latency_s)})


def test_every_class_states_the_link_latency_of_its_steps() -> None:
    assert all(c.link_latency_s >= 0 for c in link_classes())


def test_the_shipped_latency_changes_nothing_and_an_excess_adds_per_step_oracle() -> None:
    cls = match_class("scale_up", "nvswitch", DGX.scale_up.bandwidth_Bps)
    same = cls.at(DGX.scale_up.bandwidth_Bps, False, cls.link_latency_s)
    slow = cls.at(DGX.scale_up.bandwidth_Bps, False, cls.link_latency_s + 10e-6)
    for base, a, b in zip(cls.protocols, same.protocols, slow.protocols, strict=True):
        assert a.step_s == base.step_s
        assert b.step_s == pytest.approx(base.step_s + 10e-6)
    assert cls.at(1e9, False, 0.0).protocols[0].step_s == 0.0  # never below zero


@pytest.mark.parametrize(("layer", "nodes"), [("scale_up", 1), ("scale_out", 4)])
def test_each_latency_key_moves_a_collective(layer: str, nodes: int) -> None:
    size = 8 * nodes
    base = collective_time("all_reduce", 1e4, comm_group(DGX, size, 1)).time_s
    slow = collective_time("all_reduce", 1e4, comm_group(_with(DGX, layer, 1e-3), size, 1)).time_s
    assert slow > base + 1e-3  # at least one step of a 1 ms link


@pytest.mark.parametrize("key", ["scale_up.latency_us", "scale_out.latency_us"])
def test_each_latency_key_moves_the_step(key: str) -> None:
    base = load_scenario("scenarios/default.yaml")
    slow = load_scenario("scenarios/default.yaml", [f"cluster.topology.{key}=1000"])
    assert estimate_step(slow).iteration_time_s > estimate_step(base).iteration_time_s


@given(st.floats(0.0, 1e-3), st.floats(0.0, 1e-3))
def test_a_slower_link_is_never_faster(a: float, b: float) -> None:
    low, high = sorted((a, b))
    group_low = comm_group(_with(DGX, "scale_out", low), 16, 1)
    group_high = comm_group(_with(DGX, "scale_out", high), 16, 1)
    for nbytes in (1e3, 1e6, 1e9):
        assert collective_time("all_reduce", nbytes, group_high).time_s >= \
            collective_time("all_reduce", nbytes, group_low).time_s - 1e-15
