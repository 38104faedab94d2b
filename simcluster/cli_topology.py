"""``simcluster topology show``: argparse wiring and handler, with up-front size limits.

The summary builds the whole link graph and solves one max-flow for the bisection bandwidth, and
``--dot`` writes every vertex and link, so both grow with the cluster. Rather than run for minutes,
the handler refuses, before any work, a cluster beyond :data:`MAX_SUMMARY_GPUS` or
:data:`MAX_DOT_GPUS` with exit status 2 and a line naming ``--nodes`` and the limit. Measured on
2 cores: the summary of 16 384 GPUs (2048 DGX H100 or 1024 DGX-2) takes about 4 s, of 32 768 about
12 s; the DOT text of 16 384 GPUs is 7 MB (2 s), already beyond what Graphviz lays out.
"""

from __future__ import annotations

import argparse
import json
import sys

from simcluster.cli_args import positive_int
from simcluster.errors import SpecError

#: Most GPUs ``topology show`` summarizes (graph build and max-flow min cut).
MAX_SUMMARY_GPUS = 16384
#: Most GPUs ``topology show --dot`` renders (the DOT text is about 450 bytes per GPU).
MAX_DOT_GPUS = 16384
#: From this many GPUs ``topology show`` says on stderr what it is doing (about 2 s and more).
PROGRESS_GPUS = 4096


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topology show`` to the subcommands of ``simcluster``."""
    topo = sub.add_parser("topology", help="inspect a topology")
    tsub = topo.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = tsub.add_parser("show", help="GPUs, per-GPU bandwidths, bisection bandwidth, Graphviz")
    p.add_argument("topology", help="preset name (see 'simcluster catalog topologies') or file")
    p.add_argument("--nodes", type=positive_int, default=1,
                   help=f"number of nodes (default 1; at most {MAX_SUMMARY_GPUS} GPUs in all)")
    p.add_argument("--dot", nargs="?", const="-", metavar="FILE",
                   help="write the graph as Graphviz DOT to FILE (stdout if no FILE)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(handler=show)


def check_size(nodes: int, gpus_per_node: int, dot: bool) -> None:
    """Refuse a cluster larger than ``topology show`` (or ``--dot``) handles in about 10 s.

    Raises
    ------
    SpecError
        ``--nodes``, naming the GPU count and the limit.
    """
    limit = MAX_DOT_GPUS if dot else MAX_SUMMARY_GPUS
    gpus = nodes * gpus_per_node
    if gpus > limit:
        what = "topology show --dot" if dot else "topology show"
        raise SpecError("--nodes", f"{nodes} nodes are {gpus} GPUs; {what} handles at most "
                                   f"{limit} GPUs ({limit // gpus_per_node} nodes of this topology)")


def show(args: argparse.Namespace) -> int:
    """Handler of ``simcluster topology show``; returns the exit status."""
    from simcluster.report.topology import summary_dict, summary_text
    from simcluster.run.files import write_atomic
    from simcluster.spec.loader import load_topology
    from simcluster.topology import build_graph, check_nodes, summarize, to_dot

    topo = load_topology(args.topology)
    check_nodes(topo, args.nodes)
    check_size(args.nodes, topo.gpus_per_node, args.dot is not None)
    gpus = args.nodes * topo.gpus_per_node
    if gpus >= PROGRESS_GPUS:
        what = "writing its DOT graph" if args.dot is not None else "solving its bisection (max-flow)"
        print(f"topology show: building the link graph of {gpus:,} GPUs and {what}; this takes "
              "a few seconds", file=sys.stderr, flush=True)
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
