"""Attention by kernel (``execution.attention``; perf/kernels/attention.py, catalog/attention.yaml).

Hand oracles for each completion rule and the lookups, errors, and properties over every table.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import compute
from simcluster.perf.kernels import attention
from simcluster.spec import schema
from simcluster.spec.execution import ATTENTION_KERNELS
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec

H100 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "h100-sxm"))
A100 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "a100-sxm-80gb"))
RTX = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "rtx-3090-ti"))
TABLES = [(k, a) for k in attention.kernel_names() for a in ("ampere", "hopper")
          if attention.table(k, a) is not None]


def test_every_kernel_of_the_spec_is_in_the_catalog() -> None:
    assert set(attention.kernel_names()) == set(ATTENTION_KERNELS)


def test_rule_1_backward_from_forward_and_combined_oracle() -> None:
    """FA2 on H100, causal, hdim 128, 512 tokens: fwd 191 (FA3 paper), fwd+bwd 163 (FA2 release
    figure): bwd = 2.5 / (3.5/163 - 1/191) = 153.98 TFLOP/s."""
    t = attention.table("flash2", "hopper")
    assert t is not None
    assert t.rate("bwd", True, 128, 512) == pytest.approx(2.5 / (3.5 / 163 - 1 / 191), rel=1e-12)
    assert t.rate("bwd", True, 128, 512) == pytest.approx(153.98, abs=0.01)
    assert t.rate("bwd", False, 128, 512) == 214.0  # published: used as is


def test_rule_3_causal_backward_from_the_donor_oracle() -> None:
    """FA3 on H100, hdim 128, 16k: the published full-mask bwd 561 times FA2's causal/full bwd
    ratio there, (2.5 / (3.5/328 - 1/335)) / 322 = 1.0096: 566.4 TFLOP/s."""
    t = attention.table("flash3", "hopper")
    assert t is not None
    donor = 2.5 / (3.5 / 328 - 1 / 335)
    assert t.rate("bwd", True, 128, 16384) == pytest.approx(561 * donor / 322, rel=1e-12)


def test_aliases_share_their_table() -> None:
    """sdpa-flash is FA2 (PyTorch >= 2.2); Transformer Engine runs FA2 on Ampere; LLM Foundry's
    Triton kernel is FA1 by its own header."""
    for kernel, alias, arch in (("sdpa-flash", "flash2", "hopper"), ("cudnn", "flash2", "ampere"),
                                ("triton-flash", "flash1", "ampere")):
        a, b = attention.table(kernel, arch), attention.table(alias, arch)
        assert a is not None
        assert b is not None
        assert (a.fwd, a.bwd) == (b.fwd, b.bwd)


def test_lookup_interpolates_in_log_length_and_head_dim() -> None:
    t = attention.table("flash2", "hopper")
    assert t is not None
    mid = math.sqrt(2048 * 4096)  # halfway in log2 between two published lengths
    assert t.rate("fwd", False, 128, mid) == pytest.approx((362 + 368) / 2, rel=1e-12)
    assert t.rate("fwd", False, 96, 2048) == pytest.approx((318 + 362) / 2, rel=1e-12)
    assert t.rate("fwd", False, 128, 65536) == 370.0  # past 16k: the 16k value
    assert t.rate("fwd", False, 128, 128) == 309.0  # below 512: the 512 value
    assert t.rate("fwd", False, 256, 2048) == 362.0  # outside the head dims: the nearest


def test_a_part_of_the_same_architecture_scales_by_its_peak() -> None:
    """The RTX 3090 Ti (Ampere, 80 TFLOP/s bf16) takes the A100's table at 80/312."""
    args = ("bf16", "flash2", 1e12, 1.0, 128, 8192, True)
    a100 = attention.fused_attention_operator(A100, *args)
    rtx = attention.fused_attention_operator(RTX, *args)
    assert rtx.time_s == pytest.approx(a100.time_s * 312 / 80, rel=1e-12)


def test_auto_is_flash3_on_hopper_and_flash2_elsewhere() -> None:
    assert attention.resolve_kernel(H100, "auto") == "flash3"
    assert attention.resolve_kernel(A100, "auto") == "flash2"
    assert attention.resolve_kernel(RTX, "auto") == "flash2"
    assert attention.resolve_kernel(H100, "cudnn") == "cudnn"


def test_flash3_on_ampere_is_refused() -> None:
    model = ModelSpec(name="m", layers=1, hidden=1024, heads=8, kv_heads=8, ffn_hidden=4096,
                      vocab=1000, seq_len=2048)
    with pytest.raises(SpecError) as err:
        compute.layer_times(model, A100, "bf16", 1, 2048, 1, attention="flash3")
    assert err.value.key == "execution.attention"
    assert "Hopper" in err.value.message


def test_unknown_architecture_falls_back_to_the_efficiency_model() -> None:
    generic = dataclasses.replace(H100, arch="")
    op = attention.fused_attention_operator(generic, "bf16", "flash2", 4e12, 1.0, 128, 8192,
                                            causal=False)
    best = 989e12 * generic.matmul_efficiency["bf16"]
    assert op.time_s == pytest.approx(4e12 / (generic.attention_efficiency * best), rel=1e-12)


@given(st.sampled_from(TABLES), st.booleans(), st.floats(32, 256), st.floats(64, 1 << 20))
def test_rates_stay_within_each_published_series(table: tuple[str, str], causal: bool,
                                                 head_dim: float, seq: float) -> None:
    """Interpolation never leaves the range of the published (or derived) values."""
    t = attention.table(*table)
    assert t is not None
    for series in ("fwd", "bwd"):
        values = [v for (c, _), vals in (t.fwd if series == "fwd" else t.bwd).items() if c == causal
                  for v in vals]
        assert min(values) <= t.rate(series, causal, head_dim, seq) <= max(values)


@pytest.mark.parametrize("table", TABLES, ids=["/".join(t) for t in TABLES])
def test_a_causal_kernel_is_never_slower_than_the_full_mask(table: tuple[str, str]) -> None:
    """Half the work at the causal rate takes less time than all of it at the full-mask rate, at
    every published length and head dimension (the diagonal blocks cost less than the half they
    save)."""
    t = attention.table(*table)
    assert t is not None
    for series in ("fwd", "bwd"):
        for seq in t.seq_len:
            for dim in (64, 128):
                causal = 0.5 / t.rate(series, True, dim, seq)
                assert causal < 1.0 / t.rate(series, False, dim, seq), (series, seq, dim)


def test_flash2_on_hopper_reaches_far_less_of_peak_than_flash3_and_cudnn() -> None:
    """FA2 (no wgmma) at 35-38% of the H100's 989 TFLOP/s forward at 16k, FA3 and cuDNN 55-66%."""
    for kernel, low, high in (("flash2", 0.33, 0.38), ("flash3", 0.60, 0.66),
                              ("cudnn", 0.54, 0.61)):
        t = attention.table(kernel, "hopper")
        assert t is not None
        assert low <= t.rate("fwd", True, 128, 16384) / 989 <= high, kernel
