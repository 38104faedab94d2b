#!/usr/bin/env python3
"""Fit the static power of the power-limit clock model (``accelerator.static_power_W``).

The model (simcluster/perf/kernels/clock.py): power at SM clock ``f`` is
``P(f) = P_static + (P_top - P_static) (f / f_top)^3``. On the Perseus artifact's A100 SXM stage
profiles (``analysis/perseus_a100_sxm_stage_profile.csv``: GPT-3 175B and BLOOM pipeline stages,
forward and backward, each at 38 locked clocks from 1410 to 855 MHz) every (model, stage,
instruction) series is normalised by its own 1410 MHz point; the static share ``a`` of
``P / P_top = a + (1 - a) (f / 1410)^3`` is fitted by least squares over all points of a model, and
the static power is ``a`` times the mean power drawn at 1410 MHz. The catalog takes the mean of the
two models, rounded to the watt.

Usage (repository root): ``python3 analysis/fit_static_power.py``.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _guard import guarded

DATA = Path(__file__).resolve().parent / "perseus_a100_sxm_stage_profile.csv"
TOP_MHZ = 1410.0


def load(path: Path = DATA) -> dict[str, list[tuple[str, float, float, float]]]:
    """model -> [(series key, clock MHz, time s, power W)]."""
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    rows: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
    for r in csv.DictReader(lines):
        time, energy = float(r["time"]), float(r["energy"])
        rows[r["model"]].append((f"{r['stage']}/{r['instruction']}", float(r["frequency"]), time,
                                 energy / time))
    return rows


def fit(points: list[tuple[str, float, float, float]]) -> tuple[float, float, float, float]:
    """(static share a, RMS of the normalised power, mean power at the top clock, static W)."""
    top = {key: power for key, mhz, _, power in points if mhz == TOP_MHZ}
    x3 = np.array([(mhz / TOP_MHZ) ** 3 for _, mhz, _, _ in points])
    p = np.array([power / top[key] for key, _, _, power in points])
    a = float(np.sum((p - x3) * (1 - x3)) / np.sum((1 - x3) ** 2))
    rms = float(np.sqrt(np.mean((a + (1 - a) * x3 - p) ** 2)))
    p_top = float(np.mean(list(top.values())))
    return a, rms, p_top, a * p_top


def main(argv: Sequence[str]) -> int:
    del argv
    static = []
    for model, points in sorted(load().items()):
        a, rms, p_top, watts = fit(points)
        static.append(watts)
        print(f"{model}: {len(points)} points, static share {a:.3f} (RMS {rms:.1%}) of "
              f"{p_top:.0f} W at {TOP_MHZ:.0f} MHz = {watts:.0f} W")
    print(f"static_power_W: {np.mean(static):.0f} (mean of {len(static)} models)")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("fit_static_power.py", main, sys.argv))
