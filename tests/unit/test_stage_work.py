"""Both engines take their per-micro-batch op times from one place (perf/stage_work.py).

The analytical engine times a pipeline stage as one span of layers, the discrete-event engine
each virtual chunk of it; summed over a stage's chunks, the DES durations must give the analytical
stage times (interleaved, uneven layers, unfused gradient accumulation, first and last stage ends).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from simcluster.perf import comm_plan
from simcluster.perf.stage_work import grad_accumulation_s, layer_costs, optimizer_s
from simcluster.perf.step import estimate_step
from simcluster.sim.durations import stage_durations
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario


def interleaved_uneven() -> Scenario:
    return load_scenario({
        "model": "gpt3-175b", "cluster": {"topology": "dgx-a100-80gb", "nodes": 128},
        "parallelism": {"global_batch": 1536, "tp": 8, "pp": 4, "schedule": "interleaved",
                        "virtual_stages": 2, "stage_layers": [10, 14, 12, 12, 12, 12, 10, 14]},
        "execution": {"grad_accumulation_fusion": False}})


def category(parts: tuple[tuple[str, float], ...], name: str) -> float:
    return dict(parts)[name]


def test_des_chunks_sum_to_the_analytical_stage() -> None:
    s = interleaved_uneven()
    analytical = estimate_step(s).stages
    des = stage_durations(s)
    assert len(des) == len(analytical) == 4
    for stage, st in zip(des, analytical, strict=True):
        fwd = sum(category(c.forward, "compute") for c in stage.chunks)
        bwd = sum(category(c.backward, "compute") for c in stage.chunks)
        wgrad = sum(category(c.wgrad, "compute") for c in stage.chunks)
        comm = sum(category(c.forward, k) + category(c.backward, k)
                   for c in stage.chunks for k in ("tp_comm", "cp_comm", "ep_comm"))
        # each chunk runs its own unfused accumulation pass; the analytical stage runs one
        # pass over all its parameters, which costs the same bytes
        assert fwd == pytest.approx(st.forward_compute_s, rel=1e-12)
        assert bwd == pytest.approx(st.backward_compute_s, rel=1e-9)
        assert wgrad == pytest.approx(st.wgrad_s, rel=1e-9)
        assert comm == pytest.approx(st.tp_s + st.cp_s + st.ep_s, rel=1e-12)


def test_span_adds_layers_and_the_model_ends_once() -> None:
    s = interleaved_uneven()
    costs = layer_costs(s, comm_plan.groups(s))
    layer, emb, logits = costs.layer, costs.embedding, costs.logits
    whole = costs.span(3, True, True, 0.0)
    assert whole.forward_s == pytest.approx(3 * layer.forward_s + emb.forward_s + logits.forward_s,
                                            rel=1e-12)
    assert whole.wgrad_s == pytest.approx(3 * layer.wgrad_s + emb.wgrad_s + logits.wgrad_s,
                                          rel=1e-12)
    # a middle span is linear in its layers; the ends come on top, once
    middle = costs.span(1, False, False, 0.0)
    assert costs.span(3, False, False, 0.0).forward_s == pytest.approx(3 * middle.forward_s)
    assert whole.forward_s > costs.span(3, False, False, 0.0).forward_s + emb.forward_s
    # the unfused accumulation pass of the span's parameters enters backward and wgrad
    held = 1.5e9
    pass_s = grad_accumulation_s(s, held)
    assert pass_s > 0
    with_pass = costs.span(2, False, False, held)
    assert with_pass.backward_s - costs.span(2, False, False, 0.0).backward_s == \
        pytest.approx(pass_s, rel=1e-12)
    assert with_pass.wgrad_s - costs.span(2, False, False, 0.0).wgrad_s == \
        pytest.approx(pass_s, rel=1e-12)


def test_both_engines_take_the_optimizer_step_from_one_place() -> None:
    """ZeRO-1 shards the Adam step over dp * cp; the DES's slowest stage is the analytical one."""
    s = interleaved_uneven()
    par = s.parallelism
    zero0, zero1 = (dataclasses.replace(s, parallelism=dataclasses.replace(par, zero_stage=z))
                    for z in (0, 1))
    held = 2.0e9
    assert optimizer_s(zero1, held) == pytest.approx(optimizer_s(zero0, held / (par.dp * par.cp)),
                                                     rel=1e-12)
    assert optimizer_s(zero0, held) > 30 * optimizer_s(zero1, held)  # dp * cp = 32
    for scenario in (zero0, zero1):
        des = max(stage.optimizer_s for stage in stage_durations(scenario))
        assert des == pytest.approx(estimate_step(scenario).breakdown.optimizer, rel=1e-12)


def test_expert_parameters_take_their_own_optimizer_shard() -> None:
    """Mixtral 8x7B, one pipeline stage, DP 16 with EP 8: each expert parameter is sharded over
    dp*cp/ep = 2 ranks, a dense one over 16 (ZeRO-1, as the memory model shards them). By hand:
    32 layers x 8 experts x 3 x 4096 x 14336 = 45,097,156,608 expert parameters, every expert on
    8 GPUs, so 5,637,144,576 per GPU; at 30 B per updated parameter on an A100 80GB
    (2039 GB/s x 0.79), their update alone is 2,818,572,288 x 30 B = 52.5 ms."""
    s = load_scenario({"name": "moe", "model": "mixtral-8x7b", "precision": "bf16",
                       "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
                       "parallelism": {"tp": 1, "pp": 1, "ep": 8, "global_batch": 16,
                                       "zero_stage": 1}})
    assert (s.parallelism.dp, s.parallelism.ep) == (16, 8)
    expert = 32 * 8 * 3 * 4096 * 14336 / 8
    assert expert == 5_637_144_576
    rate = 2039e9 * 0.79
    dense = 1.0e9
    expected = math.ceil(dense / 16) * 30 / rate + math.ceil(expert / 2) * 30 / rate
    assert optimizer_s(s, dense + expert, expert) == pytest.approx(expected, rel=1e-12)
    # both engines use it
    assert stage_durations(s)[0].optimizer_s == pytest.approx(
        estimate_step(s).breakdown.optimizer, rel=1e-12)
    assert estimate_step(s).breakdown.optimizer > math.ceil(expert / 2) * 30 / rate
