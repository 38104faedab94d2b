"""Shared pieces of the device measurements: a timer on CUDA events, a power/clock sampler, CSV rows.

Run on a machine with an NVIDIA GPU and PyTorch (analysis/device/README.md). Nothing in simcluster
imports this: the measurements it produces are data under analysis/device/<gpu>_<date>/.
"""

from __future__ import annotations

import contextlib
import csv
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def time_cuda(fn: Callable[[], object], min_ms: float = 30.0, max_reps: int = 100,
              warmup: int = 3) -> tuple[float, float, int]:
    """Median and minimum time of ``fn`` in ms (CUDA events around each call, after ``warmup``
    calls), repeated until about ``min_ms`` of device time; returns (median, min, reps)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    first = max(start.elapsed_time(end), 1e-3)
    reps = int(min(max_reps, max(3, min_ms / first)))
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(reps)]
    for s, e in pairs:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in pairs]
    return statistics.median(times), min(times), reps


class Sampler:
    """Samples SM clock, memory clock, power, temperature and clock-event reasons through NVML
    every ``period_s`` in a thread; ``window(t0, t1)`` averages the samples between two host times."""

    def __init__(self, period_s: float = 0.05) -> None:
        self.period_s = period_s
        self.rows: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ok = False
        self.static: dict[str, Any] = {}
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.ok = True
            self.static = self._static_info()
        except Exception as exc:  # NVML missing: the measurements still run, without clocks
            self.static = {"nvml_error": repr(exc)}

    def _static_info(self) -> dict[str, Any]:
        nv, h = self._nvml, self._h
        info: dict[str, Any] = {}
        for key, call in {
            "power_limit_W": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
            "power_default_limit_W": lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000,
            "max_sm_clock_MHz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
            "max_mem_clock_MHz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM),
            "app_sm_clock_MHz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM),
            "driver": lambda: nv.nvmlSystemGetDriverVersion(),
            "name": lambda: nv.nvmlDeviceGetName(h),
        }.items():
            try:
                value = call()
                info[key] = value.decode() if isinstance(value, bytes) else value
            except Exception as exc:
                info[key] = f"n/a ({type(exc).__name__})"
        return info

    def _reasons(self) -> int:
        nv, h = self._nvml, self._h
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if hasattr(nv, name):
                return int(getattr(nv, name)(h))
        return -1

    def _loop(self) -> None:
        nv, h = self._nvml, self._h
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a missed sample is not an error
                self.rows.append({
                    "t": time.time(),
                    "sm_MHz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                    "mem_MHz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                    "power_W": nv.nvmlDeviceGetPowerUsage(h) / 1000,
                    "temp_C": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                    "reasons": self._reasons(),
                })
            self._stop.wait(self.period_s)

    def start(self) -> None:
        if self.ok:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """Mean SM clock, power and temperature, and the OR of event reasons, over [t0, t1]."""
        rows = [r for r in self.rows if t0 <= r["t"] <= t1]
        if not rows:
            return {"sm_MHz": float("nan"), "power_W": float("nan"), "temp_C": float("nan"),
                    "reasons": 0, "samples": 0}
        reasons = 0
        for r in rows:
            reasons |= int(r["reasons"]) if r["reasons"] >= 0 else 0
        return {"sm_MHz": statistics.fmean(r["sm_MHz"] for r in rows),
                "power_W": statistics.fmean(r["power_W"] for r in rows),
                "temp_C": statistics.fmean(r["temp_C"] for r in rows),
                "reasons": reasons, "samples": len(rows)}


class Table:
    """Rows appended to a CSV file as they come (a run cut short keeps what it measured)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fields: list[str] | None = None

    def add(self, row: dict[str, Any]) -> None:
        row = {k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
        new = self.fields is None and not self.path.exists()  # one header per file
        if self.fields is None:
            self.fields = list(row)
        with self.path.open("a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)


def log(out: Path, message: str) -> None:
    """Print a line and keep it in ``out/log.txt``."""
    print(message, flush=True)
    with (out / "log.txt").open("a") as fh:
        fh.write(message + "\n")


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
