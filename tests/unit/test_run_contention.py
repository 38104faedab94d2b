"""Tier B contention and link perturbations in `simcluster run` (issue 4 "Done when")."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster.run.single import simulate
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SPINE = ROOT / "scenarios" / "oversubscribed-spine.yaml"


@pytest.mark.parametrize("engine", ["des", "analytical"])
def test_dp_rings_over_an_oversubscribed_spine_slow_each_other(engine: str) -> None:
    contended = simulate(load_scenario(SPINE), engine=engine)
    alone = simulate(load_scenario(SPINE), contention="off", engine=engine)
    # Hand count (tests/unit/test_flows_contention.py): 8 ring flows share each leaf's uplinks,
    # which carry half the leaf's downlink bandwidth at 2:1, so each gets half its NIC.
    assert contended.contention["dp_comm"] == pytest.approx(2.0)
    b_on, b_off = contended.step.breakdown, alone.step.breakdown
    assert b_on.dp_comm == pytest.approx(2.0 * b_off.dp_comm)
    assert b_on.compute == b_off.compute
    assert contended.step.iteration_time_s > alone.step.iteration_time_s
    assert contended.to_dict()["contention"]["dp_comm"] == pytest.approx(2.0)


def test_non_blocking_fabric_skips_tier_b() -> None:
    s = load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1"])
    assert simulate(s).contention == {}
    assert simulate(s, contention="on").contention["dp_comm"] == pytest.approx(1.0)


def test_uniform_link_degradation_slows_communication_only() -> None:
    """Slower links slow the collectives; the compute beside them changes only by the HBM
    bandwidth a slower collective takes (perf/kernels/comm_sms.py): within 0.1%."""
    base = simulate(load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1"]),
                    engine="analytical")
    half = simulate(load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1",
                                          "perturbations.link_bandwidth=[{factor: 0.5}]"]),
                    engine="analytical")
    assert half.step.breakdown.compute == pytest.approx(base.step.breakdown.compute, rel=1e-3)
    assert half.step.dp_total_s > base.step.dp_total_s
    assert half.step.iteration_time_s > base.step.iteration_time_s


def test_one_degraded_node_is_priced_by_contention_in_the_analytical_engine() -> None:
    s = load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1",
                              "perturbations.link_bandwidth=[{node: 1, factor: 0.5}]"])
    result = simulate(s, engine="analytical")
    assert result.contention["dp_comm"] == pytest.approx(2.0)


def test_one_degraded_node_is_simulated_by_the_des() -> None:
    healthy = load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1"])
    degraded = load_scenario(SPINE, ["cluster.topology.scale_out.oversubscription=1",
                                     "perturbations.link_bandwidth=[{node: 1, factor: 0.5}]"])
    slow, base = simulate(degraded), simulate(healthy)
    assert slow.contention == {}  # the DES models the slow node's ports itself
    assert slow.step.breakdown.dp_comm > base.step.breakdown.dp_comm
