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

Other formats and accelerators (fp8 on Hopper; bf16, fp8 and NVFP4 on Blackwell):
``python3 analysis/fit_gemm_tiles.py --formats`` fits every sweep of gemm_sweeps.yaml with a ``fit``
block, ``--sweep ID [ID ...]`` the named ones, and ``--csv PATH --accelerator NAME --format FMT
--sms N --peak TFLOPS [--tiles blackwell] [--act-quant B]`` any CSV of (m, n, k, latency_ms). Each
prints the fitted tile terms, the free-clock level at 8192^3, the sustained level, the mean
|error| of time and its median / p90 by latency band (section "Other formats" below).
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
from simcluster.errors import SpecError  # noqa: E402
from simcluster.perf.kernels import gemm  # noqa: E402
from simcluster.perf.kernels.operator import bytes_per_element  # noqa: E402
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


def h100_unit_times(acc: AcceleratorSpec, tiles: GemmTileSpec, rows: np.ndarray,
                    dtype: str = "bf16") -> tuple[np.ndarray, np.ndarray]:
    """(compute time at matmul_efficiency 1, memory-bound time) per row: the simulator's
    arithmetic for ``dtype`` (its peak, and ``bytes_per_element(dtype)`` for A, B and C)."""
    m, n, k = rows[:, 0], rows[:, 1], rows[:, 2]
    ref = tile_efficiency_np(tiles, *(np.array([float(v)]) for v in tiles.reference_mnk))[0]
    rate = acc.peak(dtype) * tile_efficiency_np(tiles, m, n, k) / ref
    memory = ((m * k + k * n + m * n) * bytes_per_element(dtype)
              / (acc.memory_bandwidth_Bps * acc.memory_efficiency))
    return 2 * m * n * k / rate, memory


def lad(unit: np.ndarray, memory: np.ndarray, measured: np.ndarray, effs: np.ndarray,
        t0s: np.ndarray, quant: np.ndarray | None = None) -> tuple[float, float, float]:
    """(mean |relative time error|, efficiency, t0) minimising it over the two grids; ``quant``
    (s per row) is a kernel the measurement ran beside the GEMM (activation quantisation)."""
    best = (np.inf, 0.0, 0.0)
    base = np.maximum(unit[None, :] / effs[:, None], memory[None, :])
    if quant is not None:
        base = base + quant[None, :]
    for t0 in t0s:
        loss = np.mean(np.abs((base + t0) / measured[None, :] - 1.0), axis=1)
        i = int(np.argmin(loss))
        if loss[i] < best[0]:
            best = (float(loss[i]), float(effs[i]), float(t0))
    return best


def fit_h100_sweep(acc: AcceleratorSpec, rows: np.ndarray) -> tuple[GemmTileSpec, float, float,
                                                                     float]:
    """(tiles, level, t0, mean |error|) of the H100 SXM bf16 sweep: :func:`fit_sweep`."""
    return fit_sweep(acc, rows)


def fit_sweep(acc: AcceleratorSpec, rows: np.ndarray, *, dtype: str = "bf16",
              quant: np.ndarray | None = None, shapes: Sequence[tuple[int, int]] = H100_FIT_TILES,
              sms: int = 132, effs: np.ndarray = COARSE_EFF, t0s: np.ndarray = COARSE_T0,
              t0_half: float = 0.25e-6,
              k_grid: np.ndarray = H100_K_GRID) -> tuple[GemmTileSpec, float, float, float]:
    """(tiles, level, t0, mean |error|): the coarse grids over every tile of ``shapes``, split and
    k_overhead, then fine grids of the level and t0 (+- ``t0_half``) around the best."""
    base = GemmTileSpec(sms=sms, tile_m=128, tile_n=128, k_overhead=0.0,
                        reference_mnk=H100_REFERENCE, source="analysis/fit_gemm_tiles.py")
    measured = rows[:, 3]
    best: tuple[float, GemmTileSpec, float, float] | None = None
    for (tm, tn), split, k0 in itertools.product(shapes, SPLITS, k_grid):
        tiles = dataclasses.replace(base, tile_m=tm, tile_n=tn, max_split_k=split,
                                    k_overhead=float(k0))
        loss, eff, t0 = lad(*h100_unit_times(acc, tiles, rows, dtype), measured, effs, t0s, quant)
        if best is None or loss < best[0]:
            best = (loss, tiles, eff, t0)
    assert best is not None
    _, tiles, eff, t0 = best
    fine_eff = np.arange(eff - 0.005, eff + 0.00501, 0.0005)
    fine_t0 = np.arange(max(0.0, t0 - t0_half), t0 + t0_half + 0.0001e-6, 0.05e-6)
    loss, eff, t0 = lad(*h100_unit_times(acc, tiles, rows, dtype), measured, fine_eff, fine_t0,
                        quant)
    return tiles, eff, t0, loss


def sustained_ratio(acc: AcceleratorSpec, tiles: GemmTileSpec, rows: np.ndarray, eff: float,
                    t0: float, threshold_ms: float = SUSTAINED_MS, dtype: str = "bf16",
                    quant: np.ndarray | None = None,
                    max_share: float = 1.0) -> tuple[float, int]:
    """Median of measured rate / model rate over the kernels that hold the power limit (the
    measured time less ``quant``, the activation quantisation run beside the GEMM, if given; only
    the kernels where it is under ``max_share`` of the time)."""
    unit, memory = h100_unit_times(acc, tiles, rows, dtype)
    predicted = np.maximum(unit / eff, memory) + t0
    long = rows[:, 3] >= threshold_ms * 1e-3
    if quant is not None:
        long &= quant < max_share * rows[:, 3]
    measured = rows[long, 3] if quant is None else rows[long, 3] - quant[long]
    return float(np.median(predicted[long] / measured)), int(long.sum())


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


# --- Other formats and accelerators (``--sweep ID``, ``--formats``, ``--csv PATH``) -------------
#
# The ``role: fit`` sweeps of analysis/gemm_sweeps.yaml with a ``fit`` block (fp8 on Hopper, bf16 /
# fp8 / fp4 on Blackwell) are fitted one by one as the H100 bf16 sweep is: the simulator's own
# forward time for the sweep's dtype (its peak and bytes per element), one tile of ``tiles``, a
# split up to 16, a k_overhead (grid of 16) and a free-clock level at 8192^3, by least absolute
# deviations of the relative time error with a per-call floor t0; then the sustained level, the
# free-clock level times the median measured/model rate of the kernels of >= SUSTAINED_MS. What
# the measurement ran beside the GEMM (the activation quantisation of the fp8 and fp4 ops) is
# taken out first: the published latency of that kernel where the collector measured it
# (``act_quant: measured``), else a memory-bound kernel of ``act_quant`` bytes per activation
# element at the accelerator's achievable bandwidth.

#: Hopper and Blackwell tiles the fit chooses among: the Hopper warpgroup tiles, and on Blackwell
#: also 256 x 256 (a 2-SM UMMA pair's 256 x 256 output counted per SM pair as two 128 x 256).
FORMAT_TILES = {"hopper": H100_FIT_TILES,
                "blackwell": ((128, 128), (128, 256), (256, 128), (256, 256))}
FORMAT_EFF = np.arange(0.30, 0.9501, 0.005)
#: The sustained level of a sweep whose op quantises its activation takes the long kernels where
#: that memory-bound kernel is under this share of the time: the GEMM then draws the power the
#: limit holds down; with a larger share the average power drops and the GEMM runs at a higher
#: clock (on the H100 per-tensor fp8 sweep the long kernels' measured/model rate is ~0.92 with a
#: share under 5% and ~1.0 above 10%).
MAX_QUANT_SHARE = 0.05
FORMAT_T0 = np.arange(0.0, 16.0001e-6, 0.5e-6)
QUANT_FILE = ROOT / "analysis" / "gemm_fp8_act_quant_aiconfigurator.csv"
#: The simulator's dtype of each published format (fp8 covers per-tensor and block-scaled fp8,
#: fp4 NVFP4; simcluster/spec/hardware.py DTYPES).
SIM_DTYPE = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}


@dataclasses.dataclass(frozen=True)
class FormatSweep:
    """A ``role: fit`` sweep with a ``fit`` block: what the generic fit needs."""

    id: str
    accelerator: str
    format: str               # bf16, fp8, fp8_block, nvfp4 (the published gemm_dtype)
    points_file: Path
    sms: int
    peak_tflops: float
    tiles: tuple[tuple[int, int], ...]
    act_quant: str | float    # "measured", bytes per activation element, or 0 (none)
    sms_check: tuple[int, ...] = ()
    mamf_tflops: float | None = None  # the catalog's best-shape MAMF number, if any
    sustained_ms: float = SUSTAINED_MS  # kernels at least this long set the sustained level
    k_grid: tuple[int, int, int] = (0, 512, 16)  # k_overhead grid: first, last, step

    @property
    def dtype(self) -> str:
        return SIM_DTYPE[self.format]


def format_sweeps(sweeps: list[dict[str, object]]) -> list[FormatSweep]:
    """The sweeps of ``analysis/gemm_sweeps.yaml`` that carry a ``fit`` block."""
    out = []
    for sweep in sweeps:
        fit = sweep.get("fit")
        if not isinstance(fit, dict):
            continue
        tiles = fit.get("tiles", "hopper")
        out.append(FormatSweep(
            id=str(sweep["id"]), accelerator=str(sweep["accelerator"]),
            format=str(sweep["dtype"]), points_file=ROOT / "analysis" / str(sweep["points_file"]),
            sms=int(fit["sms"]), peak_tflops=float(fit["peak_TFLOPS"]),
            tiles=FORMAT_TILES[tiles] if isinstance(tiles, str) else tuple(
                (int(a), int(b)) for a, b in tiles),
            act_quant=fit.get("act_quant", 0.0),
            sms_check=tuple(int(s) for s in fit.get("sms_check", ())),
            mamf_tflops=None if fit.get("mamf_TFLOPS") is None else float(fit["mamf_TFLOPS"]),
            sustained_ms=float(fit.get("sustained_ms", SUSTAINED_MS)),
            k_grid=tuple(int(v) for v in fit.get("k_grid", (0, 512, 16)))))  # type: ignore[arg-type]
    return out


def format_accelerator(sweep: FormatSweep, sms: int | None = None) -> AcceleratorSpec:
    """The catalog accelerator with the sweep's SM count and peak for its dtype."""
    acc = accelerator(sweep.accelerator)
    return dataclasses.replace(
        acc, sms=sms or sweep.sms, gemm_tiles=None,
        peak_flops_per_s={**acc.peak_flops_per_s, sweep.dtype: sweep.peak_tflops * 1e12})


def quant_times(sweep: FormatSweep, acc: AcceleratorSpec, rows: np.ndarray) -> np.ndarray | None:
    """Seconds per row of the activation quantisation the measurement ran beside the GEMM."""
    if sweep.act_quant == "measured":
        lines = [ln for ln in QUANT_FILE.read_text().splitlines() if ln and not ln.startswith("#")]
        table = {(name, int(m), int(k)): (float(cs) + float(sm)) * 1e-3
                 for name, m, k, cs, sm in (ln.split(",") for ln in lines[1:])}
        try:
            return np.array([table[(sweep.accelerator, int(m), int(k))] for m, _, k, _ in rows])
        except KeyError as err:
            raise SpecError("act_quant", f"no measured quantisation for {err.args[0]}",
                            str(QUANT_FILE)) from None
    per_element = float(sweep.act_quant)
    if per_element == 0.0:
        return None
    bandwidth = acc.memory_bandwidth_Bps * acc.memory_efficiency
    quant: np.ndarray = rows[:, 0] * rows[:, 2] * per_element / bandwidth
    return quant


@dataclasses.dataclass(frozen=True)
class FormatFit:
    """What :func:`fit_format` prints, for the summary table."""

    sweep: FormatSweep
    tiles: GemmTileSpec
    free: float
    t0: float
    loss: float
    sustained: float
    long: int
    level_1ms: float
    raw_free: float
    raw_sustained: float
    sustained_loss: float


def fit_format(sweep: FormatSweep) -> FormatFit:
    """Fit one sweep and print its parameters, levels, checks and residuals."""
    acc = format_accelerator(sweep)
    rows = h100_sweep(sweep.points_file)
    quant = quant_times(sweep, acc, rows)
    peak = sweep.peak_tflops
    m, n, k, t = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    measured_tf = 2 * m * n * k / t / 1e12
    print(f"\n## {sweep.id}: {sweep.accelerator} {sweep.format} (simulator dtype {sweep.dtype}, "
          f"peak {peak:g} TFLOP/s, {sweep.sms} SMs), {sweep.points_file.name}")
    print(f"{len(rows)} shapes: M {m.min():.0f}-{m.max():.0f}, N {n.min():.0f}-{n.max():.0f}, "
          f"K {k.min():.0f}-{k.max():.0f}; latency {t.min() * 1e3:.4f}-{t.max() * 1e3:.2f} ms; "
          f"fastest {measured_tf.max():.1f} TFLOP/s (quantisation included)"
          + (f"; MAMF best shape {sweep.mamf_tflops:g}" if sweep.mamf_tflops else ""))
    long_rows = t >= sweep.sustained_ms * 1e-3
    if quant is not None:
        print(f"activation quantisation ({sweep.act_quant}"
              f"{'' if sweep.act_quant == 'measured' else ' B/element, modelled'}): median "
              f"{np.median(quant / t):.1%} of the latency, {np.median(quant[long_rows] / t[long_rows]):.1%} "
              f"on the kernels of >= {sweep.sustained_ms:g} ms")
    first, last, step = sweep.k_grid
    k_grid = np.arange(first, last + 1, step)
    tiles, eff, t0, loss = fit_sweep(acc, rows, dtype=sweep.dtype, quant=quant, shapes=sweep.tiles,
                                     sms=sweep.sms, effs=FORMAT_EFF, t0s=FORMAT_T0, t0_half=0.5e-6,
                                     k_grid=k_grid)
    ratio, long = sustained_ratio(acc, tiles, rows, eff, t0, sweep.sustained_ms, sweep.dtype, quant,
                                  MAX_QUANT_SHARE)
    level = eff * ratio
    ratio_1ms, _ = sustained_ratio(acc, tiles, rows, eff, t0, 1.0, sweep.dtype, quant,
                                   MAX_QUANT_SHARE)
    print(f"tile {tiles.tile_m}x{tiles.tile_n}, max_split_k {tiles.max_split_k}, k_overhead "
          f"{tiles.k_overhead:g}; free-clock level {eff:.4f} at 8192^3 ({eff * peak:.0f} TFLOP/s), "
          f"t0 {t0 * 1e6:.2f} us, mean |error| {loss:.1%}")
    for threshold in (0.5, 1.0, 2.0, 5.0, 10.0):
        r, count = sustained_ratio(acc, tiles, rows, eff, t0, threshold, sweep.dtype, quant,
                                   MAX_QUANT_SHARE)
        print(f"   kernels >= {threshold} ms: {count} shapes, measured/model rate median {r:.4f} "
              f"-> level {eff * r:.4f}")
        if quant is not None:
            r, count = sustained_ratio(acc, tiles, rows, eff, t0, threshold, sweep.dtype, quant)
            print(f"      (any quantisation share: {count} shapes, median {r:.4f} -> level "
                  f"{eff * r:.4f})")
    share = "" if quant is None else f", quantisation < {MAX_QUANT_SHARE:.0%} of the time"
    print(f"sustained matmul_efficiency {level:.4f} ({level * peak:.0f} TFLOP/s at 8192^3, "
          f"{level:.1%} of peak; {long} shapes >= {sweep.sustained_ms:g} ms{share})")
    raw_free, raw_sustained = eff, level
    if quant is not None:  # the same tile terms with nothing taken out: the bound it moves
        unit, memory = h100_unit_times(acc, tiles, rows, sweep.dtype)
        fine = np.arange(0.30, 0.9501, 0.0005)
        _, raw_free, raw_t0 = lad(unit, memory, t, fine, np.arange(0.0, 16.0001e-6, 0.05e-6))
        raw_ratio, _ = sustained_ratio(acc, tiles, rows, raw_free, raw_t0, sweep.sustained_ms,
                                       sweep.dtype)
        print(f"   (raw t0 {raw_t0 * 1e6:.2f} us, kernels >= {sweep.sustained_ms:g} ms median "
              f"{raw_ratio:.4f})")
        raw_sustained = raw_free * raw_ratio
        print(f"without taking the quantisation out (same tiles): free-clock {raw_free:.4f}, "
              f"sustained {raw_sustained:.4f}")
    fitted = dataclasses.replace(acc, gemm_tiles=tiles,
                                 matmul_efficiency={sweep.dtype: round(level, 3)})
    sustained_loss = format_summary(fitted, rows, sweep.dtype, t0, quant)
    for sms in sweep.sms_check:  # the same search on another SM count: does the data prefer it?
        other = format_accelerator(sweep, sms)
        o_tiles, o_eff, _, o_loss = fit_sweep(other, rows, dtype=sweep.dtype, quant=quant,
                                              shapes=((tiles.tile_m, tiles.tile_n),), sms=sms,
                                              effs=FORMAT_EFF, t0s=FORMAT_T0, t0_half=0.5e-6,
                                              k_grid=k_grid)
        print(f"check: {sms} SMs, tile {o_tiles.tile_m}x{o_tiles.tile_n}: max_split_k "
              f"{o_tiles.max_split_k}, k_overhead {o_tiles.k_overhead:g}, free-clock level "
              f"{o_eff:.4f}, mean |error| {o_loss:.2%} (vs {loss:.2%} at {sweep.sms})")
    return FormatFit(sweep, tiles, eff, t0, loss, level, long, eff * ratio_1ms, raw_free,
                     raw_sustained, sustained_loss)


def format_summary(acc: AcceleratorSpec, rows: np.ndarray, dtype: str, t0: float,
                   quant: np.ndarray | None) -> float:
    """Median and p90 |error| of the sustained model (+ quantisation + t0) by latency band;
    returns the mean |error| over every shape."""
    assert acc.gemm_tiles is not None
    unit, memory = h100_unit_times(acc, acc.gemm_tiles, rows, dtype)
    extra = t0 if quant is None else quant + t0
    err = (np.maximum(unit / acc.matmul_efficiency[dtype], memory) + extra) / rows[:, 3] - 1.0
    print("| published latency | shapes | median error | median abs error | p90 abs error |")
    print("|---|---:|---:|---:|---:|")
    for lo, hi in ((0.0, 0.05), (0.05, 0.2), (0.2, 1.0), (1.0, np.inf), (0.0, np.inf)):
        sel = (rows[:, 3] >= lo * 1e-3) & (rows[:, 3] < hi * 1e-3)
        if sel.any():
            e = err[sel]
            print(f"| {lo}-{hi} ms | {sel.sum()} | {np.median(e):+.1%} | {np.median(abs(e)):.1%} | "
                  f"{np.percentile(abs(e), 90):.1%} |")
    return float(np.mean(abs(err)))


def formats_table(fits: Sequence[FormatFit]) -> None:
    """One line per fitted sweep: the numbers the catalog comments quote."""
    print("\n| sweep | tile | split | k_overhead | free-clock level | level >= 1 ms | sustained "
          "level (>= ms) | TFLOP/s | mean abs error (free / sustained) | no quantisation taken out "
          "(free / sustained) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in fits:
        print(f"| {f.sweep.id} | {f.tiles.tile_m}x{f.tiles.tile_n} | {f.tiles.max_split_k} | "
              f"{f.tiles.k_overhead:g} | {f.free:.4f} | {f.level_1ms:.4f} | {f.sustained:.4f} "
              f"({f.sweep.sustained_ms:g}) | {f.sustained * f.sweep.peak_tflops:.0f} | "
              f"{f.loss:.1%} / {f.sustained_loss:.1%} | {f.raw_free:.4f} / {f.raw_sustained:.4f} |")


def formats_main(argv: Sequence[str]) -> int:
    """``--sweep ID [ID ...]``, ``--formats`` (every sweep with a ``fit`` block) or ``--csv PATH
    --accelerator NAME --format FMT --sms N --peak TFLOPS [--act-quant B]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="fit_gemm_tiles.py")
    parser.add_argument("--sweep", nargs="+", default=[])
    parser.add_argument("--formats", action="store_true")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--accelerator")
    parser.add_argument("--format", choices=sorted(SIM_DTYPE), default="bf16")
    parser.add_argument("--sms", type=int)
    parser.add_argument("--peak", type=float)
    parser.add_argument("--tiles", choices=sorted(FORMAT_TILES), default="hopper")
    parser.add_argument("--act-quant", default="0")
    args = parser.parse_args(argv[1:])
    known = {s.id: s for s in format_sweeps(load_sweeps())}
    chosen = list(known.values()) if args.formats else []
    for sweep_id in args.sweep:
        if sweep_id not in known:
            raise SpecError("sweep", f"no sweep {sweep_id!r} with a fit block (have "
                            f"{', '.join(known)})", str(SWEEPS))
        chosen.append(known[sweep_id])
    if args.csv is not None:
        if not (args.accelerator and args.sms and args.peak):
            raise SpecError("csv", "--csv needs --accelerator, --sms and --peak")
        chosen.append(FormatSweep(
            id=args.csv.stem, accelerator=args.accelerator, format=args.format,
            points_file=args.csv.resolve(), sms=args.sms, peak_tflops=args.peak,
            tiles=FORMAT_TILES[args.tiles],
            act_quant=args.act_quant if args.act_quant == "measured" else float(args.act_quant)))
    formats_table([fit_format(sweep) for sweep in chosen])
    return 0


def main(argv: Sequence[str]) -> int:
    if len(argv) > 1:  # another sweep, format or CSV (formats_main)
        return formats_main(argv)
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
