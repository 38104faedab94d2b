"""Calibrate ``execution.host_op_us`` (host time per modelled layer operator and pass) on vTrain.

vTrain's single-node Megatron-DeepSpeed measurements (tests/validation/data/vtrain_single_node.csv,
VIA-Research/vTrain) include many small steps (hidden 1024 and 2048, micro-batch 1, up to 8-way
TP) whose measured time per layer never drops below about 3 ms, while the GPU work simcluster
counts goes down to 1 ms: the host, not the GPU, sets their pace. One parameter is fitted: the
host time per modelled operator and pass, on the EVEN rows of the CSV (minimising the median
|error| of the analytical engine over a 1 us grid from 0 to 100 us); the ODD rows are held out and
their median |error| reported. The value goes into the `deepspeed-megatron-2022` stack
(simcluster/catalog/stacks.yaml), the stack vTrain's runs used.

Usage: ``python analysis/calibrate_host_overhead.py``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from _guard import guarded
from _split_fit import fit_even_report_odd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.validation import vtrain

GRID_US = range(101)


def median_abs(rows: list[vtrain.VTrainRow], host_us: float) -> float:
    """Median |error| of the analytical engine over ``rows`` at ``host_us``."""
    errors = vtrain.signed_errors(rows, host_op_us=host_us)
    return statistics.median(abs(e) for e in errors)


def main(argv: list[str]) -> int:
    """Fit on the even rows, report the odd rows."""
    del argv
    fit_even_report_odd(vtrain.load_rows(), median_abs, GRID_US)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("calibrate_host_overhead.py", main, sys.argv))
