"""Speed of Tier B (simcluster.flows): prints a table; not a test (run: python benchmarks/bench_flows.py).

Targets (issue 4): a 1 GiB all-reduce over 16 384 GPUs (2048 DGX H100 nodes) on a fat tree with
Tier B in under 0.5 s; the contention factors of the 1024-GPU GPT-3 scenario in under 2 s. Each
case runs ``REPEATS`` times from scratch (fresh graph and routes) and reports the best; the link
graph build (simcluster.topology, shared with every tier) is timed on its own line.
"""

from __future__ import annotations

import copy
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from simcluster import catalog
from simcluster.flows import FlowModel, contention
from simcluster.report.table import format_table
from simcluster.spec import load_scenario, load_topology
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import build_graph, summarize

REPEATS = 3
ROOT = Path(__file__).resolve().parents[1]
NODES = 2048
GiB = 2**30


def _fat_tree_h100() -> TopologySpec:
    raw = copy.deepcopy(yaml.safe_load(catalog.topology_path("dgx-h100").read_text()))
    raw["scale_out"]["fabric"] = "fat-tree"
    return load_topology(raw)


def _best(fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(REPEATS):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def _tier_b(topo: TopologySpec, spray: bool, algo: str, protocol: str) -> Callable[[], Any]:
    def run() -> Any:
        model = FlowModel(topo, NODES, spray=spray)
        start = time.perf_counter()
        result = model.collective_time("all_reduce", GiB, NODES * 8, 1, algo, protocol)
        return time.perf_counter() - start, result
    return run


def tier_b_sweep_s(nodes: int = 128, repeats: int = REPEATS) -> float:
    """Best seconds of ``collective --topology dgx-h100 --nodes 128 --bytes 1K:8G --tier B``'s work.

    The command's Tier B part, in process: a fresh :class:`FlowModel` (graph and routes) and the
    24 sizes of the 1K:8G all-reduce sweep over all GPUs (issue 11 target: <= 0.5 s).
    """
    topo = load_topology("dgx-h100")
    sizes = [1024.0 * 2**k for k in range(24)]

    def sweep() -> None:
        model = FlowModel(topo, nodes)
        for size in sizes:
            model.collective_time("all_reduce", size, nodes * topo.gpus_per_node)

    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sweep()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Run every case and print the results table."""
    topo = _fat_tree_h100()
    rows: list[list[object]] = []
    rows.append(["Tier B all-reduce sweep 1K:8G (24 sizes), 128 x dgx-h100, graph included",
                 f"{tier_b_sweep_s():.3f}", "0.5", "-"])
    seconds, _ = _best(lambda: build_graph(topo, NODES))
    rows.append(["link graph, 2048 x dgx-h100 fat tree (topology.build_graph)", f"{seconds:.3f}", "2",
                 "-"])
    seconds, _ = _best(lambda: summarize(topo, 128))
    rows.append(["topology summary with bisection max-flow, 128 x dgx-h100 (topology.summarize)",
                 f"{seconds:.3f}", "1.5", "-"])
    for spray, algo, protocol in [(True, "ring", "Simple"), (False, "ring", "Simple"),
                                  (True, "ring", "auto")]:
        runs = [_tier_b(topo, spray, algo, protocol)() for _ in range(REPEATS)]
        seconds, result = min(runs, key=lambda run: float(run[0]))
        label = (f"Tier B 1 GiB all-reduce, 16384 GPUs, {algo}/{protocol}, "
                 f"{'spray' if spray else 'ECMP'}")
        rows.append([label, f"{seconds:.3f}", "0.5", f"busbw {result.busbw_Bps / 1e9:.1f} GB/s"])
    scenario = ROOT / "scenarios" / "gpt3-175b-1024xa100.yaml"
    for spray in (True, False):
        seconds, factors = _best(lambda s=spray: contention(load_scenario(scenario), spray=s))
        rows.append([f"contention(), GPT-3 175B on 1024 A100, {'spray' if spray else 'ECMP'} "
                     "(load + graph + solve)", f"{seconds:.3f}", "2",
                     ", ".join(f"{k} {v:.2f}" for k, v in factors.items())])
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"best of {REPEATS}")
    print(format_table(["case", "seconds", "target s", "result"], rows))


if __name__ == "__main__":
    main()
