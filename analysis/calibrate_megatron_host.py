"""Calibrate the ``megatron-core-2024`` stack's ``execution.host_op_us`` on NVIDIA's MoE rows.

Megatron-Core's MoE layer, outside a whole-iteration CUDA graph, issues its kernels from the host
one call at a time: the router, the dispatcher's permutations and, per local expert, one GEMM of
each grouped GEMM (Transformer Engine's ``GroupedLinear``). At micro-batch 1 a Qwen3-30B-A3B layer
on a B200 takes about 3 ms of GPU work and the host needs longer to issue it: NVIDIA's micro-batch-1
rows run 2.5-3x slower per token than micro-batch 4 on the same GPUs (docs/validation.md, MoE).
``perf/compute.py`` ``host_bound`` prices that: each pass lasts at least its kernel calls times the
host time per call. One parameter is fitted, the host time per call, on the EVEN rows of the MoE
subset (``tests/validation/nvidia.py``, in mapping order; minimising the analytical engine's median
|error| over a 1 us grid from 0 to 100 us); the ODD rows are held out and their median |error|
reported. Rows whose preset graphs the whole iteration keep 0 (``nvidia_recipes.FULL_ITERATION_GRAPHS``).
The value goes into the stack (simcluster/catalog/stacks.yaml). The dense subsets are reported at
the fitted value as a check: their kernels are long enough that the host never sets the pace.

Usage: ``python analysis/calibrate_megatron_host.py`` (about two minutes).
"""

from __future__ import annotations

import copy
import statistics
import sys
from pathlib import Path

from _guard import guarded
from _split_fit import fit_even_report_odd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simcluster.spec import load_scenario
from tests.validation import nvidia

GRID_US = range(101)


def error(case: nvidia.NvidiaCase, host_us: float) -> float:
    """Predicted over measured tokens/s/GPU minus 1, analytical engine, at ``host_us`` (unless the
    row's own mapping sets the host time)."""
    raw = copy.deepcopy(case.scenario)
    raw["execution"].setdefault("host_op_us", host_us)
    return nvidia.tokens_per_gpu(load_scenario(raw)) / case.tokens_per_s_per_gpu - 1.0


def median_abs(cases: list[nvidia.NvidiaCase], host_us: float) -> float:
    """Median |error| over ``cases`` at ``host_us``."""
    return statistics.median(abs(error(c, host_us)) for c in cases)


def main(argv: list[str]) -> int:
    """Fit on the even MoE rows, report the odd ones and the dense subsets."""
    del argv
    cases, _ = nvidia.mapped_rows()
    moe = [c for c in cases if c.subset == nvidia.SUBSET_MOE]
    best = fit_even_report_odd(moe, median_abs, GRID_US, "MoE ")
    for name in (nvidia.SUBSET_H100, nvidia.SUBSET_BLACKWELL, nvidia.SUBSET_LONG):
        rows = [c for c in cases if c.subset == name]
        print(f"{name} ({len(rows)} rows): median |error| {median_abs(rows, best):.1%} "
              f"(0 us: {median_abs(rows, 0):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("calibrate_megatron_host.py", main, sys.argv))
