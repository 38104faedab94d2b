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
