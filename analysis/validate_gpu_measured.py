"""Print simcluster's kernel, layer and memory model against this project's GPU measurements.

Run from the repository root: ``python analysis/validate_gpu_measured.py [h100|h200]`` (default
both). The data and the comparisons live in ``tests/validation/gpu_measured.py`` (the code the
validation tests run); how the data was taken: analysis/device/README.md. Error = predicted / measured - 1.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded

from tests.validation import gpu_measured as hm


def layers(gpu: str) -> None:
    print("| layer | attention | tokens | fwd+bwd measured (ms) | error fwd | error fwd+bwd | "
          "activations measured (MiB) | error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in hm.rows(gpu, "layers"):
        fwd, both = hm.layer_errors(gpu, r)
        tokens = int(r["batch"]) * int(r["seq"])
        print(f"| {r['shape']} | {r['attention']} | {tokens} | {float(r['fwd_bwd_ms_per_layer']):.2f} | "
              f"{fwd:+.1%} | {both:+.1%} | {float(r['activation_MiB_per_layer']):.0f} | "
              f"{hm.stack_activation_error(r):+.1%} |")
    for r in hm.rows(gpu, "steady"):
        if r["what"] == "layer":
            print(f"steady {r['name']}: {float(r['ms']):.2f} ms per layer at {float(r['sm_MHz']):.0f} MHz, "
                  f"{float(r['power_W']):.0f} W: error {hm.steady_layer_error(gpu, r):+.1%}")


def _spread(errors: list[float], sep: str = " / ") -> str:
    """Median |error| and mean signed error of ``errors``."""
    return f"{hm.median_abs(errors):.1%}{sep}{statistics.fmean(errors):+.1%}"


def gemms(gpu: str) -> None:
    print("\n| GEMMs at the power limit | shapes | median abs error | mean error | worst |")
    print("|---|---:|---:|---:|---:|")
    for dtype in ("bf16", "fp8_tensor"):
        for label, keep in ((">= 2048 tokens", lambda t: t >= 2048), ("512 tokens", lambda t: t < 2048)):
            shapes = [r for r in hm.steady_gemms(gpu, dtype) if keep(int(r["name"].split("x")[0]))]
            errors = [hm.gemm_error(gpu, r) for r in shapes]
            print(f"| {dtype}, {label} | {len(errors)} | {_spread(errors, ' | ')} | "
                  f"{max(errors, key=abs):+.1%} |")
    for dtype, catalog_dtype in (("bf16", "bf16"), ("fp8_tensor", "fp8")):
        measured = hm.sustained_tflops(gpu, dtype)
        acc = hm.accelerator(gpu)
        predicted = hm.achievable_matmul_flops_per_s(acc, catalog_dtype, 8192, 8192, 8192) / 1e12
        print(f"sustained 8192^3 {dtype}: measured {measured:.0f} TFLOP/s, catalog {predicted:.0f} "
              f"({predicted / measured - 1:+.1%})")


def attention(gpu: str) -> None:
    print("\n| attention table vs measured | points | fwd median abs / mean | bwd median abs / mean |")
    print("|---|---:|---:|---:|")
    for kernel in ("sdpa-flash", "cudnn"):
        for label, lo, hi in (("512-16k, hd 64/128", 0, 16384), ("32k-64k, hd 128", 16385, 65536)):
            errs = hm.attention_errors(gpu, kernel, lo, hi, (64, 128) if hi <= 16384 else (128,))
            f, b = [e[0] for e in errs], [e[1] for e in errs]
            print(f"| {kernel} ({hm.KERNELS[kernel]} table), {label} | {len(errs)} | "
                  f"{_spread(f)} | {_spread(b)} |")


def memory(gpu: str) -> None:
    ops = ("copy", "add", "mul_scalar", "gelu", "silu", "cast_bf16_fp8", "layer_norm_fwd",
           "layer_norm_bwd", "rms_norm_fwd", "softmax_2048", "adam_fused", "adam_foreach")
    acc = hm.accelerator(gpu)
    print(f"\nachieved HBM bandwidth / {acc.memory_bandwidth_Bps / 1e9:.0f} GB/s "
          f"(catalog memory_efficiency {acc.memory_efficiency}):")
    print(", ".join(f"{op} {hm.achieved_bandwidth_fraction(gpu, op):.3f}" for op in ops))


def main(argv: Sequence[str]) -> int:
    if len(argv) > 1 and argv[1] not in hm.GPUS:
        print(__doc__)
        return 0 if argv[1] in ("-h", "--help") else 2
    for gpu in argv[1:] or hm.GPUS:
        print(f"\n## {gpu} ({hm.GPUS[gpu][0]})\n")
        layers(gpu)
        gemms(gpu)
        attention(gpu)
        memory(gpu)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_gpu_measured.py", main, sys.argv))
