"""Low-precision linear layers (``precision: fp8 | mxfp8 | nvfp4``; perf/kernels/lowp.py).

Hand oracles for the cast bytes, the saved activations and the weight copies; the GEMMs at the
low-precision rate and everything else in bf16; the errors a user meets; properties over recipes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import compute
from simcluster.perf.kernels import lowp
from simcluster.perf.kernels.gemm import gemm_operator
from simcluster.perf.memory import estimate_memory
from simcluster.perf.memory_stage import layer_activation_bytes
from simcluster.perf.step import estimate_step
from simcluster.sim import simulate_step
from simcluster.spec import load_scenario, schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec

DEFAULT = Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml"
H100 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "h100-sxm"))
B200 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "b200"))
LLAMA = schema.parse(ModelSpec, catalog.entry("models", "llama-3-8b"))
RECIPES = ("delayed", "current", "blockwise", "mxfp8", "nvfp4")


def test_cast_bytes_oracles() -> None:
    """X = 1000 bf16 elements into a row- and a column-wise copy."""
    x = 1000.0
    assert lowp.cast_bytes("delayed", x, fused=False) == 2 * x + 2 * x  # read 2, write 1 + 1
    assert lowp.cast_bytes("delayed", x, fused=True) == 0.0  # the norm writes 2 x 1 instead of 2
    assert lowp.cast_bytes("current", x, fused=False) == 2 * x + 2 * x + 2 * x  # + amax read
    assert lowp.cast_bytes("current", x, fused=True) == 2 * x  # the amax read stays
    assert lowp.cast_bytes("mxfp8", x, fused=False) == pytest.approx(2 * x + 2 * x * (1 + 1 / 32))
    assert lowp.cast_bytes("nvfp4", x, fused=False) == pytest.approx(2 * x + 2 * x * (0.5 + 1 / 16))
    assert lowp.cast_bytes("nvfp4", x, fused=True) == 0.0  # writes less than the bf16 it replaces


def test_recipes_and_dtypes() -> None:
    assert lowp.recipe_of("fp8", "auto") == "delayed"
    assert lowp.recipe_of("fp8", "current") == "current"
    assert lowp.recipe_of("mxfp8", "auto") == "mxfp8"
    assert lowp.recipe_of("bf16", "current") == "none"  # the stack's recipe applies to fp8 only
    assert (lowp.gemm_dtype("fp8"), lowp.gemm_dtype("mxfp8"), lowp.gemm_dtype("nvfp4")) == (
        "fp8", "fp8", "fp4")
    assert lowp.activation_dtype("nvfp4") == "bf16"
    assert lowp.activation_dtype("fp16") == "fp16"


def _op(layer: compute.LayerTimes, name: str, kind: str = "gemm") -> compute.OperatorTime:
    return next(o for o in layer.operators if o.name == name and o.kind == kind)


def test_linear_gemms_at_the_fp8_rate_attention_and_norms_in_bf16() -> None:
    """Llama 3 8B, b = 1, s = 4096, TP 1 on H100: QKV ``[4096, 6144, 4096]`` at the fp8 rate;
    the attention, the norms and the rotary embedding exactly as under bf16."""
    fp8 = compute.layer_times(LLAMA, H100, "fp8", 1, 4096, 1)
    bf16 = compute.layer_times(LLAMA, H100, "bf16", 1, 4096, 1)
    qkv = _op(fp8, "qkv")
    expected = gemm_operator(H100, "fp8", "qkv", (4096, 4096 + 2 * 1024, 4096))
    assert qkv.time_s == expected.time_s
    # the data- and weight-gradient GEMMs with Hopper's split accumulator (pytorch/ao#2377)
    assert qkv.backward_s == pytest.approx(1.15 * expected.backward_s, rel=1e-12)
    assert qkv.wgrad_s == pytest.approx(1.15 * expected.wgrad_s, rel=1e-12)
    for name, kind in (("attention", "attention"), ("norm1", "memory"), ("rope", "memory")):
        assert _op(fp8, name, kind) == _op(bf16, name, kind)
    cast = _op(fp8, "proj_cast", "memory")  # the attention output: a cast kernel of its own
    assert cast.bytes == 4 * 4096 * 4096
    assert _op(fp8, "qkv_cast", "memory").bytes == 0.0  # fused into the norm
    logits_fp8 = compute.logits_times(LLAMA, H100, "fp8", 1, 4096, 1)
    assert logits_fp8 == compute.logits_times(LLAMA, H100, "bf16", 1, 4096, 1)


def test_unfused_casts_cost_more() -> None:
    fused = compute.layer_times(LLAMA, H100, "fp8", 1, 4096, 1)
    eager = compute.layer_times(LLAMA, H100, "fp8", 1, 4096, 1, fp8_cast_fusion=False)
    current = compute.layer_times(LLAMA, H100, "fp8", 1, 4096, 1, fp8_recipe="current")
    assert eager.forward_s > fused.forward_s
    assert eager.backward_s > fused.backward_s
    assert current.forward_s > fused.forward_s


def test_saved_activations_oracle() -> None:
    """GPT-style MHA gelu layer, no SP, no recompute, linear inputs kept in FP8 (1 byte):
    ``s*b*h*(8 + 19/t)`` against Korthikanti's ``s*b*h*(10 + 24/t)`` in 16 bits."""
    gpt = ModelSpec(name="g", layers=2, hidden=1024, heads=16, kv_heads=16, ffn_hidden=4096,
                    vocab=1000, seq_len=2048, ffn_act="gelu")
    s, b, h, t = 2048, 2, 1024, 4
    sbh = s * b * h
    bf16 = layer_activation_bytes(gpt, b, s, t, False, "none")
    fp8 = layer_activation_bytes(gpt, b, s, t, False, "none", linear_bytes=1.0)
    assert bf16 == pytest.approx(sbh * (10 + 24 / t))
    assert fp8 == pytest.approx(sbh * (8 + 19 / t))



def test_memory_holds_the_weight_copies_and_smaller_activations() -> None:
    bf16 = load_scenario(DEFAULT)
    fp8 = load_scenario(DEFAULT, ["precision=fp8"])
    a, b = estimate_memory(bf16).stages[0], estimate_memory(fp8).stages[0]
    params = a.weights_bytes / 2  # 16-bit weights (ZeRO-1 keeps them whole)
    assert b.weights_bytes == pytest.approx(a.weights_bytes + 2 * params)  # row + column FP8
    assert b.activations_bytes < a.activations_bytes


def test_fp8_step_faster_on_the_default_scenario_both_engines_equal() -> None:
    bf16 = load_scenario(DEFAULT)
    fp8 = load_scenario(DEFAULT, ["precision=fp8"])
    fast, slow = estimate_step(fp8).iteration_time_s, estimate_step(bf16).iteration_time_s
    assert fast < slow
    assert simulate_step(fp8).iteration_time_s == pytest.approx(fast, rel=0.03)


def test_block_scaled_formats_need_blackwell() -> None:
    with pytest.raises(SpecError) as err:
        load_scenario(DEFAULT, ["precision=nvfp4"])
    assert err.value.key == "precision"
    assert "Blackwell" in str(err.value)
    assert "use fp8" in str(err.value)
    with pytest.raises(SpecError, match="precision"):
        load_scenario(DEFAULT, ["precision=mxfp8"])
    with pytest.raises(SpecError, match="fp8_recipe"):
        load_scenario(DEFAULT, ["execution.fp8_recipe=tensorwise"])


def test_nvfp4_runs_at_the_fp4_rate_on_blackwell() -> None:
    layer = compute.layer_times(LLAMA, B200, "nvfp4", 1, 4096, 1)
    assert _op(layer, "qkv").time_s == gemm_operator(B200, "fp4", "qkv",
                                                     (4096, 6144, 4096)).time_s
    assert _op(layer, "qkv").backward_s == gemm_operator(B200, "fp4", "qkv",
                                                         (4096, 6144, 4096)).backward_s
    mx = compute.layer_times(LLAMA, B200, "mxfp8", 1, 4096, 1)
    assert _op(mx, "qkv").time_s == gemm_operator(B200, "fp8", "qkv", (4096, 6144, 4096)).time_s


@given(st.sampled_from(RECIPES), st.floats(1.0, 1e10), st.booleans())
def test_cast_bytes_order(recipe: str, elements: float, fused: bool) -> None:
    """Bytes are never negative; a separate kernel never moves less than a fused cast; current
    scaling never less than delayed."""
    b = lowp.cast_bytes(recipe, elements, fused)
    assert b >= 0.0
    assert lowp.cast_bytes(recipe, elements, False) >= b
    if recipe == "delayed":
        assert lowp.cast_bytes("current", elements, fused) >= b


@given(st.sampled_from(("fp8", "mxfp8", "nvfp4")), st.sampled_from(RECIPES[:3]))
def test_saved_inputs_smaller_than_16_bit(precision: str, fp8_recipe: str) -> None:
    recipe = lowp.recipe_of(precision, fp8_recipe)
    assert lowp.saved_input_bytes(precision, recipe) < lowp.HIGH_BYTES
    assert lowp.weight_copy_bytes(precision, recipe) > 0.0
    assert lowp.weight_copy_bytes("bf16", "none") == 0.0
