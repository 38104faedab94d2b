"""Mixture of experts as Megatron-Core runs it and multi-head latent attention (issue 23, item 3).

Oracles: the published parameter counts of the new presets (DeepSeek-V3 report section 4.2,
Mistral's Mixtral 8x22B announcement, the Kimi-K2 checkpoint's tensor total), MLA's projections
counted by hand from DeepSeek-V3's config, the dispatcher's permutation bytes and the flex
dispatcher's expected destinations by hand; properties: leading dense blocks, shared experts and
routing imbalance change what they should and nothing else.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import comm_plan
from simcluster.perf.compute import embedding_times, layer_times, logits_times
from simcluster.perf.flops import (
    layer_forward_flops,
    mlp_forward_flops,
    window_pairs,
    window_share,
)
from simcluster.perf.kernels.lowp import LinearFormat
from simcluster.perf.layer_ops import block_shape
from simcluster.perf.memory_stage import all_stage_params, layer_activation_bytes
from simcluster.perf.moe_layer import permutations
from simcluster.perf.mtp import with_mtp
from simcluster.perf.params import count_params, mla_params
from simcluster.perf.stage_work import LayerCosts, layer_costs
from simcluster.perf.tp_overlap import blocks
from simcluster.run.single import simulate
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.loader import load_scenario
from simcluster.spec.model import MLASpec, ModelSpec, MoESpec
from simcluster.spec.schema import parse

ROOT = Path(__file__).resolve().parents[2]


def preset(name: str) -> ModelSpec:
    return parse(ModelSpec, catalog.entry("models", name), name)


def h100() -> AcceleratorSpec:
    return load_scenario({"model": "deepseek-v3", "cluster": {"topology": "dgx-h100", "nodes": 1},
                          "parallelism": {"global_batch": 8, "ep": 8}}).cluster.topology.accelerator


# Published parameter counts -------------------------------------------------------------------

def test_deepseek_v3_counts_671b_total_37b_active() -> None:
    """DeepSeek-V3 report section 4.2: 671B total, 37B activated (the MTP module not counted)."""
    p = count_params(preset("deepseek-v3"))
    assert p.total == pytest.approx(671e9, rel=0.001)
    assert p.active == pytest.approx(37e9, rel=0.02)
    assert (p.dense_layers, p.layers) == (3, 61)


def test_mixtral_8x22b_counts_141b_total_39b_active() -> None:
    """Mistral AI, Mixtral 8x22B announcement: 141B total, 39B active."""
    p = count_params(preset("mixtral-8x22b"))
    assert p.total == pytest.approx(141e9, rel=0.005)
    assert p.active == pytest.approx(39e9, rel=0.005)


def test_kimi_k2_counts_the_checkpoints_tensors() -> None:
    """The released Kimi-K2 checkpoint sums to 1,026,470,731,056 parameters (the published 1.04T
    is not reproduced by its config either; the preset's comment says so)."""
    assert count_params(preset("kimi-k2")).total == pytest.approx(1_026_470_731_056, rel=1e-4)


def test_mla_projections_by_hand() -> None:
    """DeepSeek-V3's attention: q 7168x1536 + norm 1536 + 1536x128*192; kv 7168x(512+64) + norm
    512 + 512x128*(128+128); output 128*128x7168."""
    q = 7168 * 1536 + 1536 + 1536 * 128 * 192
    kv = 7168 * 576 + 512 + 512 * 128 * 256
    assert mla_params(preset("deepseek-v3")) == q + kv + 128 * 128 * 7168 == 187_107_328


def test_mla_flops_are_its_matrices_and_value_heads() -> None:
    m = preset("deepseek-v3")
    f = layer_forward_flops(m, 1, 4096)
    norms = 1536 + 512
    assert (f.qkv_flops + f.attention_output_flops) / (2 * 4096) + norms == mla_params(m)
    assert f.attention_scores_flops == 2 * 4096 * 4096 * 128 * 192
    assert f.attention_values_flops == 2 * 4096 * 4096 * 128 * 128


# Spec errors name their key -------------------------------------------------------------------

def _with(**change: object) -> ModelSpec:
    base = preset("mixtral-8x7b")
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    values.update(change)
    return ModelSpec(**values)


@pytest.mark.parametrize(("build", "key"), [
    (lambda: MoESpec(experts=8, top_k=2, dense_layers=1), "dense_ffn_hidden"),
    (lambda: _with(mla=MLASpec(kv_lora_rank=512, rope_head_dim=64, v_head_dim=128)), "kv_heads"),
    (lambda: _with(kv_heads=32, mla=MLASpec(kv_lora_rank=512, rope_head_dim=128,
                                            v_head_dim=128)), "mla.rope_head_dim"),
    (lambda: _with(moe=MoESpec(experts=8, top_k=2, dense_layers=32, dense_ffn_hidden=64)),
     "moe.dense_layers"),
])
def test_inconsistent_moe_and_mla_keys_are_refused(build: object, key: str) -> None:
    with pytest.raises(SpecError) as err:
        build()  # type: ignore[operator]
    assert err.value.key == key


def test_the_keys_load_from_a_scenario_file() -> None:
    s = load_scenario({"model": {"name": "tiny-mla", "layers": 4, "hidden": 256, "heads": 4,
                                 "head_dim": 96, "ffn_hidden": 128, "ffn_act": "swiglu",
                                 "vocab": 1000, "seq_len": 256, "bias": False,
                                 "mla": {"kv_lora_rank": 64, "rope_head_dim": 32,
                                         "v_head_dim": 64},
                                 "moe": {"experts": 8, "top_k": 2, "shared_experts": 1,
                                         "dense_layers": 1, "dense_ffn_hidden": 512,
                                         "imbalance": 1.25}},
                       "cluster": {"topology": "dgx-h100", "nodes": 1},
                       "parallelism": {"global_batch": 8, "ep": 8},
                       "execution": {"moe_dispatcher": "flex"}})
    assert s.model.mla == MLASpec(q_lora_rank=0, kv_lora_rank=64, rope_head_dim=32, v_head_dim=64)
    assert s.model.moe is not None
    assert s.model.moe.imbalance == 1.25
    assert s.execution.moe_dispatcher == "flex"
    with pytest.raises(SpecError) as err:
        load_scenario({"model": "qwen3-30b-a3b", "cluster": {"topology": "dgx-h100", "nodes": 1},
                       "parallelism": {"global_batch": 8}, "execution": {"moe_dispatcher": "deepep"}})
    assert "moe_dispatcher" in err.value.key


# The dispatcher ------------------------------------------------------------------------------

def test_flex_destinations_by_hand() -> None:
    """Expected ranks holding at least one of a token's experts: every rank holds one expert of 8
    with top-2 -> 2; one rank -> 1; 128 experts on 8 ranks, top-8: 8 (1 - C(112,8)/C(128,8))."""
    assert comm_plan.flex_copies(2, 8, 8) == 2.0
    assert comm_plan.flex_copies(8, 1, 128) == 1.0
    expected = 8 * (1 - math.comb(112, 8) / math.comb(128, 8))
    assert comm_plan.flex_copies(8, 8, 128) == pytest.approx(expected)
    assert 5.3 < expected < 5.4


@given(st.integers(1, 16), st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([16, 64, 256]))
def test_flex_sends_at_most_min_topk_ep_copies(top_k: int, ep: int, experts: int) -> None:
    assume(experts % ep == 0)
    copies = comm_plan.flex_copies(top_k, ep, experts)
    assert top_k / (experts / ep) - 1e-9 <= copies <= min(top_k, ep) + 1e-9


def test_permutation_bytes_by_dispatcher() -> None:
    """alltoall: permute 2Tk rows, sort and unsort 4R rows (EP > 1, several local experts),
    unpermute (Tk + T) rows; allgather: 2R rows picked plus the unpermute; flex: the unpermute."""
    m, acc = preset("qwen3-30b-a3b"), h100()
    sh = block_shape(m, "bf16", 1, 4096, 1, 1, False)
    row = 2048 * 2
    t, tk = 4096, 4096 * 8
    ops = {d: {o.name: o.bytes for o in permutations(m, acc, sh, tk, tk, 8, 16, d)}
           for d in ("alltoall", "allgather", "flex")}
    assert ops["alltoall"] == {"permute": (2 * tk + 4 * tk) * row, "unpermute": (tk + t) * row}
    assert ops["allgather"] == {"permute": 2 * tk * row, "unpermute": (tk + t) * row}
    assert ops["flex"] == {"unpermute": (tk + t) * row}


def test_ep_comm_scales_with_imbalance_and_skips_dense_blocks() -> None:
    s = load_scenario({"model": "qwen3-30b-a3b", "cluster": {"topology": "dgx-h100", "nodes": 2},
                       "parallelism": {"global_batch": 64, "ep": 16}, "precision": "bf16"})
    g = comm_plan.groups(s)
    base = comm_plan.ep_layer_comm_s(s, g)[0]
    moe = s.model.moe
    assert moe is not None
    skewed = dataclasses.replace(s, model=dataclasses.replace(
        s.model, moe=dataclasses.replace(moe, imbalance=1.5)))
    assert comm_plan.ep_layer_comm_s(skewed, g)[0] > base
    dense = dataclasses.replace(s, model=dataclasses.replace(
        s.model, moe=dataclasses.replace(moe, dense_layers=12, dense_ffn_hidden=6144)))
    assert comm_plan.ep_layer_comm_s(dense, g)[0] == pytest.approx(base * 36 / 48)


# Layer times ---------------------------------------------------------------------------------

def test_imbalance_lengthens_only_the_routed_experts() -> None:
    m, acc = preset("qwen3-30b-a3b"), h100()
    assert m.moe is not None
    skew = dataclasses.replace(m, moe=dataclasses.replace(m.moe, imbalance=2.0))
    a = {o.name: o.time_s for o in layer_times(m, acc, "bf16", 2, 4096, 1, ep=8).operators}
    b = {o.name: o.time_s for o in layer_times(skew, acc, "bf16", 2, 4096, 1, ep=8).operators}
    assert {n for n in a if a[n] != b[n]} == {"mlp_gate", "mlp_up", "activation", "mlp_down",
                                              "permute"}
    assert b["mlp_down"] > 1.5 * a["mlp_down"]


def test_shared_experts_add_a_dense_mlp_on_every_token() -> None:
    m, acc = preset("deepseek-v3"), h100()
    names = [o.name for o in layer_times(m, acc, "bf16", 1, 4096, 1, ep=8).operators]
    for name in ("router", "router_topk", "permute", "unpermute", "shared_gate", "shared_up",
                 "shared_activation", "shared_down", "dense_up", "dense_down", "q_down", "kv_up"):
        assert name in names
    assert "qkv" not in names


def test_mla_gemms_count_as_the_attention_column() -> None:
    layer = layer_times(preset("deepseek-v3"), h100(), "bf16", 1, 4096, 2, ep=8)
    ops = {o.name: o for o in layer.operators}
    attention, _ = blocks(layer)
    assert attention.column_fwd == pytest.approx(sum(ops[n].time_s for n in
                                                     ("q_down", "q_up", "kv_down", "kv_up")))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 8), st.integers(0, 2), st.integers(1, 4))
def test_dense_and_shared_flops_add_up(dense: int, shared: int, top_k: int) -> None:
    """``layers x mlp_forward_flops`` = the MoE blocks' routed + shared + router FLOPs plus the
    dense blocks' FFN, whatever the split."""
    m = preset("mixtral-8x7b")
    moe = MoESpec(experts=8, top_k=top_k, shared_experts=shared, dense_layers=dense,
                  dense_ffn_hidden=28672 if dense else 0)
    mm = dataclasses.replace(m, moe=moe)
    t, h, f, L = 1000, m.hidden, m.ffn_hidden, m.layers
    per = 2 * t * h * 3
    expect = (L - dense) * (per * (top_k + shared) * f + 2 * t * h * 8) + dense * per * 28672
    assert L * mlp_forward_flops(mm, t) == pytest.approx(expect, rel=1e-9)
    p = count_params(mm)
    assert p.total - count_params(dataclasses.replace(m, moe=dataclasses.replace(
        moe, dense_layers=0))).total == dense * (p.dense_mlp - p.per_layer_mlp)


def test_stage_parameters_sum_to_the_model() -> None:
    """Spread over pipeline stages (dense blocks pro rata), every parameter is held once at
    TP = EP = 1, the multi-token prediction module on the last stage."""
    s = load_scenario({"model": "deepseek-v3", "cluster": {"topology": "dgx-h100", "nodes": 1},
                       "parallelism": {"global_batch": 8, "pp": 4,
                                       "stage_layers": [16, 15, 15, 15]}})
    held = sum(p.dense + p.expert for p in all_stage_params(s.model, s.parallelism))
    p = count_params(s.model)
    assert held == pytest.approx(p.total + p.mtp, rel=1e-12)


def test_mla_saves_its_latents_on_every_tp_rank() -> None:
    """Without SP, ``2 x bytes(tp=2) - bytes(tp=1)`` is what every rank keeps whole: the two norm
    inputs (4 sbh), the QKV and MLP inputs (2 x 2 sbh) and MLA's two latents, each kept as its
    norm's input and its up-projection's input (2 + 2 bytes)."""
    m, s, h = preset("deepseek-v3"), 4096, 7168
    one = layer_activation_bytes(m, 1, s, 1, False, "none")
    two = layer_activation_bytes(m, 1, s, 2, False, "none")
    assert 2 * two - one == pytest.approx(8 * s * h + 4 * s * (1536 + 512), rel=1e-12)


# Both engines --------------------------------------------------------------------------------

def test_deepseek_scenario_runs_alike_in_both_engines() -> None:
    s = load_scenario(ROOT / "scenarios" / "deepseek-v3-1024xh100-fp8.yaml")
    des = simulate(s).step.iteration_time_s
    analytical = simulate(s, engine="analytical").step.iteration_time_s
    assert des == pytest.approx(analytical, rel=0.01)


def test_lowp_format_reaches_the_expert_gemms() -> None:
    m, acc = preset("qwen3-30b-a3b"), h100()
    bf16 = {o.name: o for o in layer_times(m, acc, "bf16", 2, 4096, 1, ep=8).operators}
    fp8 = {o.name: o for o in layer_times(m, acc, "fp8", 2, 4096, 1, ep=8).operators}
    assert fp8["mlp_up"].time_s < bf16["mlp_up"].time_s
    assert fp8["router"].time_s == bf16["router"].time_s  # the router stays 16-bit
    assert LinearFormat("bf16", "none", True).recipe == "none"


# Sliding windows and attention sinks (GPT-OSS) ------------------------------------------------

@pytest.mark.parametrize(("name", "total", "active"), [("gpt-oss-120b", 116.83e9, 5.13e9),
                                                       ("gpt-oss-20b", 20.91e9, 3.61e9)])
def test_gpt_oss_counts_its_model_card(name: str, total: float, active: float) -> None:
    """gpt-oss model card (arXiv 2508.10925) Table 1: totals, and active parameters counting the
    unembedding but not the embedding (simcluster's active counts both)."""
    m = preset(name)
    p = count_params(m)
    assert p.total == pytest.approx(total, abs=0.005e9)
    assert p.active - m.vocab * m.hidden == pytest.approx(active, abs=0.005e9)


def test_window_pairs_by_hand() -> None:
    assert window_pairs(4, 2) == 1 + 2 + 2 + 2
    assert window_pairs(3, 5) == 1 + 2 + 3  # a window longer than the sequence: causal
    m = preset("gpt-oss-120b")
    band = 2 * (4096 * 128 - 128 * 127 / 2) / 4096**2
    assert window_share(m, 4096) == pytest.approx(0.5 + 0.5 * band)
    assert window_share(m, 128) == 1.0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 1 << 16), st.integers(1, 1 << 16))
def test_window_pairs_between_the_window_and_causal(seq: int, window: int) -> None:
    pairs = window_pairs(seq, window)
    assert min(seq, window) * seq / 2 <= pairs <= seq * (seq + 1) / 2 + 1e-6


def test_windowed_blocks_blend_the_attention_kernel() -> None:
    """Half the blocks windowed: the attention operator is the mean of the full and the windowed
    kernel; nothing else changes; the unfused path computes the whole square either way."""
    m, acc = preset("gpt-oss-120b"), h100()
    full = dataclasses.replace(m, window=0)
    every = dataclasses.replace(m, window_layers=1.0)
    ops = {n: {o.name: o for o in layer_times(x, acc, "bf16", 1, 4096, 1, ep=8).operators}
           for n, x in (("half", m), ("full", full), ("every", every))}
    assert ops["every"]["attention"].time_s < ops["full"]["attention"].time_s / 4
    assert ops["half"]["attention"].time_s == pytest.approx(
        (ops["full"]["attention"].time_s + ops["every"]["attention"].time_s) / 2)
    assert {n for n in ops["half"] if ops["half"][n] != ops["full"][n]} == {"attention"}
    math = {n: layer_times(x, acc, "bf16", 1, 4096, 1, attention="math", ep=8).forward_s
            for n, x in (("half", m), ("full", full))}
    assert math["half"] == math["full"]


def test_sinks_add_one_parameter_per_head_and_layer() -> None:
    m = preset("gpt-oss-20b")
    without = dataclasses.replace(m, attention_sinks=False)
    assert count_params(m).total - count_params(without).total == 24 * 64


# Multi-token prediction (DeepSeek-V3) --------------------------------------------------------

def test_mtp_module_is_outside_the_total_and_about_11_5b() -> None:
    """DeepSeek-V3 README: 685B on Hugging Face = 671B main model + 14B MTP module, 11.5B of it
    unique (the embedding and output head are shared)."""
    m = preset("deepseek-v3")
    p = count_params(m)
    assert m.mtp_layers == 1
    assert p.mtp == pytest.approx(11.5e9, rel=0.02)
    assert p.total == count_params(dataclasses.replace(m, mtp_layers=0)).total


def test_mtp_runs_a_block_and_the_output_head_again_on_the_last_stage() -> None:
    m, acc = preset("deepseek-v3"), h100()
    block = layer_times(m, acc, "bf16", 1, 4096, 1, ep=8)
    first = embedding_times(m, acc, "bf16", 1, 4096)
    last = logits_times(m, acc, "bf16", 1, 4096, 1)
    both = with_mtp(last, block, first, m, acc, "bf16", 4096, 1)
    extras = sum(o.time_s for o in both.operators if o.name.startswith("mtp_"))
    # the output head and loss twice: the model's and the module's
    assert both.forward_s == pytest.approx(2 * last.forward_s + block.forward_s + first.forward_s
                                           + extras)
    assert extras > 0
    assert with_mtp(last, block, first, dataclasses.replace(m, mtp_layers=0), acc, "bf16",
                    4096, 1) is last


def test_the_last_stage_holds_the_mtp_module() -> None:
    def held(mtp: int) -> float:
        s = load_scenario({"model": {"preset": "deepseek-v3", "mtp_layers": mtp},
                           "cluster": {"topology": "dgx-h100", "nodes": 1},
                           "parallelism": {"global_batch": 8, "pp": 4,
                                           "stage_layers": [16, 15, 15, 15]}})
        last = all_stage_params(s.model, s.parallelism)[-1]
        return last.dense + last.expert
    assert held(1) - held(0) == pytest.approx(count_params(preset("deepseek-v3")).mtp, rel=1e-12)


def test_ep_overlap_hides_each_pass_behind_the_other_micro_batch() -> None:
    """``execution.ep_comm_overlap``: a forward all-to-all is exposed only beyond the layer's
    backward compute of the other micro-batch, a backward one beyond its forward."""
    def costs(overlap: bool) -> LayerCosts:
        s = load_scenario({"model": "qwen3-30b-a3b",
                           "cluster": {"topology": "dgx-h100", "nodes": 2},
                           "parallelism": {"global_batch": 64, "ep": 16, "pp": 1},
                           "execution": {"ep_comm_overlap": overlap}, "precision": "bf16"})
        return layer_costs(s, comm_plan.groups(s))
    plain, hidden = costs(False), costs(True)
    assert hidden.ep[0] == pytest.approx(max(0.0, plain.ep[0] - plain.layer.backward_s))
    assert hidden.ep[1] == pytest.approx(max(0.0, plain.ep[1] - plain.layer.forward_s))
    assert hidden.ep[0] < plain.ep[0]
