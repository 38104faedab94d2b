"""Contention factors of a training step from Tier B (docs/collectives.md, "Contention in a training step").

Tier A prices each collective as if its group were alone on the fabric (with its share of the node's
NICs). :func:`contention` runs, on the scenario's link graph, all the data-parallel gradient
reductions of the step at once (every DP group's ring), and separately all the pipeline sends of a
steady-state 1F1B slot at once (every rank of stage ``i`` to its peer in stage ``i+1``),
and divides each group's concurrent time by its time alone on a healthy fabric. The result is a
multiplicative slowdown per breakdown category, computed once per scenario ("per phase, not per
message"), for the step model to apply to its exposed DP and PP time.

The factors are bandwidth-term slowdowns (flows of a nominal 1 GiB, no latency): latency does not
contend, and DP reductions are large. Rank placement is Megatron's (TP fastest, then CP, DP, PP;
:mod:`simcluster.perf.comm_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simcluster.flows.capacity import degrade, link_capacities, nic_edges
from simcluster.flows.decompose import Context, decompose
from simcluster.flows.engine import simulate
from simcluster.flows.plan import FlowClass, Phase, Transfer
from simcluster.flows.routes import Router
from simcluster.perf.cache import Keyed, keyed_topology, memoised
from simcluster.spec.hardware import TopologySpec
from simcluster.spec.scenario import Scenario
from simcluster.topology import Edge, build_graph, gpu_vertex

#: Bytes per flow of the bandwidth-only runs (any size gives the same ratio without latency).
NOMINAL_BYTES = float(2**30)


def dp_groups(s: Scenario) -> list[list[int]]:
    """Every data-parallel group's global ranks (stride ``tp*cp``; Megatron order)."""
    par = s.parallelism
    return dp_groups_of(par.tp * par.cp, par.dp, par.pp)


def dp_groups_of(inner: int, dp: int, pp: int) -> list[list[int]]:
    """:func:`dp_groups` of ``dp`` ranks at stride ``inner = tp*cp``, ``pp`` stages."""
    block = inner * dp
    return [[stage * block + offset + i * inner for i in range(dp)]
            for stage in range(pp) for offset in range(inner)]


def pp_pairs(s: Scenario) -> list[tuple[int, int]]:
    """Every (sender, receiver) of one pipeline transfer slot: each rank of stage ``i`` to ``i+1``.

    In steady 1F1B a stage sends one message at a time (Megatron's batched
    ``send_forward_recv_backward``), so every GPU sends once and receives once; the backward
    direction is the mirror image on the other direction of each full-duplex link.
    """
    par = s.parallelism
    return pp_pairs_of(par.tp * par.cp * par.dp, par.pp)


def pp_pairs_of(block: int, pp: int) -> list[tuple[int, int]]:
    """:func:`pp_pairs` with ``block = tp*cp*dp`` ranks per stage."""
    return [(r, r + block) for r in range(block * (pp - 1))]


def contention(s: Scenario, spray: bool = True,
               degraded_nodes: Mapping[int, float] | None = None) -> dict[str, float]:
    """Slowdown of the step's DP reductions and PP sends from sharing the fabric (Tier B).

    Parameters
    ----------
    s : Scenario
        Its topology, ``cluster.nodes`` and parallel layout are used.
    spray : bool
        Spread inter-leaf flows over all spines (adaptive routing) rather than ECMP-hash them
        (:class:`simcluster.flows.routes.Router`).
    degraded_nodes : mapping of int to float, optional
        Node index -> factor on that node's NIC links (0.5: 400G -> 200G).

    Returns
    -------
    dict of str to float
        ``{"dp_comm": f, "pp_comm": f}``, each ``f >= 1`` (1 when the category has no traffic):
        the largest, over groups (or sends), of the time with all of them running at once on the
        (degraded) fabric over the time alone on a healthy one.
    """
    par = s.parallelism
    return dict(_contention(keyed_topology(s.cluster.topology), s.cluster.nodes,
                            par.tp * par.cp, par.dp, par.pp, spray,
                            tuple((degraded_nodes or {}).items())))


@memoised(maxsize=1024)
def _contention(topo: Keyed[TopologySpec], nodes: int, inner: int, dp: int, pp: int, spray: bool,
                degraded_nodes: tuple[tuple[int, float], ...]) -> tuple[tuple[str, float], ...]:
    """:func:`contention` on what it reads (``inner = tp*cp``), memoised: a sweep's layouts share
    a few (inner, dp, pp) shapes, and one solve takes ~0.1 s on 128 nodes."""
    graph = build_graph(topo.value, nodes)
    ctx = Context(Router(graph, spray), topo.value)
    factors: dict[Edge, float] = {}
    for node, factor in degraded_nodes:
        factors = degrade(nic_edges(graph, node), factor, factors)
    rings = [decompose(ctx, "all_reduce", "ring", g, NOMINAL_BYTES)
             for g in dp_groups_of(inner, dp, pp) if len(g) > 1]
    sends = [_send(ctx, a, b) for a, b in pp_pairs_of(inner * dp, pp)]
    return (("dp_comm", _slowdown(graph, rings, factors)),
            ("pp_comm", _slowdown(graph, sends, factors)))


def _send(ctx: Context, a: int, b: int) -> Transfer:
    usage = ctx.router.usage(gpu_vertex(ctx.topo, a), gpu_vertex(ctx.topo, b))
    return Transfer((Phase((FlowClass(usage, NOMINAL_BYTES),)),))


def _slowdown(graph: object, transfers: Sequence[Transfer], degraded: Mapping[Edge, float]) -> float:
    """Largest concurrent-over-alone time ratio of ``transfers`` (1 when there are none)."""
    if not transfers:
        return 1.0
    edges = set().union(*(t.edges() for t in transfers))
    healthy = link_capacities(graph, edges)
    together = simulate(transfers, link_capacities(graph, edges, degraded=degraded)).finish_s
    return max(1.0, *(t / alone_time_s(x, healthy) for t, x in zip(together, transfers, strict=True)))


def alone_time_s(transfer: Transfer, capacity_Bps: Mapping[Edge, float]) -> float:
    """Time of ``transfer`` alone; closed form for one class (``bytes / min_e c_e/(w_e m)``)."""
    if len(transfer.phases) == 1 and len(transfer.phases[0].classes) == 1:
        phase = transfer.phases[0]
        c = phase.classes[0]
        if not c.usage:
            return phase.latency_s
        rate = min(capacity_Bps[e] / (w * c.multiplicity) for e, w in c.usage)
        return transfer.start_s + phase.latency_s + c.bytes_per_flow / rate
    return simulate([transfer], capacity_Bps).finish_s[0]
