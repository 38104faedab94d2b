"""The host floor of a layer pass (``execution.host_op_us``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.catalog import entry
from simcluster.perf.compute import host_bound, layer_times
from simcluster.spec import AcceleratorSpec, ModelSpec, load_scenario, schema

A100 = schema.parse(AcceleratorSpec, entry("accelerators", "a100-sxm-40gb"))
SMALL = schema.parse(ModelSpec, {"name": "s", "layers": 2, "hidden": 1024, "heads": 16,
                                 "vocab": 50304, "seq_len": 1024})


def test_small_layers_take_the_hosts_time_oracle() -> None:
    layer = layer_times(SMALL, A100, "fp16", 1, 1024, 8, recompute="full", attention="math")
    n = len(layer.operators)
    floored = host_bound(layer, 54e-6, recomputed=n)
    assert floored.forward_s == pytest.approx(n * 54e-6)  # the GPU work is shorter
    assert floored.backward_s == pytest.approx(2 * n * 54e-6)
    assert floored.recompute_s == pytest.approx(n * 54e-6)
    assert layer.forward_s < n * 54e-6


def test_the_floor_is_what_layer_times_applies() -> None:
    plain = layer_times(SMALL, A100, "fp16", 1, 1024, 8, recompute="selective")
    with_host = layer_times(SMALL, A100, "fp16", 1, 1024, 8, recompute="selective",
                            host_op_s=54e-6)
    core = sum(1 for o in plain.operators if o.name in ("attention", "scores", "softmax",
                                                         "attn_dropout", "attn_v"))
    assert with_host == host_bound(plain, 54e-6, recomputed=core)


@given(st.floats(0.0, 1e-3), st.integers(1, 8), st.sampled_from([1, 2, 8]))
def test_the_floor_never_shortens_a_pass(host_s: float, mb: int, tp: int) -> None:
    layer = layer_times(SMALL, A100, "fp16", mb, 1024, tp, recompute="full")
    floored = host_bound(layer, host_s, recomputed=len(layer.operators))
    assert floored.forward_s >= layer.forward_s
    assert floored.backward_s >= layer.backward_s
    assert floored.recompute_s >= layer.recompute_s
    assert host_bound(layer, 0.0) == layer


def test_the_key_reads_microseconds_and_stacks_set_it() -> None:
    s = load_scenario("scenarios/default.yaml", ["execution=deepspeed-megatron-2022"])
    assert s.execution.host_op_s == pytest.approx(53e-6)
    assert load_scenario("scenarios/default.yaml").execution.host_op_s == 0.0


# ------------------------------------------------- grouped expert GEMMs: one call per local expert

MOE = schema.parse(ModelSpec, {"name": "m", "layers": 4, "hidden": 1024, "heads": 16,
                               "ffn_hidden": 512, "ffn_act": "swiglu", "vocab": 32000,
                               "seq_len": 1024, "moe": {"experts": 16, "top_k": 2}})
EXPERT_GEMMS = ("mlp_gate", "mlp_up", "mlp_down")


def test_a_grouped_expert_gemm_issues_one_call_per_local_expert_oracle() -> None:
    """16 experts over EP 4: 4 local experts, so each of the three expert GEMMs (gate, up, down)
    is 4 host calls (Transformer Engine's GroupedLinear), every other operator 1: the floor of a
    forward pass is (operators + 3 x 3) calls."""
    layer = layer_times(MOE, A100, "bf16", 1, 1024, 1, ep=4)
    gemms = [o for o in layer.operators if o.name in EXPERT_GEMMS]
    assert [o.launches for o in gemms] == [4.0, 4.0, 4.0]
    assert all(o.launches == 1.0 for o in layer.operators if o.name not in EXPERT_GEMMS)
    calls = len(layer.operators) + 3 * 3
    floored = host_bound(layer, 42e-6)
    assert floored.forward_s == pytest.approx(max(layer.forward_s, calls * 42e-6))
    assert floored.backward_s == pytest.approx(max(layer.backward_s, 2 * calls * 42e-6))


@given(st.sampled_from([1, 2, 4, 8, 16]), st.floats(1e-6, 1e-4))
def test_the_floor_grows_with_the_local_experts(ep: int, host_s: float) -> None:
    """Property: fewer ranks per expert group (more local experts) never lowers the host floor,
    and the calls counted are the operators plus (local - 1) per expert GEMM."""
    layer = layer_times(MOE, A100, "bf16", 1, 1024, 1, ep=ep)
    local = 16 / ep
    assert sum(o.launches for o in layer.operators) == pytest.approx(
        len(layer.operators) + 3 * (local - 1))
    if ep > 1:
        wider = layer_times(MOE, A100, "bf16", 1, 1024, 1, ep=ep // 2)
        assert sum(o.launches for o in wider.operators) > sum(o.launches for o in layer.operators)
    assert host_bound(layer, host_s).forward_s >= layer.forward_s


def test_megatron_core_runs_its_fitted_host_time() -> None:
    """``megatron-core-2024``: 45 us per call (analysis/calibrate_megatron_host.py)."""
    s = load_scenario("scenarios/default.yaml", ["execution=megatron-core-2024"])
    assert s.execution.host_op_s == pytest.approx(45e-6)


def test_leading_dense_blocks_average_the_calls_oracle() -> None:
    """One dense block of four (``moe.dense_layers``): the averaged layer issues 3/4 of the MoE
    block's expert-GEMM calls, and the dense block's MLP GEMMs a quarter each."""
    mixed = schema.parse(ModelSpec, {
        "name": "d", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 512,
        "ffn_act": "swiglu", "vocab": 32000, "seq_len": 1024,
        "moe": {"experts": 16, "top_k": 2, "dense_layers": 1, "dense_ffn_hidden": 2048}})
    layer = layer_times(mixed, A100, "bf16", 1, 1024, 1, ep=4)
    by_name = {o.name: o.launches for o in layer.operators}
    assert by_name["mlp_up"] == pytest.approx(0.75 * 4)
    assert by_name["dense_up"] == pytest.approx(0.25)
