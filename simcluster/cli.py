"""The ``simcluster`` command line: a thin layer over the library API.

Bad input exits with status 2 and one line naming the file, the key path and what was expected;
internal errors exit with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence

from simcluster import catalog, cli_collective, cli_reliability
from simcluster.cli_args import positive_int
from simcluster.errors import SpecError
from simcluster.report.catalog import TABLES
from simcluster.report.run import run_text
from simcluster.report.topology import summary_dict, summary_text
from simcluster.run.files import write_atomic
from simcluster.run.single import simulate
from simcluster.sim import DesResult, write_trace
from simcluster.spec.loader import dump_scenario, load_scenario, load_topology, to_yaml
from simcluster.topology import build_graph, summarize, to_dot

Handler = Callable[[argparse.Namespace], int]


def _validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario, args.set)
    print(to_yaml(dump_scenario(scenario)), end="")
    return 0


def _run(args: argparse.Namespace) -> int:
    engine = "analytical" if args.fast else "des"
    run = simulate(load_scenario(args.scenario, args.set), contention=args.contention, engine=engine)
    if args.trace is not None:
        if not isinstance(run.step, DesResult):
            raise SpecError("--trace", "needs the discrete-event engine (drop --fast)")
        try:
            write_trace(run.step, args.trace)
        except OSError as err:
            raise SpecError("--trace", f"cannot write {args.trace}: {err.strerror}") from None
    result = run.to_dict()
    print(json.dumps(result, indent=2) if args.json else run_text(result))
    return 0


def _topology_show(args: argparse.Namespace) -> int:
    topo = load_topology(args.topology)
    if args.dot is not None:
        dot = to_dot(build_graph(topo, args.nodes))
        if args.dot == "-":
            print(dot, end="")
        else:
            write_atomic(args.dot, dot, "--dot")
        return 0
    summary = summarize(topo, args.nodes)
    print(json.dumps(summary_dict(topo, summary), indent=2) if args.json
          else summary_text(topo, summary))
    return 0


def _catalog(args: argparse.Namespace) -> int:
    kinds = [args.kind] if args.kind else list(catalog.KINDS)
    print("\n\n".join(f"{kind}\n{TABLES[kind]()}" for kind in kinds))
    return 0


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario key by its dotted path, e.g. parallelism.tp=4")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="simcluster",
        description="Simulate large-model training clusters: step time, memory, communication, "
                    "failures and checkpoints.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("run", help="estimate one training step: time, breakdown, MFU, memory, cost")
    p.add_argument("scenario", help="scenario YAML file")
    _add_set(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--fast", action="store_true",
                   help="closed-form (analytical) engine instead of the discrete-event simulation")
    p.add_argument("--trace", metavar="FILE",
                   help="write a Chrome/Perfetto trace of the simulated step (ui.perfetto.dev)")
    p.add_argument("--contention", choices=("auto", "on", "off"), default="auto",
                   help="Tier B flow-level contention of DP and PP traffic: auto (default) runs it "
                        "only on oversubscribed fabrics or degraded nodes")
    p.set_defaults(handler=_run)
    p = sub.add_parser("validate", help="check a scenario and print it fully resolved as YAML")
    p.add_argument("scenario", help="scenario YAML file")
    _add_set(p)
    p.set_defaults(handler=_validate)
    _add_topology(sub)
    cli_collective.add_parser(sub)
    cli_reliability.add_parser(sub)
    p = sub.add_parser("catalog", help="list the presets (accelerators, models, topologies)")
    p.add_argument("kind", nargs="?", choices=catalog.KINDS)
    p.set_defaults(handler=_catalog)
    return parser


def _add_topology(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topo = sub.add_parser("topology", help="inspect a topology")
    tsub = topo.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = tsub.add_parser("show", help="GPUs, per-GPU bandwidths, bisection bandwidth, Graphviz")
    p.add_argument("topology", help="preset name (see 'simcluster catalog topologies') or file")
    p.add_argument("--nodes", type=positive_int, default=1, help="number of nodes (default 1)")
    p.add_argument("--dot", nargs="?", const="-", metavar="FILE",
                   help="write the graph as Graphviz DOT to FILE (stdout if no FILE)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(handler=_topology_show)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simcluster`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except SpecError as err:
        print(f"simcluster: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0
    except Exception:
        traceback.print_exc()
        print("simcluster: internal error (a bug; please report it with the scenario)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
