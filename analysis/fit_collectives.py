#!/usr/bin/env python3
"""Fit the Tier A collective calibration (simcluster/catalog/collectives.yaml) from published data.

Model (one line per NCCL protocol, the structure of NCCL's ``src/graph/tuning.cc``; docs/collectives.md,
"Calibration"): for an all-reduce over ``n`` ranks on one NVSwitch node, protocol ``p`` in
{LL, LL128, Simple} costs

    t_p(S) = alpha_p + nsteps * delta_p + f * max(S, ramp_p) / (eff_p * B_line)
    t(S)   = min_p t_p(S)

with ``f = 2(n-1)/n`` (the nccl-tests all-reduce bus factor), ``nsteps = 2(n-1)`` ring steps,
``delta_p`` NCCL's per-hop ring latency (tuning.cc hwLat, NVLINK row: 0.6 / 1.9 / 3.4 us; held
fixed, so ``alpha_p`` is the per-call overhead left over), ``eff_p`` the bus bandwidth as a fraction of
the per-GPU line rate and ``ramp_p`` the size below which the time stops falling (NCCL lowers its
channel count for small messages, ``topoGetAlgoInfo`` in NVIDIA/nccl @5067397 ``src/enqueue.cc``, so
bandwidth grows with S there). The NVLS line (H100) has no per-step term: NCCL's NVLS latency does
not grow with n (``src/graph/tuning.cc``, same commit).

Fits (minimax of the busbw error, Nelder-Mead with restarts, numpy only):

* nvlink3-nvswitch: the 8xA100 nccl-tests sweep of stas00/ml-engineering @744d01e
  ``network/README.md`` (id ``allreduce_8xA100_nvlink3_nccltests_sweep``; all 20 sizes;
  weights ask for 15% at >= 1 MiB and 5% at >= 1 GiB, 30% below 1 MiB).
* nvlink4-nvswitch: the Azure ND H100 v5 NVLS curve of Azure/AI-benchmarking-guide @8fd0c6e
  ``Azure_Results/ND_H100_v5_results.md`` (18 of its 24 sizes), embedded below. Lines: ring LL,
  ring LL128, NVLS Simple. Ring Simple takes the GTC ring plateau (NVIDIA GTC25 S72583,
  ``gtc25_allreduce_busbw_NVLink4_H100_8_GPUs``, 370 GB/s) with the NVLS line's alpha.

Every other class has no size sweep; the script derives it (printed with its rule) from a GTC
plateau or NCCL constant and the 8xA100 curve shape (same alpha and ramp, efficiencies scaled).

Usage (from the repository root):
    python3 analysis/fit_collectives.py path/to/measurements.yaml
The file is a YAML transcription of that sweep (list ``collective_communication``, an entry with
that id whose ``measured.points`` give ``size_B``, ``time_us`` and ``busbw_GBps``) and is not shipped
with the repository (the sweep's values are copied, with their source, into
``tests/validation/test_collectives_published.py``); without the argument, or when the file is
missing, the script says so and exits 2.
numpy and pyyaml only; never imported by the simcluster package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import yaml
from _guard import guarded

SWEEP_ID = "allreduce_8xA100_nvlink3_nccltests_sweep"
PROTOCOLS = ("LL", "LL128", "Simple")
DELTA_NVLINK_US = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}  # NCCL tuning.cc hwLat[NVLINK][Ring]
N = 8
F_AR = 2 * (N - 1) / N
A100_LINE = 300e9  # NVLink3: 12 links x 25 GB/s per direction (sjeaugey, NVIDIA/nccl-tests#149)
H100_LINE = 450e9  # NVLink4: 18 links, 450 GB/s per direction
B200_LINE = 900e9  # NVLink5: 18 x 50 GB/s per direction
# Azure ND H100 v5, NCCL 2.18.5, NVLS, in-place busbw GB/s (Azure/AI-benchmarking-guide @8fd0c6e
# Azure_Results/ND_H100_v5_results.md; 18 of its 24 sizes).
AZURE_H100 = {2**10: 0.07, 2**14: 0.95, 2**16: 2.72, 2**18: 10.86, 2**20: 43.70, 2**21: 81.93,
              2**22: 128.73, 2**23: 172.13, 2**24: 234.45, 2**25: 295.53, 2**26: 361.78,
              2**27: 400.61, 2**28: 423.38, 2**29: 438.46, 2**30: 466.35, 2**31: 472.36,
              2**32: 475.54, 2**33: 478.87}
# Same source, 8xA100 column (cross-check only, not fitted).
AZURE_A100 = {2**10: 0.04, 2**14: 0.67, 2**16: 2.70, 2**18: 10.11, 2**20: 36.22, 2**21: 53.54,
              2**22: 71.43, 2**23: 89.99, 2**24: 109.22, 2**25: 132.77, 2**26: 166.63,
              2**27: 174.18, 2**28: 213.87, 2**29: 221.58, 2**30: 228.10, 2**31: 230.22,
              2**32: 230.48, 2**33: 231.58}

Line = tuple[float, float, float]  # (alpha_s, eff, ramp_bytes)


def line_time(size: np.ndarray, line: Line, steps_delta_s: float, line_Bps: float) -> np.ndarray:
    """t = alpha + nsteps*delta + f*max(S, ramp)/(eff*B_line)."""
    alpha, eff, ramp = line
    return alpha + steps_delta_s + F_AR * np.maximum(size, ramp) / (eff * line_Bps)


def unpack(x: np.ndarray) -> list[Line]:
    """Unconstrained vector -> (alpha >= 0, 0 < eff < 1.5, ramp >= 0) per line."""
    return [(float(np.exp(x[3 * i])), 1.5 / (1 + float(np.exp(-x[3 * i + 1]))),
             float(np.exp(x[3 * i + 2]))) for i in range(len(x) // 3)]


def nelder_mead(fun: Callable[[np.ndarray], float], x0: np.ndarray, iters: int,
                step: float) -> tuple[np.ndarray, float]:
    """Plain Nelder-Mead (reflection, expansion, contraction, shrink)."""
    pts = [x0, *(x0 + step * e for e in np.eye(len(x0)))]
    vals = [fun(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = fun(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = fun(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = fun(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0] + 0.5 * (p - pts[0]) for p in pts]
                vals = [fun(p) for p in pts]
    best = int(np.argmin(vals))
    return pts[best], vals[best]


def tolerance(size: np.ndarray) -> np.ndarray:
    """Target busbw tolerance per size: 30% below 1 MiB, 15% from 1 MiB, 5% from 1 GiB."""
    return np.where(size >= 2**30, 0.05, np.where(size >= 2**20, 0.15, 0.30))


def fit(size: np.ndarray, time_s: np.ndarray,
        model: Callable[[np.ndarray, list[Line]], np.ndarray], x0: np.ndarray) -> list[Line]:
    """Minimax fit of the busbw error (relative to each size's tolerance), with restarts."""
    tol = tolerance(size)

    def objective(x: np.ndarray) -> float:
        err = np.abs(time_s / model(size, unpack(x)) - 1) / tol
        return float(err.max() + 0.05 * err.mean())

    rng = np.random.default_rng(20240601)
    best: tuple[np.ndarray, float] | None = None
    for _ in range(24):
        x, v = nelder_mead(objective, x0 + rng.normal(0, 0.4, len(x0)), 3000, 0.5)
        x, v = nelder_mead(objective, x, 3000, 0.05)
        if best is None or v < best[1]:
            best = (x, v)
    if best is None:
        raise RuntimeError("no fit")
    return unpack(best[0])


def a100_model(size: np.ndarray, lines: list[Line]) -> np.ndarray:
    """Three ring protocol lines on 8xA100."""
    return np.min([line_time(size, ln, 2 * (N - 1) * DELTA_NVLINK_US[p] * 1e-6, A100_LINE)
                   for p, ln in zip(PROTOCOLS, lines, strict=True)], axis=0)


def h100_model(size: np.ndarray, lines: list[Line]) -> np.ndarray:
    """Ring LL, ring LL128, NVLS Simple on 8xH100."""
    ring = [line_time(size, ln, 2 * (N - 1) * DELTA_NVLINK_US[p] * 1e-6, H100_LINE)
            for p, ln in zip(PROTOCOLS[:2], lines[:2], strict=True)]
    return np.min([*ring, line_time(size, lines[2], 0.0, H100_LINE)], axis=0)


def x_start(lines: list[Line]) -> np.ndarray:
    """Inverse of :func:`unpack`."""
    return np.array([v for a, e, r in lines
                     for v in (np.log(a), -np.log(1.5 / e - 1), np.log(r))])


def side_by_side(size: np.ndarray, meas_busbw: np.ndarray, pred_s: np.ndarray) -> None:
    """Print size, published busbw, predicted busbw, error."""
    print("| size | published busbw GB/s | predicted busbw GB/s | error |\n|---|---|---|---|")
    for s, b, t in zip(size, meas_busbw, pred_s, strict=True):
        pred = F_AR * s / t / 1e9
        print(f"| {fmt_size(s)} | {b:.2f} | {pred:.2f} | {pred / b - 1:+.1%} |")


def fmt_size(s: float) -> str:
    """2**20 -> '1 MiB'."""
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if s >= k:
            return f"{s / k:g} {unit}"
    return f"{s:g} B"


def print_lines(name: str, lines: dict[str, Line], line_Bps: float) -> None:
    """One row per protocol: alpha (us), efficiency, busbw GB/s, ramp bytes."""
    for p, (a, e, r) in lines.items():
        print(f"| {name} | {p} | {a * 1e6:.1f} | {e:.4f} | {e * line_Bps / 1e9:.1f} | {r:.0f} |")


def main(argv: Sequence[str]) -> int:
    """Run the fits and print the tables that collectives.yaml and docs/collectives.md copy."""
    if len(argv) < 2:
        print("fit_collectives.py: expected the path to the measurements file", file=sys.stderr)
        return 2
    path = Path(argv[1])
    if not path.is_file():
        print(f"fit_collectives.py: {path}: not found (pass the path to the measurements file)",
              file=sys.stderr)
        return 2
    entries = yaml.safe_load(path.read_text("utf-8")).get("collective_communication", [])
    found = [e for e in entries if e.get("id") == SWEEP_ID]
    if not found:
        print(f"fit_collectives.py: {path}: no entry {SWEEP_ID}", file=sys.stderr)
        return 2
    sweep = found[0]["measured"]["points"]
    size = np.array([p["size_B"] for p in sweep], float)
    time_s = np.array([p["time_us"] for p in sweep], float) * 1e-6
    busbw = np.array([p["busbw_GBps"] for p in sweep], float)

    a100 = fit(size, time_s, a100_model, x_start([(30e-6, 0.06, 1e5), (20e-6, 0.4, 4e6),
                                                   (150e-6, 0.75, 1e6)]))
    h_size = np.array(sorted(AZURE_H100), float)
    h_time = F_AR * h_size / (np.array([AZURE_H100[int(s)] for s in h_size]) * 1e9)
    h100 = fit(h_size, h_time, h100_model, x_start([(20e-6, 0.015, 1e3), (30e-6, 0.8, 1e6),
                                                     (70e-6, 1.05, 1e6)]))
    a = dict(zip(PROTOCOLS, a100, strict=True))
    print(f"## Fitted lines ({SWEEP_ID}; Azure ND H100 v5 NVLS)\n")
    print("| class | protocol | alpha us | efficiency | busbw GB/s | ramp bytes |\n|---|---|---|---|---|---|")
    print_lines("nvlink3-nvswitch", a, A100_LINE)
    h_ring_simple = (h100[2][0], 370e9 / H100_LINE, h100[2][2])
    print_lines("nvlink4-nvswitch", {"LL": h100[0], "LL128": h100[1], "Simple": h_ring_simple,
                                     "NVLS": h100[2]}, H100_LINE)
    derived(a, h100)
    print(f"\n## 8xA100 all-reduce, {SWEEP_ID}\n")
    side_by_side(size, busbw, a100_model(size, a100))
    print("\n## 8xH100 NVLS all-reduce, Azure ND H100 v5 (Azure/AI-benchmarking-guide @8fd0c6e)\n")
    side_by_side(h_size, np.array([AZURE_H100[int(s)] for s in h_size]), h100_model(h_size, h100))
    print("\n## Cross-check: 8xA100 Azure ND A100 v4 curve (same snapshot) with the fit above\n")
    az = np.array(sorted(AZURE_A100), float)
    side_by_side(az, np.array([AZURE_A100[int(s)] for s in az]), a100_model(az, a100))
    return 0


def derived(a: dict[str, Line], h100: list[Line]) -> None:
    """Classes without a size sweep: Simple efficiency from a plateau, shape from 8xA100."""
    simple = a["Simple"][1]
    rules = {  # class: (Simple efficiency, line rate, rule)
        "nvlink5-nvswitch": (700e9 / B200_LINE, B200_LINE, "GTC25 B200 ring 700 GB/s"),
        "pcie4": (24 / 32, 32e9, "GTC24 PCIe Gen4 24 GB/s = NCCL Gen4 x16 24 of 32"),
        "pcie5": (48 / 64, 64e9, "GTC24 PCIe Gen5 48 GB/s of 64"),
        "nvlink-bridge-ga102": (48 / 56.25, 56.25e9, "NCCL SM86_NVLINK_BW 12 x 4 links = 48"),
        "ib-hdr-200": (24 / 25, 25e9, "GTC24 200Gb RDMA 24 GB/s of 25"),
        "ib-ndr-400": (47.5 / 50, 50e9, "maintainer 46-48 per NDR NIC; GTC24 400Gb RDMA 48"),
        "ethernet-100g": (10 / 12.5, 12.5e9, "GTC24 100GbE TCP/IP sockets 10 GB/s of 12.5"),
    }
    print("\n## Derived classes (efficiency_p = eff_Simple * eff_p(A100)/eff_Simple(A100); "
          "alpha, ramp from 8xA100)\n")
    print("| class | protocol | alpha us | efficiency | busbw GB/s | ramp bytes |\n|---|---|---|---|---|---|")
    for name, (eff, line_Bps, rule) in rules.items():
        lines = {p: (al, eff * e / simple, r) for p, (al, e, r) in a.items()}
        print_lines(name, lines, line_Bps)
        print(f"|  | rule: {rule} | | | | |")
    nvls_eff = 850e9 / B200_LINE
    print(f"| nvlink5-nvswitch | NVLS | {h100[2][0] * 1e6:.1f} | {nvls_eff:.4f} | 850.0 | "
          f"{h100[2][2]:.0f} |\n|  | rule: GTC25 B200 SHARP 850, alpha/ramp from H100 NVLS | | | | |")


if __name__ == "__main__":
    sys.exit(guarded("fit_collectives.py", main, sys.argv))
