"""FLOP counts against the published conventions (SC'21 Eq. 3, Korthikanti et al. 2022, Megatron-LM).

Pins: per-layer sum with full recompute == Narayanan et al. SC'21 Eq. 3 exactly for every GPT-3
preset; 4.51e18 FLOPs for GPT-3 175B at B=1536; Megatron code form vs 0.75 x Eq. 3 (1.0009);
model FLOPs == Korthikanti et al. model FLOPs; SwiGLU, GQA and MoE against hand-computed counts.
"""

from __future__ import annotations

import dataclasses

import pytest

from simcluster.perf.flops import (
    hardware_flops_per_iteration,
    korthikanti_model_flops,
    korthikanti_selective_hardware_flops,
    layer_forward_flops,
    logits_forward_flops,
    megatron_flops,
    model_flops_per_iteration,
    recompute_forward_flops,
    sc21_eq3_flops,
    six_n_flops,
)
from simcluster.perf.params import count_params
from simcluster.spec.loader import load_scenario
from simcluster.spec.model import ModelSpec

GPT3_PRESETS = ["gpt3-1.7b", "gpt3-3.6b", "gpt3-7.5b", "gpt3-18b", "gpt3-39b", "gpt3-76b",
                "gpt3-145b", "gpt3-175b", "gpt3-310b", "gpt3-530b", "gpt3-1t"]


def model(name: str) -> ModelSpec:
    """A catalog model, resolved through a minimal scenario."""
    scenario = load_scenario({"model": name, "cluster": {"topology": "dgx-h100", "nodes": 1},
                              "parallelism": {"global_batch": 8}})
    return scenario.model


def shape(m: ModelSpec) -> tuple[int, int, int, int]:
    return m.seq_len, m.layers, m.hidden, m.vocab


@pytest.mark.parametrize("name", GPT3_PRESETS)
def test_full_recompute_equals_sc21_eq3_exactly(name: str) -> None:
    """SC'21 Eq. 3 counts 4 passes of the layer GEMMs and 3 of the logits; no elementwise ops."""
    m = model(name)
    ours = hardware_flops_per_iteration(m, 1536, "full")
    assert ours == pytest.approx(sc21_eq3_flops(1536, *shape(m)), rel=1e-12)


@pytest.mark.parametrize("name", GPT3_PRESETS)
def test_model_flops_equal_korthikanti_exactly(name: str) -> None:
    """Korthikanti et al. 2022 App. A: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))."""
    m = model(name)
    ours = model_flops_per_iteration(m, 512)
    assert ours == pytest.approx(korthikanti_model_flops(512, *shape(m)), rel=1e-12)


def test_gpt3_175b_iteration_is_4_51e18() -> None:
    """SC'21 Eq. 3 worked out: l=96, h=12288, s=2048, V=51200, B=1536 -> 4.51e18 (3 digits)."""
    ours = hardware_flops_per_iteration(model("gpt3-175b"), 1536, "full")
    assert ours == pytest.approx(4.51e18, rel=5e-3)


def test_megatron_code_form_vs_sc21() -> None:
    """Megatron code / (0.75 * SC'21 Eq. 3) = 1.0009 for GPT-3 175B (4 digits),
    i.e. (1 + s/(6h) + V/(12lh)) / (1 + s/(6h) + V/(16lh))."""
    m = model("gpt3-175b")
    s, _, h, V = shape(m)
    L = m.layers
    ratio = megatron_flops(m, 1536) / (0.75 * sc21_eq3_flops(1536, *shape(m)))
    relation = (1 + s / (6 * h) + V / (12 * L * h)) / (1 + s / (6 * h) + V / (16 * L * h))
    assert ratio == pytest.approx(relation, rel=1e-12)
    assert round(ratio, 4) == 1.0009


@pytest.mark.parametrize("name", ["gpt3-175b", "llama-2-7b", "llama-2-70b", "llama-3-8b",
                                  "llama-3-405b", "bloom-176b"])
def test_model_flops_equal_megatron_code_for_dense_models(name: str) -> None:
    """Megatron ``num_floating_point_operations`` (``training.py``) covers GQA and SwiGLU."""
    m = model(name)
    assert model_flops_per_iteration(m, 64) == pytest.approx(megatron_flops(m, 64), rel=1e-12)


def test_mixtral_megatron_code_differs_by_router_only() -> None:
    """Megatron counts the top_k experts but not the h x experts router."""
    m = model("mixtral-8x7b")
    router = 3 * m.layers * 2 * 64 * m.seq_len * m.hidden * 8  # 3 passes, 2*tokens*h*E
    assert model_flops_per_iteration(m, 64) - megatron_flops(m, 64) == pytest.approx(router)


def test_korthikanti_selective_counts_recompute_three_times() -> None:
    """Korthikanti's s/(3h) adds 12*B*s^2*h per layer over model FLOPs; this module adds one
    attention-core forward, 4*B*s^2*h: a factor 3 apart."""
    m = model("gpt3-175b")
    B = 1536
    theirs = korthikanti_selective_hardware_flops(B, *shape(m)) - korthikanti_model_flops(
        B, *shape(m))
    ours = hardware_flops_per_iteration(m, B, "selective") - model_flops_per_iteration(m, B)
    assert ours == pytest.approx(4 * B * m.seq_len**2 * m.hidden * m.layers, rel=1e-12)
    assert theirs == pytest.approx(3 * ours, rel=1e-12)


def test_plain_gpt_layer_is_24bsh2_plus_4bs2h() -> None:
    """SC'21 Eq. 3, per layer forward: 24*b*s*h^2 + 4*b*s^2*h."""
    m = model("gpt3-175b")
    b, s, h = 4, m.seq_len, m.hidden
    layer = layer_forward_flops(m, b)
    assert layer.total_flops == 24 * b * s * h**2 + 4 * b * s**2 * h
    assert layer.attention_scores_flops == 2 * b * s**2 * h
    assert layer.attention_values_flops == 2 * b * s**2 * h
    assert logits_forward_flops(m, b) == 2 * b * s * h * m.vocab


def test_llama_2_7b_per_token_by_hand() -> None:
    """Hand count, llama-2-7b (h 4096, 32 layers, ffn 11008 swiglu, MHA, s 4096, V 32000):
    attention 4h^2 = 67,108,864 + MLP 3*h*f = 135,266,304 weights per layer; x32 x2 =
    12,952,010,752; attention core 4*s*h*32 = 2,147,483,648; logits 2*h*V = 262,144,000."""
    m = model("llama-2-7b")
    layer = layer_forward_flops(m, 1)
    per_token = (m.layers * layer.total_flops + logits_forward_flops(m, 1)) / m.seq_len
    assert per_token == 12_952_010_752 + 2_147_483_648 + 262_144_000


def test_llama_3_8b_per_token_by_hand() -> None:
    """Hand count, llama-3-8b (GQA 8 of 32 heads, head_dim 128, ffn 14336, s 8192, V 128256):
    attention 2h^2 + 2*h*1024 = 41,943,040 + MLP 3*h*f = 176,160,768 weights per layer; x32 x2 =
    13,958,643,712; attention core 4*s*h*32 = 4,294,967,296; logits 2*h*V = 1,050,673,152."""
    m = model("llama-3-8b")
    layer = layer_forward_flops(m, 1)
    per_token = (m.layers * layer.total_flops + logits_forward_flops(m, 1)) / m.seq_len
    assert per_token == 13_958_643_712 + 4_294_967_296 + 1_050_673_152


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3-8b", "llama-2-70b"])
def test_forward_is_2n_nonembedding_plus_attention(name: str) -> None:
    """Kaplan et al. 2020 s2.1: forward ~ 2*N_nonembedding + attention (N counts the untied
    output layer, not the input embedding or norms, which do no matmul)."""
    m = model(name)
    pc = count_params(m)
    matmul_params = pc.total - pc.embedding - m.layers * pc.per_layer_norm - (pc.final - m.vocab
                                                                              * m.hidden)
    attention = 4 * m.seq_len * m.hidden * m.layers  # per token, scores + AV
    layer = layer_forward_flops(m, 1)
    per_token = (m.layers * layer.total_flops + logits_forward_flops(m, 1)) / m.seq_len
    assert per_token == 2 * matmul_params + attention
    tokens = 1024 * m.seq_len
    assert six_n_flops(matmul_params, tokens) == pytest.approx(
        model_flops_per_iteration(m, 1024) - 3 * attention * tokens, rel=1e-12)


def test_mixtral_active_flops_use_top_k_experts() -> None:
    """Mixtral: each token passes 2 of 8 SwiGLU experts (ffn 14336) and an h x 8 router."""
    m = model("mixtral-8x7b")
    tokens = m.seq_len
    layer = layer_forward_flops(m, 1)
    assert layer.mlp_flops == 2 * tokens * (2 * 3 * 4096 * 14336 + 4096 * 8)
    dense = dataclasses.replace(m, moe=None)
    expected = 2 * layer_forward_flops(dense, 1).mlp_flops + 2 * tokens * 4096 * 8
    assert layer.mlp_flops == expected
    pc = count_params(m)
    assert layer.mlp_flops == 2 * tokens * pc.per_layer_mlp_active


def test_causal_halves_attention_core_only() -> None:
    m = model("gpt3-1.7b")
    full, causal = layer_forward_flops(m, 2), layer_forward_flops(m, 2, causal=True)
    assert causal.attention_core_flops == full.attention_core_flops / 2
    assert causal.total_flops == full.total_flops - full.attention_core_flops / 2


def test_recompute_ordering_and_unknown_mode() -> None:
    m = model("gpt3-7.5b")
    flops = [hardware_flops_per_iteration(m, 64, r) for r in ("none", "selective", "full")]
    assert flops[0] == model_flops_per_iteration(m, 64) < flops[1] < flops[2]
    with pytest.raises(ValueError, match="recompute"):
        recompute_forward_flops(layer_forward_flops(m, 1), "some")
