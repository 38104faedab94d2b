#!/usr/bin/env python3
"""Write the aiconfigurator GEMM tables the tile/wave fit reads (analysis/gemm_*_aiconfigurator.csv).

NVIDIA's ai-dynamo/aiconfigurator publishes per-GPU GEMM latency tables (parquet) measured by its
collectors (``collector/{sglang,trtllm}/collect_gemm.py``, timing in ``collector/helper.py``
``benchmark_with_power``: 3 warm-up calls, a CUDA graph of up to 6 copies of the op, 3 warm-up
replays, then 6 timed replays between two CUDA events; latency = elapsed / 6 / copies; clocks not
locked). This script copies the rows the fit uses, verbatim, into small CSVs: every row with m, n
and k multiples of 8 and at least 128 (the decode-sized m < 128 and the misaligned probes are left
out, as for analysis/gemm_h100_aiconfigurator.csv), sorted by (m, n, k). With more than
``MAX_ROWS`` rows a table would be subsampled evenly; none of the tables below needs it (9,538 to
9,576 rows each). It also writes the measured activation-quantisation latencies of the TensorRT-LLM
per-tensor fp8 path (``analysis/gemm_fp8_act_quant_aiconfigurator.csv``), which the fp8 fit takes
out of the GEMM latencies.

Usage (repository root; needs pandas and pyarrow)::

    python3 analysis/extract_gemm_aiconfigurator.py GIT_DIR [COMMIT]

``GIT_DIR`` is a clone (or bare mirror) of github.com/ai-dynamo/aiconfigurator; ``COMMIT``
defaults to the one every provenance entry of analysis/gemm_sweeps.yaml names; at that commit the
CSVs it writes are byte-identical to the checked-in ones. ``--h100-bf16`` instead checks that the
same selection reproduces the data rows of analysis/gemm_h100_aiconfigurator.csv (it does).
"""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from _guard import guarded

if TYPE_CHECKING:
    import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ANALYSIS = ROOT / "analysis"
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
DATA = "aic-core/src/aiconfigurator_core/systems/data"
MAX_ROWS = 15_000

#: Collector notes shared by the headers.
SGLANG_METHOD = (
    "collector/sglang/collect_gemm.py and collector/helper.py (benchmark_with_power) at {commit}: "
    "up to 6 copies of the op in one CUDA graph (fewer for large operands), 3 warm-up and 6 timed "
    "replays between CUDA events; latency = elapsed / 6 / copies. Clocks free (not locked): short "
    "kernels run above the clock the GPU holds at its power limit.")
TRTLLM_METHOD = (
    "collector/trtllm/collect_gemm.py and collector/helper.py (benchmark_with_power) at {commit}: "
    "tensorrt_llm._torch.modules.linear.Linear, up to 5 weight copies (enough to exceed L2) in one "
    "CUDA graph, 3 warm-up and 6 timed replays between CUDA events; latency = elapsed / 6 / copies. "
    "Clocks free (not locked).")


@dataclasses.dataclass(frozen=True)
class Table:
    """One output CSV: which rows of which published table."""

    out: str
    system: str          # aiconfigurator systems/data/<system>
    runtime: str         # <framework>/<version>
    kernel_source: str
    gemm_dtype: str
    device: str          # what the table's device column says, and the part's power limit
    what: str            # the op as the collector calls it
    sweep_id: str


TABLES = (
    Table("gemm_h100_fp8_aiconfigurator.csv", "h100_sxm", "trtllm/1.3.0rc20", "torch_flow", "fp8",
          "NVIDIA H100 80GB HBM3 (SXM5, 700 W)",
          "per-tensor fp8 (e4m3): torch.ops.tensorrt_llm.quantize_e4m3_per_tensor on randn bf16 "
          "activations (dynamic per-tensor scale), then torch.ops.trtllm.cublas_scaled_mm "
          "(cuBLASLt fp8, per-tensor scales, bf16 out) on randn-derived e4m3 weights",
          "aic_h100_sxm_fp8"),
    Table("gemm_h200_fp8_aiconfigurator.csv", "h200_sxm", "trtllm/1.3.0rc20", "torch_flow", "fp8",
          "NVIDIA H200 (SXM, 700 W)", "as gemm_h100_fp8_aiconfigurator.csv", "aic_h200_sxm_fp8"),
    Table("gemm_b200_fp8_aiconfigurator.csv", "b200_sxm", "trtllm/1.3.0rc20", "torch_flow", "fp8",
          "NVIDIA B200 (HGX/DGX B200, 1000 W)", "as gemm_h100_fp8_aiconfigurator.csv",
          "aic_b200_fp8"),
    Table("gemm_gb200_fp8_aiconfigurator.csv", "gb200", "trtllm/1.3.0rc20", "torch_flow", "fp8",
          "NVIDIA GB200 (NVL72 tray, 1200 W)", "as gemm_h100_fp8_aiconfigurator.csv",
          "aic_gb200_fp8"),
    Table("gemm_h100_fp8block_aiconfigurator.csv", "h100_sxm", "sglang/0.5.14",
          "sglang_deepgemm_gemm_nt_f8f8bf16", "fp8_block", "NVIDIA H100 80GB HBM3 (SXM5, 700 W)",
          "block-scaled fp8: sglang_per_token_group_quant_fp8 (1 x 128 activation groups) on randn "
          "bf16, then DeepGEMM gemm_nt_f8f8bf16 with 128 x 128 weight-block scales, bf16 out",
          "aic_h100_sxm_fp8_block"),
    Table("gemm_h200_fp8block_aiconfigurator.csv", "h200_sxm", "sglang/0.5.14",
          "sglang_deepgemm_gemm_nt_f8f8bf16", "fp8_block", "NVIDIA H200 (SXM, 700 W)",
          "as gemm_h100_fp8block_aiconfigurator.csv", "aic_h200_sxm_fp8_block"),
    Table("gemm_b200_fp8block_aiconfigurator.csv", "b200_sxm", "sglang/0.5.14",
          "sglang_deepgemm_gemm_nt_f8f8bf16", "fp8_block", "NVIDIA B200 (HGX/DGX B200, 1000 W)",
          "as gemm_h100_fp8block_aiconfigurator.csv (on SM100 DeepGEMM takes UE8M0 power-of-two "
          "scales, DEEPGEMM_SCALE_UE8M0)", "aic_b200_fp8_block"),
    Table("gemm_gb200_fp8block_aiconfigurator.csv", "gb200", "sglang/0.5.14",
          "sglang_deepgemm_gemm_nt_f8f8bf16", "fp8_block", "NVIDIA GB200 (NVL72 tray, 1200 W)",
          "as gemm_b200_fp8block_aiconfigurator.csv", "aic_gb200_fp8_block"),
    Table("gemm_b200_bf16_aiconfigurator.csv", "b200_sxm", "sglang/0.5.14", "sglang_torch_linear",
          "bfloat16", "NVIDIA B200 (HGX/DGX B200, 1000 W)",
          "torch.nn.functional.linear(A[m,k], W[n,k]) on randn bf16 (cuBLAS/cuBLASLt through "
          "PyTorch), the H100 fit's collector", "aic_b200_bf16"),
    Table("gemm_gb200_bf16_aiconfigurator.csv", "gb200", "sglang/0.5.14", "sglang_torch_linear",
          "bfloat16", "NVIDIA GB200 (NVL72 tray, 1200 W)", "as gemm_b200_bf16_aiconfigurator.csv",
          "aic_gb200_bf16"),
    Table("gemm_b200_bf16_trtllm_aiconfigurator.csv", "b200_sxm", "trtllm/1.3.0rc20", "torch_flow",
          "bfloat16", "NVIDIA B200 (HGX/DGX B200, 1000 W)",
          "unquantised tensorrt_llm Linear on randn bf16 (cuBLAS): the fp8 tables' harness",
          "aic_b200_bf16_trtllm"),
    Table("gemm_gb200_bf16_trtllm_aiconfigurator.csv", "gb200", "trtllm/1.3.0rc20", "torch_flow",
          "bfloat16", "NVIDIA GB200 (NVL72 tray, 1200 W)",
          "as gemm_b200_bf16_trtllm_aiconfigurator.csv", "aic_gb200_bf16_trtllm"),
    Table("gemm_b200_nvfp4_aiconfigurator.csv", "b200_sxm", "sglang/0.5.14",
          "sglang_flashinfer_cutedsl_nvfp4", "nvfp4", "NVIDIA B200 (HGX/DGX B200, 1000 W)",
          "NVFP4 (e2m1, fp8 scale per 16 elements, fp32 global scale): flashinfer fp4_quantize of "
          "randn bf16 activations, then flashinfer mm_fp4 backend cute-dsl (SGLang 0.5.14's choice "
          "on SM100), bf16 out", "aic_b200_nvfp4"),
    Table("gemm_gb200_nvfp4_aiconfigurator.csv", "gb200", "sglang/0.5.14",
          "sglang_flashinfer_cutedsl_nvfp4", "nvfp4", "NVIDIA GB200 (NVL72 tray, 1200 W)",
          "as gemm_b200_nvfp4_aiconfigurator.csv", "aic_gb200_nvfp4"),
)
#: The H100 bf16 fit set, for the --h100-bf16 reproduction check.
H100_BF16 = Table("gemm_h100_aiconfigurator.csv", "h100_sxm", "sglang/0.5.14",
                  "sglang_torch_linear", "bfloat16", "", "", "aic_h100_sxm_bf16")
#: The measured activation quantisation of the TensorRT-LLM fp8 path, per GPU.
QUANT_OUT = "gemm_fp8_act_quant_aiconfigurator.csv"
QUANT_SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200",
                 "gb200": "gb200"}


def git_bytes(git_dir: Path, commit: str, path: str) -> bytes:
    """The bytes of ``commit:path`` in the repository at ``git_dir`` (``OSError`` if absent)."""
    done = subprocess.run(["git", "-C", str(git_dir), "show", f"{commit}:{path}"],
                          check=False, capture_output=True)
    if done.returncode:
        raise OSError(f"{git_dir}: git show {commit[:9]}:{path} failed: "
                      f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def read_parquet(git_dir: Path, commit: str, path: str) -> pd.DataFrame:
    import pandas as pd  # optional: only this script needs it (with pyarrow)

    return pd.read_parquet(io.BytesIO(git_bytes(git_dir, commit, path)))


def aligned(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with m, n and k multiples of 8 and at least 128, sorted by (m, n, k)."""
    keep = (df.m % 8 == 0) & (df.n % 8 == 0) & (df.k % 8 == 0)
    keep &= (df.m >= 128) & (df.n >= 128) & (df.k >= 128)
    return df[keep].sort_values(["m", "n", "k"])


def table_rows(git_dir: Path, commit: str, table: Table) -> tuple[list[str], int, str]:
    """(CSV data lines, published rows of that dtype and kernel, the table's path)."""
    path = f"{DATA}/{table.system}/gemm/{table.runtime}/gemm_perf.parquet"
    df = read_parquet(git_dir, commit, path)
    df = df[(df.gemm_dtype.astype(str) == table.gemm_dtype)
            & (df.kernel_source.astype(str) == table.kernel_source)]
    if df.duplicated(["m", "n", "k"]).any():
        raise ValueError(f"{path}: duplicate (m, n, k) rows for {table.gemm_dtype}")
    kept = aligned(df)
    if len(kept) > MAX_ROWS:  # evenly spaced rows (none of today's tables)
        step = len(kept) / MAX_ROWS
        kept = kept.iloc[[int(i * step) for i in range(MAX_ROWS)]]
    lines = [f"{int(m)},{int(n)},{int(k)},{float(t)!r}"
             for m, n, k, t in zip(kept.m, kept.n, kept.k, kept.latency, strict=True)]
    return lines, len(df), path


def header(table: Table, commit: str, path: str, kept: int, published: int) -> list[str]:
    framework = table.runtime.split("/")[0]
    method = (SGLANG_METHOD if framework == "sglang" else TRTLLM_METHOD).format(
        commit=commit[:9])
    text = [
        f"{table.gemm_dtype} GEMM latencies on {table.device.split(' (')[0]}, a fit set of the "
        f"tile/wave GEMM model (analysis/fit_gemm_tiles.py --sweep {table.sweep_id}; "
        f"analysis/gemm_sweeps.yaml sweep {table.sweep_id}).",
        f"Source: ai-dynamo/aiconfigurator@{commit}",
        f"  {path},",
        f"  rows gemm_dtype = {table.gemm_dtype}, kernel_source = {table.kernel_source}, "
        f"device {table.device}.",
        f"Op: {table.what}. The latency includes the activation quantisation kernel(s) where the "
        f"op has one (analysis/fit_gemm_tiles.py takes it out).",
        f"Method: {method}",
        f"Kept: every row with m, n and k multiples of 8 and at least 128 ({kept:,} of {published:,};"
        f" no subsampling). Written by analysis/extract_gemm_aiconfigurator.py.",
        "Columns: m, n (output), k (reduction), latency in ms as published (verbatim).",
    ]
    out: list[str] = []
    for para in text:  # wrap at ~110 characters, continuation lines indented
        indent = len(para) - len(para.lstrip(" "))
        words, line = para.split(), " " * indent
        for word in words:
            if line and len(line) + 1 + len(word) > 108:
                out.append(f"# {line}")
                line = "  " + word
            else:
                line = f"{line} {word}" if line.strip() else line + word
        out.append(f"# {line}")
    return out


def quant_lines(git_dir: Path, commit: str, needed: dict[str, set[tuple[int, int]]]) -> list[str]:
    """Measured dynamic per-tensor fp8 quantisation (compute_scale + scale_matrix) per (m, k)."""
    rows: list[str] = []
    for system, name in QUANT_SYSTEMS.items():
        base = f"{DATA}/{system}/quantize/trtllm/1.3.0rc20"
        scale = read_parquet(git_dir, commit, f"{base}/computescale_perf.parquet")
        matrix = read_parquet(git_dir, commit, f"{base}/scale_matrix_perf.parquet")
        both = scale.merge(matrix, on=["m", "k"], suffixes=("_cs", "_sm")).sort_values(["m", "k"])
        for m, k, cs, sm in zip(both.m, both.k, both.latency_cs, both.latency_sm, strict=True):
            if (int(m), int(k)) in needed[name]:
                rows.append(f"{name},{int(m)},{int(k)},{float(cs)!r},{float(sm)!r}")
    return rows


QUANT_HEADER = [
    "# Measured activation quantisation of the TensorRT-LLM per-tensor fp8 GEMM path, the part of",
    "# the gemm_{h100,h200,b200,gb200}_fp8_aiconfigurator.csv latencies that is not the GEMM",
    "# (analysis/fit_gemm_tiles.py takes it out).",
    f"# Source: ai-dynamo/aiconfigurator@{COMMIT}",
    "#   aic-core/src/aiconfigurator_core/systems/data/<system>/quantize/trtllm/1.3.0rc20/",
    "#   computescale_perf.parquet and scale_matrix_perf.parquet (collector/trtllm/collect_computescale.py):",
    "#   scale_matrix = torch.ops.tensorrt_llm.static_quantize_e4m3_per_tensor (the static quantise);",
    "#   compute_scale = quantize_e4m3_per_tensor (dynamic: amax, then quantise) minus scale_matrix.",
    "#   Both on randn bf16 [m, k], the same harness as the GEMMs (CUDA graph, 6 timed replays).",
    "# The dynamic path the fp8 GEMM rows ran is compute_scale + scale_matrix. Kept: the (m, k) of the",
    "# fp8 CSVs. Columns: accelerator (catalog name), m, k, compute_scale_ms, scale_matrix_ms (verbatim).",
]


def main(argv: Sequence[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    git_dir = Path(args[0])
    commit = args[1] if len(args) > 1 else COMMIT
    if "--h100-bf16" in argv:  # reproduction check of the existing H100 bf16 CSV's data block
        lines, _, _ = table_rows(git_dir, commit, H100_BF16)
        existing = [ln for ln in (ANALYSIS / H100_BF16.out).read_text().splitlines()
                    if ln and not ln.startswith("#")][1:]
        print(f"{H100_BF16.out}: {'identical' if lines == existing else 'DIFFERS'} "
              f"({len(lines)} rows extracted, {len(existing)} in the file)")
        return 0 if lines == existing else 1
    needed: dict[str, set[tuple[int, int]]] = {name: set() for name in QUANT_SYSTEMS.values()}
    for table in TABLES:
        lines, published, path = table_rows(git_dir, commit, table)
        text = [*header(table, commit, path, len(lines), published), "m,n,k,latency_ms", *lines]
        (ANALYSIS / table.out).write_text("\n".join(text) + "\n")
        print(f"{table.out}: {len(lines)} rows of {published}")
        if table.gemm_dtype == "fp8":
            name = QUANT_SYSTEMS[table.system]
            needed[name] |= {(int(ln.split(",")[0]), int(ln.split(",")[2])) for ln in lines}
    quant = quant_lines(git_dir, commit, needed)
    (ANALYSIS / QUANT_OUT).write_text("\n".join(
        [*QUANT_HEADER, "accelerator,m,k,compute_scale_ms,scale_matrix_ms", *quant]) + "\n")
    print(f"{QUANT_OUT}: {len(quant)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("extract_gemm_aiconfigurator.py", main, sys.argv))
