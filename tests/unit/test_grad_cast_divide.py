"""FSDP1's gradient preparation (``execution.grad_cast_divide``): every micro-batch, each layer's
unsharded gradient is cast to the reduce dtype (when it differs) and divided by the pre-divide
factor before its reduce-scatter (PyTorch ``torch/distributed/fsdp/_runtime_utils.py``
``_post_backward_hook``, v2.0-v2.1). Oracle: MPT-7B's layer parameters counted by hand from its
shape (hidden 4096, FFN 16384, biases, LayerNorm weights and biases; vocabulary 50,368, tied
embeddings, learned positions of 2,048) at the H100's streaming rate (3350 GB/s x its
``memory_efficiency``); properties: the step grows by exactly that backward time, in both
engines, and nothing moves where the key does not apply.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.perf.comm_plan import groups
from simcluster.perf.kernels.comm_sms import overlap_share
from simcluster.perf.kernels.elementwise import achieved_bandwidth_Bps
from simcluster.perf.stage_work import scenario_layer_times
from simcluster.perf.zero3 import grad_cast_divide_bytes
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario

H, F, V, SEQ, LAYERS = 4096, 16384, 50368, 2048, 32
MPT_7B: dict[str, Any] = {
    "name": "mpt-7b", "layers": LAYERS, "hidden": H, "heads": 32, "ffn_hidden": F, "vocab": V,
    "seq_len": SEQ, "ffn_act": "gelu", "tied_embeddings": True, "bias": True, "dropout": False,
    "position": "learned", "norm": "layernorm"}


def mpt(zero: int = 3, fp32_reduce: bool = True, flag: bool = True, nodes: int = 1,
        micro_batch: int = 6) -> Scenario:
    """MPT-7B under LLM Foundry's stack on ``nodes`` DGX H100 (one micro-batch per GPU)."""
    return load_scenario({
        "name": "mpt", "model": MPT_7B, "precision": "bf16",
        "execution": {"stack": "llm-foundry-2023", "grad_cast_divide": flag,
                      "fp32_grad_buffer": fp32_reduce},
        "cluster": {"topology": "dgx-h100", "nodes": nodes},
        "parallelism": {"global_batch": 8 * nodes * micro_batch, "micro_batch": micro_batch,
                        "zero_stage": zero}})


def _layer_params() -> float:
    layer = 4 * H * H + 4 * H + 2 * H * F + F + H + 2 * 2 * H  # qkv+out, fc1, fc2, two LayerNorms
    return layer + (V * H + SEQ * H + 2 * H) / LAYERS  # embeddings and final norm, spread


def test_bytes_oracle() -> None:
    """fp32 reduce: cast (2 B read, 4 B written) and divide (4 + 4 B); bf16 reduce: no cast,
    divide (2 + 2 B); ZeRO-1 (no per-micro-batch reduce-scatter) or the key off: none."""
    assert grad_cast_divide_bytes(mpt()) == pytest.approx(14 * _layer_params(), rel=1e-12)
    assert grad_cast_divide_bytes(mpt(fp32_reduce=False)) == pytest.approx(
        4 * _layer_params(), rel=1e-12)
    assert grad_cast_divide_bytes(mpt(zero=2)) == grad_cast_divide_bytes(mpt())
    assert grad_cast_divide_bytes(mpt(zero=1)) == 0.0
    assert grad_cast_divide_bytes(mpt(flag=False)) == 0.0


def test_a_layer_backward_pays_it_once() -> None:
    """14 B x 202.4M parameters = 2.83 GB per layer and micro-batch: 1.0 ms at the H100's rate."""
    on, off = scenario_layer_times(mpt()), scenario_layer_times(mpt(flag=False))
    acc = mpt().cluster.topology.accelerator
    seconds = 14 * _layer_params() / achieved_bandwidth_Bps(acc)
    assert on.backward_s - off.backward_s == pytest.approx(seconds, rel=1e-12)
    assert on.forward_s == off.forward_s
    assert [o.name for o in on.operators if o.name == "grad_cast_divide"] == ["grad_cast_divide"]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([2, 3]), st.booleans(), st.sampled_from([1, 2]),
       st.sampled_from(["analytical", "des"]))
def test_the_step_grows_by_what_the_backward_gains(zero: int, fp32: bool, nodes: int,
                                                   engine: str) -> None:
    """Property: with one micro-batch per step and no pipeline, the step grows by the layers'
    extra backward time, less at most the data-parallel communication it now hides, more at most
    the slowdown of the collectives beside it (``overlap_share``)."""
    s = mpt(zero, fp32, True, nodes)
    on = simulate(s, engine=engine).step
    off = simulate(mpt(zero, fp32, False, nodes), engine=engine).step
    extra = LAYERS * grad_cast_divide_bytes(s) / achieved_bandwidth_Bps(
        s.cluster.topology.accelerator)
    share = overlap_share(s, groups(s).dp, scenario_layer_times(s))
    grown = on.iteration_time_s - off.iteration_time_s
    assert grown >= extra - off.breakdown.dp_comm
    assert grown <= extra * (1 + share) * (1 + 1e-9)
