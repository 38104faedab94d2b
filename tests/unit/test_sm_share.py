"""The SMs a collective takes from the compute beside it (``execution.comm_sms``, perf/kernels/comm_sms.py).

Oracles: the share is ``comm_sms / sms`` from the architecture whitepapers' SM counts (A100 108,
H100 SXM5 132); a GPU computing ``W`` seconds beside ``O`` seconds of collectives takes
``W + O c / S`` (compute on ``S - c`` of ``S`` SMs while they run). ZeRO-3 on a compute-bound
layer hides every gather but the first and every reduce-scatter but the last, so the analytical
step grows by exactly the share of the hidden DP time, and the discrete-event engine, which
observes the overlap op by op, grows by the same seconds. Properties: more SMs to the collectives
never speed a step up, in either engine, and ``comm_sms: 0`` is the model without the mechanism.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.kernels.comm_sms import comm_sm_share, comm_sms, contention_s
from simcluster.perf.stage_work import scenario_layer_times
from simcluster.perf.step import estimate_step
from simcluster.sim.commclock import CommClock, extension_s
from simcluster.sim.step import simulate_step
from simcluster.spec import Scenario, load_scenario, schema
from simcluster.spec.hardware import AcceleratorSpec
from tests.golden.sim_cases import tiny

WIDE = {"name": "wide", "layers": 4, "hidden": 2048, "heads": 16, "vocab": 1024, "seq_len": 2048}


def _wide(zero: int, sms: int | None, topology: str = "dgx-a100-80gb", **execution: Any) -> Scenario:
    # 50M parameters per layer against ~0.9 TFLOP per layer and micro-batch on 16 GPUs: the
    # collectives hide behind compute (tests/unit/test_zero_sharding.py)
    return load_scenario({
        "name": "wide", "model": WIDE, "precision": "bf16",
        "cluster": {"topology": topology, "nodes": 2},
        "execution": {"comm_sms": sms, **execution},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": 64, "micro_batch": 4,
                        "zero_stage": zero}})


def test_share_is_the_collective_sms_over_the_whitepaper_count() -> None:
    assert comm_sm_share(_wide(3, 16)) == pytest.approx(16 / 108)  # A100: 108 SMs
    assert comm_sm_share(_wide(3, 16, "dgx-h100")) == pytest.approx(16 / 132)  # H100 SXM5: 132
    assert comm_sm_share(_wide(3, 0)) == 0.0
    assert comm_sm_share(_wide(3, 500)) == 1.0  # never more than the whole GPU


def test_default_is_two_nccl_channels_per_nic() -> None:
    # 8 NICs per DGX node: 16 channels, as NCCL logs on such nodes (NVIDIA/nccl#1453); one NIC
    # per consumer box: 2; never above NCCL 2.x's MAXCHANNELS (32)
    assert comm_sms(_wide(3, None)) == 16
    assert comm_sms(tiny(pp=1)) == 2
    assert comm_sm_share(tiny(pp=1)) == pytest.approx(2 / 84)  # RTX 3090 Ti: 84 SMs
    wide_nics = load_scenario({
        "name": "n", "model": WIDE, "precision": "bf16",
        "cluster": {"topology": {"preset": "dgx-a100-80gb", "scale_out": {"nics_per_node": 32}},
                    "nodes": 2},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": 64, "micro_batch": 4}})
    assert comm_sms(wide_nics) == 32


def test_unknown_sm_count_takes_nothing() -> None:
    unknown = {"preset": "b200", "sms": 0}  # a part whose SM count is not stated
    assert schema.parse(AcceleratorSpec, {**catalog.entry("accelerators", "b200"), "sms": 0}).sms == 0
    s = load_scenario({"name": "b", "model": WIDE, "precision": "bf16",
                       "cluster": {"topology": {"preset": "dgx-a100-80gb",
                                                "accelerator": unknown}, "nodes": 2},
                       "parallelism": {"tp": 1, "pp": 1, "global_batch": 64, "micro_batch": 4,
                                       "zero_stage": 3}})
    assert comm_sm_share(s) == 0.0


def test_contention_is_the_share_of_the_overlap() -> None:
    # W + O c / S: 10 s of collectives beside compute, 16 of 108 SMs
    assert contention_s(16 / 108, 10.0) == pytest.approx(10.0 * 16 / 108)
    assert contention_s(0.5, -1.0) == 0.0


def test_tile_model_and_accelerator_must_count_the_same_sms() -> None:
    entry = catalog.entry("accelerators", "h100-sxm")
    entry["sms"] = 100
    with pytest.raises(SpecError) as err:
        schema.parse(AcceleratorSpec, entry)
    assert "gemm_tiles.sms" in str(err.value)
    assert "100" in str(err.value)


@pytest.mark.parametrize("engine", ["analytical", "des"])
def test_zero3_step_grows_by_the_share_of_the_hidden_gathers(engine: str) -> None:
    """Compute overlapped by the gathers runs its GEMMs and attention on 92 of 108 SMs and its
    memory-bound kernels on the HBM bandwidth 2 x busbw leaves: the step grows by
    ``hidden x (1 - 1/slow)``, ``slow`` computed here from the layer's own operators."""
    off, on = _wide(3, 0), _wide(3, 16)
    hidden = estimate_step(off).dp_hidden_s  # every gather and reduce-scatter beside compute
    assert hidden > 0
    run = estimate_step if engine == "analytical" else simulate_step
    grown = run(on).iteration_time_s - run(off).iteration_time_s
    layer = scenario_layer_times(on)
    memory = sum(o.time_s + o.backward_s for o in layer.operators if o.kind == "memory")
    compute = layer.forward_s + layer.backward_s - memory
    busbw = collective_time("reduce_scatter", 2**30, comm_plan.groups(on).dp).busbw_Bps
    left = 1 - 2 * busbw / (2039e9 * 0.79)  # A100 80GB achieved bandwidth (docs/catalog.md)
    slow = (compute * 108 / 92 + memory / left) / (compute + memory)
    assert grown == pytest.approx(hidden * (1 - 1 / slow), rel=1e-9)
    assert 16 / 108 < 1 - 1 / slow < 0.25
    assert run(on).breakdown.compute - run(off).breakdown.compute == pytest.approx(grown, rel=1e-9)


@pytest.mark.parametrize("zero", [0, 1])
def test_engines_agree_on_the_dp_buckets_and_gathers_beside_compute(zero: int) -> None:
    """Overlapped DP buckets (ZeRO-0) and ZeRO-1's overlapped weight gathers: the DES extends each
    op by what it overlapped, the closed form charges the hidden seconds; within 5%."""
    grown = [run(_wide(zero, 16)).iteration_time_s - run(_wide(zero, 0)).iteration_time_s
             for run in (estimate_step, simulate_step)]
    assert grown[0] > 0
    assert grown[1] == pytest.approx(grown[0], rel=0.05)


def test_no_overlap_no_contention() -> None:
    # the reduction after the backward, the weights gathered before the forward: nothing beside
    # compute, so nothing changes
    kwargs = {"overlap_grad_reduce": False, "overlap_param_gather": False}
    for run in (estimate_step, simulate_step):
        assert (run(_wide(1, 16, **kwargs)).iteration_time_s
                == run(_wide(1, 0, **kwargs)).iteration_time_s)


def test_comm_clock_counts_time_with_any_collective_in_flight() -> None:
    clock = CommClock()
    clock.start(1.0)
    clock.start(2.0)  # a second one beside the first: counted once
    assert clock.busy(3.0) == pytest.approx(2.0)
    clock.stop(4.0)
    clock.stop(5.0)
    assert clock.busy(9.0) == pytest.approx(4.0)
    clock.start(10.0)
    assert clock.busy(10.5) == pytest.approx(4.5)


def test_extension_owes_the_share_less_what_was_run() -> None:
    assert extension_s(0.25, 4.0, 0.0) == pytest.approx(1.0)
    assert extension_s(0.25, 4.0, 1.0) == 0.0
    assert extension_s(0.25, 5.0, 1.0) == pytest.approx(0.25)


@settings(max_examples=20, deadline=None)
@given(low=st.integers(0, 64), more=st.integers(1, 64), zero=st.sampled_from([0, 1, 2, 3]),
       overlap=st.booleans())
def test_more_collective_sms_never_speed_a_step_up(low: int, more: int, zero: int,
                                                   overlap: bool) -> None:
    execution = {"overlap_grad_reduce": overlap, "overlap_param_gather": overlap}
    for run in (estimate_step, simulate_step):
        steps = [run(tiny(pp=1, zero_stage=zero, execution={**execution, "comm_sms": c}))
                 .iteration_time_s for c in (low, low + more)]
        assert steps[1] >= steps[0] * (1 - 1e-12)


def test_overlap_share_oracle() -> None:
    """8 s of GEMMs on 80% of the SMs and 2 s of memory-bound kernels on half the bandwidth:
    (8/0.8 + 2/0.5) / 10 = 1.4x, so 1 - 1/1.4 = 0.2857 extra per overlapped second."""
    from simcluster.perf.kernels.comm_sms import _overlap_share

    assert _overlap_share(0.2, 0.5, 8.0, 2.0) == pytest.approx(1 - 1 / 1.4, rel=1e-12)
    assert _overlap_share(0.2, 1.0, 8.0, 0.0) == pytest.approx(0.2, rel=1e-12)  # SMs only


@given(st.floats(0.0, 0.9), st.floats(0.1, 1.0), st.floats(0.001, 10.0), st.floats(0.0, 10.0))
def test_overlap_share_lies_between_its_two_parts(sm: float, hbm: float, compute: float,
                                                  memory: float) -> None:
    """The layer's slowdown is a weighted mean of the GEMMs' (1/(1 - sm)) and the memory-bound
    kernels' (1/hbm), so the share lies between sm and 1 - hbm."""
    from simcluster.perf.kernels.comm_sms import _overlap_share

    share = _overlap_share(sm, hbm, compute, memory)
    low, high = sorted((sm, 1.0 - hbm))
    assert low - 1e-12 <= share <= high + 1e-12


def test_a_group_inside_one_node_rings_on_24_channels() -> None:
    """NCCL's log on one 8x H100 node: "24 coll channels" (aws-do-eks nccl-test README); the
    same on an HGX A100 ("Channel 23/24", nccl-tests#100); 16 on two nodes."""
    one_node = load_scenario({
        "name": "w", "model": WIDE, "precision": "bf16",
        "cluster": {"topology": "dgx-h100", "nodes": 1},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": 16, "micro_batch": 2, "zero_stage": 3}})
    assert comm_plan.groups(one_node).dp.nodes == 1
    assert comm_sms(one_node, intra_node=True) == 24
    assert comm_sms(_wide(3, None, "dgx-h100")) == 16
