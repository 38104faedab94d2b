"""``simcluster reliability``: argparse wiring and handler, a thin layer over the horizon engine.

``add_parser(sub)`` adds the subcommand to the subparsers of :mod:`simcluster.cli`.
"""

from __future__ import annotations

import argparse
import json

from simcluster.cli_args import non_negative_int, positive_int
from simcluster.errors import SpecError


def parse_sweep(text: str) -> list[float]:
    """``START:STOP:STEP`` in minutes (STOP included) -> intervals in seconds."""
    try:
        start, stop, step = (float(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP:STEP in minutes, got {text!r}") from None
    if start <= 0 or step <= 0 or stop < start:
        raise argparse.ArgumentTypeError(f"need 0 < START <= STOP and STEP > 0, got {text!r}")
    count = int((stop - start) / step + 1e-9) + 1
    if count > 1000:
        raise argparse.ArgumentTypeError(f"{count} intervals is too many (at most 1000)")
    return [(start + k * step) * 60.0 for k in range(count)]


def handle(args: argparse.Namespace) -> int:
    """Run the Monte Carlo (and the sweep) and print text or one JSON object."""
    from simcluster.horizon import interval_sweep, simulate_reliability  # numpy: on use only
    from simcluster.report.reliability import summary_text, sweep_text
    from simcluster.spec.loader import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    if scenario.reliability is None:
        raise SpecError("reliability", "missing: the reliability command needs a reliability: "
                        "section", args.scenario)
    result = simulate_reliability(scenario, replicas=args.replicas, seed=args.seed,
                                  engine=args.engine, jobs=args.jobs).to_dict()
    sweep = None
    if args.interval_sweep:
        sweep = interval_sweep(scenario, args.interval_sweep, replicas=args.replicas, seed=args.seed,
                               engine=args.engine, jobs=args.jobs).to_dict()
    if args.json:
        print(json.dumps({"scenario": scenario.name, **result, **(sweep or {})}, indent=2))
        return 0
    text = summary_text(scenario.name, result)
    print(text if sweep is None else f"{text}\n\n{sweep_text(sweep)}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reliability`` to the subcommands of ``simcluster``."""
    p = sub.add_parser("reliability",
                       help="failures, restarts and checkpoints over the whole run: goodput, lost "
                            "time, best checkpoint interval (Monte Carlo)")
    p.add_argument("scenario", help="scenario YAML file (with a reliability: section)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key by its dotted path, e.g. checkpoint.interval_min=30")
    p.add_argument("--replicas", type=positive_int, default=200, help="Monte Carlo replicas (default 200)")
    p.add_argument("--interval-sweep", type=parse_sweep, metavar="START:STOP:STEP",
                   help="checkpoint intervals to compare, in minutes (STOP included)")
    p.add_argument("--seed", type=non_negative_int, default=None, help="root seed (default: the scenario's)")
    p.add_argument("--engine", choices=("fast", "simpy"), default="fast",
                   help="fast event loop (default) or the SimPy engine; identical results")
    p.add_argument("--jobs", type=positive_int, default=1, help="worker processes (default 1)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(handler=handle)
