"""ZeRO-2 reduce-scatters per micro-batch and ZeRO-3 per-layer gathers and reduce-scatters: closed
forms and both engines."""

from __future__ import annotations

from typing import Any

import pytest

from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.memory import grad_bytes_for
from simcluster.perf.step import estimate_step
from simcluster.perf.zero3 import Zero3Layer, pass_exposed_s, zero3_layer
from simcluster.sim import simulate_step
from simcluster.spec import Scenario, load_scenario
from tests.golden.sim_cases import tiny


@pytest.mark.parametrize(("args", "expected"), [
    ((4, 1.0, 3.0, 0.0, True), 1.0),             # gathers hidden but the first
    ((4, 3.0, 1.0, 0.0, True), 3.0 + 3 * 2.0),   # comm-bound: each later gather exceeds by 2
    ((4, 1.0, 3.0, 1.0, True), 2.0),             # backward hidden: first gather + last scatter
    ((4, 2.0, 1.0, 1.0, True), 2.0 + 3 * 2.0 + 1.0),
    ((4, 2.0, 1.0, 1.0, False), 4 * 3.0),        # no prefetch: everything blocks
    ((0, 2.0, 1.0, 1.0, True), 0.0),
])
def test_pass_exposed_by_hand(args: tuple[int, float, float, float, bool], expected: float) -> None:
    assert pass_exposed_s(*args) == pytest.approx(expected)


def _params(s: Scenario) -> int:
    """A tp = pp = 1 GPT's parameters by hand (SC'21 section 3.3): l (12h^2 + 13h) per layer,
    the embedding V h, learned positions s h, the untied output layer V h and the final norm."""
    m = s.model
    assert not m.tied_embeddings
    assert m.position == "learned"
    assert m.ffn_hidden == 4 * m.hidden
    return (m.layers * (12 * m.hidden**2 + 13 * m.hidden) + (2 * m.vocab + m.seq_len) * m.hidden
            + 2 * m.hidden)


def test_the_hand_count_of_the_tiny_gpt() -> None:
    assert _params(_zero3(True)) == 13_790_208  # 4 (12 512^2 + 13 512) + (2048 + 256) 512 + 1024


def _zero3(prefetch: bool, **kwargs: Any) -> Scenario:
    return tiny(tp=1, pp=1, zero_stage=3, execution={"zero3_prefetch": prefetch}, **kwargs)


def _layer(s: Scenario) -> Zero3Layer:
    layer = zero3_layer(s, comm_plan.groups(s), _params(s))
    assert layer is not None
    return layer


def test_layer_collectives_move_one_layer_of_16_bit_weights_and_gradients() -> None:
    s = _zero3(True)
    dp = comm_plan.groups(s).dp
    assert dp is not None
    assert dp.ranks == 8
    per_layer = _params(s) / s.model.layers  # a quarter of the hand count per ZeRO-3 unit
    layer = _layer(s)
    assert layer.gather_s == collective_time("all_gather", 2 * per_layer, dp).time_s
    grads = grad_bytes_for(s.precision) * per_layer  # fp32 gradients reduced in bf16 training
    assert layer.scatter_s == collective_time("reduce_scatter", grads, dp).time_s
    assert zero3_layer(tiny(tp=1, pp=1, zero_stage=1), comm_plan.groups(s), 1e6) is None


@pytest.mark.parametrize("prefetch", [True, False])
def test_analytical_step_books_every_pass_of_every_micro_batch(prefetch: bool) -> None:
    s = _zero3(prefetch)
    est, layer, n = estimate_step(s), _layer(s), s.model.layers
    st, m = est.stages[0], s.parallelism.micro_batches
    per_mb = (pass_exposed_s(n, layer.gather_s, st.forward_compute_s / n, 0.0, prefetch)
              + pass_exposed_s(n, layer.gather_s, st.backward_compute_s / n, layer.scatter_s,
                               prefetch))
    assert est.breakdown.dp_comm == pytest.approx(m * per_mb, rel=1e-12)
    assert est.dp_total_s == pytest.approx(m * n * (2 * layer.gather_s + layer.scatter_s))
    assert est.dp_hidden_s == pytest.approx(est.dp_total_s - est.breakdown.dp_comm)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_des_equals_the_closed_form_without_prefetch(schedule: str) -> None:
    s = _zero3(False, schedule=schedule)
    des, ana = simulate_step(s), estimate_step(s)
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=1e-12)
    assert des.breakdown.dp_comm == pytest.approx(ana.breakdown.dp_comm, rel=1e-9)
    assert all(not buckets for buckets in des.plan.dp_buckets)


def _compute_bound(zero_stage: int = 3, overlap: bool = True, batch: int = 64) -> Scenario:
    # 50M parameters per layer (100 MB gathered) against ~0.9 TFLOP per layer and micro-batch on
    # 16 A100: every gather but the first, and every reduce-scatter but the last, hide.
    model = {"name": "wide", "layers": 4, "hidden": 2048, "heads": 16, "vocab": 1024,
             "seq_len": 2048}
    return load_scenario({
        "name": "wide", "model": model, "precision": "bf16",
        "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
        # comm_sms 0: the SMs the collectives take are tested apart (test_sm_share.py)
        "execution": {"overlap_grad_reduce": overlap, "comm_sms": 0},
        "parallelism": {"tp": 1, "pp": 1, "global_batch": batch, "micro_batch": 4,
                        "zero_stage": zero_stage}})


def test_des_equals_the_closed_form_when_prefetch_hides_the_gathers() -> None:
    s = _compute_bound()
    layer, des, ana = _layer(s), simulate_step(s), estimate_step(s)
    st, n, m = ana.stages[0], s.model.layers, s.parallelism.micro_batches
    assert layer.gather_s + layer.scatter_s < st.forward_compute_s / n  # the premise
    assert ana.breakdown.dp_comm == pytest.approx(m * (2 * layer.gather_s + layer.scatter_s))
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=1e-12)
    assert des.breakdown.dp_comm == pytest.approx(ana.breakdown.dp_comm, rel=1e-9)
    # the DES counts the collectives' wall time, stretched where a gather and a scatter share
    assert des.dp_total_s >= ana.dp_total_s * (1 - 1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"topology": "dgx-a100-80gb", "nodes": 1}])
def test_when_communication_bound_the_des_lies_between_the_bounds(kwargs: dict[str, Any]) -> None:
    # Gathers and reduce-scatters share the links max-min fairly in the DES, so it can finish a
    # little before the closed form (which serialises them), never before the network's own work.
    fast, slow = simulate_step(_zero3(True, **kwargs)), simulate_step(_zero3(False, **kwargs))
    s = _zero3(True, **kwargs)
    ana, layer = estimate_step(s), _layer(s)
    work = s.parallelism.micro_batches * s.model.layers * (2 * layer.gather_s + layer.scatter_s)
    assert work <= fast.iteration_time_s <= ana.iteration_time_s * (1 + 1e-12)
    assert fast.iteration_time_s < slow.iteration_time_s


@pytest.mark.parametrize("prefetch", [True, False])
def test_zero3_records_chain_back_to_the_start(prefetch: bool) -> None:
    result = simulate_step(_zero3(prefetch))
    records = result.records
    assert {r.stream for r in records} >= {"compute", "dp", "dp-rs"}
    # a record's gate released it: it ended by the record's start (ops) or end (waits)
    assert all(records[r.gate].end_s <= (r.end_s if r.name.startswith("wait") else r.start_s)
               + 1e-15 for r in records if r.gate >= 0)
    path = result.critical_path
    assert path[0].start_s == 0.0
    assert path[-1].end_s == pytest.approx(result.iteration_time_s)



def _zero2_pair(**kwargs: Any) -> tuple[Scenario, Scenario]:
    # comm_sms 0: the SMs the collectives take are tested apart (test_sm_share.py)
    z1, z2 = (tiny(tp=1, pp=1, zero_stage=z, execution={"overlap_grad_reduce": False,
                                                        "comm_sms": 0}, **kwargs)
              for z in (1, 2))
    return z1, z2


def test_zero2_under_gpipe_hides_each_scatter_behind_one_backward_only() -> None:
    # GPipe runs every forward first, so an earlier micro-batch's reduce-scatter has only the
    # next backward to hide behind; both engines agree (one bucket per micro-batch).
    z1, z2 = _zero2_pair(schedule="gpipe")
    e1, e2, rs = estimate_step(z1), estimate_step(z2), _scatter(z2)
    st, m = e2.stages[0], z2.parallelism.micro_batches
    backward = st.total_s - st.forward_compute_s - (st.tp_s + st.cp_s + st.ep_s) / 3
    assert rs > st.total_s  # the premise: comm-bound, so the window matters
    assert e2.iteration_time_s == pytest.approx(
        e1.iteration_time_s + (m - 1) * (rs - backward), rel=1e-12)
    assert simulate_step(z2).iteration_time_s == pytest.approx(e2.iteration_time_s, rel=1e-12)


def _scatter(s: Scenario) -> float:
    held = _params(s)
    dp = comm_plan.groups(s).dp
    assert dp is not None
    return collective_time("reduce_scatter", held * grad_bytes_for(s.precision), dp).time_s


@pytest.mark.parametrize(("scenarios", "one_bucket"), [
    (_zero2_pair(topology="dgx-a100-80gb", nodes=2, batch=64), True),  # scatter outruns compute
    ((_compute_bound(1, False, 256), _compute_bound(2, False, 256)), False),  # scatter hides
])
def test_zero2_reduce_scatters_every_earlier_micro_batch(scenarios: tuple[Scenario, Scenario],
                                                         one_bucket: bool) -> None:
    """ZeRO-2 = ZeRO-1 plus m - 1 reduce-scatters, each behind the next micro-batch's compute on
    the serial DP stream: only what outruns the compute is exposed (a backlog at the end)."""
    z1, z2 = scenarios
    e1, e2, m = estimate_step(z1), estimate_step(z2), z2.parallelism.micro_batches
    held, grad = _params(z2), 4
    assert m == 4
    assert comm_plan.zero2_scatter_s(z2, comm_plan.groups(z2), held, grad) == _scatter(z2)
    assert comm_plan.zero2_scatter_s(z1, comm_plan.groups(z1), held, grad) == 0.0
    # Both engines reduce in Megatron's buckets (one here for the tiny model, six for the wide
    # one, whose every bucket pays the collective's latency): comm_plan.dp_buckets
    one, buckets = comm_plan.dp_buckets(z2, comm_plan.groups(z2), held, grad, final=False)
    assert (buckets == 1) == one_bucket
    rs = one * buckets
    assert rs >= _scatter(z2)
    assert e2.dp_total_s == pytest.approx(e1.dp_total_s + (m - 1) * rs, rel=1e-12)
    backlog = (m - 1) * max(0.0, rs - e2.stages[0].total_s)
    assert e2.iteration_time_s == pytest.approx(e1.iteration_time_s + backlog, rel=1e-12)
    d1, d2 = simulate_step(z1), simulate_step(z2)
    assert d2.iteration_time_s == pytest.approx(d1.iteration_time_s + backlog, rel=1e-12)
    assert len(d2.plan.dp_buckets[0]) == buckets * m
    assert d2.iteration_time_s == pytest.approx(e2.iteration_time_s, rel=1e-12)
    assert d2.dp_total_s == pytest.approx(e2.dp_total_s, rel=1e-9)
