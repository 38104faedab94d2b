#!/usr/bin/env python3
"""Fit the tile/wave GEMM model (``gemm_tiles`` of the A100 and H100 catalog entries).

The model (simcluster/perf/gemm.py ``tile_efficiency``, docs/catalog.md "GEMM size model"):
a GEMM's output is cut into ``tile_m x tile_n`` tiles run in waves over the ``sms``; each tile
costs ``K/s + k_overhead`` steps for the best split ``s <= max_split_k`` of K, and the rate is
anchored at ``reference_mnk``, where the rate is ``peak * matmul_efficiency``. The forward time
is ``max(2MNK / rate, bytes / achievable bandwidth)``, exactly what the simulator computes.

Fixed from documentation, not fitted: ``sms`` (A100 108, H100 SXM 132). Fitted, per accelerator,
on the ``role: fit`` sweeps of ``analysis/gemm_sweeps.yaml``, each with a constant per-call time
``t0`` for the measurement floor (launch and timer; the simulator does not use it):

- H100 SXM, on NVIDIA aiconfigurator's H100 SXM sweep (``analysis/gemm_h100_aiconfigurator.csv``:
  9,576 ``F.linear`` shapes through cuBLAS, M, N, K from 128 to 65,536), least absolute deviations
  of the relative time error: the tile (three Hopper cuBLAS/CUTLASS shapes), ``max_split_k``
  (1 .. 16), ``k_overhead`` (grid of 16) and a level; then the **sustained** level: the sweep ran
  with free clocks, and kernels that run long enough to hold the GPU at its 700 W limit (published
  latency >= ``SUSTAINED_MS``; the same collector measured ~691 W on such H200 GEMMs) run slower
  than short ones: ``matmul_efficiency`` is the fitted level times the median measured/model rate
  of those kernels, the clock a GPU keeps under continuous training load. OpenXLA's sm_90 table and
  MAMF's best shapes are checks;
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
from simcluster.perf.kernels import gemm  # noqa: E402
from simcluster.spec import schema  # noqa: E402
from simcluster.spec.hardware import AcceleratorSpec, GemmTileSpec  # noqa: E402

SWEEPS = ROOT / "analysis" / "gemm_sweeps.yaml"
SPLITS = (1, 2, 4, 8, 16)
T0_GRID = np.arange(0.0, 8.0001e-6, 0.05e-6)  # seconds
Point = tuple[int, int, int, float]


def load_sweeps(path: Path = SWEEPS) -> list[dict[str, object]]:
    """The sweeps of ``analysis/gemm_sweeps.yaml``."""
    sweeps: list[dict[str, object]] = yaml.safe_load(path.read_text())["sweeps"]
    return sweeps


def accelerator(name: str) -> AcceleratorSpec:
    return schema.parse(AcceleratorSpec, catalog.entry("accelerators", name))


def with_tiles(acc: AcceleratorSpec, tiles: GemmTileSpec) -> AcceleratorSpec:
    gemm.reference_tile_efficiency.cache_clear()  # type: ignore[attr-defined]
    return dataclasses.replace(acc, gemm_tiles=tiles)


def forward_s(acc: AcceleratorSpec, m: int, n: int, k: int) -> float:
    """The simulator's forward time of one ``[m, k] x [k, n]`` bf16 GEMM."""
    return gemm.gemm_operator(acc, "bf16", "mm", (m, n, k)).time_s


def measured_s(points: Sequence[Point]) -> np.ndarray:
    return np.array([2.0 * m * n * k / (tf * 1e12) for m, n, k, tf in points])


def residuals(acc: AcceleratorSpec, points: Sequence[Point], t0: float) -> np.ndarray:
    """Relative time error ``(predicted + t0) / measured - 1`` per point."""
    predicted = np.array([forward_s(acc, m, n, k) for m, n, k, _ in points])
    return (predicted + t0) / measured_s(points) - 1.0


#: H100 SXM: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper); the tile is fitted
#: among the Hopper cuBLAS/CUTLASS warpgroup tiles 128 x 128, 128 x 256 and 256 x 128.
H100_FIT_TILES = ((128, 128), (128, 256), (256, 128))
H100_K_GRID = np.arange(0, 513, 16)
H100_REFERENCE = (8192, 8192, 8192)
H100_SWEEP = ROOT / "analysis" / "gemm_h100_aiconfigurator.csv"
H200_LONG = ROOT / "analysis" / "gemm_h200_aiconfigurator_long.csv"
#: Kernels at least this long (published latency, ms) hold the GPU at its power limit: the sweep's
#: median rate of large aligned shapes falls from ~760 TFLOP/s at 0.2-0.8 ms to ~690-720 beyond
#: 1 ms, on H100 and on H200 alike, and the same collector's power-logging H200 table draws
#: ~691 W of 700 for every GEMM of 0.05 ms or more run for >= 1 s (docs/catalog.md).
SUSTAINED_MS = 1.0
#: The OpenXLA table's per-call floor (5.9 us for the smallest calls; fitted 5.5 us before).
XLA_FLOOR_S = 5.5e-6
COARSE_EFF = np.arange(0.50, 0.9501, 0.005)
COARSE_T0 = np.arange(0.0, 8.0001e-6, 0.25e-6)


def h100_sweep(path: Path = H100_SWEEP) -> np.ndarray:
    """The aiconfigurator rows as an array of (m, n, k, latency seconds)."""
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    rows = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]])  # after the header
    rows[:, 3] *= 1e-3
    return rows


def tile_efficiency_np(tiles: GemmTileSpec, m: np.ndarray, n: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    """:func:`gemm.tile_efficiency` over arrays (batch 1), the same arithmetic."""
    blocks = np.ceil(m / tiles.tile_m) * np.ceil(n / tiles.tile_n)
    area = tiles.sms * tiles.tile_m * tiles.tile_n
    best = np.zeros_like(m)
    split = 1
    while split <= tiles.max_split_k:
        waves = np.ceil(blocks * split / tiles.sms)
        best = np.maximum(best, m * n * k / (area * waves * (k / split + tiles.k_overhead)))
        split *= 2
    return best


def h100_unit_times(acc: AcceleratorSpec, tiles: GemmTileSpec,
                    rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(compute time at matmul_efficiency 1, memory-bound time) per row."""
    m, n, k = rows[:, 0], rows[:, 1], rows[:, 2]
    ref = tile_efficiency_np(tiles, *(np.array([float(v)]) for v in tiles.reference_mnk))[0]
    rate = acc.peak("bf16") * tile_efficiency_np(tiles, m, n, k) / ref
    memory = (m * k + k * n + m * n) * 2 / (acc.memory_bandwidth_Bps * acc.memory_efficiency)
    return 2 * m * n * k / rate, memory


def lad(unit: np.ndarray, memory: np.ndarray, measured: np.ndarray, effs: np.ndarray,
        t0s: np.ndarray) -> tuple[float, float, float]:
    """(mean |relative time error|, efficiency, t0) minimising it over the two grids."""
    best = (np.inf, 0.0, 0.0)
    for t0 in t0s:
        predicted = np.maximum(unit[None, :] / effs[:, None], memory[None, :]) + t0
        loss = np.mean(np.abs(predicted / measured[None, :] - 1.0), axis=1)
        i = int(np.argmin(loss))
        if loss[i] < best[0]:
            best = (float(loss[i]), float(effs[i]), float(t0))
    return best


def fit_h100_sweep(acc: AcceleratorSpec, rows: np.ndarray) -> tuple[GemmTileSpec, float, float,
                                                                     float]:
    """(tiles, level, t0, mean |error|): the coarse grids over every tile, split and k_overhead,
    then fine grids of the level and t0 around the best."""
    base = GemmTileSpec(sms=132, tile_m=128, tile_n=128, k_overhead=0.0,
                        reference_mnk=H100_REFERENCE, source="analysis/fit_gemm_tiles.py")
    measured = rows[:, 3]
    best: tuple[float, GemmTileSpec, float, float] | None = None
    for (tm, tn), split, k0 in itertools.product(H100_FIT_TILES, SPLITS, H100_K_GRID):
        tiles = dataclasses.replace(base, tile_m=tm, tile_n=tn, max_split_k=split,
                                    k_overhead=float(k0))
        loss, eff, t0 = lad(*h100_unit_times(acc, tiles, rows), measured, COARSE_EFF, COARSE_T0)
        if best is None or loss < best[0]:
            best = (loss, tiles, eff, t0)
    assert best is not None
    _, tiles, eff, t0 = best
    fine_eff = np.arange(eff - 0.005, eff + 0.00501, 0.0005)
    fine_t0 = np.arange(max(0.0, t0 - 0.25e-6), t0 + 0.2501e-6, 0.05e-6)
    loss, eff, t0 = lad(*h100_unit_times(acc, tiles, rows), measured, fine_eff, fine_t0)
    return tiles, eff, t0, loss


def sustained_ratio(acc: AcceleratorSpec, tiles: GemmTileSpec, rows: np.ndarray, eff: float,
                    t0: float, threshold_ms: float = SUSTAINED_MS) -> tuple[float, int]:
    """Median of measured rate / model rate over the kernels that hold the power limit."""
    unit, memory = h100_unit_times(acc, tiles, rows)
    predicted = np.maximum(unit / eff, memory) + t0
    long = rows[:, 3] >= threshold_ms * 1e-3
    return float(np.median(predicted[long] / rows[long, 3])), int(long.sum())


def h200_level(fitted_h100: AcceleratorSpec, free_level: float, t0: float) -> float:
    """The H200's sustained level: the H100's tile terms (the same GH100 compute die and clocks)
    and free-clock level, times the median measured/model rate of the H200's kernels that hold
    its 700 W limit (the same collector on an H200)."""
    tiles = fitted_h100.gemm_tiles
    assert tiles is not None
    h200 = dataclasses.replace(accelerator("h200-sxm"), gemm_tiles=tiles)
    ratio, long = sustained_ratio(h200, tiles, h100_sweep(H200_LONG), free_level, t0)
    print(f"## h200-sxm: {long} shapes >= {SUSTAINED_MS} ms, measured/model median {ratio:.4f} "
          f"-> sustained matmul_efficiency {free_level * ratio:.4f}")
    return free_level * ratio


def h100_main() -> AcceleratorSpec:
    """Fit, print and return the H100 SXM with its fitted gemm_tiles and sustained level."""
    h100 = accelerator("h100-sxm")
    rows = h100_sweep()
    tiles, eff, t0, loss = fit_h100_sweep(h100, rows)
    ratio, long = sustained_ratio(h100, tiles, rows, eff, t0)
    level = eff * ratio
    print(f"## h100-sxm: tile {tiles.tile_m}x{tiles.tile_n}, max_split_k {tiles.max_split_k}, "
          f"k_overhead {tiles.k_overhead:g}, free-clock level {eff:.4f} at 8192^3, call floor "
          f"t0 {t0 * 1e6:.2f} us, mean |error| {loss:.1%} over {len(rows)} shapes")
    for threshold in (0.5, SUSTAINED_MS, 2.0):
        r, n = sustained_ratio(h100, tiles, rows, eff, t0, threshold)
        print(f"   kernels >= {threshold} ms: {n} shapes, measured/model rate median {r:.4f} "
              f"-> level {eff * r:.4f}")
    print(f"sustained matmul_efficiency {level:.4f} ({level * 989:.0f} TFLOP/s at 8192^3; "
          f"{long} shapes >= {SUSTAINED_MS} ms)")
    fitted = dataclasses.replace(with_tiles(h100, tiles), matmul_efficiency={
        **h100.matmul_efficiency, "bf16": round(level, 3)})
    h100_summary(fitted, rows, t0)
    h200_level(fitted, eff, t0)
    return fitted


def h100_summary(acc: AcceleratorSpec, rows: np.ndarray, t0: float) -> None:
    """Median and p90 |error| of the sustained model (+ t0) by latency band and overall."""
    assert acc.gemm_tiles is not None
    unit, memory = h100_unit_times(acc, acc.gemm_tiles, rows)
    err = (np.maximum(unit / acc.matmul_efficiency["bf16"], memory) + t0) / rows[:, 3] - 1.0
    print("\n| published latency | shapes | median error | median abs error | p90 abs error |")
    print("|---|---:|---:|---:|---:|")
    bands = ((0.0, 0.05), (0.05, 0.2), (0.2, 1.0), (1.0, np.inf), (0.0, np.inf))
    for lo, hi in bands:
        sel = (rows[:, 3] >= lo * 1e-3) & (rows[:, 3] < hi * 1e-3)
        e = err[sel]
        print(f"| {lo}-{hi} ms | {sel.sum()} | {np.median(e):+.1%} | {np.median(abs(e)):.1%} | "
              f"{np.percentile(abs(e), 90):.1%} |")


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
    rate = np.array([gemm.achievable_matmul_flops_per_s(unit, "bf16", m, n, k, b)
                     for b, m, n, k, _ in points])
    memory = np.array([gemm.memory_bound_time_s(acc, b * (m * k + k * n + m * n) * 2)
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
    fitted = h100_main()
    table(fitted, points_of(sweeps, "xla_sm90_bf16_b1"), XLA_FLOOR_S,
          "H100 SXM: XLA sm_90 (check, + its 5.5 us call floor)")
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
