"""Per-operator roofline: GEMM rate model, layer operators, backward/recompute rules, Adam."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf import compute
from simcluster.spec import schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec, MoESpec

A100 = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "a100-sxm-80gb"))
#: The half-dimension curve's own part (gemm_half_dim 254, analysis/fit_matmul.py; no gemm_tiles).
RTX = schema.parse(AcceleratorSpec, catalog.entry("accelerators", "rtx-3090-ti"))
GPT = ModelSpec(name="gpt-test", layers=2, hidden=4096, heads=32, vocab=51200, seq_len=2048,
                kv_heads=32, ffn_hidden=16384)
LLAMA = ModelSpec(name="llama-test", layers=2, hidden=4096, heads=32, kv_heads=8,
                  ffn_hidden=14336, ffn_act="swiglu", vocab=128256, seq_len=8192, bias=False,
                  norm="rmsnorm", position="rope")
dims = st.integers(1, 65536)


def test_gemm_time_at_reference_shape_is_peak_times_efficiency() -> None:
    """At 8192^3 (its gemm_tiles reference) the A100 rate is exactly peak * matmul_efficiency:
    312e12 * 0.793 (the EleutherAI cookbook sweep level, analysis/fit_gemm_tiles.py)."""
    n = 8192
    expected = 2 * n**3 / (312e12 * 0.793)
    assert compute.gemm_time_s(A100, "bf16", n, n, n) == pytest.approx(expected, rel=1e-12)


@given(dims, dims, dims, st.sampled_from([0, 1, 2]), st.integers(1, 4096))
def test_rate_monotone_in_each_dimension(m: int, n: int, k: int, axis: int, grow: int) -> None:
    """On the half-dimension curve, growing any one GEMM dimension never lowers the rate (the
    tile/wave model is not monotone: a tile or wave more can cost more than it adds)."""
    shape = [m, n, k]
    bigger = list(shape)
    bigger[axis] += grow
    assert (compute.achievable_matmul_flops_per_s(RTX, "fp16", *bigger)
            >= compute.achievable_matmul_flops_per_s(RTX, "fp16", *shape))


def test_small_gemm_well_below_large() -> None:
    """n = 256 runs at well under half the n = 8192 rate (RTX 3090 Ti, half-dim 254: about 13 %)."""
    small = compute.achievable_matmul_flops_per_s(RTX, "fp16", 256, 256, 256)
    large = compute.achievable_matmul_flops_per_s(RTX, "fp16", 8192, 8192, 8192)
    assert small / large == pytest.approx((256 / 510) ** 3 / (8192 / 8446) ** 3, rel=1e-12)
    assert small < 0.2 * large


def test_efficiency_fallback() -> None:
    """A dtype without matmul_efficiency borrows bf16, then fp16, else 1.0."""
    acc = replace(A100, matmul_efficiency={"fp16": 0.5})
    assert compute.matmul_efficiency(acc, "tf32") == 0.5
    assert compute.matmul_efficiency(replace(A100, matmul_efficiency={}), "bf16") == 1.0
    # tf32 has its own entry: mli microbench A100 matmul_fp32_tf32, 116 of 156 TFLOP/s (n = 8192)
    assert compute.matmul_efficiency(A100, "tf32") == pytest.approx(116 / 156, abs=5e-4)


def test_bad_inputs_raise() -> None:
    """Zero dims, unknown dtypes and a TP that does not divide heads are SpecErrors."""
    with pytest.raises(SpecError):
        compute.gemm_time_s(A100, "bf16", 0, 8, 8)
    with pytest.raises(SpecError):
        compute.gemm_time_s(A100, "fp8", 8, 8, 8)  # A100 has no fp8 peak
    with pytest.raises(SpecError):
        compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=3)
    with pytest.raises(SpecError):
        compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=1, recompute="some")


def test_memory_bound_time() -> None:
    """1 GB at 2039 GB/s x 0.79."""
    assert compute.memory_bound_time_s(A100, 1e9) == pytest.approx(1e9 / (2039e9 * 0.79))


def test_gemm_operator_backward_is_two_gemms() -> None:
    """A square GEMM's dgrad and wgrad have its shape, so backward = 2x forward, wgrad = half."""
    op = compute.gemm_operator(A100, "bf16", "x", (4096, 4096, 4096))
    assert op.backward_s == pytest.approx(2 * op.time_s)
    assert op.wgrad_s == pytest.approx(op.time_s)
    assert op.flops == 2 * 4096**3
    assert op.bytes == 3 * 4096**2 * 2


def test_gemm_operator_is_a_roofline() -> None:
    """On a starved memory system (1 GB/s) a GEMM takes its memory time, in every pass."""
    slow = replace(A100, memory_bandwidth_Bps=1e9)
    op = compute.gemm_operator(slow, "bf16", "x", (4096, 4096, 4096))
    memory = compute.memory_bound_time_s(slow, op.bytes)
    assert op.time_s == pytest.approx(memory)
    assert op.backward_s == pytest.approx(2 * memory)
    assert compute.gemm_operator(A100, "bf16", "x", (4096, 4096, 4096)).time_s < memory / 100


def test_layer_flops_match_megatron_per_layer_count() -> None:
    """Forward FLOPs of a GPT block = 24 b s h^2 + 4 b s^2 h (the per-layer term of SC'21 Eq. 3)."""
    b, s, h = 2, 2048, 4096
    lt = compute.layer_times(GPT, A100, "bf16", b, s, tp=1)
    assert sum(o.flops for o in lt.operators) == pytest.approx(24 * b * s * h**2 + 4 * b * s**2 * h)


def test_layer_operator_names() -> None:
    """GPT (gelu, bias, learned positions, unfused attention) and Llama (swiglu, no bias, RoPE,
    flash) operator lists."""
    gpt = [o.name for o in compute.layer_times(GPT, A100, "bf16", 1, 2048, 1,
                                               attention="math").operators]
    assert gpt == ["norm1", "qkv", "scores", "softmax", "attn_dropout", "attn_v", "proj",
                   "dropout1", "residual1", "norm2", "mlp_up", "activation", "mlp_down",
                   "dropout2", "residual2"]
    llama = [o.name for o in compute.layer_times(LLAMA, A100, "bf16", 1, 8192, 1).operators]
    assert llama == ["norm1", "qkv", "rope", "attention", "proj", "residual1", "norm2",
                     "mlp_gate", "mlp_up", "activation", "mlp_down", "residual2"]


def test_rope_reads_and_writes_queries_and_keys_once_each_way() -> None:
    """Llama 3 8B, tp 2, 8192 tokens: q is 16 heads x 128, k is 4 KV heads x 128 per GPU; one
    read and one write of bf16 q and k in forward, the same in backward."""
    ops = {o.name: o for o in compute.layer_times(LLAMA, A100, "bf16", 1, 8192, 2).operators}
    rope = ops["rope"]
    assert rope.bytes == 2 * 8192 * (16 * 128 + 4 * 128) * 2
    assert rope.time_s == pytest.approx(rope.bytes / (A100.memory_bandwidth_Bps
                                                      * A100.memory_efficiency))
    assert rope.backward_s == rope.time_s
    assert rope.flops == 0.0


def test_gqa_qkv_shape_and_tp_split() -> None:
    """Llama QKV output width (h + 2 kv hd)/tp: (4096 + 2*8*128)/4 = 1536 columns."""
    lt = compute.layer_times(LLAMA, A100, "bf16", 1, 8192, tp=4)
    qkv = next(o for o in lt.operators if o.name == "qkv")
    assert qkv.flops == 2 * 8192 * 1536 * 4096


def test_tp_and_cp_divide_gemm_work() -> None:
    """tp = 2 halves every GEMM's FLOPs; cp = 2 halves the tokens (and attention FLOPs)."""
    one = compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=1)
    tp2 = compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=2)
    cp2 = compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=1, cp=2)
    total = sum(o.flops for o in one.operators)
    assert sum(o.flops for o in tp2.operators) == pytest.approx(total / 2)
    assert sum(o.flops for o in cp2.operators) == pytest.approx(total / 2)
    assert tp2.forward_s < one.forward_s


def test_sequence_parallel_shrinks_norm_bytes() -> None:
    """With SP the norms act on s/tp tokens."""
    plain = compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=4)
    sp = compute.layer_times(GPT, A100, "bf16", 1, 2048, tp=4, sequence_parallel=True)
    by_name = {o.name: o for o in sp.operators}
    assert by_name["norm1"].bytes == pytest.approx(plain.operators[0].bytes / 4)
    assert sp.forward_s < plain.forward_s


def test_recompute_policies() -> None:
    """none = 0; selective = attention-core forward; full = the whole forward."""
    def run(policy: str, flash: bool = True) -> compute.LayerTimes:
        return compute.layer_times(GPT, A100, "bf16", 1, 2048, 1, recompute=policy,
                                   attention="flash2" if flash else "math")
    assert run("none").recompute_s == 0.0
    full = run("full")
    assert full.recompute_s == full.forward_s
    sel = run("selective")
    assert sel.recompute_s == next(o.time_s for o in sel.operators if o.name == "attention")
    unfused = run("selective", flash=False)
    core = {"scores", "softmax", "attn_dropout", "attn_v"}
    assert unfused.recompute_s == pytest.approx(
        sum(o.time_s for o in unfused.operators if o.name in core))


def test_flash_attention_backward_uses_real_work() -> None:
    """Without a kernel table (an accelerator of unknown architecture) flash backward = 2.5x the
    forward work at the backward efficiency (compute-bound case)."""
    generic = replace(A100, arch="")
    lt = compute.layer_times(LLAMA, generic, "bf16", 1, 8192, 1)
    attn = next(o for o in lt.operators if o.name == "attention")
    ratio = (compute.FLASH_ATTENTION_BACKWARD_WORK * A100.attention_efficiency
             / A100.attention_backward_efficiency)
    assert attn.backward_s == pytest.approx(ratio * attn.time_s)
    assert attn.flops == pytest.approx(4 * 8192**2 * 4096)  # standard (non-causal) count
    assert attn.wgrad_s == 0.0


def test_flash_attention_takes_the_kernel_table_rate_oracle() -> None:
    """FlashAttention-2 on the A100, head dim 128, causal, 8k: the catalog's published 182
    TFLOP/s forward + backward (FA2 release figure), split by FA2's H100 backward/forward ratio
    at 8k, causal, hdim 128 (fwd 333; bwd = 2.5 / (3.5/308 - 1/333) = 299.0). By hand: ratio
    r = 299.0/333 = 0.89796; fwd = 182 (1 + 2.5/r) / 3.5 = 196.77; bwd = r fwd = 176.69 TFLOP/s.
    The layer's attention forward is the causal work (half of 4 s^2 h) over that rate."""
    lt = compute.layer_times(LLAMA, A100, "bf16", 1, 8192, 1, attention="flash2")
    attn = next(o for o in lt.operators if o.name == "attention")
    work = 0.5 * 4 * 8192**2 * 4096
    r = (2.5 / (3.5 / 308 - 1 / 333)) / 333
    fwd = 182e12 * (1 + 2.5 / r) / 3.5
    assert attn.time_s == pytest.approx(work / fwd, rel=1e-12)
    assert attn.backward_s == pytest.approx(2.5 * work / (r * fwd), rel=1e-12)
    assert fwd / 1e12 == pytest.approx(196.77, abs=0.01)


def test_dropout_follows_bias_unless_stated() -> None:
    """GPT-style models (biases) train with dropout, Llama-style ones without; MPT has biases and
    trains with p = 0, where PyTorch runs no kernel (``model.dropout: false``)."""
    assert GPT.dropout is True
    assert LLAMA.dropout is False
    mpt_like = replace(GPT, dropout=False)
    names = {o.name for o in compute.layer_times(mpt_like, A100, "bf16", 1, 2048, 1,
                                                 attention="math").operators}
    assert not names & {"dropout1", "dropout2", "attn_dropout"}
    assert {"dropout1", "dropout2", "attn_dropout"} <= {
        o.name for o in compute.layer_times(GPT, A100, "bf16", 1, 2048, 1,
                                            attention="math").operators}
    embedding = compute.embedding_times(mpt_like, A100, "bf16", 1, 2048)
    assert "embedding_dropout" not in {o.name for o in embedding.operators}


def test_backward_about_twice_forward_and_wgrad_share() -> None:
    """Backward is ~2x forward for a GEMM-dominated block; wgrad is about half the backward."""
    lt = compute.layer_times(GPT, A100, "bf16", 4, 2048, tp=1)
    assert 1.8 < lt.backward_s / lt.forward_s < 2.6
    assert 0.35 < lt.wgrad_s / lt.backward_s < 0.5


def test_moe_balanced_routing() -> None:
    """Top-2 of 8 experts: expert GEMM FLOPs = 2x the dense FFN's; ep leaves per-GPU FLOPs alone."""
    moe = replace(LLAMA, moe=MoESpec(experts=8, top_k=2))
    dense = compute.layer_times(LLAMA, A100, "bf16", 1, 4096, 1)
    sparse = compute.layer_times(moe, A100, "bf16", 1, 4096, 1)
    ep4 = compute.layer_times(moe, A100, "bf16", 1, 4096, 1, ep=4)

    def mlp(lt: compute.LayerTimes) -> float:
        return sum(o.flops for o in lt.operators if o.name.startswith("mlp_"))
    assert mlp(sparse) == pytest.approx(2 * mlp(dense))
    assert mlp(ep4) == pytest.approx(mlp(sparse))
    router = next(o for o in sparse.operators if o.name == "router")
    assert router.flops == 2 * 4096 * 8 * 4096


def test_logits_and_embedding() -> None:
    """Logits GEMM [b s, h] x [h, V/tp]; CE over b s V/tp fp32 elements; embedding memory-bound."""
    lt = compute.logits_times(GPT, A100, "bf16", 1, 2048, tp=2)
    by_name = {o.name: o for o in lt.operators}
    assert by_name["logits"].flops == 2 * 2048 * 25600 * 4096
    assert by_name["cross_entropy"].bytes == 2 * 2048 * 25600 * 4
    emb = compute.embedding_times(GPT, A100, "bf16", 1, 2048)
    assert all(o.kind == "memory" for o in emb.operators)
    assert emb.operators[0].bytes == 2 * 2048 * 4096 * 2


def test_optimizer_step_bytes() -> None:
    """Adam moves 30 B per updated parameter; ZeRO sharding over 8 ranks divides the time by 8."""
    full = compute.optimizer_step_time_s(A100, 8e9)
    assert full == pytest.approx(8e9 * 30 / (2039e9 * 0.79))
    assert compute.optimizer_step_time_s(A100, 8e9, dp_shards=8) == pytest.approx(full / 8)


def test_unfused_grad_accumulation_bytes() -> None:
    """Unfused accumulation reads the fresh gradient and reads and writes the buffer, per param."""
    fp16 = compute.grad_accumulation_time_s(A100, 2e9, 2, 2)
    assert fp16 == pytest.approx(2e9 * 6 / (2039e9 * 0.79))
    assert compute.grad_accumulation_time_s(A100, 2e9, 2, 4) == pytest.approx(fp16 * 10 / 6)
    assert compute.grad_accumulation_time_s(A100, 0.0, 2, 4) == 0.0


def test_grad_accumulation_rejects_bad_sizes() -> None:
    with pytest.raises(SpecError, match=r"execution\.grad_accumulation_fusion"):
        compute.grad_accumulation_time_s(A100, -1.0, 2, 2)
