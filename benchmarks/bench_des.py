"""Speed and memory of the DES iteration engine (issue 5 targets).

Cases: one step of GPT-3 175B on 1024 A100 (TP8 PP16 DP8, interleaved v=2, 192 micro-batches;
target 0.5 s) and of a Llama-3-405B-class model on 16 384 H100 (TP8 PP16 DP128, sequence 8192;
target 2 s), from the scenario files. Each case is timed ``REPEATS`` times from scratch (plan
build from ``perf/`` durations + simulation + collect) and the best is kept; peak memory is the
Python heap peak of one more run under ``tracemalloc`` (the simulator's own allocations).

Then: cost per record of full simulations of the default scenario growing from ~5k to ~500k
records (``extrapolate_above=None``), and steps of 4 194 304 micro-batches, extrapolated from
their periodic steady state (``sim/periodic.py``).

Run: ``python benchmarks/bench_des.py`` (prints Markdown tables).
"""

from __future__ import annotations

import platform
import time
import tracemalloc
from pathlib import Path

from simcluster.sim import simulate_step
from simcluster.sim.build import build_plan
from simcluster.sim.periodic import with_micro_batches
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 5
CASES = [("GPT-3 175B, 1024 x A100, TP8 PP16 DP8, interleaved v=2",
          "gpt3-175b-1024xa100.yaml", 0.5),
         ("Llama-3 405B, 16 384 x H100, TP8 PP16 DP128, seq 8192, interleaved v=2",
          "llama3-405b-16k-h100.yaml", 2.0)]


def _best(fn: object, repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Print the table."""
    print(f"Python {platform.python_version()} on {platform.machine()}, best of {REPEATS}")
    print("| case | build (s) | step (s) | target (s) | peak heap (MiB) | records | simulated "
          "stage GPUs | step time (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, name, target in CASES:
        s = load_scenario(ROOT / "scenarios" / name)
        build = _best(lambda s=s: build_plan(s))
        total = _best(lambda s=s: simulate_step(s))
        tracemalloc.start()
        result = simulate_step(s)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"| {label} | {build:.3f} | {total:.3f} | {target} | {peak:.0f} | "
              f"{len(result.records)} | {result.simulated_gpus} of {s.cluster.gpus} | "
              f"{result.iteration_time_s:.3f} |")


FLAT_MICRO_BATCHES = (700, 7_000, 70_000)  # ~5k, ~50k, ~500k records of the default scenario
HUGE = 4 * 2**20
HUGE_CASES = ("default.yaml", "gpt3-175b-1024xa100.yaml")


def flatness() -> None:
    """Print us/record of full simulations growing from ~5k to ~500k records."""
    base = load_scenario(ROOT / "scenarios" / "default.yaml")
    print("| micro-batches (default scenario) | records | step (s) | us/record |")
    print("|---:|---:|---:|---:|")
    for m in FLAT_MICRO_BATCHES:
        s = with_micro_batches(base, m)
        seconds = _best(lambda s=s: simulate_step(s, extrapolate_above=None), 3 if m < 50_000 else 1)
        records = simulate_step(s, extrapolate_above=None).record_count
        print(f"| {m} | {records} | {seconds:.3f} | {seconds / records * 1e6:.2f} |")


def huge() -> None:
    """Print the time of steps of 4M micro-batches (extrapolated)."""
    print("| scenario, 4 194 304 micro-batches | seconds | simulated micro-batches | step time (s) |")
    print("|---|---:|---:|---:|")
    for name in HUGE_CASES:
        s = with_micro_batches(load_scenario(ROOT / "scenarios" / name), HUGE)
        seconds = _best(lambda s=s: simulate_step(s), 3)
        result = simulate_step(s)
        assert result.extrapolation is not None
        print(f"| {name} | {seconds:.3f} | {result.extrapolation.simulated_micro_batches} | "
              f"{result.iteration_time_s:.6g} |")


if __name__ == "__main__":
    main()
    flatness()
    huge()
