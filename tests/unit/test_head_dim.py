"""``model.head_dim``: attention heads wider or narrower than ``hidden / heads`` (Qwen3, GPT-OSS).

Oracle: Qwen3-30B-A3B's attention (HF Qwen/Qwen3-30B-A3B config.json: hidden_size 2048,
num_attention_heads 32, num_key_value_heads 4, head_dim 128): q_proj 2048 x 4096, k_proj and v_proj
2048 x 512, o_proj 4096 x 2048, no biases.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import flops, params
from simcluster.perf.compute import layer_times
from simcluster.spec import schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec

H100 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "h100-sxm"))
QWEN3_ATTENTION: dict[str, Any] = {
    "name": "q", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128,
    "ffn_hidden": 6144, "ffn_act": "swiglu", "vocab": 151936, "seq_len": 4096, "bias": False,
    "position": "rope", "norm": "rmsnorm"}


def test_wide_heads_oracle() -> None:
    m = ModelSpec(**QWEN3_ATTENTION)
    assert m.head_dim == 128
    assert params.attention_params(m) == 2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048
    lf = flops.layer_forward_flops(m, 1)
    tokens = 4096
    assert lf.qkv_flops == 2 * tokens * 2048 * (4096 + 2 * 512)
    assert lf.attention_output_flops == 2 * tokens * 4096 * 2048
    qkv = next(o for o in layer_times(m, H100, "bf16", 1, 4096, 1).operators if o.name == "qkv")
    assert qkv.flops == lf.qkv_flops


def test_default_is_hidden_over_heads_and_the_error_names_the_key() -> None:
    m = ModelSpec(**{**QWEN3_ATTENTION, "head_dim": 0})
    assert m.head_dim == 64
    with pytest.raises(SpecError) as err:
        ModelSpec(**{**QWEN3_ATTENTION, "hidden": 2050, "head_dim": 0})
    assert err.value.key == "hidden"
    assert "head_dim" in str(err.value)
    assert ModelSpec(**{**QWEN3_ATTENTION, "hidden": 2050}).head_dim == 128  # given: no rule


@given(st.sampled_from([8, 16, 32, 64]), st.sampled_from([1, 2, 4, 8]), st.booleans())
def test_explicit_hidden_over_heads_changes_nothing(heads: int, groups: int, bias: bool) -> None:
    kv = max(heads // groups, 1)
    base = ModelSpec(**{**QWEN3_ATTENTION, "heads": heads, "kv_heads": kv, "head_dim": 0,
                        "bias": bias})
    explicit = dataclasses.replace(base, head_dim=2048 // heads)
    assert params.attention_params(explicit) == params.attention_params(base)
    assert flops.layer_forward_flops(explicit, 2) == flops.layer_forward_flops(base, 2)
