"""``simcluster report``: argparse wiring and handler of the self-contained HTML report.

A scenario file is run (``run.single.simulate``, the DES by default, ``--fast`` for the closed
form) and reported with its figures; a directory is read as ``simcluster sweep`` results. The page
is built by :mod:`simcluster.report.html` and :mod:`simcluster.report.html_sweep` (docs/report.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcluster.cli_args import positive_int
from simcluster.errors import SpecError

if TYPE_CHECKING:
    from simcluster.run.single import RunResult

#: Checkpoint intervals of the goodput figure, as multiples of Young's interval.
YOUNG_MULTIPLES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the subcommands of ``simcluster``."""
    p = sub.add_parser(
        "report", help="write a self-contained HTML report of a scenario run or of sweep results",
        description="SCENARIO (a YAML file): run it like 'simcluster run' and write DIR/index.html "
                    "with the summary (step time, tokens/s, MFU, memory fit, cost, time to "
                    "train), the time breakdown, memory per GPU by category, the pipeline Gantt "
                    "(DES, pp > 1), goodput against the checkpoint interval (with a reliability "
                    "section) and the resolved scenario. SWEEP_RESULTS (a 'simcluster sweep "
                    "--out' directory): the top-10 table, the Pareto front, the rejection counts "
                    "and a TP x PP heatmap of the best step time. One HTML file, figures inline, "
                    "no JavaScript or network (docs/report.md).")
    p.add_argument("source", metavar="SCENARIO|SWEEP_RESULTS",
                   help="scenario YAML file, or a directory holding results.parquet (or results.csv)")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="directory to write index.html into (created if missing)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key by its dotted path, e.g. parallelism.tp=4")
    p.add_argument("--fast", action="store_true",
                   help="closed-form (analytical) engine instead of the discrete-event simulation "
                        "(no Gantt figure then)")
    p.add_argument("--contention", choices=("auto", "on", "off"), default="auto",
                   help="Tier B contention, as for 'simcluster run' (default auto)")
    p.add_argument("--replicas", type=positive_int, default=100,
                   help="Monte Carlo replicas of the reliability run and of each point of the "
                        "goodput figure (default 100)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Write ``OUT/index.html``; print its path."""
    from simcluster.report.html import write_page

    source = Path(args.source)
    if source.is_dir():
        if args.set or args.fast:
            raise SpecError("--set" if args.set else "--fast", "applies to a scenario file, not to "
                            "sweep results", str(source))
        text = _sweep_page(source)
    elif source.is_file():
        text = _scenario_page(args, source)
    else:
        raise SpecError("SCENARIO|SWEEP_RESULTS", "no such file or directory", str(source))
    print(f"written: {write_page(text, args.out)}")
    return 0


#: Results files above this size take seconds to read and draw: say so on stderr.
PROGRESS_BYTES = 10 << 20


def _sweep_page(directory: Path) -> str:
    from simcluster.report.html_sweep import CSV_NAME, PARQUET_NAME, read_results, sweep_page

    files = [directory / name for name in (CSV_NAME, PARQUET_NAME)]
    large = any(f.is_file() and f.stat().st_size > PROGRESS_BYTES for f in files)
    if large:  # seconds of silence otherwise (565k rows: 15 s)
        print(f"simcluster report: reading the sweep's results in {directory}", file=sys.stderr)
    rows, path = read_results(directory)
    if large:
        print(f"simcluster report: {len(rows):,} rows read from {path.name}; drawing the page",
              file=sys.stderr)
    return sweep_page(rows, path)


def _scenario_page(args: argparse.Namespace, path: Path) -> str:
    from simcluster.report.html import scenario_page
    from simcluster.run.single import simulate
    from simcluster.spec.loader import dump_scenario, load_scenario, to_yaml

    scenario = load_scenario(path, args.set)
    engine = "analytical" if args.fast else "des"
    try:
        run = simulate(scenario, contention=args.contention,
                       reliability_replicas=args.replicas, engine=engine)
    except SpecError as err:
        raise err.within(str(path)) from None
    notes: list[str] = []
    events = _gantt_events(run, notes)
    sweep = _goodput_sweep(run, args.replicas, notes)
    return scenario_page(run.to_dict(), to_yaml(dump_scenario(scenario)), events, sweep, notes)


def _gantt_events(run: RunResult, notes: list[str]) -> list[dict[str, Any]] | None:
    """Chrome trace events of the DES step when it has a pipeline; else a note why not."""
    from simcluster.sim import DesResult
    from simcluster.sim.trace import chrome_trace

    step = run.step
    if run.scenario.parallelism.pp <= 1:
        return None
    if not isinstance(step, DesResult):
        notes.append("no pipeline Gantt: the analytical engine (--fast) keeps no event records")
        return None
    if step.extrapolation is not None:
        notes.append("no pipeline Gantt: the step was extrapolated from a shorter simulated one "
                     "(lower parallelism.global_batch to draw it)")
        return None
    return chrome_trace(step.records, step.plan).events


def _goodput_sweep(run: RunResult, replicas: int, notes: list[str]) -> dict[str, Any] | None:
    """Goodput at multiples of Young's interval, on common random numbers (``horizon``)."""
    r = run.reliability
    if r is None:
        if run.scenario.reliability is not None:
            notes.append("no goodput figure: the reliability section needs training.tokens")
        return None
    young = r.get("young_interval_min")
    if young is None or run.scenario.checkpoint is None:
        notes.append("no goodput figure: the scenario takes no checkpoints")
        return None
    from simcluster.horizon import interval_sweep

    print(f"simcluster report: goodput at {len(YOUNG_MULTIPLES)} checkpoint intervals x "
          f"{replicas} replicas", file=sys.stderr)
    intervals_s = [young * 60.0 * m for m in YOUNG_MULTIPLES]
    return interval_sweep(run.scenario, intervals_s, replicas,
                          step_time_s=run.step.iteration_time_s).to_dict()
