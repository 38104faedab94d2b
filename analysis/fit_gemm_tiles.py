#!/usr/bin/env python3
"""Fit the tile/wave GEMM model (``gemm_tiles`` of the A100 and H100 catalog entries).

The model (simcluster/perf/roofline.py ``tile_efficiency``, docs/catalog.md "GEMM size model"):
a GEMM's output is cut into ``tile_m x tile_n`` tiles run in waves over the ``sms``; each tile
costs ``K/s + k_overhead`` steps for the best split ``s <= max_split_k`` of K, and the rate is
anchored at the shape ``matmul_efficiency`` was measured at (MAMF). The forward time is
``max(2MNK / rate, bytes / achievable bandwidth)``, exactly what the simulator computes.

Fixed from documentation, not fitted: ``sms`` (A100 108, H100 SXM 132) and the A100 tile
(256 x 128, NVIDIA's Matrix Multiplication Background guide). Fitted, per accelerator, on the
``role: fit`` sweeps of ``analysis/gemm_sweeps.yaml``, least squares on the relative time error:

- H100 SXM: the tile (two CUTLASS/cuBLAS Hopper shapes), ``max_split_k`` (1 .. 16) and
  ``k_overhead`` (integer grid), plus a constant per-call time ``t0`` for the measurement floor
  (the simulator does not use it);
- A100: ``k_overhead`` on the two MAMF points (``max_split_k`` is the H100 value). Printed for
  the record: the catalog does not use it (docs/catalog.md says why).

Usage (repository root): ``python3 analysis/fit_gemm_tiles.py``. Prints the parameters, the
residual of every point and the summary the catalog comments quote.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from _guard import guarded

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simcluster import catalog  # noqa: E402
from simcluster.perf import roofline  # noqa: E402
from simcluster.spec import schema  # noqa: E402
from simcluster.spec.hardware import AcceleratorSpec, GemmTileSpec  # noqa: E402

SWEEPS = ROOT / "analysis" / "gemm_sweeps.yaml"
H100_TILES = ((128, 128), (128, 256))
SPLITS = (1, 2, 4, 8, 16)
K_GRID = np.arange(0, 513, 8)
T0_GRID = np.arange(0.0, 8.0001e-6, 0.05e-6)  # seconds
Point = tuple[int, int, int, float]


def load_sweeps(path: Path = SWEEPS) -> list[dict[str, object]]:
    """The sweeps of ``analysis/gemm_sweeps.yaml``."""
    sweeps: list[dict[str, object]] = yaml.safe_load(path.read_text())["sweeps"]
    return sweeps


def accelerator(name: str) -> AcceleratorSpec:
    return schema.parse(AcceleratorSpec, catalog.entry("accelerators", name))


def with_tiles(acc: AcceleratorSpec, tiles: GemmTileSpec) -> AcceleratorSpec:
    roofline.reference_tile_efficiency.cache_clear()  # type: ignore[attr-defined]
    return dataclasses.replace(acc, gemm_tiles=tiles)


def forward_s(acc: AcceleratorSpec, m: int, n: int, k: int) -> float:
    """The simulator's forward time of one ``[m, k] x [k, n]`` bf16 GEMM."""
    return roofline.gemm_operator(acc, "bf16", "mm", (m, n, k)).time_s


def measured_s(points: Sequence[Point]) -> np.ndarray:
    return np.array([2.0 * m * n * k / (tf * 1e12) for m, n, k, tf in points])


def residuals(acc: AcceleratorSpec, points: Sequence[Point], t0: float) -> np.ndarray:
    """Relative time error ``(predicted + t0) / measured - 1`` per point."""
    predicted = np.array([forward_s(acc, m, n, k) for m, n, k, _ in points])
    return (predicted + t0) / measured_s(points) - 1.0


def best_t0(acc: AcceleratorSpec, points: Sequence[Point]) -> tuple[float, float]:
    """(RMS, t0) minimising the RMS relative time error over the ``t0`` grid."""
    predicted = np.array([forward_s(acc, m, n, k) for m, n, k, _ in points])
    err = (predicted[None, :] + T0_GRID[:, None]) / measured_s(points)[None, :] - 1.0
    rms = np.sqrt(np.mean(err**2, axis=1))
    i = int(np.argmin(rms))
    return float(rms[i]), float(T0_GRID[i])


def fit_h100(acc: AcceleratorSpec, points: Sequence[Point]) -> tuple[GemmTileSpec, float, float]:
    """Tile, split and k_overhead (coarse grid, then integers around the best) and t0."""
    base = acc.gemm_tiles
    assert base is not None
    best: tuple[float, GemmTileSpec, float] | None = None
    for (tm, tn) in H100_TILES:
        tile_best: tuple[float, GemmTileSpec, float] | None = None
        for split in SPLITS:
            local = fit_k_overhead(acc, points, dataclasses.replace(
                base, tile_m=tm, tile_n=tn, max_split_k=split))
            if tile_best is None or local[0] < tile_best[0]:
                tile_best = local
        assert tile_best is not None
        print(f"tile {tm}x{tn}: best RMS {tile_best[0]:.1%} (max_split_k "
              f"{tile_best[1].max_split_k}, k_overhead {tile_best[1].k_overhead:g})")
        if best is None or tile_best[0] < best[0]:
            best = tile_best
    assert best is not None
    return best[1], best[2], best[0]


def fit_k_overhead(acc: AcceleratorSpec, points: Sequence[Point],
                   tiles: GemmTileSpec) -> tuple[float, GemmTileSpec, float]:
    """(RMS, tiles, t0) of the best k_overhead: the coarse grid, then integers around its best."""
    best: tuple[float, GemmTileSpec, float] | None = None
    for grid in (K_GRID, None):
        if grid is None:
            assert best is not None
            center = int(best[1].k_overhead)
            grid = np.arange(max(0, center - 8), center + 9)
        for k0 in grid:
            candidate = dataclasses.replace(tiles, k_overhead=float(k0))
            rms, t0 = best_t0(with_tiles(acc, candidate), points)
            if best is None or rms < best[0]:
                best = (rms, candidate, t0)
    assert best is not None
    return best


#: A100 (not in the catalog, docs/catalog.md): 108 SMs (NVIDIA A100 Tensor Core GPU Architecture
#: whitepaper), the 256 x 128 cuBLAS tile of the Matrix Multiplication Background guide's A100
#: wave-quantization example, anchored at the mamf_bf16_NVIDIA_A100_SXM best shape.
A100_BASE = GemmTileSpec(sms=108, tile_m=256, tile_n=128, k_overhead=0.0,
                         reference_mnk=(1024, 10240, 5120), source="analysis/fit_gemm_tiles.py")


def fit_a100(acc: AcceleratorSpec, points: Sequence[Point], split: int) -> tuple[GemmTileSpec, float]:
    base = A100_BASE
    best: tuple[float, GemmTileSpec] | None = None
    for k0 in range(513):
        tiles = dataclasses.replace(base, max_split_k=split, k_overhead=float(k0))
        rms = float(np.sqrt(np.mean(residuals(with_tiles(acc, tiles), points, 0.0) ** 2)))
        if best is None or rms < best[0]:
            best = (rms, tiles)
    assert best is not None
    return best[1], best[0]


def table(acc: AcceleratorSpec, points: Sequence[Point], t0: float, title: str) -> None:
    err = residuals(acc, points, t0)
    print(f"\n### {title}\n")
    print("| M | N | K | measured TFLOP/s | model TFLOP/s | time error % |")
    print("|---:|---:|---:|---:|---:|---:|")
    for (m, n, k, tf), e in zip(points, err, strict=True):
        print(f"| {m} | {n} | {k} | {tf:.1f} | {tf / (1 + e):.1f} | {100 * e:+.1f} |")
    print(f"\nRMS {np.sqrt(np.mean(err**2)):.1%}, median |error| {np.median(abs(err)):.1%}, "
          f"max |error| {abs(err).max():.1%} over {len(points)} points")


def points_of(sweeps: list[dict[str, object]], sweep_id: str) -> list[Point]:
    for sweep in sweeps:
        if sweep["id"] == sweep_id:
            rows = sweep["points"]
            assert isinstance(rows, list)
            return [(int(m), int(n), int(k), float(tf)) for m, n, k, tf in rows]
    raise KeyError(sweep_id)


def main(argv: Sequence[str]) -> int:
    del argv
    sweeps = load_sweeps()
    h100 = accelerator("h100-sxm")
    tiles, t0, rms = fit_h100(h100, points_of(sweeps, "xla_sm90_bf16_b1"))
    print(f"## h100-sxm: tile {tiles.tile_m}x{tiles.tile_n}, max_split_k {tiles.max_split_k}, "
          f"k_overhead {tiles.k_overhead:g}, measurement floor t0 {t0 * 1e6:.2f} us "
          f"(RMS {rms:.1%})")
    fitted = with_tiles(h100, tiles)
    table(fitted, points_of(sweeps, "xla_sm90_bf16_b1"), t0, "H100 SXM: XLA sm_90 (fit, + t0)")
    table(fitted, points_of(sweeps, "mamf_h100_sxm"), 0.0, "H100 SXM: MAMF (check)")
    acc = accelerator("a100-sxm-80gb")
    a100, rms = fit_a100(acc, points_of(sweeps, "mamf_a100_sxm"), tiles.max_split_k)
    print(f"\n## a100-sxm-80gb (not in the catalog, docs/catalog.md): tile "
          f"{a100.tile_m}x{a100.tile_n}, max_split_k {a100.max_split_k} (H100 fit), k_overhead "
          f"{a100.k_overhead:g} (RMS {rms:.1%})")
    table(with_tiles(acc, a100), points_of(sweeps, "mamf_a100_sxm"), 0.0, "A100 SXM: MAMF (fit)")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("fit_gemm_tiles.py", main, sys.argv))
