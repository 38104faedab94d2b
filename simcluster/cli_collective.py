"""``simcluster collective``: time one collective like nccl-tests, with Tier A or Tier B.

``--bytes SIZE`` prints one result; ``--bytes A:B`` doubles the size from A to B (nccl-tests
``-b A -e B -f 2``) and prints the nccl-tests-style table. The group is the first ``--gpus`` GPUs
(default: all GPUs of ``--nodes`` nodes), consecutive ranks (stride 1). Bad sizes, ops and
algorithms raise :class:`~simcluster.errors.SpecError` naming the flag (exit status 2).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcluster import units
from simcluster.cli_args import positive_int
from simcluster.errors import SpecError
from simcluster.perf.collectives_formulas import OPS, check_op

if TYPE_CHECKING:  # the handler imports these (numpy, networkx) only when it runs
    from simcluster.perf.collectives import CollectiveTime
    from simcluster.report.collective import CollectiveRow
    from simcluster.spec.hardware import TopologySpec

#: A sweep doubles the size at most this many times (1 B to 2**40 B).
MAX_SIZES = 41
#: Most GPUs of a Tier B cluster: the link graph, routes and flow incidence grow with the GPUs
#: (measured on 2 cores: a 1K:8G all_reduce sweep takes about 5 s at the limit, 10 s at twice it).
MAX_TIER_B_GPUS = 8192


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``collective`` subcommand to the subparsers of ``simcluster.cli``."""
    p = sub.add_parser("collective", help="time a collective like nccl-tests (time, algbw, busbw)")
    p.add_argument("--topology", required=True, help="preset name or topology file")
    p.add_argument("--nodes", type=positive_int, default=1, help="nodes (default 1)")
    p.add_argument("--gpus", type=positive_int, default=None,
                   help="ranks in the group (default: every GPU of the nodes)")
    p.add_argument("--op", default="all_reduce", help=f"one of {', '.join(OPS)} (default all_reduce)")
    p.add_argument("--bytes", required=True, metavar="SIZE|A:B",
                   help="size (1K, 64MiB, 8G; bare K/M/G are binary) or a doubling range A:B")
    p.add_argument("--algo", default="auto", help="auto (default) or an algorithm of the op")
    p.add_argument("--tier", choices=("A", "B"), default="A",
                   help="A: calibrated analytical (default); B: flow-level max-min on the graph")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--plot", metavar="FILE", help="write busbw against size as a PNG (matplotlib)")
    p.set_defaults(handler=run_collective)


def parse_sizes(text: str) -> list[float]:
    """``SIZE`` -> ``[SIZE]``; ``A:B`` -> ``A, 2A, 4A, ...`` up to ``B`` (nccl-tests ``-f 2``).

    Raises
    ------
    SpecError
        ``--bytes`` for an unparsable size, a negative one, ``A > B`` or a range from 0.
    """
    parts = text.split(":")
    if len(parts) > 2:
        raise SpecError("--bytes", f"expected SIZE or A:B, got {text!r}")
    try:
        sizes = [units.parse_size(p.strip()) for p in parts]
    except ValueError as err:
        raise SpecError("--bytes", str(err)) from None
    if any(s < 0 for s in sizes):
        raise SpecError("--bytes", f"sizes must be >= 0, got {text!r}")
    if len(sizes) == 1:
        return sizes
    return _doubling(sizes[0], sizes[1], text)


def _doubling(low: float, high: float, text: str) -> list[float]:
    if low <= 0 or low > high:
        raise SpecError("--bytes", f"a range A:B needs 0 < A <= B, got {text!r}")
    out = [low]
    while out[-1] * 2 <= high and len(out) < MAX_SIZES:
        out.append(out[-1] * 2)
    return out


def _check(args: argparse.Namespace, topo: TopologySpec) -> int:
    """Validate op, algorithm and group size; return the group size."""
    from simcluster.flows.decompose import FLOW_ALGOS
    from simcluster.perf.collectives import ALGOS
    from simcluster.topology import check_nodes

    check_op(args.op, "--op")
    algos = ALGOS if args.tier == "A" else ("auto", *FLOW_ALGOS[args.op])
    if args.algo not in algos:
        raise SpecError("--algo", f"unknown {args.algo!r} for tier {args.tier}; expected one of "
                        f"{', '.join(algos)}")
    check_nodes(topo, args.nodes)
    available = args.nodes * topo.gpus_per_node
    gpus = available if args.gpus is None else int(args.gpus)
    if gpus > available:
        raise SpecError("--gpus", f"{gpus} exceeds the {available} GPUs of {args.nodes} node(s)")
    if args.tier == "B":
        check_tier_b(args.nodes, topo.gpus_per_node)
    return gpus


def check_tier_b(nodes: int, gpus_per_node: int) -> None:
    """Refuse a Tier B cluster beyond :data:`MAX_TIER_B_GPUS` GPUs, before any work.

    Tier B builds the graph of every node given (not only the group's), so the limit is on
    ``--nodes``.

    Raises
    ------
    SpecError
        ``--nodes``, naming the GPU count and the limit, and pointing to Tier A.
    """
    gpus = nodes * gpus_per_node
    if gpus > MAX_TIER_B_GPUS:
        raise SpecError("--nodes", f"{nodes} nodes are {gpus} GPUs; Tier B handles at most "
                                   f"{MAX_TIER_B_GPUS} GPUs ({MAX_TIER_B_GPUS // gpus_per_node} "
                                   f"nodes of this topology); use --tier A")


def _timer(args: argparse.Namespace, topo: TopologySpec, gpus: int) -> Callable[[float], CollectiveTime]:
    """size -> result for the chosen tier (Tier B's graph, routes and incidence are built once)."""
    from simcluster.flows.tier_b import FlowModel
    from simcluster.perf.collectives import collective_time, comm_group

    if args.tier == "B":
        model = FlowModel(topo, args.nodes)
        return lambda size: model.collective_time(args.op, size, gpus, 1, args.algo)
    group = comm_group(topo, gpus, 1)
    return lambda size: collective_time(args.op, size, group, args.algo)


def _rekeyed(err: SpecError) -> SpecError:
    """A library error about the algorithm, named by its flag."""
    return SpecError("--algo", err.message) if err.key == "collective.algo" else err


#: Figure formats ``--plot`` writes (matplotlib's raster and vector formats people open).
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp", ".eps", ".tif", ".tiff")


def check_plot_path(path: str) -> None:
    """``SpecError`` unless ``path`` ends in a figure format (checked before anything runs)."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise SpecError("--plot", f"{path}: expected a figure file ending in "
                        f"{', '.join(PLOT_SUFFIXES)}, got {suffix or 'no suffix'!r}")


def run_collective(args: argparse.Namespace) -> int:
    """Handler of ``simcluster collective``; returns the exit status."""
    from simcluster.report.collective import plot_busbw, row
    from simcluster.spec.loader import load_topology

    if args.plot:
        check_plot_path(args.plot)
    topo = load_topology(args.topology)
    sizes = parse_sizes(args.bytes)
    gpus = _check(args, topo)
    timer = _timer(args, topo, gpus)
    try:
        rows = [row(size, timer(size)) for size in sizes]
    except SpecError as err:
        raise _rekeyed(err) from None
    header = _header(args, topo, gpus)
    title = (f"{args.op} on {gpus} GPUs ({args.nodes} x {topo.name}), tier {args.tier}, "
             f"algo {args.algo}")
    if args.plot:
        plot_busbw(rows, args.plot, title)
    print(_render(args, header, title, rows))
    return 0


def _header(args: argparse.Namespace, topo: TopologySpec, gpus: int) -> dict[str, Any]:
    return {"topology": topo.name, "nodes": args.nodes, "gpus": gpus, "op": args.op,
            "algo": args.algo, "tier": args.tier}


def _render(args: argparse.Namespace, header: dict[str, Any], title: str,
            rows: list[CollectiveRow]) -> str:
    from simcluster.report.collective import as_json, single_text, sweep_table

    if args.json:
        return json.dumps(as_json(header, rows), indent=2)
    if ":" not in args.bytes:
        return single_text(title, rows[0])
    return f"# {title}\n{sweep_table(rows)}"
