"""Speed of one evaluation, end to end (issue 11 targets).

Cases, each the best (or the median, where the target says so) of repeated runs on a warm
process unless it says "whole process":

- ``load_scenario`` of preset-based scenario files (default, GPT-3 175B): target 0.7 ms;
- the structural pre-check ``check_layout`` on a valid and an invalid layout: target 0.05 ms;
- the analytical engine (``--fast``) in-process, median over the 22 SC'21 cases: target 1 ms;
- the DES on the ``bench_des.py`` cases: target half their issue-5 times (0.324 s and 0.039 s);
- the DES with 4 194 304 micro-batches per pipeline (default and GPT-3 175B scenarios at that many
  micro-batches): target 2 s;
- ``simcluster run scenarios/default.yaml --fast`` and ``simcluster --help`` as whole processes:
  targets 0.25 s and 0.2 s;
- a Tier B all-reduce sweep 1K:8G on 128 DGX H100 (graph, routes and every size): target 0.5 s.

Run: ``python benchmarks/bench_eval.py`` (prints a Markdown table; the results are kept in
``benchmarks/README.md``).
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.validation.sc21 holds the SC'21 cases

from simcluster.flows.tier_b import FlowModel  # noqa: E402
from simcluster.run.single import simulate  # noqa: E402
from simcluster.sim import simulate_step  # noqa: E402
from simcluster.spec import check_layout, load_scenario  # noqa: E402
from simcluster.spec.loader import load_topology  # noqa: E402
from tests.validation import sc21  # noqa: E402

Row = tuple[str, float, float, str]  # case, seconds, target seconds, note
MICRO_BATCHES = 4 * 2**20


def _times(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _load_rows() -> list[Row]:
    rows = []
    for name in ("default.yaml", "gpt3-175b-1024xa100.yaml"):
        path = ROOT / "scenarios" / name
        load_scenario(path)
        best = min(_times(lambda path=path: load_scenario(path), 1000))
        rows.append((f"load_scenario({name}), best of 1000", best, 0.7e-3, ""))
    return rows


def _rejects(base: object, layout: dict[str, int]) -> bool:
    try:
        check_layout(base, **layout)  # type: ignore[arg-type]
    except Exception:
        return True
    return False


def _precheck_rows() -> list[Row]:
    base = load_scenario(ROOT / "scenarios" / "gpt3-175b-1024xa100.yaml")
    rows = []
    for label, layout in (("valid tp=4 pp=16", {"tp": 4, "pp": 16}),
                          ("invalid tp=3", {"tp": 3, "pp": 16})):
        rejected = _rejects(base, layout)
        best = min(_times(lambda layout=layout: _rejects(base, layout), 10000))
        rows.append((f"check_layout, {label} ({'rejected' if rejected else 'accepted'}), best of "
                     "10000", best, 0.05e-3, ""))
    return rows


def _fast_rows() -> list[Row]:
    alone, loaded = [], []
    for case in sc21.CASES:
        s = sc21.scenario(case)
        simulate(s, engine="analytical")
        alone.append(statistics.median(_times(lambda s=s: simulate(s, engine="analytical"), 50)))
        loaded.append(statistics.median(_times(
            lambda case=case: simulate(sc21.scenario(case), engine="analytical"), 50)))
    return [("--fast in-process (simulate, analytical), median over the 22 SC'21 cases",
             statistics.median(alone), 1e-3, f"slowest case {max(alone) * 1e3:.2f} ms"),
            ("--fast in-process with the scenario load (load_scenario of the case's mapping + "
             "simulate), median over the 22 SC'21 cases", statistics.median(loaded), 1e-3,
             f"slowest case {max(loaded) * 1e3:.2f} ms")]


def _des_rows() -> list[Row]:
    rows = []
    for name, target in (("gpt3-175b-1024xa100.yaml", 0.162), ("llama3-405b-16k-h100.yaml", 0.0195)):
        s = load_scenario(ROOT / "scenarios" / name)
        best = min(_times(lambda s=s: simulate_step(s), 5))
        rows.append((f"DES step, {name} (bench_des case; target: half the issue-5 time)", best, target,
                     f"step {simulate_step(s).iteration_time_s:.3f} s"))
    for name in ("default.yaml", "gpt3-175b-1024xa100.yaml"):
        base = load_scenario(ROOT / "scenarios" / name)
        par = base.parallelism
        batch = MICRO_BATCHES * par.micro_batch * par.dp
        s = load_scenario(ROOT / "scenarios" / name, [f"parallelism.global_batch={batch}"])
        seconds = min(_times(lambda s=s: simulate_step(s), 3))
        result = simulate_step(s)
        rows.append((f"DES, {name} with {MICRO_BATCHES:,} micro-batches per pipeline "
                     f"(global_batch {batch:,})", seconds, 2.0,
                     f"step {result.iteration_time_s:.1f} s, {result.record_count:,} records"))
    return rows


def _process_rows() -> list[Row]:
    exe = str(Path(sys.executable).with_name("simcluster"))
    rows = []
    for label, argv, target in (
            ("simcluster --help, whole process, best of 10", [exe, "--help"], 0.2),
            ("simcluster run scenarios/default.yaml --fast, whole process, best of 10",
             [exe, "run", str(ROOT / "scenarios" / "default.yaml"), "--fast"], 0.25)):
        best = min(_times(lambda argv=argv: subprocess.run(argv, check=True, capture_output=True),
                          10))
        rows.append((label, best, target, ""))
    return rows


def _tier_b_sweep() -> None:
    topo = load_topology("dgx-h100")
    model = FlowModel(topo, 128)
    size = 1024.0
    while size <= 8 * 2**30:
        model.collective_time("all_reduce", size, 128 * topo.gpus_per_node, 1, "auto")
        size *= 2


def _tier_b_rows() -> list[Row]:
    best = min(_times(_tier_b_sweep, 3))
    return [("Tier B all_reduce 1K:8G (24 sizes), 128 x dgx-h100, best of 3", best, 0.5, "")]


def main() -> None:
    """Print the table."""
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print("| case | measured | target | result | note |")
    print("|---|---:|---:|---|---|")
    for group in (_load_rows, _precheck_rows, _fast_rows, _des_rows, _process_rows, _tier_b_rows):
        for label, seconds, target, note in group():
            verdict = "met" if seconds <= target else "MISSED"
            print(f"| {label} | {_fmt(seconds)} | {_fmt(target)} | {verdict} | {note} |", flush=True)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 0.1 else f"{seconds:.3f} s"


if __name__ == "__main__":
    main()
