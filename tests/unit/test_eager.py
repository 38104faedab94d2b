"""Eager-mode element-wise kernels (``execution.elementwise: eager``): byte counts and effects."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.catalog import entry
from simcluster.perf.compute import layer_times, logits_times
from simcluster.perf.kernels import eager
from simcluster.spec import AcceleratorSpec, ModelSpec, schema

A100 = schema.parse(AcceleratorSpec, entry("accelerators", "a100-sxm-80gb"))
LLAMA = schema.parse(ModelSpec, entry("models", "llama-3-8b"))
GPT = schema.parse(ModelSpec, entry("models", "gpt3-1.7b"))


def _bw() -> float:
    return A100.memory_bandwidth_Bps * A100.memory_efficiency


def test_rmsnorm_chain_bytes_oracle() -> None:
    # x.float() 2+4, pow 4+4, mean 4, x*rsqrt 4+4, type_as 4+2, *weight 2+2 = 36 B per element
    op = eager.rmsnorm(A100, "norm1", 1e9)
    assert op.bytes == 36e9
    assert op.time_s == pytest.approx(36e9 / _bw())
    assert op.backward_s == pytest.approx(2 * 36e9 / _bw())


def test_rope_swiglu_loss_bytes_oracle() -> None:
    assert eager.rope(A100, 1e6).bytes == 20e6  # float 2+4, complex mul 4+4, type_as 4+2
    assert eager.swiglu(A100, 1e6).bytes == 10e6  # silu 2+2, mul 2+2+2
    assert eager.loss(A100, 1e6).bytes == 14e6  # float 2+4, log_softmax 4+4
    copy = eager.repeat_kv(A100, 1e6, 8e6, 2)
    assert copy is not None
    assert copy.bytes == 2 * (1e6 + 8e6) * 2  # K and V: read the heads, write 8x
    assert eager.repeat_kv(A100, 8e6, 8e6, 2) is None  # no grouped-query attention, no copy


def test_launch_floor_binds_only_for_tiny_tensors() -> None:
    tiny = eager.rmsnorm(A100, "norm", 10.0)
    assert tiny.time_s == eager.RMSNORM_KERNELS * eager.KERNEL_LAUNCH_S
    assert pytest.approx(3.25e-6) == eager.KERNEL_LAUNCH_S  # 260 us / 80 kernels, CUDA.jl docs
    big = eager.rmsnorm(A100, "norm", 1e8)
    assert big.time_s > eager.RMSNORM_KERNELS * eager.KERNEL_LAUNCH_S


@given(mb=st.integers(1, 4), seq=st.sampled_from([512, 2048, 4096]), tp=st.sampled_from([1, 2, 4]))
def test_eager_is_never_faster_and_changes_only_elementwise_ops(mb: int, seq: int, tp: int) -> None:
    fused = layer_times(LLAMA, A100, "bf16", mb, seq, tp)
    eager_ = layer_times(LLAMA, A100, "bf16", mb, seq, tp, elementwise="eager")
    assert eager_.forward_s > fused.forward_s
    assert eager_.backward_s > fused.backward_s
    gemms = {o.name: o.time_s for o in fused.operators if o.kind == "gemm"}
    assert len(gemms) == 5  # qkv, proj, gate, up, down
    assert {o.name: o.time_s for o in eager_.operators if o.kind == "gemm"} == gemms
    assert logits_times(LLAMA, A100, "bf16", mb, seq, tp, elementwise="eager").forward_s > \
        logits_times(LLAMA, A100, "bf16", mb, seq, tp).forward_s


def test_layernorm_gelu_models_are_the_same_eager_or_fused() -> None:
    """PyTorch's LayerNorm and GELU are single native kernels: eager costs no more there, except
    the attention output's copy around a head-major kernel (SDPA), which a ``[b, s, h, d]``
    kernel (FlashAttention's own API, LLM Foundry's Triton kernel) does not need."""
    fused = layer_times(GPT, A100, "bf16", 2, 2048, 1, attention="sdpa-flash")
    eager_ = layer_times(GPT, A100, "bf16", 2, 2048, 1, attention="sdpa-flash",
                         elementwise="eager")
    extra = {o.name for o in eager_.operators} - {o.name for o in fused.operators}
    assert extra == {"attn_out_copy"}
    flash_api = layer_times(GPT, A100, "bf16", 2, 2048, 1, attention="flash2", elementwise="eager")
    assert {o.name for o in flash_api.operators} == {o.name for o in fused.operators}
    same = {o.name: o.time_s for o in fused.operators}
    assert all(same[o.name] == o.time_s for o in eager_.operators if o.name in same)
