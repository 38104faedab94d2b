"""Tensor-parallel communication overlap (``execution.tp_comm_overlap``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.perf import comm_plan
from simcluster.perf.stage_work import scenario_layer_times
from simcluster.perf.tp_overlap import (
    PIPELINE_SPLITS,
    blocks,
    exposed_bulk,
    exposed_pipelined,
    margin_s,
    overlapped_layer_s,
)
from simcluster.run.single import simulate
from simcluster.spec import load_scenario

LLAMA = "scenarios/llama3-405b-16k-h100.yaml"  # tp 8 with sequence parallelism
times = st.floats(0.0, 10.0, allow_nan=False)


def test_exposed_oracles() -> None:
    assert exposed_pipelined(4.0, 1.0, 4) == pytest.approx(3.0 + 0.25)  # comm-bound: excess + chunk
    assert exposed_pipelined(1.0, 4.0, 4) == pytest.approx(0.25)  # GEMM-bound: one chunk of comm
    assert exposed_bulk(1.0, 4.0) == 0.0
    assert exposed_bulk(5.0, 4.0) == 1.0


@given(times, times, st.integers(1, 16))
def test_overlap_never_exposes_more_than_the_communication(c: float, g: float, n: int) -> None:
    assert 0.0 <= exposed_pipelined(c, g, n) <= c + 1e-12
    assert 0.0 <= exposed_bulk(c, g) <= c
    assert exposed_bulk(c, g) <= exposed_pipelined(c, g, n) + 1e-12  # chunking costs a fill


def _layer(mode: str) -> tuple[float, float]:
    s = load_scenario(LLAMA, [f"execution.tp_comm_overlap={mode}"])
    return comm_plan.tp_layer_comm_s(s, comm_plan.groups(s), scenario_layer_times(s))


def test_modes_order_and_the_none_mode_is_todays_model() -> None:
    s = load_scenario(LLAMA)
    none = _layer("none")
    assert none == comm_plan.tp_layer_comm_s(s, comm_plan.groups(s))  # without GEMM times too
    bulk, pipelined = _layer("bulk"), _layer("pipelined")
    assert bulk[0] == none[0]  # bulk overlaps only backward pairs
    assert pipelined[0] < bulk[0]
    assert pipelined[1] <= bulk[1] < none[1]


def test_pipelined_layer_oracle() -> None:
    s = load_scenario(LLAMA, ["execution.tp_comm_overlap=pipelined"])
    layer = scenario_layer_times(s)
    g, c = 0.002, 0.003  # gather and scatter seconds, made up for the oracle
    fwd, bwd = overlapped_layer_s("pipelined", 8, g, c, layer)
    want_f = want_b = 0.0
    for b in blocks(layer):
        want_f += exposed_pipelined(g, b.column_fwd, 8) + exposed_pipelined(c, b.row_fwd,
                                                                           PIPELINE_SPLITS)
        want_b += exposed_pipelined(g, b.row_dgrad, 8) + exposed_bulk(c, b.column_wgrad)
    assert (fwd, bwd) == pytest.approx((want_f, want_b))


def test_no_sequence_parallelism_means_no_overlap() -> None:
    items = ["parallelism.sequence_parallel=false", "execution.tp_comm_overlap=pipelined"]
    s = load_scenario(LLAMA, items)
    plain = load_scenario(LLAMA, ["parallelism.sequence_parallel=false"])
    layer = scenario_layer_times(s)
    assert comm_plan.tp_layer_comm_s(s, comm_plan.groups(s), layer) == \
        comm_plan.tp_layer_comm_s(plain, comm_plan.groups(plain), layer)


def test_both_engines_see_the_overlap() -> None:
    for engine in ("analytical", "des"):
        base = simulate(load_scenario(LLAMA), engine=engine).to_dict()
        over = simulate(load_scenario(LLAMA, ["execution.tp_comm_overlap=pipelined"]),
                        engine=engine).to_dict()
        assert over["time_breakdown_s"]["tp_comm"] < base["time_breakdown_s"]["tp_comm"]
        assert over["iteration_time_s"] < base["iteration_time_s"]


def test_overlap_kernels_take_their_sms_from_the_gemms() -> None:
    """Megatron-Bridge's H100 configuration (simcluster/perf/tp_overlap.py): the projection's
    pipelined reduce-scatter keeps 24 of the H100's 132 SMs from its GEMM for the GEMM's whole run
    (24/108 more time), the MLP's 1 (1/131), and the bulk reduce-scatters 4 of 132 while they hide
    beside the weight-gradient GEMMs."""
    s = load_scenario(LLAMA, ["execution.tp_comm_overlap=pipelined"])
    layer = scenario_layer_times(s)
    g, c = 0.002, 0.003
    attention, mlp = blocks(layer)
    fwd0, bwd0 = overlapped_layer_s("pipelined", 8, g, c, layer)
    fwd, bwd = overlapped_layer_s("pipelined", 8, g, c, layer, 132)
    assert fwd - fwd0 == pytest.approx(attention.row_fwd * 24 / 108 + mlp.row_fwd / 131)
    hidden = sum(min(c, b.column_wgrad) for b in (attention, mlp))
    assert bwd - bwd0 == pytest.approx(hidden * 4 / 132)
    assert margin_s(1.0, 24, 0) == 0.0  # SM count unknown: nothing taken


def test_the_scenario_passes_its_sm_count() -> None:
    s = load_scenario(LLAMA, ["execution.tp_comm_overlap=pipelined"])
    layer = scenario_layer_times(s)
    with_sms = comm_plan.tp_layer_comm_s(s, comm_plan.groups(s), layer)
    topo = s.cluster.topology
    topo = dataclasses.replace(topo, accelerator=dataclasses.replace(topo.accelerator, sms=0))
    unknown = dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, topology=topo))
    without = comm_plan.tp_layer_comm_s(unknown, comm_plan.groups(unknown), layer)
    assert with_sms[0] > without[0]
    assert with_sms[1] > without[1]
