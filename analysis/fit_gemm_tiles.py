#!/usr/bin/env python3
"""Fit the tile/wave GEMM model (``gemm_tiles`` of the A100 and H100 catalog entries).

The model (simcluster/perf/roofline.py ``tile_efficiency``, docs/catalog.md "GEMM size model"):
a GEMM's output is cut into ``tile_m x tile_n`` tiles run in waves over the ``sms``; each tile
costs ``K/s + k_overhead`` steps for the best split ``s <= max_split_k`` of K, and the rate is
anchored at ``reference_mnk``, where the rate is ``peak * matmul_efficiency``. The forward time
is ``max(2MNK / rate, bytes / achievable bandwidth)``, exactly what the simulator computes.

Fixed from documentation, not fitted: ``sms`` (A100 108, H100 SXM 132). Fitted, per accelerator,
on the ``role: fit`` sweeps of ``analysis/gemm_sweeps.yaml``, each with a constant per-call time
``t0`` for the measurement floor (launch and timer; the simulator does not use it):

- H100 SXM, on OpenXLA's sm_90 table, least squares on the relative time error: the tile (two
  CUTLASS/cuBLAS Hopper shapes), ``max_split_k`` (1 .. 16) and ``k_overhead`` (integer grid); the
  level is MAMF's (``reference_mnk`` is its best shape), which the table agrees with;
- A100, on the EleutherAI cookbook sweeps (1,093 shapes), least absolute deviations of the
  relative time error: the tile (three Ampere shapes), ``max_split_k`` (1 .. 8), ``k_overhead``
  (grid of 32) and the level, ``matmul_efficiency`` at 8192^3. The MAMF best shapes are a check.

Usage (repository root): ``python3 analysis/fit_gemm_tiles.py``. Prints the parameters, the
residuals and the summaries the catalog comments and docs/catalog.md quote.
"""

from __future__ import annotations

import dataclasses
import itertools
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


#: A100: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper); the tile is fitted among
#: the Ampere cuBLAS/CUTLASS tiles 256 x 128 (the Matrix Multiplication Background guide's A100
#: example), 128 x 256 and 128 x 128. The reference is 8192^3, a shape of the sweep.
A100_TILES = ((256, 128), (128, 256), (128, 128))
A100_SPLITS = (1, 2, 4, 8)
A100_K_GRID = np.arange(0, 641, 32)
A100_REFERENCE = (8192, 8192, 8192)
EFF_GRID = np.arange(0.600, 0.9501, 0.0005)
BatchPoint = tuple[int, int, int, int, float]


def a100_fit_sweeps(sweeps: list[dict[str, object]]) -> list[dict[str, object]]:
    """The ``role: fit`` sweeps of the A100."""
    return [sw for sw in sweeps if sw["accelerator"] == "a100-sxm-80gb" and sw["role"] == "fit"]


def a100_points(sweeps: list[dict[str, object]]) -> list[BatchPoint]:
    """Every point of ``sweeps``, as (batch, M, N, K, TFLOP/s)."""
    points: list[BatchPoint] = []
    for sweep in sweeps:
        rows = sweep["points"]
        assert isinstance(rows, list)
        points += [(int(b), int(m), int(n), int(k), float(tf)) for b, m, n, k, tf in rows]
    return points


def split_times(acc: AcceleratorSpec, points: Sequence[BatchPoint]) -> tuple[np.ndarray, ...]:
    """(compute time at matmul_efficiency 1, memory-bound time, measured time) per point."""
    unit = dataclasses.replace(acc, matmul_efficiency={**acc.matmul_efficiency, "bf16": 1.0})
    flops = np.array([2.0 * b * m * n * k for b, m, n, k, _ in points])
    rate = np.array([roofline.achievable_matmul_flops_per_s(unit, "bf16", m, n, k, b)
                     for b, m, n, k, _ in points])
    memory = np.array([roofline.memory_bound_time_s(acc, b * (m * k + k * n + m * n) * 2)
                       for b, m, n, k, _ in points])
    return flops / rate, memory, np.array([f / (p[4] * 1e12) for f, p in zip(flops, points, strict=True)])


def l1_fit(unit_s: np.ndarray, memory_s: np.ndarray,
           measured_s: np.ndarray) -> tuple[float, float, float]:
    """(mean |relative time error|, efficiency, t0) of the best efficiency and floor.

    Least absolute deviations, not least squares: the slowest-of-200 statistic of the sweep
    makes one-sided outliers (the same shape measured twice differs by up to 60 %)."""
    predicted = np.maximum(unit_s[None, :] / EFF_GRID[:, None], memory_s[None, :])
    best = (np.inf, 0.0, 0.0)
    for t0 in T0_GRID:
        loss = np.mean(np.abs((predicted + t0) / measured_s[None, :] - 1.0), axis=1)
        i = int(np.argmin(loss))
        if loss[i] < best[0]:
            best = (float(loss[i]), float(EFF_GRID[i]), float(t0))
    return best


def fit_a100(acc: AcceleratorSpec, points: Sequence[BatchPoint]) -> tuple[GemmTileSpec, float,
                                                                          float, float]:
    """(tiles, matmul_efficiency at the reference, t0, mean |error|) of the best A100 fit."""
    base = GemmTileSpec(sms=108, tile_m=256, tile_n=128, k_overhead=0.0,
                        reference_mnk=A100_REFERENCE, source="analysis/fit_gemm_tiles.py")
    best: tuple[float, GemmTileSpec, float, float] | None = None
    for (tm, tn), split, k0 in itertools.product(A100_TILES, A100_SPLITS, A100_K_GRID):
        tiles = dataclasses.replace(base, tile_m=tm, tile_n=tn, max_split_k=split,
                                    k_overhead=float(k0))
        loss, eff, t0 = l1_fit(*split_times(with_tiles(acc, tiles), points))
        if best is None or loss < best[0]:
            best = (loss, tiles, eff, t0)
    assert best is not None
    return best[1], best[2], best[3], best[0]


def a100_summary(acc: AcceleratorSpec, sweeps: list[dict[str, object]], t0: float) -> None:
    """Per sweep: points, median signed and absolute error, p90 |error| (time, + t0)."""
    print("\n| sweep | points | median error | median abs error | p90 abs error |")
    print("|---|---:|---:|---:|---:|")
    for sweep in a100_fit_sweeps(sweeps):
        points = a100_points([sweep])
        unit, memory, measured = split_times(acc, points)
        eff = acc.matmul_efficiency["bf16"]
        err = (np.maximum(unit / eff, memory) + t0) / measured - 1.0
        print(f"| {sweep['id']} | {len(points)} | {np.median(err):+.1%} | "
              f"{np.median(abs(err)):.1%} | {np.percentile(abs(err), 90):.1%} |")


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
    points = a100_points(a100_fit_sweeps(sweeps))
    tiles, eff, t0, loss = fit_a100(acc, points)
    print(f"\n## a100-sxm-80gb: tile {tiles.tile_m}x{tiles.tile_n}, max_split_k "
          f"{tiles.max_split_k}, k_overhead {tiles.k_overhead:g}, matmul_efficiency {eff:.4f} at "
          f"{'x'.join(map(str, tiles.reference_mnk))}, floor t0 {t0 * 1e6:.2f} us (mean |error| "
          f"{loss:.1%} over {len(points)} points)")
    fitted = dataclasses.replace(with_tiles(acc, tiles), matmul_efficiency={
        **acc.matmul_efficiency, "bf16": round(eff, 3)})
    a100_summary(fitted, sweeps, t0)
    table(fitted, points_of(sweeps, "mamf_a100_sxm"), 0.0, "A100 SXM: MAMF best shapes (check)")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("fit_gemm_tiles.py", main, sys.argv))
