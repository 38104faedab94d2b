"""``simcluster reliability``: argparse wiring and handler, a thin layer over the horizon engine.

``add_parser(sub)`` adds the subcommand to the subparsers of :mod:`simcluster.cli`. The step time
comes from the same engine and contention as ``simcluster run`` (``simcluster.run.single
.engine_step``): the discrete-event simulation by default, the closed forms with ``--fast``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simcluster.cli_args import MAX_JOBS, add_scenario, job_count, non_negative_int, positive_int
from simcluster.errors import SpecError
from simcluster.report.reliability import optimum_text, summary_text, sweep_text
from simcluster.run.single import CONTENTION_MODES, engine_step
from simcluster.run.straggler import resolve_straggler
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario

STEP_ENGINES = ("des", "analytical")
LOOPS = ("fast", "simpy")
AUTO = "auto"


def parse_sweep(text: str) -> list[float] | str:
    """``START:STOP:STEP`` in minutes (STOP included) -> intervals in seconds; or ``auto``."""
    if text == AUTO:
        return AUTO
    try:
        start, stop, step = (float(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP:STEP in minutes or 'auto', "
                                         f"got {text!r}") from None
    if not 0 < start <= stop < float("inf") or not 0 < step < float("inf"):
        raise argparse.ArgumentTypeError(f"need 0 < START <= STOP and STEP > 0, got {text!r}")
    count = int((stop - start) / step + 1e-9) + 1
    if count > 1000:
        raise argparse.ArgumentTypeError(f"{count} intervals is too many (at most 1000)")
    return [(start + k * step) * 60.0 for k in range(count)]


def checkpoint_warnings(scenario: Scenario) -> list[str]:
    """Warning lines about the checkpoint policy of ``scenario``.

    A scenario without a ``checkpoint:`` section (``scenario.checkpoint is None``) never
    checkpoints; unless the file says so explicitly (``checkpoint: none``, a ``CheckpointSpec``
    whose mode is ``none``), that is worth a warning.
    """
    if scenario.checkpoint is not None:
        return []
    return ["no checkpoint: section: no checkpoints are taken, so every failure restarts the run "
            "from the start; add one (e.g. --set checkpoint.interval_min=60) or write "
            "'checkpoint: none' to say so"]


def memory_warnings(scenario: Scenario) -> list[str]:
    """A warning when the layout does not fit in GPU memory (the run's times assume it ran)."""
    from simcluster.perf.memory import estimate_memory
    from simcluster.units import GiB

    memory = estimate_memory(scenario, flash_attention=scenario.execution.flash_attention)
    if memory.fits_in_memory:
        return []
    if memory.peak_bytes <= memory.capacity_bytes:  # the GPUs have room; the host has not
        from simcluster.perf.offload import host_refusal

        host = host_refusal(memory.host_bytes, memory.host_capacity_bytes,
                            scenario.cluster.topology)
        return [f"the layout does not fit: {host}; the step time and everything above assume "
                "it ran"]
    return [f"the layout does not fit: it needs {memory.peak_bytes / GiB:.1f} GiB per GPU on stage "
            f"{memory.peak_stage}, {memory.capacity_bytes / GiB:.1f} GiB available (simcluster "
            "run shows the parts); the step time and everything above assume it ran"]


def step_choice(args: argparse.Namespace) -> tuple[str, str]:
    """(step engine, event loop) from ``--engine``, ``--fast`` and ``--loop``.

    ``--engine fast|simpy`` is the old spelling of ``--loop`` and still accepted.
    """
    engine = args.engine
    loop = args.loop or (engine if engine in LOOPS else "fast")
    step = "analytical" if args.fast else (engine if engine in STEP_ENGINES else "des")
    if args.fast and engine == "des":
        raise SpecError("--engine", "--engine des contradicts --fast (the analytical engine)")
    if engine in LOOPS and args.loop and args.loop != engine:
        raise SpecError("--engine", f"--engine {engine} (the old --loop) contradicts --loop {args.loop}")
    return step, loop


def handle(args: argparse.Namespace) -> int:
    """Run the Monte Carlo (and the sweep or the interval search); print text or one JSON object."""
    scenario = load_scenario(args.scenario, args.set)
    if scenario.reliability is None:
        raise SpecError("reliability", "missing: the reliability command needs a reliability: "
                        "section", args.scenario)
    step_engine, loop = step_choice(args)
    warnings = checkpoint_warnings(scenario) + memory_warnings(scenario)
    try:
        out = _evaluate(args, scenario, step_engine, loop)
    except SpecError as err:
        raise err.within(args.scenario) from None
    warnings += out.pop("warnings", [])
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps({"scenario": scenario.name, **out, "warnings": warnings}, indent=2))
        return 0
    text = summary_text(scenario.name, out)
    if "interval_sweep" in out:
        text = f"{text}\n\n{sweep_text(out)}"
    elif "interval_search" in out:
        text = f"{text}\n\n{optimum_text(out)}"
    print("\n".join([text, *(f"warning: {line}" for line in warnings)]))
    return 0


def _evaluate(args: argparse.Namespace, scenario: Scenario, step_engine: str, loop: str
              ) -> dict[str, Any]:
    """The result dict (with the sweep's or the search's fields and ``warnings`` merged)."""
    from simcluster.horizon import interval_sweep, simulate_reliability  # numpy: load on use
    from simcluster.horizon.bounds import check_replicas
    from simcluster.horizon.optimize import optimize_interval

    check_replicas(args.replicas)
    step_s = engine_step(scenario, args.contention, step_engine)[0].iteration_time_s
    scenario = resolve_straggler(scenario, args.contention, step_engine, step_s)
    _check_up_front(args, scenario, step_s, loop)
    common: dict[str, Any] = {"replicas": args.replicas, "seed": args.seed,
                              "step_time_s": step_s, "engine": loop, "jobs": args.jobs}
    result = simulate_reliability(scenario, **common, step_engine=step_engine).to_dict()
    extra: dict[str, Any] = {}
    if args.optimize_interval or args.interval_sweep == AUTO:
        extra = optimize_interval(scenario, **common).to_dict()
    elif args.interval_sweep:
        extra = interval_sweep(scenario, args.interval_sweep, **common).to_dict()
    return {**result, **extra}


def _check_up_front(args: argparse.Namespace, scenario: Scenario, step_s: float, loop: str) -> None:
    """Check the base evaluation and the sweep's or the search's together, before any replica runs."""
    from simcluster.horizon.bounds import check_bounds
    from simcluster.horizon.config import horizon_config
    from simcluster.horizon.optimize import MAX_EVALUATIONS, search_bracket_s

    configs = [horizon_config(scenario, step_s)]
    if args.optimize_interval or args.interval_sweep == AUTO:
        low, high = search_bracket_s(horizon_config(scenario, step_s, interval_s=3600.0))
        configs += [horizon_config(scenario, step_s, interval_s=x) for x in (low, high)] \
            * (MAX_EVALUATIONS // 2)
    elif args.interval_sweep:
        configs += [horizon_config(scenario, step_s, interval_s=i) for i in args.interval_sweep]
    check_bounds(tuple(configs), args.replicas, loop)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reliability`` to the subcommands of ``simcluster``."""
    p = sub.add_parser("reliability",
                       help="failures, restarts and checkpoints over the whole run: goodput, lost "
                            "time, best checkpoint interval (Monte Carlo)",
                       description="Monte Carlo of the whole training run with failures, restarts "
                                   "and checkpoints. Refuses (exit 2) a run that cannot make "
                                   "progress or that exceeds the engine's limits (see "
                                   "docs/reliability.md, 'Limits').")
    add_scenario(p, "scenario YAML file (with a reliability: section)", "checkpoint.interval_min=30")
    p.add_argument("--replicas", type=positive_int, default=200,
                   help="Monte Carlo replicas (default 200, at most 100000)")
    p.add_argument("--interval-sweep", type=parse_sweep, metavar="START:STOP:STEP|auto",
                   help="checkpoint intervals to compare, in minutes (STOP included); warns when "
                        "the best is on an edge of the grid; 'auto' = --optimize-interval")
    p.add_argument("--optimize-interval", action="store_true",
                   help="find the best checkpoint interval by golden-section search between "
                        "Young/4 and 4 x Daly (common random numbers)")
    p.add_argument("--seed", type=non_negative_int, default=None, help="root seed (default: the scenario's)")
    p.add_argument("--engine", choices=(*STEP_ENGINES, *LOOPS), default=None,
                   help="engine of the step time, as in 'simcluster run': des (default) or "
                        "analytical; 'fast' and 'simpy' are the old spelling of --loop")
    p.add_argument("--fast", action="store_true", help="same as --engine analytical (as in 'run')")
    p.add_argument("--loop", choices=LOOPS, default=None,
                   help="event loop of the horizon engine: fast (default) or simpy; identical results")
    p.add_argument("--contention", choices=CONTENTION_MODES, default="auto",
                   help="Tier B contention of the step, as in 'simcluster run' (default auto)")
    p.add_argument("--jobs", type=job_count, default=1,
                   help=f"worker processes (default 1, at most {MAX_JOBS})")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(handler=handle)
