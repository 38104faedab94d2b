"""Regenerate every figure of the docs: one command, from the shipped scenarios.

Runs the simcluster commands each figure needs (``run --trace``, ``run --json``, ``sweep``,
``collective --json``) into a temporary directory, then the ``analysis/plot_*.py`` script that
draws it; each figure is written as PNG, SVG and CSV to ``docs/img`` (or ``--out``). The sweeps
are narrowed with ``--search`` so the whole run takes a minute or two.
Usage: ``python analysis/make_figures.py [--list] [--only NAME ...] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _guard import guarded

from simcluster.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
ANALYSIS = ROOT / "analysis"
SCENARIOS = ROOT / "scenarios"
CLI = "import sys; from simcluster.cli import main; sys.exit(main(sys.argv[1:]))"
#: Layouts of scenarios/default.yaml in the breakdown figure: (file stem = bar label, overrides).
NO_SP = "parallelism.sequence_parallel=false"  # TP 1 has no sequence parallelism
LAYOUTS = (("tp2-pp2", ()), ("tp1-pp4", ("parallelism.tp=1", "parallelism.pp=4", NO_SP)),
           ("tp4-pp1", ("parallelism.tp=4", "parallelism.pp=1")),
           ("tp8-pp2", ("parallelism.tp=8", "parallelism.pp=2")),
           ("tp1-pp16", ("parallelism.tp=1", "parallelism.pp=16", NO_SP)))
#: The planning sweep, narrowed: one micro-batch size, schedule and ZeRO stage.
PLAN_SEARCH = ("--search", "micro_batch=1", "--search", "schedule=1f1b", "--search", "zero_stage=1")

Steps = list[list[str]]


def simcluster(*args: str) -> list[str]:
    """The command line of ``simcluster ARGS`` with this interpreter."""
    return [sys.executable, "-c", CLI, *args]


def script(name: str, *args: str) -> list[str]:
    """The command line of ``analysis/NAME ARGS``."""
    return [sys.executable, str(ANALYSIS / name), *args]


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: its name, its PNG under the output directory, the docs page showing it, and
    the commands that make it (given the scratch directory and the PNG path)."""

    name: str
    target: str
    page: str
    steps: Callable[[Path, Path], Steps]


def _gantt(scenario: str, trace: str, *zoom: str, title: str) -> Callable[[Path, Path], Steps]:
    def steps(tmp: Path, png: Path) -> Steps:
        made = [] if (tmp / trace).exists() else [
            simcluster("run", str(SCENARIOS / scenario), "--trace", str(tmp / trace))]
        return [*made, script("plot_gantt.py", str(tmp / trace), "--out", str(png), "--title",
                              title, *zoom)]
    return steps


def _seed(name: str) -> Callable[[Path, Path], Steps]:
    """A seed figure script (analysis/plot_seed_*.py): it draws all its figures at once, so it
    runs once per regeneration (a marker in the scratch directory) for the figures it shares."""
    def steps(tmp: Path, png: Path) -> Steps:
        marker = tmp / f"{name}.done"
        if marker.exists():
            return []
        touch = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
        return [script(name, "--out-dir", str(png.parent)), touch]
    return steps


def _breakdown(tmp: Path, png: Path) -> Steps:
    runs = [simcluster("run", str(SCENARIOS / "default.yaml"), "--json",
                       *[a for o in sets for a in ("--set", o)], "--out-file", str(tmp / f"{stem}.json"))
            for stem, sets in LAYOUTS]
    return [*runs, script("plot_breakdown.py", *[str(tmp / f"{s}.json") for s, _ in LAYOUTS],
                          "--out", str(png), "--title",
                          "default.yaml (Llama 3 8B, 16 x H100): step-time breakdown by layout")]


def _plan_sweep(tmp: Path) -> Steps:
    if (tmp / "plan" / "results.parquet").exists():
        return []
    return [simcluster("sweep", str(SCENARIOS / "plan-10b-300b.yaml"), *PLAN_SEARCH, "--out",
                       str(tmp / "plan"), "--quiet")]


def _pareto(tmp: Path, png: Path) -> Steps:
    return [*_plan_sweep(tmp), script("plot_pareto.py", str(tmp / "plan" / "results.parquet"),
                                      "--out", str(png), "--title", "plan-10b-300b (mb1, 1f1b, "
                                      "ZeRO-1): time vs cost, every option")]


def _planning(tmp: Path, png: Path) -> Steps:
    return [*_plan_sweep(tmp), script("plot_planning.py", str(tmp / "plan" / "results.parquet"),
                                      "--out", str(png))]


def _busbw(tmp: Path, png: Path) -> Steps:
    tops = ("dgx-a100-80gb", "dgx-h100")
    runs = [simcluster("collective", "--topology", t, "--bytes", "32K:16G", "--json",
                       "--out-file", str(tmp / f"{t}.json")) for t in tops]
    return [*runs, script("plot_busbw.py", *[str(tmp / f"{t}.json") for t in tops], "--out",
                          str(png))]


FIGURES = (
    Figure("gantt", "des-default-trace.png", "docs/des.md",
           _gantt("default.yaml", "default-trace.json", title="default.yaml: one step (DES)")),
    Figure("gantt-head", "des-default-trace-head.png", "docs/des.md",
           _gantt("default.yaml", "default-trace.json", "--head", "0.06",
                  title="default.yaml: first 6% of the step")),
    Figure("gantt-tail", "des-default-trace-tail.png", "docs/des.md",
           _gantt("default.yaml", "default-trace.json", "--tail", "0.06",
                  title="default.yaml: last 6% of the step")),
    Figure("gantt-gpt3", "des-gpt3-175b-trace.png", "docs/des.md",
           _gantt("gpt3-175b-1024xa100.yaml", "gpt3-trace.json",
                  title="gpt3-175b-1024xa100.yaml: one step (DES)")),
    Figure("heatmap", "tp-pp-heatmap.png", "docs/sweep.md",
           lambda tmp, png: [script("plot_heatmap.py", str(SCENARIOS / "default.yaml"), "--out",
                                    str(png))]),
    Figure("breakdown", "breakdown-layouts.png", "docs/sweep.md", _breakdown),
    Figure("pareto", "pareto-plan-10b.png", "docs/sweep.md", _pareto),
    Figure("planning", "planning.png", "docs/cost.md", _planning),
    Figure("busbw", "busbw.png", "docs/collectives.md", _busbw),
    Figure("goodput", "goodput_vs_interval.png", "docs/reliability.md",
           lambda tmp, png: [script("plot_goodput_interval.py", "--replicas", "400", "--out",
                                    str(png))]),
    Figure("validation", "validation-scatter.png", "docs/validation.md",
           lambda tmp, png: [script("plot_validation.py", "--out", str(png))]),
    Figure("mpt-seq", "mpt-error-vs-seq.png", "docs/validation.md",
           lambda tmp, png: [script("validate_mpt.py", "--plot", str(png.parent))]),
    Figure("mpt-gpus", "mpt-error-vs-gpus.png", "docs/validation.md",
           lambda tmp, png: [script("validate_mpt.py", "--plot", str(png.parent))]),
    Figure("seed-boxes", "seed-10b-boxes.png", "docs/seeds.md", _seed("plot_seed_hardware.py")),
    Figure("seed-comm", "seed-comm-share.png", "docs/seeds.md", _seed("plot_seed_hardware.py")),
    Figure("seed-uninterr", "seed-uninterrupted.png", "docs/seeds.md",
           _seed("plot_seed_reliability.py")),
    Figure("seed-ckpt", "seed-checkpoint-modes.png", "docs/seeds.md",
           _seed("plot_seed_reliability.py")),
    Figure("seed-spares", "seed-spares-elastic.png", "docs/seeds.md",
           _seed("plot_seed_reliability.py")),
    Figure("seed-perturb", "seed-degraded-stragglers.png", "docs/seeds.md",
           _seed("plot_seed_perturb.py")),
)


def _run(command: list[str]) -> None:
    out_file = None
    if "--out-file" in command:  # a simcluster --json whose stdout is the file
        i = command.index("--out-file")
        out_file, command = Path(command[i + 1]), command[:i] + command[i + 2:]
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0"}  # no date in the SVG and PNG metadata
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise SpecError("", f"{' '.join(command[3:] if command[1] == '-c' else command[1:])} "
                        f"failed ({done.returncode}): {last}")
    if out_file is not None:
        out_file.write_text(done.stdout, encoding="utf-8")


def make(figures: Sequence[Figure], out: Path) -> None:
    """Run every figure's commands (sharing one scratch directory), printing each as it ends."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="simcluster-figures-") as scratch:
        for figure in figures:
            start = time.perf_counter()
            for command in figure.steps(Path(scratch), out / figure.target):
                _run(command)
            print(f"{figure.name:13s} {out / figure.target} ({time.perf_counter() - start:.1f} s)",
                  flush=True)


def main(argv: Sequence[str]) -> int:
    """List or regenerate the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--list", action="store_true", help="print each figure, its target and "
                        "its docs page, and stop")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these figures")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"), help="output directory")
    args = parser.parse_args(argv[1:])
    names = {f.name for f in FIGURES}
    unknown = [n for n in args.only or () if n not in names]
    if unknown:
        raise SpecError("--only", f"unknown figure {unknown[0]!r} (one of {', '.join(sorted(names))})")
    chosen = [f for f in FIGURES if args.only is None or f.name in args.only]
    if args.list:
        for f in chosen:
            print(f"{f.name:13s} img/{f.target:30s} {f.page}")
        return 0
    start = time.perf_counter()
    make(chosen, Path(args.out))
    print(f"{len(chosen)} figures (PNG, SVG, CSV) in {args.out}, {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("make_figures.py", main, sys.argv))
