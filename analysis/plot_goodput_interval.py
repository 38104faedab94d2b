"""Figure: goodput against the checkpoint interval, simulated (mean, 95% band) and closed forms.

Sweeps ``scenarios/1k-h100-reliability.yaml`` (128 DGX H100, Llama 3 failure rate, synchronous
0.98 TB checkpoints at 200 GB/s) over 5..90 min with common random numbers, and writes
``docs/img/goodput_vs_interval.png`` with its SVG and a CSV of the points. Needs matplotlib
(``pip install simcluster[plots]``).
Usage: ``python analysis/plot_goodput_interval.py [--replicas N] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from _guard import guarded

from simcluster.horizon import interval_sweep
from simcluster.report.figures import goodput
from simcluster.report.reliability import sweep_text
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main(argv: Sequence[str]) -> int:
    """Run the sweep, print it, draw the figure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replicas", type=int, default=400)
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "goodput_vs_interval.png"))
    args = parser.parse_args(argv[1:])
    if importlib.util.find_spec("matplotlib") is None:  # say so before a minutes-long sweep
        raise ModuleNotFoundError("no matplotlib", name="matplotlib")
    scenario = load_scenario(ROOT / "scenarios" / "1k-h100-reliability.yaml")
    intervals = [m * 60.0 for m in range(5, 95, 5)]
    sweep = interval_sweep(scenario, intervals, replicas=args.replicas, jobs=2).to_dict()
    print(sweep_text(sweep))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    written = goodput(sweep, args.out, title=f"{scenario.name}: goodput vs checkpoint interval "
                                             f"({args.replicas} replicas per point)")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_goodput_interval.py", main, sys.argv))
