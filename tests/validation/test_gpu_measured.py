"""Kernels, layers and activation memory on an H100 and an H200 SXM, measured by this project
(2026-11-26).

Sources: ``tests/validation/data/h100_measured/`` and ``h200_measured/``
(``analysis/device/measure_gpu.py`` at the cards' 700 W limit, PyTorch 2.11, CUDA 13.0, cuDNN 9.19;
analysis/device/README.md; :mod:`tests.validation.gpu_measured`). The catalog was fitted on
published sources only; these measurements check it. Error = predicted / measured - 1.

Tolerances, and why (each GPU):
- eager transformer layers (10 shapes x 2 attention kernels, bursts of ~100 ms): forward +
  backward median |error| 5%, every row 8%; forward alone median 5%, every row 12% (the forward is
  a third of the time, so launch and norm kernels weigh more in it).
- the same layers held 6 s at the power limit: 5% each.
- GEMMs held a second at the power limit, >= 2048 tokens: bf16 median 3%, every shape 5%; fp8
  (one scale per tensor) median 8%: the catalog's fp8 tiles, fitted on aiconfigurator's sweep, run
  6-7% fast on these cards (known; docs/validation.md). 512-token GEMMs: strict expected failures.
- the 8192^3 level held 15-25 s: bf16 3%, fp8 5% (the catalog's sustained levels).
- FlashAttention-2 (PyTorch's flash backend) against the FlashAttention-3 paper's FA2 bars, head
  dimensions 64 and 128: median 5% forward and backward; 32k and 64k tokens (the tables' flat
  extension past 16k, H100): 15% each.
- streaming kernels (copy, add, scale, SiLU, fp8 cast at 1 GiB): their median within 0.05 of
  memory_efficiency (the H200's copy and cast run at 0.79 and 0.69 of its bandwidth, the others
  0.82-0.92: a spread the one streaming rate does not have).
- activation bytes per layer of the GPT (MPT) stacks (H100): 1%.
- caching-allocator fragmentation of an eager Llama loop (H100): the default allocator within
  0.10-0.20 of the dynamic bytes (simcluster's default 0.15, GMLake), expandable segments under 0.10.
- grouped expert GEMMs (H100, balanced routing, kernels >= 0.2 ms): >= 1024 tokens per expert
  median 5%, each 20%; 128 and 512 tokens per expert median 10%, each 25%.
"""

from __future__ import annotations

import statistics

import pytest

from tests.validation import gpu_measured as hm

GPUS = tuple(hm.GPUS)
LAYERS = [(gpu, r) for gpu in GPUS for r in hm.rows(gpu, "layers")]
H100_LAYERS = hm.rows("h100", "layers")


def _id(row: dict[str, str]) -> str:
    return f"{row['shape']}-{row['attention']}"


@pytest.mark.parametrize("gpu", GPUS)
def test_layers_median_error(gpu: str) -> None:
    errors = [hm.layer_errors(gpu, r) for r in hm.rows(gpu, "layers")]
    assert len(errors) == 20
    assert hm.median_abs(e[1] for e in errors) <= 0.05
    assert hm.median_abs(e[0] for e in errors) <= 0.05


@pytest.mark.parametrize(("gpu", "row"), LAYERS, ids=[f"{g}-{_id(r)}" for g, r in LAYERS])
def test_each_layer(gpu: str, row: dict[str, str]) -> None:
    forward, both = hm.layer_errors(gpu, row)
    assert abs(both) <= 0.08, f"forward + backward {both:+.1%}"
    assert abs(forward) <= 0.12, f"forward {forward:+.1%}"


STEADY_LAYERS = [(g, r) for g in GPUS for r in hm.rows(g, "steady") if r["what"] == "layer"]


@pytest.mark.parametrize(("gpu", "row"), STEADY_LAYERS,
                         ids=[f"{g}-{r['name']}" for g, r in STEADY_LAYERS])
def test_layer_at_the_power_limit(gpu: str, row: dict[str, str]) -> None:
    error = hm.steady_layer_error(gpu, row)
    assert abs(error) <= 0.05, f"{error:+.1%}"


def _tokens(row: dict[str, str]) -> int:
    return int(row["name"].split("x")[0])


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize(("dtype", "median_bound"), [("bf16", 0.03), ("fp8_tensor", 0.08)])
def test_gemms_at_the_power_limit(gpu: str, dtype: str, median_bound: float) -> None:
    shapes = [r for r in hm.steady_gemms(gpu, dtype) if _tokens(r) >= 2048]
    assert len(shapes) == 16
    assert hm.median_abs(hm.gemm_error(gpu, r) for r in shapes) <= median_bound
    if dtype == "bf16":
        worst = max(hm.gemm_error(gpu, r) for r in shapes)
        assert abs(worst) <= 0.05, f"{worst:+.1%}"


@pytest.mark.xfail(strict=True, reason="512-token GEMMs run 13-29% slower at the power limit than "
                   "the tile model gives (one wave of 128x128 tiles at most 4 rows deep: the "
                   "model's k_overhead does not capture it); docs/validation.md")
@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("dtype", ["bf16", "fp8_tensor"])
def test_small_token_gemms(gpu: str, dtype: str) -> None:
    shapes = [r for r in hm.steady_gemms(gpu, dtype) if _tokens(r) < 2048]
    assert shapes
    assert max(abs(hm.gemm_error(gpu, r)) for r in shapes) <= 0.08


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize(("dtype", "catalog_dtype", "bound"),
                         [("bf16", "bf16", 0.03), ("fp8_tensor", "fp8", 0.05)])
def test_sustained_level(gpu: str, dtype: str, catalog_dtype: str, bound: float) -> None:
    """The catalog's sustained level at 8192^3 (aiconfigurator's sweeps and the 700 W clock)
    against back-to-back GEMMs: H100 681 TFLOP/s bf16 and 1238 fp8 at about 1360 and 1250 MHz,
    H200 668 and 1207."""
    measured = hm.sustained_tflops(gpu, dtype) * 1e12
    predicted = hm.achievable_matmul_flops_per_s(hm.accelerator(gpu), catalog_dtype, 8192, 8192, 8192)
    assert abs(predicted / measured - 1) <= bound


@pytest.mark.parametrize("gpu", GPUS)
def test_sustained_runs_hold_the_power_limit(gpu: str) -> None:
    """The premise of the sustained level (perf/kernels/clock.py): under back-to-back GEMMs the
    card sits at its 700 W limit with the software power cap active (NVML clock-event bit 0x4)."""
    late = [r for r in hm.rows(gpu, "sustained") if float(r["t_s"]) > 10]
    assert all(int(r["reasons"]) & 0x4 for r in late)
    assert min(float(r["power_W"]) for r in late) >= 680


@pytest.mark.parametrize("gpu", GPUS)
def test_flash2_tables(gpu: str) -> None:
    errors = hm.attention_errors(gpu, "sdpa-flash")
    assert len(errors) == 24
    assert hm.median_abs(e[0] for e in errors) <= 0.05
    assert hm.median_abs(e[1] for e in errors) <= 0.05


@pytest.mark.parametrize("kernel", ["sdpa-flash", "cudnn"])
def test_long_sequences_stay_flat(kernel: str) -> None:
    """Past 16k the tables take the 16k rate; measured at 32k and 64k (causal, head dim 128)."""
    long = hm.attention_errors("h100", kernel, min_seq=16385, max_seq=65536, head_dims=(128,))
    assert len(long) == 2
    assert max(max(abs(f), abs(b)) for f, b in long) <= 0.15


@pytest.mark.parametrize("gpu", GPUS)
def test_cudnn_backward_table(gpu: str) -> None:
    errors = hm.attention_errors(gpu, "cudnn")
    assert hm.median_abs(e[1] for e in errors) <= 0.10


@pytest.mark.xfail(strict=True, reason="cuDNN 9.19's forward runs 15% (median) faster than the "
                   "FlashAttention-3 paper's cuDNN bars (cuDNN 9 of mid-2024) that the catalog "
                   "holds for the 2024-2025 stacks; docs/validation.md")
@pytest.mark.parametrize("gpu", GPUS)
def test_cudnn_forward_table(gpu: str) -> None:
    errors = hm.attention_errors(gpu, "cudnn")
    assert hm.median_abs(e[0] for e in errors) <= 0.10


@pytest.mark.parametrize("gpu", GPUS)
def test_streaming_bandwidth(gpu: str) -> None:
    fractions = [hm.achieved_bandwidth_fraction(gpu, op)
                 for op in ("copy", "add", "mul_scalar", "silu", "cast_bf16_fp8")]
    assert abs(statistics.median(fractions) - hm.accelerator(gpu).memory_efficiency) <= 0.05


@pytest.mark.parametrize("row", [r for r in H100_LAYERS if r["kind"] == "gpt"], ids=_id)
def test_gpt_activation_bytes(row: dict[str, str]) -> None:
    assert abs(hm.stack_activation_error(row)) <= 0.01


def test_dropout_masks() -> None:
    """One GPT layer keeps 30.0 bytes per token and hidden unit besides its input, 32.0 with
    dropout p = 0.1: the model's two 1-byte masks."""
    variants = {r["variant"]: float(r["bytes_per_token_hidden"]) for r in hm.rows("h100", "memvar")}
    assert variants["gpt+dropout"] - variants["gpt"] == pytest.approx(2.0, abs=0.01)
    assert variants["gpt"] + 2 == pytest.approx(32.0, abs=0.1)


COMPILED = hm.rows("h100", "layers_compiled")


@pytest.mark.parametrize("row", COMPILED, ids=lambda r: r["shape"])
def test_compiled_layer(row: dict[str, str]) -> None:
    """Layers under ``torch.compile`` (inductor's fused element-wise kernels, H100, burst clocks)
    against ``elementwise: fused``: -2.6..+7.2%; the same Llama layers in eager mode are 12-15%
    slower than the fused prediction, which is what ``elementwise: eager`` adds."""
    assert abs(hm.compiled_layer_error(row)) <= 0.08


def test_compiled_layers_median() -> None:
    assert len(COMPILED) == 4
    assert hm.median_abs(hm.compiled_layer_error(r) for r in COMPILED) <= 0.03


@pytest.mark.parametrize("row", [r for r in COMPILED if r["kind"] == "gpt"], ids=lambda r: r["shape"])
def test_compiled_gpt_activation_bytes(row: dict[str, str]) -> None:
    assert abs(hm.stack_activation_error(row)) <= 0.01


@pytest.mark.parametrize("config", ["qwen3-30b-a3b/ep8", "deepseek-v3/ep8", "mixtral-8x7b/ep1"])
def test_moe_block_issue_time(config: str) -> None:
    """A whole eager MoE block (router, top-k, permute, two grouped GEMMs, SwiGLU, unpermute)
    launches 94-127 kernels per forward + backward, which the host issues in 2.2-3.4 ms whatever
    the token count: at 1024 tokens the Qwen3 EP-8 share is host-bound (GPU time = issue time
    within 10%), the others are not. Recorded for the per-micro-batch MoE cost (issue 23)."""
    host, gpu = hm.moe_host_floor_ms(config)
    assert 2.0 <= host <= 4.0
    assert (gpu <= 1.1 * host) == (config == "qwen3-30b-a3b/ep8")


MCORE_MOE = hm.rows("h200", "mcore_moe")


def test_megatron_core_moe_kernels_grow_with_local_experts() -> None:
    """Megatron-Core 0.16.1's MoE layer (local spec, no Transformer Engine: router with aux loss,
    all-to-all dispatcher, SequentialMLP experts) launches 17 kernels per local expert and 90
    more per forward+backward, whatever the token count (H200)."""
    slope, fixed = hm.mcore_moe_kernel_fit()
    assert slope == pytest.approx(17.0, abs=0.5)
    assert fixed == pytest.approx(90, abs=10)
    for row in MCORE_MOE:
        predicted = fixed + slope * int(row["local_experts"])
        assert int(row["kernels_fwd_bwd"]) == pytest.approx(predicted, rel=0.03)


@pytest.mark.parametrize("row", MCORE_MOE, ids=lambda r: f"{r['local_experts']}x{r['tokens']}")
def test_megatron_core_moe_layer_is_host_bound(row: dict[str, str]) -> None:
    """Every point, 8-128 local experts and 1k-16k tokens, takes the host's time to issue it
    (GPU wall within 1%), 37-58 us per kernel: 9 ms at 8 local experts, 14-21 ms at 16."""
    host, wall = float(row["host_fwd_bwd_ms"]), float(row["wall_fwd_bwd_ms"])
    assert wall == pytest.approx(host, rel=0.01)
    assert 30.0 <= host / int(row["kernels_fwd_bwd"]) * 1e3 <= 65.0


@pytest.mark.xfail(strict=True, reason="eager Llama layers keep 23-25% more than the model counts "
                   "(44 bytes per token and hidden unit against 34 for Llama 3 8B): the attention "
                   "kernel saves repeat_kv's full-width K and V (4(q - kv) per token) and the eager "
                   "SwiGLU multiply saves silu(gate) (2f); counting them for the eager stack makes "
                   "torchtitan's published Llama 2 13B run (b2, no AC) exceed 80 GB by 3%, so the "
                   "model's allocator reserve has to be checked with them; under torch.compile the "
                   "same layers keep 8-12% more than the model; docs/validation.md")
@pytest.mark.parametrize("row", [r for r in H100_LAYERS if r["kind"] == "llama"]
                         + [r for r in COMPILED if r["kind"] == "llama"], ids=_id)
def test_eager_llama_activation_bytes(row: dict[str, str]) -> None:
    assert abs(hm.stack_activation_error(row)) <= 0.05


@pytest.mark.parametrize(("band", "median_bound", "worst_bound"),
                         [((1024, 2048, 4096, 8192), 0.05, 0.20), ((128, 512), 0.10, 0.25)])
def test_grouped_expert_gemms(band: tuple[int, ...], median_bound: float,
                              worst_bound: float) -> None:
    """Grouped expert GEMMs (H100, ``torch._grouped_mm``, the expert shapes of Mixtral 8x7B,
    Qwen3-30B-A3B, DeepSeek-V3 and GPT-OSS-120B, 1-32 local experts, balanced, kernels >= 0.2 ms)
    against the batched GEMM operator the MoE layers use: at 128 tokens per expert the weights'
    HBM read bounds it (DeepSeek-V3's 4k tokens x top-8 over 256 experts)."""
    errors = hm.expert_gemm_errors("h100", band)
    assert len(errors) >= 20
    assert hm.median_abs(errors) <= median_bound
    assert max(abs(e) for e in errors) <= worst_bound


@pytest.mark.parametrize("row", hm.rows("h100", "alloc"),
                         ids=lambda r: f"{r['alloc_conf']}-{r['layers']}layers")
def test_allocator_fragmentation(row: dict[str, str]) -> None:
    """The default allocator's reserve on an eager Llama loop is GMLake's 15% (the default of
    ``execution.allocator_fragmentation``, 0.12-0.15 measured); expandable segments (torchtitan's
    run_llama_train.sh since October 2024) keep it under 10% (0.04-0.08 measured)."""
    f = hm.allocator_fragmentation(row)
    if row["alloc_conf"] == "default":
        assert 0.10 <= f <= 0.20, f"{f:.3f}"
    else:
        assert f < 0.10, f"{f:.3f}"


MCORE_LAYER = hm.rows("h100", "mcore_layer")


def _mcore(kind: str) -> list[dict[str, str]]:
    return [r for r in MCORE_LAYER if r["kind"] == kind]


def test_grouped_moe_kernels_do_not_grow_with_experts() -> None:
    """With grouped expert GEMMs (the legacy ``GroupedMLP`` on ``torch._grouped_mm``), Megatron-Core
    0.16.1's MoE layer launches 104-111 kernels per forward+backward at 8 to 128 local experts and
    1k to 16k tokens, where ``SequentialMLP`` adds 17 per local expert (H100,
    ``analysis/device/mcore_layer.py``)."""
    kernels = [int(r["kernels_fwd_bwd"]) for r in _mcore("moe")]
    assert len(kernels) == 12
    assert min(kernels) >= 100
    assert max(kernels) <= 115
    slope, _ = hm.mcore_moe_kernel_fit()
    assert max(kernels) < 90 + slope * 8  # fewer than the sequential layer's smallest share


@pytest.mark.parametrize("row", _mcore("moe"), ids=lambda r: f"{r['local_experts']}x{r['tokens']}")
def test_grouped_moe_layer_is_host_bound(row: dict[str, str]) -> None:
    """Every grouped point ends when the host has issued it (wall within 6% of the issue time):
    55-90 us per kernel, 6-9 ms per forward+backward, with 8 to 128 local experts alike, except the
    whole 128-expert top-8 layer at 16k tokens, whose GPU work (14.4 ms) the host waits for at the
    dispatcher's copy of the expert counts."""
    host, wall = float(row["host_fwd_bwd_ms"]), float(row["wall_fwd_bwd_ms"])
    assert wall == pytest.approx(host, rel=0.06)
    if (row["local_experts"], row["tokens"]) == ("128", "16384"):
        assert wall > 12.0
        return
    assert 55.0 <= host / int(row["kernels_fwd_bwd"]) * 1e3 <= 90.0
    assert 5.5 <= host <= 9.5


def test_megatron_core_python_costs_several_dispatches_per_kernel() -> None:
    """The same host issues a bare in-place ``add_`` in 10.6 us; Megatron-Core's layers take 40 us
    (a dense Llama 3 8B layer at 1k tokens, host-bound) to 52 us (a whole Qwen3-30B-A3B layer)
    per kernel: its Python, autograd and the module hooks, not the launch, set the floor."""
    (tiny,) = _mcore("tiny_add")
    floor_us = float(tiny["host_fwd_bwd_ms"]) * 1e3
    assert 5.0 <= floor_us <= 15.0
    for kind in ("layer_dense", "layer_moe"):
        row = next(r for r in _mcore(kind) if r["tokens"] == "1024")
        per_kernel = float(row["host_fwd_bwd_ms"]) / int(row["kernels_fwd_bwd"]) * 1e3
        assert 3.0 * floor_us <= per_kernel <= 6.0 * floor_us
        assert float(row["wall_fwd_bwd_ms"]) == pytest.approx(float(row["host_fwd_bwd_ms"]),
                                                              rel=0.01)
