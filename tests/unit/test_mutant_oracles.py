"""Independent oracles for the mutants that survived issue 15's spot-check (tests/MUTANTS.md).

Every expected value here is a hand computation from a cited formula or a published number, never
the function under test or today's output; each tolerance says where it comes from.
``python tests/mutants.py`` applies each mutation and checks that the named test fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from simcluster.horizon import BUCKETS, CheckpointPlan, FailureClass, HorizonConfig
from simcluster.horizon.fast import run_fast
from simcluster.horizon.machine import JobMachine
from simcluster.horizon.sampling import FAILURE, HORIZON, BufferedPoisson, Event, WeibullSource
from simcluster.perf import collectives_formulas as f
from simcluster.perf.collectives import collective_time, comm_group
from simcluster.perf.collectives_formulas import phase_steps
from simcluster.perf.comm_plan import groups, pp_message_s
from simcluster.perf.memory import stage_memory
from simcluster.perf.memory_stage import stage_activation_bytes
from simcluster.perf.reliability import daly_interval_s
from simcluster.perf.step import estimate_step
from simcluster.rng import generator
from simcluster.sim.build import _bucket_slots
from simcluster.sim.perturb import _placements
from simcluster.spec import load_topology
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario

GiB = 2**30


def _scenario(model: object, topology: str, nodes: int, parallelism: dict[str, object],
              execution: dict[str, object] | None = None) -> Scenario:
    return load_scenario({"model": model, "cluster": {"topology": topology, "nodes": nodes},
                          "parallelism": parallelism, "execution": execution or {}})


# 1. NVLS all-gather / reduce-scatter bus bandwidth -----------------------------------------------


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_nvls_all_gather_bus_bandwidth_is_n_minus_1_over_2n_of_all_reduce(op: str) -> None:
    """NCCL src/graph/tuning.cc (NVLS): the intra bus bandwidth is doubled for all-reduce only
    ("pipelines two ops") and scaled by (ppn-1)/ppn otherwise, so relative to the all-reduce NVLS
    bus bandwidth B an all-gather gets B (n-1)/(2n): 7/16 on 8 GPUs. The nccl-tests time is then
    alpha + (n-1)/n S / (B (n-1)/(2n)) = alpha + 2 S / B (hand algebra)."""
    n = 8
    assert f.nvls_bus_factor(op, n) == pytest.approx(7 / 16, rel=1e-15)
    assert f.nvls_bus_factor("all_reduce", n) == 1.0
    group = comm_group(load_topology("dgx-h100"), n, 1)
    assert group.intra is not None
    assert group.intra.nvls is not None
    cost = group.intra.nvls
    size = 8.0 * GiB  # far above the ramp, so the size is the size
    expected = cost.alpha_s + 2.0 * size / cost.bandwidth_Bps
    assert collective_time(op, size, group, "nvls").time_s == pytest.approx(expected, rel=1e-12)


# 2. Expert ZeRO group dp*cp/ep -------------------------------------------------------------------


def test_mixtral_optimizer_state_shards_experts_over_dp_cp_over_ep() -> None:
    """Mixtral 8x7B (Jiang et al. 2024 Table 1: 32 layers, dim 4096, FFN 14336 SwiGLU, 32 heads,
    8 KV heads x 128, vocab 32000 untied, 8 experts) on 32 GPUs, tp = pp = cp = 1, ep = 8, ZeRO-1.

    Hand count: experts 32 x 8 x 3 x 4096 x 14336 = 45.097e9 parameters, 1/ep of them per GPU;
    dense: attention 32 x (2 x 4096^2 + 2 x 4096 x 1024) = 1.342e9, embedding + output
    2 x 32000 x 4096 = 0.262e9, router 32 x 4096 x 8 = 1.0e6 (norms, 0.27e6, left out).
    Adam's 12 bytes/param (Megatron) sharded over dp*cp = 32 for dense and over the expert
    data-parallel group dp*cp/ep = 4 for experts (Megatron ``expert_data_parallel``):
    12 x (45.097e9 / 8 / 4 + 1.605e9 / 32) = 17.51e9 bytes. Tolerance 0.1%: the norms left out
    (0.27e6 x 12 / 32 bytes) and the rounding of the hand sums."""
    s = _scenario("mixtral-8x7b", "dgx-a100-80gb", 4,
                  {"global_batch": 64, "tp": 1, "ep": 8, "zero_stage": 1})
    assert (s.parallelism.dp, s.parallelism.cp) == (32, 1)
    experts = 32 * 8 * 3 * 4096 * 14336
    dense = 32 * (2 * 4096**2 + 2 * 4096 * 1024) + 2 * 32000 * 4096 + 32 * 4096 * 8
    expected = 12 * (experts / 8 / 4 + dense / 32)
    assert stage_memory(s, 0).optimizer_bytes == pytest.approx(expected, rel=1e-3)


# 3. Weibull scale with Gamma(1 + 1/k) ------------------------------------------------------------


@pytest.mark.parametrize("shape", [0.7, 1.5])
def test_weibull_failure_count_matches_nodes_rate_horizon(shape: float) -> None:
    """Renewal theorem: per node N(T)/T -> 1/mean gap, and the configured rate is 1/mean gap, so
    1000 nodes at 1/day over 400 days expect 400,000 failures whatever the shape k (a Weibull
    scale without Gamma(1+1/k) gives 1/Gamma(1+1/k): -21% at k = 0.7, +11% at k = 1.5).
    Tolerance 1.5%: the renewal transient (CV^2 - 1)/2 per node is 0.16% at k = 0.7
    (CV^2 = Gamma(1+2/k)/Gamma(1+1/k)^2 - 1 = 2.24), and the count's standard deviation
    sqrt(N CV^2) is 0.24% of N, so the band is over 5 sigma beyond the bias."""
    nodes, rate, horizon = 1000, 1.0 / 86400.0, 400 * 86400.0
    source = WeibullSource(nodes, rate, shape, generator(15, 0, "weibull-oracle"))
    count = 0
    for k in range(1, 41):  # in steps, as the sample path asks for chunks
        count += source.until(k * horizon / 40).size
    expected = nodes * rate * horizon
    assert abs(count - expected) / expected < 0.015


# 4. Daly bound 2M ---------------------------------------------------------------------------------


def test_daly_interval_between_m_and_2m_uses_the_formula() -> None:
    """Daly 2006 Eq. 37 holds for delta < 2M (M beyond): with delta = 1.5 h and M = 1 h,
    tau = sqrt(2 x 1.5 x 1)(1 + sqrt(0.75)/3 + 0.75/9) - 1.5 = 1.7321 x 1.3720 - 1.5 = 0.8764 h."""
    hour = 3600.0
    expected = (math.sqrt(3.0) * (1 + math.sqrt(0.75) / 3 + 0.75 / 9) - 1.5) * hour
    assert expected == pytest.approx(0.8764 * hour, rel=1e-4)
    assert daly_interval_s(1.5 * hour, hour) == pytest.approx(expected, rel=1e-12)
    assert daly_interval_s(2.0 * hour, hour) == hour


# 5. DP overlap window: the last backward --------------------------------------------------------


def test_dp_reduction_hides_behind_the_last_backward_not_the_forward() -> None:
    """With ``overlap_grad_reduce`` the gradient buckets are all-reduced while the last
    micro-batch's backward runs (Megatron DDP ``overlap_grad_reduce``), so when the reduction
    outlasts that backward the hidden part is the backward: 2/3 of one micro-batch's compute,
    since backward is twice the forward FLOPs (Narayanan et al. SC'21 s3.2; no recompute here).
    Band 0.6-0.72: per-GEMM efficiency may differ between forward and backward by ~10%. The SMs
    the collective holds are left out (``comm_sms: 0``): they would stretch the backward it hides
    behind (tests/unit/test_dp_overlap.py)."""
    s = _scenario({"preset": "gpt3-1.7b", "seq_len": 512}, "dgx-a100-80gb", 4,
                  {"global_batch": 64, "tp": 1, "pp": 1, "micro_batch": 1, "zero_stage": 0},
                  {"overlap_grad_reduce": True, "comm_sms": 0})  # ZeRO-0: no gather after the step
    e = estimate_step(s)
    per_micro_batch = e.breakdown.compute / s.parallelism.micro_batches
    assert e.dp_total_s > per_micro_batch  # the reduction outlasts the backward (precondition)
    assert 0.6 < e.dp_hidden_s / per_micro_batch < 0.72


# 6. Rollback resets the persist request point ---------------------------------------------------


class _FixedPath:
    """A sample path with fixed events (the horizon engine's stub)."""

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    def events(self) -> Iterator[Event]:
        return iter(self._events)


def test_rollback_to_durable_restarts_the_persist_count_from_it() -> None:
    """In-memory snapshots every 10 s of work (blocking 1 s), every 2nd persisted (1 s); failures
    lose host memory, so they restore the durable point. By hand (t, p):
    RUN 0-10, BLOCK -11 (snap 10), RUN -21, BLOCK -22 (snap 20, 2nd: persist until 23), RUN -32,
    BLOCK -33 (durable 20; snap 30), RUN -43, BLOCK -44 (snap 40, persist until 45).
    Failure at 44.5 (p 40.5): persist not finished, restore 20, rework 20.5; the persist count
    restarts at 20. DETECT -46.5, DIAGNOSE -49.5, RESTART -53.5, WARMUP -54.5, RUN -64.5,
    BLOCK -65.5 (snap 30), RUN -75.5, BLOCK -76.5 (snap 40 = 20 + 2 x 10: persist until 77.5),
    RUN -86.5, BLOCK -87.5 (durable 40; snap 50). Failure at 88 (p 50.5): restore 40, rework 10.5.
    Total rework 31.0 (51.0 if the count kept the lost snapshot at 40: restore 20 again)."""
    ck = CheckpointPlan(mode="in-memory", interval_s=10.0, blocking_s=1.0, persist_s=1.0,
                        persist_every=2)
    cls = FailureClass(name="f", rate_per_node_s=0.0, detect_s=2.0, replace=False,
                       in_memory_restore=False)
    cfg = HorizonConfig(nodes=1, work_s=1000.0, diagnose_s=3.0, restart_s=4.0, warmup_s=1.0,
                        classes=(cls,), checkpoint=ck)
    events: list[Event] = [(44.5, FAILURE, 0, 0.0), (88.0, FAILURE, 0, 0.0),
                           (200.0, HORIZON, -1, 0.0)]
    rec = run_fast(JobMachine(cfg), _FixedPath(events))  # type: ignore[arg-type]
    assert dict(zip(BUCKETS, rec.lost_s, strict=True))["rework"] == pytest.approx(31.0, abs=1e-9)


# 7. Full recompute: every in-flight layer input but one, plus one layer's working set ------------


def test_full_recompute_middle_stage_keeps_inputs_and_one_working_layer() -> None:
    """GPT-3 1.7B (SC'21 Table 1: 24 layers, h 2304, 24 heads, s 2048), b = 1, tp = 1, pp = 4
    1F1B, full recompute, no flash attention. Stage 1 (no embedding, no logits) has 6 layers and
    p - 1 = 3 micro-batches in flight (Narayanan et al. SC'21 s2.2): 18 layer-micro-batches.
    Korthikanti et al. 2022: a checkpointed layer keeps its input, 2sbh bytes; the layer being
    recomputed holds its whole working set sbh(34 + 5as/h) (Eq. 1), whose input is that same
    tensor: 17 x 2sbh + sbh(34 + 5as/h) = 824,180,736 bytes, exact in integers."""
    s = _scenario("gpt3-1.7b", "dgx-a100-80gb", 1,
                  {"global_batch": 16, "tp": 1, "pp": 4, "micro_batch": 1, "recompute": "full"})
    sq, b, h, a = 2048, 1, 2304, 24
    sbh = sq * b * h
    expected = 17 * 2 * sbh + sbh * 34 + 5 * a * sq * sq * b
    assert expected == 824_180_736
    assert stage_activation_bytes(s, 1, flash_attention=False) == pytest.approx(expected, rel=1e-12)


# 8. Straggler placement in Megatron's rank order (tp fastest, then cp, dp, pp) -------------------


def test_slow_gpu_placement_counts_context_parallel_ranks() -> None:
    """Megatron ``RankGenerator`` order tp-cp-ep-dp-pp: rank = tp_r + tp(cp_r + cp(dp_r +
    dp pp_r)). tp = cp = dp = pp = 2 on 2 nodes of 8: ranks 0-3 are replica 0 of stage 0, 4-7
    replica 1 of stage 0, 8-11 replica 0 of stage 1, 12-15 replica 1 of stage 1."""
    s = _scenario("gpt3-1.7b", "dgx-a100-80gb", 2,
                  {"global_batch": 16, "tp": 2, "cp": 2, "pp": 2, "micro_batch": 1})
    assert s.parallelism.dp == 2
    assert list(_placements(s, 0, None)) == [(0, 0)] * 4 + [(1, 0)] * 4
    assert list(_placements(s, 1, None)) == [(0, 1)] * 4 + [(1, 1)] * 4
    assert list(_placements(s, 1, 5)) == [(1, 1)]


# 9. DP bucket ready fractions -------------------------------------------------------------------


def test_dp_buckets_become_ready_evenly_through_the_releasing_op() -> None:
    """With ``overlap_grad_reduce``, Megatron DDP launches a bucket's reduction as soon as its
    gradients are complete; with the op's gradients split into n equal buckets in backward order,
    bucket k is complete after (k + 1)/n of the op, the last at its end: 1/4, 1/2, 3/4, 1 for
    n = 4. Without overlap the whole reduction waits for the stage's last op (index n_ops - 1),
    every bucket at that op's end. Bucket indices run on across releases (ZeRO-2 scatters first)."""
    releases = [(1, (0.1, 0.1), False), (3, (0.2, 0.2, 0.2, 0.2), True)]
    assert _bucket_slots(releases, 5, overlap=True) == {
        1: ((0, 0.5), (1, 1.0)),
        3: ((2, 0.25), (3, 0.5), (4, 0.75), (5, 1.0))}
    assert _bucket_slots(releases, 5, overlap=False) == {
        1: ((0, 1.0), (1, 1.0)),
        4: ((2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0))}


# 10. Tier B latency steps ------------------------------------------------------------------------


def test_tier_b_latency_steps_follow_nccl_tuning() -> None:
    """NCCL src/graph/tuning.cc latencies, as (intra-node, inter-node) step counts:
    tree all-reduce 2((ppn - 1) intraLat + ceil(log2 nNodes) interLat): 16 nodes x 8 -> (14, 8),
    5 nodes x 8 -> (14, 6); ring all-reduce 2(n - 1) steps of which nInterSteps = 2(nNodes - 1)
    cross nodes: 32 ranks on 4 nodes -> (56, 6); ring all-gather one pass -> (28, 3)."""
    assert phase_steps("all_reduce", "tree", 128, 16, 8) == [(14, 8)]
    assert phase_steps("all_reduce", "tree", 40, 5, 8) == [(14, 6)]
    assert phase_steps("all_reduce", "ring", 32, 4, 8) == [(56, 6)]
    assert phase_steps("all_gather", "ring", 32, 4, 8) == [(28, 3)]


# 27. Pipeline sends on the critical path (found by the 32-mutant suite run) ----------------------


@pytest.mark.parametrize(("schedule", "v", "messages"), [("1f1b", 1, 14), ("interleaved", 2, 30)])
def test_pipeline_sends_on_the_critical_path_count_the_critical_stages_own_plus_the_fill(
        schedule: str, v: int, messages: int) -> None:
    """p = 4 stages, m = 8 micro-batches. On the critical path are the critical stage's own sends,
    one each way per micro-batch chunk (Narayanan et al. SC'21 s2.2, Fig. 4; ``m v`` chunk slots
    with interleaving, s2.2.2), plus one each way per other stage for the fill and the drain. Here
    the last stage is critical (it holds the logits, 50k vocabulary), and it sends no output of
    the last virtual stage (the loss is local): one message fewer per micro-batch. By hand:
    8 x (2 - 1) + 2 x 3 = 14 sends, and 8 x (2 x 2 - 1) + 2 x 3 = 30 with v = 2. The unit is one
    send (``pp_message_s``, not what the count is about); the ratio is a small integer, exact."""
    s = _scenario({"preset": "gpt3-1.7b", "seq_len": 512}, "dgx-a100-80gb", 4,
                  {"global_batch": 64, "tp": 1, "pp": 4, "micro_batch": 1,
                   "schedule": schedule, "virtual_stages": v})
    assert s.parallelism.micro_batches == 8  # 64 sequences over dp = 32 / 4 = 8
    message = pp_message_s(s, groups(s))
    assert message > 0
    assert estimate_step(s).breakdown.pp_comm / message == pytest.approx(messages, rel=1e-12)


# 24. Exponential gaps of the failure process (a dense rate, so the mutant fails, not explodes) --


def test_poisson_source_draws_rate_times_horizon_events_in_chunks() -> None:
    """A Poisson process of rate 0.5/s over 2000 s has 1000 arrivals on average, standard
    deviation sqrt(1000) = 31.6 (Poisson count); the band is 5 sigma. Drawn in 20 chunks of
    100 s, the arrivals are increasing and inside their chunk. Gaps multiplied by the rate instead
    of divided give about 4000."""
    source = BufferedPoisson(0.5, generator(15, 0, "poisson-oracle"))
    parts = [source.until(100.0 * (k + 1)) for k in range(20)]
    for k, part in enumerate(parts):
        assert all(100.0 * k <= t < 100.0 * (k + 1) for t in part)
    arrivals = [float(t) for part in parts for t in part]
    assert arrivals == sorted(arrivals)
    assert abs(len(arrivals) - 1000) < 5 * math.sqrt(1000)
