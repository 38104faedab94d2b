"""The ``simcluster`` command line: a thin layer over the library API.

Bad input exits with status 2 and one line naming the file, the key path and what was expected;
internal errors exit with status 1.

Start-up cost: building the parser imports only argparse and constants; each handler imports the
modules it needs (numpy, networkx, SimPy and the spec loader load on demand), so ``--help`` and
``--version`` stay cheap and ``run --fast`` imports no flow or DES engine.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from simcluster import cli_collective, cli_reliability, cli_report, cli_sweep, cli_topology
from simcluster.errors import SpecError

Handler = Callable[[argparse.Namespace], int]

#: The ``catalog`` subcommand's kinds (:data:`simcluster.catalog.KINDS`; pinned by a test so the
#: parser need not import the catalog and its YAML loader).
CATALOG_KINDS = ("accelerators", "attention", "models", "reliability", "stacks", "topologies")


def version() -> str:
    """The installed distribution's version (``importlib.metadata``), else the package's."""
    from importlib import metadata  # about 10 ms of imports: only when asked

    try:
        return metadata.version("simcluster")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        from simcluster import __version__
        return __version__


class _VersionAction(argparse.Action):
    """``--version``: like argparse's, but reads the installed version only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"simcluster {version()}")
        parser.exit()


def _validate(args: argparse.Namespace) -> int:
    from simcluster.spec.loader import dump_scenario, load_scenario, to_yaml

    if args.coverage:
        from simcluster.report.validation import coverage_table

        print(coverage_table())
        if args.scenario is None:
            return 0
    if args.scenario is None:
        raise SpecError("validate", "expected a scenario YAML file, or --coverage")
    scenario = load_scenario(args.scenario, args.set)
    print(to_yaml(dump_scenario(scenario)), end="")
    _validate_sweep(args.scenario, args.set)
    return 0


def _validate_sweep(path: str, overrides: Sequence[str]) -> None:
    """Check the file's ``sweep:`` section too (every setting loads); say so on stderr."""
    from simcluster import catalog
    from simcluster.spec.loader import SWEEP_KEY

    if SWEEP_KEY not in catalog.load_yaml_file(Path(path)):
        return
    from simcluster.sweep.api import Request, prepare

    _, plan, _ = prepare(Request(path, tuple(overrides)))
    print(f"# sweep: {len(plan.settings)} settings, each loads; objective {plan.objective}",
          file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    from simcluster.report.run import run_text
    from simcluster.run.single import simulate
    from simcluster.spec.loader import load_scenario

    engine = "analytical" if args.fast else "des"
    run = simulate(load_scenario(args.scenario, args.set), contention=args.contention, engine=engine)
    if args.trace is not None:
        _write_trace(run.step, args.trace)
    result = run.to_dict()
    print(json.dumps(result, indent=2) if args.json else run_text(result))
    return 0


def _write_trace(step: object, path: str) -> None:
    from simcluster.sim import DesResult, write_trace

    if not isinstance(step, DesResult):
        raise SpecError("--trace", "needs the discrete-event engine (drop --fast)")
    try:
        write_trace(step, path)
    except OSError as err:
        raise SpecError("--trace", f"cannot write {path}: {err.strerror}") from None


def _catalog(args: argparse.Namespace) -> int:
    from simcluster.report.catalog import TABLES

    kinds = [args.kind] if args.kind else list(CATALOG_KINDS)
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
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(sub)
    p = sub.add_parser("validate", help="check a scenario and print it fully resolved as YAML; "
                       "--coverage: what simcluster is validated on, and how well")
    p.add_argument("scenario", nargs="?", help="scenario YAML file")
    p.add_argument("--coverage", action="store_true",
                   help="print the published runs simcluster is validated on, per accelerator x "
                        "stack x precision x model family, with the median, p90 and mean error "
                        "(generated from the validation tests)")
    _add_set(p)
    p.set_defaults(handler=_validate)
    cli_topology.add_parser(sub)
    cli_collective.add_parser(sub)
    cli_reliability.add_parser(sub)
    cli_sweep.add_parser(sub)
    cli_report.add_parser(sub)
    p = sub.add_parser("catalog", help="list the presets (accelerators, attention kernels, models, "
                       "reliability rates, software stacks, topologies)")
    p.add_argument("kind", nargs="?", choices=CATALOG_KINDS,
                   help="the kind of preset to list (default: every kind)")
    p.set_defaults(handler=_catalog)
    return parser


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
