"""``simcluster sweep``: argparse wiring and handler (the engine is :mod:`simcluster.sweep`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simcluster.cli_args import add_scenario, job_count, positive_int, whole_number
from simcluster.sweep.limits import MAX_GOODPUT, MAX_RERANK, RESULT_FORMATS

OBJECTIVE_CHOICES = ("step_time_s", "tokens_per_s", "mfu", "time_to_train_days", "cost_usd",
                     "capital_usd", "cash_usd", "goodput_time_to_train_days", "time", "cost",
                     "cash", "goodput")
#: Where results go by default: ``runs/sweep/<scenario file stem>/`` (``--out`` to change).
DEFAULT_OUT = Path("runs") / "sweep"


def _headroom(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        return _non_negative_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected GiB >= 0 or auto, got {text!r}") from None


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sweep`` to the subcommands of ``simcluster``."""
    p = sub.add_parser(
        "sweep", help="search every valid layout (and hardware option, varied key, checkpoint "
                      "interval); rank by time, cost, goodput",
        description="Enumerate every layout the loader accepts, check memory exactly, time the "
                    "ones that fit with the analytical model, re-time the best with the DES, and "
                    "print the ranked table, the Pareto front (time vs cost) and the rejection "
                    "counts. A 'sweep:' section in the scenario file states the same choices "
                    "(docs/sweep.md); flags override it. Results are written incrementally to "
                    "OUT/results.parquet (--results csv or csv.gz adds a CSV copy); rerun the "
                    "same command to resume, or "
                    "add --rerank, --goodput, --top or --objective to extend a finished sweep in "
                    "place (its stored rows are reused).")
    add_scenario(p, "scenario YAML file (its sweep: section, if any, is used)",
                 "training.tokens=1e12 (for every point)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="sweep any scenario key (every combination), e.g. cluster.nodes=64,128 "
                        "or checkpoint.interval_min=30,60,120")
    p.add_argument("--option", action="append", default=[], metavar="'NAME: KEY=V1,V2 ...'",
                   help="add a hardware option beside the file's (its lists are swept inside it "
                        "alone, where --vary multiplies every option), e.g. '2gpu-boxes: "
                        "cluster.topology=box-2x3090ti-nvlink cluster.nodes=16,32 cost=buy'")
    p.add_argument("--search", action="append", default=[], metavar="AXIS=V1,V2,...",
                   help="restrict a layout axis (tp, pp, cp, ep, micro_batch, schedule, "
                        "virtual_stages, recompute, sequence_parallel, zero_stage) or widen "
                        "offload (none unless searched: offload=none,optimizer,optimizer+params) "
                        "or expert_tp (MoE: 1 and tp unless searched, e.g. expert_tp=1,2,4)")
    p.add_argument("--layouts", choices=("search", "fixed"),
                   help="search every valid layout (default) or keep the file's layout")
    p.add_argument("--objective", choices=OBJECTIVE_CHOICES, metavar="NAME",
                   help=f"rank by one of {', '.join(OBJECTIVE_CHOICES)} (default step_time_s); "
                        "time, cost, cash and goodput stand for time_to_train_days, cost_usd "
                        "(amortised when buying), cash_usd (the rent, or capital + energy) and "
                        "goodput_time_to_train_days (the last needs --goodput N)")
    p.add_argument("--gpus", type=positive_int, metavar="N",
                   help="search layouts on N GPUs (sets cluster.nodes = N / GPUs per node)")
    p.add_argument("--top", type=positive_int, help="rows of the ranked table (default 10)")
    p.add_argument("--rerank", type=whole_number(0, MAX_RERANK), metavar="K",
                   help="re-time the best K with the discrete-event engine and re-rank them "
                        f"(at most {MAX_RERANK})")
    p.add_argument("--goodput", type=whole_number(0, MAX_GOODPUT), metavar="N",
                   help="run the reliability engine on the best N (optimal checkpoint interval, "
                        f"or each --vary checkpoint.interval_min value; at most {MAX_GOODPUT})")
    p.add_argument("--replicas", type=positive_int, default=100,
                   help="Monte Carlo replicas of the reliability pass (default 100)")
    _add_constraints(p)
    p.add_argument("--contention", choices=("auto", "on", "off"), default="auto",
                   help="Tier B contention, as for 'simcluster run' (default auto)")
    p.add_argument("-j", "--jobs", type=job_count, default=None,
                   help="worker processes (or Ray CPUs); default: every CPU this process may use, "
                        "at most one per work chunk. Results do not depend on it")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local processes (default) or Ray (pip install 'simcluster[distributed]')")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="an existing Ray cluster (e.g. ray://head:10001 or auto); default: a "
                        "local Ray")
    p.add_argument("--out", metavar="DIR",
                   help="results directory (default runs/sweep/<scenario file name>)")
    p.add_argument("--results", choices=RESULT_FORMATS, default="parquet",
                   help="parquet (default): OUT/results.parquet alone; csv or csv.gz: also "
                   "OUT/results.csv or OUT/results.csv.gz (the planning sweep's CSV is ~180 MB, "
                   "its gzip ~10x smaller)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(handler=handle)


def _add_constraints(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-gpus", type=positive_int, help="skip settings with more GPUs")
    p.add_argument("--max-cost", type=_non_negative_float, metavar="USD",
                   help="rank only layouts whose cost to train is at most USD")
    p.add_argument("--max-days", type=_non_negative_float, metavar="DAYS",
                   help="rank only layouts whose time to train is at most DAYS")
    p.add_argument("--headroom-gib", type=_headroom, metavar="GIB|auto",
                   help="memory to keep free on every GPU; auto (default): a layout must fit "
                   "with the caching allocator at the worst published fragmentation (33%%, "
                   "GMLake) instead of the memory model's average (15%%)")


def handle(args: argparse.Namespace) -> int:
    """Handler of ``simcluster sweep``; returns the exit status."""
    from simcluster.sweep.api import Request, execute
    from simcluster.sweep.driver import Execution
    from simcluster.sweep.report import sweep_dict, sweep_text

    constraints = {"max_gpus": args.max_gpus, "max_cost_usd": args.max_cost,
                   "max_days": args.max_days, "memory_headroom_gib": args.headroom_gib}
    request = Request(args.scenario, tuple(args.set), tuple(args.vary), tuple(args.search),
                      args.layouts, args.objective, args.top, args.rerank, args.goodput,
                      {k: v for k, v in constraints.items() if v is not None}, args.contention,
                      args.gpus, tuple(args.option))
    out = Path(args.out) if args.out else DEFAULT_OUT / Path(args.scenario).stem
    execution = Execution(args.jobs, args.backend, args.ray_address, out, not args.quiet,
                          args.replicas, args.results)
    outcome = execute(request, execution)
    top = args.top or outcome.plan.top
    print(json.dumps(sweep_dict(outcome, top), indent=2) if args.json
          else sweep_text(outcome, top))
    return 0
