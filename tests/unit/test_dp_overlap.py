"""The data-parallel reduction beside the step (perf/dp_overlap.py, perf/comm_plan.dp_buckets):
hand oracles, and the discrete-event engine, which runs the same buckets on its DP streams."""

from __future__ import annotations

import math

import pytest

from simcluster.perf import comm_plan
from simcluster.perf.dp_overlap import chunk_release_s
from simcluster.perf.memory import grad_bytes_of
from simcluster.perf.param_gather import ParamGather, gather_exposed_s
from simcluster.perf.stage_work import stage_chunk_params
from simcluster.perf.step import estimate_step
from simcluster.perf.zero3 import Zero3Layer, pass_exposed_s, zero3_step_s
from simcluster.sim import simulate_step
from simcluster.spec import load_scenario
from tests.conftest import ROOT

DEFAULT = ROOT / "scenarios" / "default.yaml"
PLAN = ROOT / "scenarios" / "plan-10b-300b.yaml"


def test_release_of_one_chunk_by_hand() -> None:
    """4 s of reduction in 4 buckets, released at 1/4, 2/4, 3/4 and the end of an 8 s backward:
    the stream starts 2 s in and keeps up (a bucket of 1 s per 2 s of op), so it runs beside 6 s
    of the op (min(R, D) (n-1)/n = 4 x 3/4 = 3 s of it reducing) and ends 1 s after the op (the
    last bucket). One bucket of 3 s: released at the end, nothing beside, all of it after."""
    assert chunk_release_s((4.0,), (4,), (2,), 8.0, None, 1) == pytest.approx((1.0, 3.0))
    assert chunk_release_s((3.0,), (1,), (2,), 8.0, None, 1) == pytest.approx((3.0, 0.0))
    # 10 s of reduction in 5 buckets behind a 4 s op: the stream is busy from 0.8 s on, so it
    # ends 10 - 3.2 = 6.8 s after the op, 4 x 4/5 = 3.2 s of it beside
    assert chunk_release_s((10.0,), (5,), (1,), 4.0, None, 1) == pytest.approx((6.8, 3.2))
    # ZB-H1: the weight-gradient op (1 s) releases the buckets, not the 8 s backward
    assert chunk_release_s((4.0,), (4,), (2,), 8.0, 1.0, 1) == pytest.approx((3.25, 0.75))


def test_release_beside_an_op_the_stream_slows_by_hand() -> None:
    """A collective holding ``share`` of the SMs slows the op beside it to ``1 - share`` of its
    rate, and the op releases a bucket per fifth of its work. 10 s of reduction in 5 buckets
    behind a 4 s op at share 0.2: the stream starts after the first 0.8 s (alone) and never
    idles, so the rest of the op runs 3.2 / 0.8 = 4 s: the op ends at 4.8 s, 0.8 s late (0.2 of
    the 4 s beside the stream), and the stream at 0.8 + 10 = 10.8 s, 6 s after it. With 4 s in
    4 buckets behind an 8 s op the stream waits for each bucket: 3 s beside, the last 1 s after,
    as without contention."""
    late, beside = chunk_release_s((10.0,), (5,), (1,), 4.0, None, 1, share=0.2)
    assert (late, beside) == pytest.approx((6.0, 4.0))
    assert 0.2 * beside == pytest.approx(4.8 - 4.0)  # the op's extension (kernels.comm_sms.contention_s)
    assert chunk_release_s((4.0,), (4,), (2,), 8.0, None, 1, share=0.2) == pytest.approx(
        (1.0, 3.0))


def test_release_of_interleaved_chunks_by_hand() -> None:
    """Two chunks of one layer, 2 s of reduction in 2 buckets each, a 2 s backward per micro-batch
    (1 s per chunk), p = 2. Chunk 0 completes last: its stream starts 0.5 s into its last
    backward and ends 2 - 0.5 = 1.5 s after it. Chunk 1 completes p = 2 chunk-0 backwards (2 s)
    earlier: its stream, then chunk 0's, would end 4 - 0.5 - 2 = 1.5 s after the stage too. Each
    chunk's op has 1 x 1/2 = 0.5 s of reduction beside it."""
    assert chunk_release_s((2.0, 2.0), (2, 2), (1, 1), 2.0, None, 2) == pytest.approx((1.5, 1.0))
    # a chunk without gradients to reduce (no data parallelism) releases nothing
    assert chunk_release_s((0.0, 0.0), (0, 0), (1, 1), 2.0, None, 2) == (0.0, 0.0)


def test_buckets_are_megatrons() -> None:
    """Megatron-LM's DistributedDataParallel: buckets of max(40M, 1M x dp) parameters, one
    collective each. Llama 3 8B's first stage (tp 2, pp 2, dp 4) holds ~2.2e9 parameters: 55
    buckets of 40M; at dp 64 they would be 64M each."""
    s = load_scenario(DEFAULT)
    groups = comm_plan.groups(s)
    held = stage_chunk_params(s)[0][0]
    grad = grad_bytes_of(s)
    one, count = comm_plan.dp_buckets(s, groups, held, grad)
    assert s.parallelism.dp == 4
    assert count == math.ceil(held / 40e6)
    assert one == comm_plan.dp_reduce_s(s, groups, held / count, grad)
    wide = load_scenario(DEFAULT, ["cluster.nodes=32"])
    assert wide.parallelism.dp == 64
    assert comm_plan.dp_buckets(wide, comm_plan.groups(wide), held, grad)[1] == math.ceil(
        held / 64e6)
    # every bucket pays the collective's latency: more than one collective of everything
    assert one * count > comm_plan.dp_reduce_s(s, groups, held, grad)


@pytest.mark.parametrize("sets", [
    ["parallelism.pp=1", "parallelism.zero_stage=0"],
    ["parallelism.pp=1", "parallelism.zero_stage=1"],
    ["parallelism.pp=2"],
    ["parallelism.pp=4", "parallelism.tp=1", "parallelism.sequence_parallel=false",
     "parallelism.schedule=interleaved", "parallelism.virtual_stages=4",
     "parallelism.global_batch=64"],
    # DP 125: the buckets back up behind the last backward, which the stream slows throughout
    ["model=llama-3-8b", "cluster.nodes=125", "parallelism.tp=8", "parallelism.pp=1",
     "parallelism.global_batch=1000", "parallelism.zero_stage=0"],
])
def test_exposed_reduction_is_the_discrete_event_engines(sets: list[str]) -> None:
    """The reduction the stage's last op leaves exposed, bucket by bucket, is the DES's."""
    s = load_scenario(DEFAULT, sets)
    assert estimate_step(s).breakdown.dp_comm == pytest.approx(
        simulate_step(s).breakdown.dp_comm, rel=1e-9)


def test_weight_gathers_wait_for_forwards_with_their_tp_communication() -> None:
    """Overlapped ZeRO-1 gathers at DP 125 (scenarios/seed-spares-elastic.yaml: Llama 3 8B, TP 8)
    take 2.8 ms a layer, more than a layer's forward: each layer waits for its gather less the
    forward before it, whose TP all-reduces (as long as its GEMMs here) count. Both engines'
    steps within 0.1%, the exposed DP time within 3% (was 0.082 s against the DES's 0.041 s
    when only the forwards' GEMMs hid the gathers and the slowed last backward was ignored)."""
    s = load_scenario(ROOT / "scenarios" / "seed-spares-elastic.yaml")
    analytical, des = estimate_step(s), simulate_step(s)
    assert analytical.iteration_time_s == pytest.approx(des.iteration_time_s, rel=1e-3)
    assert analytical.breakdown.dp_comm == pytest.approx(des.breakdown.dp_comm, rel=0.03)


@pytest.mark.parametrize("sets", [
    ["parallelism.pp=1", "parallelism.zero_stage=1"],
    ["parallelism.pp=2"],
    ["parallelism.pp=4", "parallelism.tp=1", "parallelism.sequence_parallel=false",
     "parallelism.schedule=interleaved", "parallelism.virtual_stages=4",
     "parallelism.global_batch=64"],
])
def test_the_drains_ops_run_beside_their_own_buckets(sets: list[str]) -> None:
    """The last micro-batch's backward crosses every virtual stage, each op releasing its chunk's
    buckets as it runs: the SMs those take (execution.comm_sms) slow every op of that chain, not
    only the critical stage's. The step grows by what the DES's ops are extended by, to its
    extension passes: 4 passes leave ~share^5 of the extension, 5e-4 at the ~0.2 share of
    SMs and HBM the collectives take on this H100 node (perf/kernels/comm_sms.py)."""
    on = load_scenario(DEFAULT, sets)
    off = load_scenario(DEFAULT, [*sets, "execution.comm_sms=0"])
    grown = [run(on).iteration_time_s - run(off).iteration_time_s
             for run in (estimate_step, simulate_step)]
    assert grown[1] > 0
    assert grown[0] == pytest.approx(grown[1], rel=5e-4)


def _plan(sets: list[str]) -> object:
    return load_scenario(PLAN, ["cluster.topology=box-4x3090ti-nvlink", "cluster.nodes=32",
                                "parallelism.pp=1", "parallelism.recompute=full",
                                "parallelism.schedule=zb-h1", *sets])


@pytest.mark.parametrize("sets", [
    ["parallelism.tp=2", "parallelism.micro_batch=8", "parallelism.zero_stage=2",
     "parallelism.sequence_parallel=true"],
    ["parallelism.tp=1", "parallelism.micro_batch=4", "parallelism.zero_stage=3",
     "parallelism.sequence_parallel=false"],
])
def test_zb_h1_reduction_hides_behind_the_weight_gradient_op_only(sets: list[str]) -> None:
    """ZB-H1 splits the backward into the input gradient Bi and the weight gradient W: the
    gradients, hence the buckets (ZeRO-2) and the layers' reduce-scatters (ZeRO-3), come with W,
    a third of the backward, so less of the reduction hides than under 1F1B (one micro-batch
    here: 15% of the step). Both engines, within 1%."""
    s = _plan(sets)
    assert s.parallelism.micro_batches == 1
    analytical, des = estimate_step(s), simulate_step(s)
    assert analytical.iteration_time_s == pytest.approx(des.iteration_time_s, rel=0.01)
    one_f_one_b = estimate_step(_plan([*sets, "parallelism.schedule=1f1b"]))
    assert analytical.breakdown.dp_comm > one_f_one_b.breakdown.dp_comm + 0.1


def test_zero3_under_zb_h1_is_three_passes_by_hand() -> None:
    """Forward and Bi gather each layer's parameters, W reduce-scatters its gradients: per
    micro-batch the three passes of zero3.pass_exposed_s."""
    s = _plan(["parallelism.tp=1", "parallelism.micro_batch=4", "parallelism.zero_stage=3",
               "parallelism.sequence_parallel=false"])
    layer, n = Zero3Layer(gather_s=0.004, scatter_s=0.006), s.model.layers
    forward, backward, wgrad = 0.1 * n, 0.25 * n, 0.09 * n
    exposed, total = zero3_step_s(s, layer, forward, backward, wgrad)
    by_hand = (pass_exposed_s(n, 0.004, 0.1, 0.0, True)
               + pass_exposed_s(n, 0.004, 0.16, 0.0, True)
               + pass_exposed_s(n, 0.0, 0.09, 0.006, True))
    assert exposed == pytest.approx(s.parallelism.micro_batches * by_hand, rel=1e-12)
    assert total == pytest.approx(s.parallelism.micro_batches * n * 0.014, rel=1e-12)


def test_forwards_beside_the_weight_gathers_run_longer_and_hide_more() -> None:
    """ZeRO-1/2's overlapped per-layer gathers (1 s each) before 4 layers of 0.8 s forward: a
    flow shop exposing 1 + 3 x 0.2 = 1.6 s. Beside the gathers the forwards run 1 + share times
    longer (share 0.25: 1 s each), so only the first gather is exposed."""
    pg = ParamGather(total_s=4.0, layer_s=1.0, overlapped=True)
    assert gather_exposed_s(pg, (4,), 3.2, 0) == pytest.approx(1.6)
    assert gather_exposed_s(pg, (4,), 3.2, 0, share=0.25) == pytest.approx(1.0)
