"""Speed of the analytical model over a sweep's layouts (issue 12, item 7).

For every layout of a realistic set (:func:`tests.golden.layouts_analytical.layout_space`: tp 1, 2,
4, 8; pp 1, 2, 4, 8, 16, 32, split unevenly where it does not divide the layers; cp 1, 2;
micro-batch dividing the per-replica batch, up to 8; 1F1B, GPipe, ZB-H1 and interleaved with
v = 2, 3, 4; recompute none, selective, full; sequence parallelism on and off with tp > 1; ZeRO 0
and 1, and 2 and 3 with pp = 1; filtered by ``check_layout``), a sweep does
``estimate_memory`` and, for the layouts that fit, ``estimate_step``. The scenarios are built
before the clock starts (that is the enumeration's cost, not the model's). Each pass starts with
the caches cleared (``simcluster.perf.clear_caches``, where it exists): a sweep starts cold. The
best of ``--passes`` passes is reported.

Run: ``python benchmarks/bench_layouts.py [--passes 3]``. For the "before" column, run the same
script with the older code first on ``PYTHONPATH`` (``git worktree add <dir> <commit>``, then
``PYTHONPATH=<dir>``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.golden.layouts_analytical holds the layout enumeration

import simcluster.perf  # noqa: E402
from simcluster.perf.memory import estimate_memory  # noqa: E402
from simcluster.perf.step import estimate_step  # noqa: E402
from simcluster.spec.scenario import Scenario  # noqa: E402
from tests.golden.layouts_analytical import layout_space, load_base, scenario_for  # noqa: E402

#: (label, base scenario of tests.golden.layouts_analytical.BASES)
CASES = (("GPT-3 175B, 1024 A100, batch 1536", "gpt3-175b"),
         ("Llama 3 405B, 16384 H100, batch 2048", "llama3-405b"))


def clear() -> None:
    """Empty the analytical caches, where this version of the code has them."""
    clear_caches: Callable[[], None] | None = getattr(simcluster.perf, "clear_caches", None)
    if clear_caches is not None:
        clear_caches()


def one_pass(scenarios: list[Scenario]) -> tuple[float, int]:
    """(seconds, layouts that fit) of memory for every scenario and the step for those that fit."""
    clear()
    fit = 0
    start = time.perf_counter()
    for s in scenarios:
        if estimate_memory(s, flash_attention=s.execution.flash_attention).fits_in_memory:
            estimate_step(s)
            fit += 1
    return time.perf_counter() - start, fit


def run_case(label: str, base_name: str, passes: int) -> str:
    """One Markdown row: layouts, fitting layouts, best total seconds, microseconds per layout."""
    base = load_base(base_name)
    scenarios = [scenario_for(base, layout) for layout in layout_space(base)]
    times, fit = zip(*(one_pass(scenarios) for _ in range(passes)), strict=True)
    best = min(times)
    return (f"| {label} | {len(scenarios)} | {fit[0]} | {best:.3f} | "
            f"{best / len(scenarios) * 1e6:.1f} |")


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3, help="passes; the best is kept")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, best of {args.passes} "
          f"passes, caches cleared before each; code: {Path(simcluster.perf.__file__).parent}\n")
    print("| layout set | layouts | fit | memory + step, s | us per layout |")
    print("|---|---:|---:|---:|---:|")
    for label, base_name in CASES:
        print(run_case(label, base_name, args.passes), flush=True)


if __name__ == "__main__":
    main()
