"""Kernel and single-layer timings against mli/transformers-benchmarks (README @3370b2b, notebooks).

Sources: entries ``mli_matmul_*``, ``mli_microbench_summary_*``, ``mli_bert_large_layer_3090ti_*``,
``mli_gpt2_medium_block_3090ti_*`` (PyTorch 1.13, CUDA 11.7, fp16, one GPU). The measured values are
copied here with their entry ids; nothing outside the repository is read (the copies were checked
against the calibration entries on 2026-11-26, when that check left the suite).

FLOP conventions (mli/transformers-benchmarks' own): matmul TFLOP/s = 2n^3/t; layer forward =
24bsh^2 + 4bs^2h, forward + backward = 3x forward. The HF layers run unfused attention (no flash), so
predictions use ``attention="math"``.

Tolerances, and why:
- square matmul, fp16, n >= 1024: 15 %; n = 512: 35 % (the ``gemm_half_dim`` fit set, docs/catalog.md).
- BERT-large layer (by batch, 3090 Ti), micro-batches of >= 1024 tokens: 20 %. Below that, launch
  overhead (not modelled) dominates.
- README best-over-batch BERT-large layer (V100, 3090 Ti, RTX 4090): 30 %.
- GPT-2-medium block (3090 Ti), >= 4096 tokens: 30 %, and the prediction must be *above* the
  measurement: HF GPT2 runs ``gelu_new`` as ~8 unfused elementwise kernels and separate scale and
  causal-mask passes, which the fused (Megatron-style) operator list does not have.
Known misses are ``xfail(strict=True)`` with the reason, so a fix shows up as an XPASS failure.
"""

from __future__ import annotations

import pytest

from simcluster import catalog
from simcluster.perf import compute
from simcluster.spec import schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec

#: HF bert-large / gpt2-medium layer: h = 1024, 16 heads, ffn 4096, gelu, biases, LayerNorm.
LAYER = ModelSpec(name="bert-large-layer", layers=1, hidden=1024, heads=16, kv_heads=16,
                  ffn_hidden=4096, vocab=30522, seq_len=1024)

#: (entry id, catalog accelerator, dtype, n, measured TFLOP/s)
MATMUL = [
    ("mli_matmul_RTX3090Ti_n128", "rtx-3090-ti", "fp16", 128, 0.402),
    ("mli_matmul_RTX3090Ti_n512", "rtx-3090-ti", "fp16", 512, 25.857),
    ("mli_matmul_RTX3090Ti_n2048", "rtx-3090-ti", "fp16", 2048, 71.505),
    ("mli_matmul_RTX3090Ti_n8192", "rtx-3090-ti", "fp16", 8192, 81.314),
    ("mli_matmul_RTX3090Ti_n512", "rtx-3090-ti", "fp32", 512, 21.784),
    ("mli_matmul_RTX3090Ti_n2048", "rtx-3090-ti", "fp32", 2048, 31.282),
    ("mli_matmul_RTX3090Ti_n8192", "rtx-3090-ti", "fp32", 8192, 42.056),
    ("mli_matmul_V100_n128", "v100-sxm", "fp16", 128, 0.199),
    ("mli_matmul_V100_n512", "v100-sxm", "fp16", 512, 9.184),
    ("mli_matmul_V100_n2048", "v100-sxm", "fp16", 2048, 77.61),
    ("mli_matmul_V100_n8192", "v100-sxm", "fp16", 8192, 94.904),
    ("mli_matmul_V100_n512", "v100-sxm", "fp32", 512, 9.501),
    ("mli_matmul_V100_n8192", "v100-sxm", "fp32", 8192, 14.426),
    ("mli_microbench_summary_A100", "a100-sxm-80gb", "fp16", 8192, 230.0),
    ("mli_microbench_summary_A100", "a100-sxm-80gb", "tf32", 8192, 116.0),
    ("mli_microbench_summary_RTX_4090", "rtx-4090", "fp16", 8192, 172.0),
]

MATMUL_MISSES = {
    ("mli_matmul_RTX3090Ti_n128", "fp16"): "launch/timer overhead (~10 us per call), not modelled",
    ("mli_matmul_V100_n128", "fp16"): "launch/timer overhead (~10 us per call), not modelled",
    ("mli_matmul_V100_n2048", "fp16"): "one gemm_half_dim cannot fit V100 n=512 and n=2048 "
                                        "(docs/catalog.md: -34 %)",
    ("mli_matmul_RTX3090Ti_n512", "fp32"): "gemm_half_dim is fitted on fp16 tensor cores; fp32 "
                                            "CUDA-core GEMMs saturate at smaller n",
    ("mli_matmul_V100_n512", "fp32"): "gemm_half_dim (666) is fitted on fp16 tensor cores",
}

#: (entry id, sequence length, [(batch, fwd TFLOP/s, fwd+bwd TFLOP/s), ...])
BERT = [
    ("mli_bert_large_layer_3090ti_s128", 128,
     [(2, 15.182, 14.643), (4, 29.216, 24.224), (8, 45.127, 45.81), (16, 45.951, 50.264),
      (32, 50.962, 55.816), (64, 51.905, 58.354), (128, 56.488, 61.768)]),
    ("mli_bert_large_layer_3090ti_s512", 512,
     [(2, 39.007, 40.18), (4, 40.479, 44.317), (8, 43.847, 48.017), (16, 44.57, 49.961),
      (32, 47.698, 52.374), (64, 48.522, 53.846), (128, 46.998, 52.613)]),
]
GPT2 = [
    ("mli_gpt2_medium_block_3090ti_s512", 512,
     [(2, 28.082, 29.92), (4, 30.525, 33.389), (8, 33.745, 35.788), (16, 35.026, 37.137),
      (32, 36.302, 38.818), (64, 36.595, 39.371)]),
    ("mli_gpt2_medium_block_3090ti_s1024", 1024,
     [(2, 26.884, 29.436), (4, 29.189, 31.274), (8, 30.049, 32.15), (16, 30.911, 33.323),
      (32, 31.087, 33.678), (64, 30.623, 32.888)]),
]
#: README summary, best over the notebook grid (BERT: s in {128, 512}, batch 2..128).
BERT_SUMMARY = [
    ("mli_microbench_summary_V100", "v100-sxm", 53.0, 64.0),
    ("mli_microbench_summary_RTX_3090_Ti", "rtx-3090-ti", 56.0, 62.0),
    ("mli_microbench_summary_RTX_4090", "rtx-4090", 99.0, 109.0),
    ("mli_microbench_summary_A100", "a100-sxm-80gb", 110.0, 136.0),
]
SUMMARY_MISSES = {("mli_microbench_summary_A100", "fwd"): "catalog A100 efficiency is MAMF (newer "
                  "cuBLAS, 271 vs the 230 TFLOP/s this stack measured); predicted +40 %"}


def accelerator(name: str) -> AcceleratorSpec:
    """A catalog accelerator."""
    return schema.parse(AcceleratorSpec, catalog.entry("accelerators", name))


def relative_error(predicted: float, measured: float) -> float:
    """``predicted / measured - 1``."""
    return predicted / measured - 1.0


def predicted_matmul_tflops(acc: AcceleratorSpec, dtype: str, n: int) -> float:
    """2n^3 over the roofline time of an n^3 GEMM, in TFLOP/s."""
    return 2 * n**3 / compute.gemm_operator(acc, dtype, "mm", (n, n, n)).time_s / 1e12


def predicted_layer_tflops(acc: AcceleratorSpec, batch: int, seq: int) -> tuple[float, float]:
    """(forward, forward + backward) TFLOP/s of one layer under the mli FLOP convention."""
    lt = compute.layer_times(LAYER, acc, "fp16", batch, seq, tp=1, attention="math")
    flops = 24 * batch * seq * LAYER.hidden**2 + 4 * batch * seq**2 * LAYER.hidden
    return flops / lt.forward_s / 1e12, 3 * flops / (lt.forward_s + lt.backward_s) / 1e12


def _matmul_params() -> list[object]:
    params: list[object] = []
    for entry, gpu, dtype, n, measured in MATMUL:
        reason = MATMUL_MISSES.get((entry, dtype))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(entry, gpu, dtype, n, measured, marks=marks,
                                   id=f"{entry}-{dtype}"))
    return params


@pytest.mark.parametrize(("entry", "gpu", "dtype", "n", "measured"), _matmul_params())
def test_square_matmul(entry: str, gpu: str, dtype: str, n: int, measured: float) -> None:
    """mli square matmul TFLOP/s = 2n^3/t within 15 % (n >= 1024) or 35 % (n < 1024)."""
    tolerance = 0.15 if n >= 1024 else 0.35
    error = relative_error(predicted_matmul_tflops(accelerator(gpu), dtype, n), measured)
    assert abs(error) <= tolerance, f"{entry} {dtype}: error {error:+.1%}"


def _rows(table: list[tuple[str, int, list[tuple[int, float, float]]]],
          min_tokens: int) -> list[object]:
    return [pytest.param(seq, batch, fwd, fwdbwd, id=f"{entry}-b{batch}")
            for entry, seq, rows in table for batch, fwd, fwdbwd in rows
            if batch * seq >= min_tokens]


@pytest.mark.parametrize(("seq", "batch", "fwd", "fwdbwd"), _rows(BERT, 1024))
def test_bert_large_layer_3090ti(seq: int, batch: int, fwd: float, fwdbwd: float) -> None:
    """HF BertLayer forward and forward+backward TFLOP/s within 20 % (>= 1024 tokens)."""
    p_fwd, p_fwdbwd = predicted_layer_tflops(accelerator("rtx-3090-ti"), batch, seq)
    assert abs(relative_error(p_fwd, fwd)) <= 0.20
    assert abs(relative_error(p_fwdbwd, fwdbwd)) <= 0.20


@pytest.mark.parametrize(("seq", "batch", "fwd", "fwdbwd"), _rows(GPT2, 4096))
def test_gpt2_medium_block_3090ti(seq: int, batch: int, fwd: float, fwdbwd: float) -> None:
    """HF GPT2Block: predicted above measured (unfused HF elementwise ops) and within 30 %."""
    p_fwd, p_fwdbwd = predicted_layer_tflops(accelerator("rtx-3090-ti"), batch, seq)
    for predicted, measured in ((p_fwd, fwd), (p_fwdbwd, fwdbwd)):
        assert 0.0 < relative_error(predicted, measured) <= 0.30


def _summary_params() -> list[object]:
    params: list[object] = []
    for entry, gpu, fwd, fwdbwd in BERT_SUMMARY:
        for metric, measured in (("fwd", fwd), ("fwdbwd", fwdbwd)):
            reason = SUMMARY_MISSES.get((entry, metric))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(gpu, metric, measured, marks=marks, id=f"{entry}-{metric}"))
    return params


@pytest.mark.parametrize(("gpu", "metric", "measured"), _summary_params())
def test_bert_large_summary_best_over_batches(gpu: str, metric: str, measured: float) -> None:
    """README summary BERT-large layer TFLOP/s (best over the notebook grid) within 30 %."""
    acc = accelerator(gpu)
    grid = [predicted_layer_tflops(acc, b, s) for s in (128, 512) for b in (2, 4, 8, 16, 32, 64, 128)]
    best = max(pair[0 if metric == "fwd" else 1] for pair in grid)
    assert abs(relative_error(best, measured)) <= 0.30
