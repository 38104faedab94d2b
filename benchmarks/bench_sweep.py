"""Speed and memory of ``simcluster sweep`` (issue 12 targets).

Cases, each a whole ``simcluster sweep`` process (so imports, enumeration, the analytical pass,
ranking, the Pareto front and writing Parquet/CSV are all counted), results written to a fresh
temporary directory (no resume):

- GPT-3 175B on 1024 A100 at batch 1536, the whole layout space, analytical pass: target 20 s;
- the same, then the DES re-rank of the best 50 (``--rerank 50``): the DES part, target 20 s;
- Llama 3 405B on 16,384 H100, the whole space: target 60 s;
- the planning scenario (``scenarios/plan-10b-300b.yaml``, every option): target 30 s;
- peak memory (max RSS of the sweep process and its workers): target 2 GiB.

Run: ``python benchmarks/bench_sweep.py [--jobs 2]`` (prints a Markdown table; the results are kept
in ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30


def _sweep(scenario: str, jobs: int, *extra: str) -> tuple[float, float, dict[str, object]]:
    """Seconds, peak RSS (GiB, the process and its workers) and the JSON of one sweep."""
    with tempfile.TemporaryDirectory() as out:
        sweep = [str(Path(sys.executable).with_name("simcluster")), "sweep", scenario, "-j",
                 str(jobs), "--quiet", "--json", "--out", out, *extra]
        cmd = [sys.executable, "-c", _CHILD, *sweep]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
    report = json.loads(done.stdout.splitlines()[-1])
    return seconds, float(report.pop("max_rss_gib")), report


# A wrapper runs the sweep process and adds the largest resident set of any process of it (the
# sweep and its workers: RUSAGE_CHILDREN covers every waited-for descendant) to its JSON.
_CHILD = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
out = json.loads(done.stdout)
out["max_rss_gib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
print(json.dumps(out))
"""


def _row(case: str, seconds: float, target: float, rss: float, report: dict[str, object]) -> str:
    ok = "yes" if seconds <= target and rss < 2.0 else "NO"
    return (f"| {case} | {report['evaluated']:,} | {report['eligible']:,} | {seconds:.1f} | "
            f"{target:g} | {rss:.2f} | {ok} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    gpt3, llama = "scenarios/gpt3-175b-1024xa100.yaml", "scenarios/llama3-405b-16k-h100.yaml"
    plan = "scenarios/plan-10b-300b.yaml"
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, -j {args.jobs}\n")
    print("| case | layouts evaluated | eligible | seconds | target (s) | peak GiB | met |")
    print("|---|---:|---:|---:|---:|---:|---|")
    analytical, rss, rep = _sweep(gpt3, args.jobs)
    print(_row("GPT-3 175B / 1024 A100, whole space, analytical", analytical, 20, rss, rep))
    _, rss, rep = _sweep(gpt3, args.jobs, "--rerank", "50")
    timings = rep["timings_s"]
    assert isinstance(timings, dict)
    print(_row("GPT-3 175B, DES re-rank of the best 50 (the DES pass alone)", timings["des"], 20,
               rss, rep))
    seconds, rss, rep = _sweep(llama, args.jobs)
    print(_row("Llama 3 405B / 16,384 H100, whole space, analytical", seconds, 60, rss, rep))
    if (ROOT / plan).exists():
        seconds, rss, rep = _sweep(plan, args.jobs)
        print(_row("planning scenario (every option, node count and layout)", seconds, 30, rss,
                   rep))
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"\nlargest child process: {kib / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
