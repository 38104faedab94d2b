"""Collectives as flow classes on the link graph (Tier B; docs/collectives.md, "Collectives").

``nbytes`` follows nccl-tests ``size`` as in Tier A. Ranks are global GPU indices (node-major).

* **Ring** (all-reduce, all-gather, reduce-scatter): ``C`` channels, ``C`` = group members per
  node. Channel ``c`` rotates each node's chain by ``c`` and alternates its direction node by node,
  so it leaves node ``k`` and enters node ``k+1`` through GPUs of the same local index, and the
  ``C`` channels use ``C`` different NICs of every node (NCCL's rings, one per NIC; channel 0 is
  :func:`simcluster.topology.ring_order`). Each channel is one class: its ``n`` hops move
  ``passes*(n-1)/n * S/C`` bytes each and finish together (ring synchronisation).
* **Broadcast**: the same channels cut open into chains from the root (the first rank), ``S/C``
  bytes per hop.
* **Tree** (all-reduce): per channel the two trees of :func:`simcluster.topology.double_binary_tree`
  over the nodes, the channel's first GPU of each node as the node's head and a chain inside the
  node; each tree is a class whose edges carry ``S/(2C)`` up (reduce) and down (broadcast),
  pipelined, so concurrently.
* **Hierarchical** (all-reduce): three phases: a ring reduce-scatter inside every node, a ring
  all-reduce of ``S/g`` across nodes per local position (per rail), a ring all-gather inside.
* **Pairwise** (all-to-all): one flow of ``S/n`` from every rank to every other rank.
* **P2P** (send/recv): one flow of ``S`` from the first rank to the second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from simcluster.errors import SpecError
from simcluster.flows.plan import FlowClass, Phase, Transfer, Usage, group_classes, merge_usage
from simcluster.flows.routes import Router
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import double_binary_tree, gpu_vertex

#: Tier B algorithms per op.
FLOW_ALGOS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "hierarchical"),
    "all_gather": ("ring",),
    "reduce_scatter": ("ring",),
    "broadcast": ("ring",),
    "all_to_all": ("pairwise",),
    "send_recv": ("p2p",),
}

#: Largest all-to-all Tier B decomposes (n*(n-1) flows).
MAX_PAIRWISE_RANKS = 512


@dataclass(frozen=True, slots=True)
class Context:
    """What a decomposition needs: the routes, the topology and the nodes it may leave out.

    Attributes
    ----------
    router : Router
        Routes of the cluster's link graph.
    topo : TopologySpec
        The cluster design.
    skip : frozenset[int]
        Nodes whose intra-node hops are left out because another node's are identical
        (:func:`symmetric_skip`); empty for an exact, full decomposition.
    """

    router: Router
    topo: TopologySpec
    skip: frozenset[int] = frozenset()


def symmetric_skip(topo: TopologySpec, ranks: Sequence[int], keep: Iterable[int] = ()) -> frozenset[int]:
    """Nodes whose intra-node traffic duplicates an earlier node's, for one collective alone.

    Two nodes at positions of the same parity holding the same local GPUs carry the same
    intra-node flows, so their link rows in the max-min problem are identical and one of them is
    enough (an exact reduction: max-min gives identical flows identical rates). The shared
    switch-to-switch part of every route is always kept. Nodes in ``keep`` (e.g. with degraded
    links) are never left out or used to stand for others. Valid only for rings (all nodes of a
    key carry identical flows; trees and broadcast chains ignore it) when the collective is
    simulated alone.
    """
    seen: set[object] = set()
    skip = set()
    kept = set(keep)
    for position, members in enumerate(by_node(topo, ranks)):
        node = members[0] // topo.gpus_per_node
        key: object = node if node in kept else (position % 2, tuple(r % topo.gpus_per_node
                                                                     for r in members))
        if key in seen:
            skip.add(node)
        seen.add(key)
    return frozenset(skip)


def by_node(topo: TopologySpec, ranks: Sequence[int]) -> list[list[int]]:
    """``ranks`` grouped by node, nodes ascending, ranks ascending inside each."""
    groups: dict[int, list[int]] = {}
    for rank in sorted(ranks):
        groups.setdefault(rank // topo.gpus_per_node, []).append(rank)
    return [groups[node] for node in sorted(groups)]


def ring_channels(topo: TopologySpec, ranks: Sequence[int]) -> list[list[int]]:
    """The rank order of each ring channel (one per group member of the least-filled node).

    Channel ``c``: each node's members rotated by ``c``, reversed on every other node.
    """
    nodes = by_node(topo, ranks)
    channels = []
    for c in range(min(len(members) for members in nodes)):
        order: list[int] = []
        for position, members in enumerate(nodes):
            k = c % len(members)
            chain = members[k:] + members[:k]
            order.extend(chain if position % 2 == 0 else reversed(chain))
        channels.append(order)
    return channels


def _hops(ctx: Context, pairs: Sequence[tuple[int, int]]) -> Usage:
    """Summed usage of the routes of ``pairs`` of ranks (one flow over all of them).

    Edges owned by a node of ``ctx.skip`` are left out (another node's identical rows stand for
    them); between two such nodes only the shared fabric part of the route is routed.
    """
    return merge_usage(_hop(ctx, a, b) for a, b in pairs)


def _hop(ctx: Context, a: int, b: int) -> Usage:
    gpn, skip = ctx.topo.gpus_per_node, ctx.skip
    na, nb = a // gpn, b // gpn
    if na not in skip and nb not in skip:
        return ctx.router.usage(gpu_vertex(ctx.topo, a), gpu_vertex(ctx.topo, b))
    if na == nb:
        return ()
    src, dst = gpu_vertex(ctx.topo, a), gpu_vertex(ctx.topo, b)
    if na in skip and nb in skip:
        fabric = ctx.router.fabric_usage(src, dst)
        if fabric is not None:
            return fabric
    return tuple((e, w) for e, w in ctx.router.usage(src, dst)
                 if ctx.router.node_of(e[0]) not in skip and ctx.router.node_of(e[1]) not in skip)


def _cycle(order: Sequence[int]) -> list[tuple[int, int]]:
    return [(order[i], order[(i + 1) % len(order)]) for i in range(len(order))]


def _chain(order: Sequence[int]) -> list[tuple[int, int]]:
    return [(order[i], order[i + 1]) for i in range(len(order) - 1)]


def ring_phase(ctx: Context, ranks: Sequence[int], per_hop_bytes: float,
               open_chain: bool = False) -> Phase:
    """One class per ring channel, each hop moving ``per_hop_bytes / C`` (identical ones merged)."""
    channels = ring_channels(ctx.topo, ranks)
    if open_chain:  # the chain's ends make its first and last nodes differ from the others
        ctx = replace(ctx, skip=frozenset())
        channels = [_from_root(order, ranks[0]) for order in channels]
    pairs = _chain if open_chain else _cycle
    share = per_hop_bytes / len(channels)
    return Phase(group_classes(FlowClass(_hops(ctx, pairs(order)), share)
                               for order in channels))


def _from_root(order: list[int], root: int) -> list[int]:
    """The cycle ``order`` rotated to start at ``root`` (a broadcast chain)."""
    k = order.index(root)
    return order[k:] + order[:k]


def tree_phase(ctx: Context, ranks: Sequence[int], nbytes: float) -> Phase:
    """Double binary tree all-reduce: two classes per channel, ``S/(2C)`` each way on each edge."""
    ctx = replace(ctx, skip=frozenset())  # tree positions differ by node: no symmetric rows
    nodes = by_node(ctx.topo, ranks)
    channels = min(len(m) for m in nodes)
    classes = []
    for c in range(channels):
        chains = [m[c % len(m):] + m[:c % len(m)] for m in nodes]
        inside = [pair for chain in chains for pair in _chain(chain)]
        for parents in double_binary_tree(len(nodes)):
            across = [(chains[i][0], chains[p][0]) for i, p in enumerate(parents) if p >= 0]
            edges = inside + across
            both = edges + [(b, a) for a, b in edges]
            classes.append(FlowClass(_hops(ctx, both), nbytes / (2 * channels)))
    return Phase(group_classes(classes))


def hierarchical_phases(ctx: Context, ranks: Sequence[int],
                        nbytes: float) -> tuple[Phase, ...]:
    """Intra-node ring reduce-scatter, per-rail inter-node ring all-reduce of S/g, all-gather."""
    nodes = by_node(ctx.topo, ranks)
    g, n_nodes = min(len(m) for m in nodes), len(nodes)
    intra = Phase(tuple(FlowClass(_hops(ctx, _cycle(m)), (g - 1) / g * nbytes)
                        for m in nodes if len(m) > 1))
    rails = [[m[j] for m in nodes] for j in range(g)]
    inter_bytes = 2 * (n_nodes - 1) / n_nodes * nbytes / g
    inter = Phase(tuple(FlowClass(_hops(ctx, _cycle(r)), inter_bytes) for r in rails))
    return intra, inter, intra


def pairwise_phase(ctx: Context, ranks: Sequence[int], nbytes: float) -> Phase:
    """All-to-all: every ordered pair of distinct ranks exchanges ``S/n``."""
    n = len(ranks)
    if n > MAX_PAIRWISE_RANKS:
        raise SpecError("collective.ranks", f"Tier B all-to-all decomposes at most "
                        f"{MAX_PAIRWISE_RANKS} ranks ({n} given); use Tier A")
    return Phase(group_classes(FlowClass(_hops(ctx, [(a, b)]), nbytes / n)
                               for a in ranks for b in ranks if a != b))


def decompose(ctx: Context, op: str, algo: str, ranks: Sequence[int], nbytes: float) -> Transfer:
    """Collective ``op`` of ``nbytes`` over ``ranks`` by ``algo`` as a :class:`Transfer`.

    Parameters
    ----------
    ctx : Context
        Routes, topology (node-major rank numbering) and nodes to leave out.
    op : str
        One of :data:`FLOW_ALGOS`' keys.
    algo : str
        One of ``FLOW_ALGOS[op]``.
    ranks : sequence of int
        Distinct global ranks, at least 2.
    nbytes : float
        nccl-tests ``size``, bytes.

    Returns
    -------
    Transfer
        Phases without latency (Tier B adds them per protocol:
        :func:`simcluster.flows.tier_b.phase_latencies_s`).
    """
    if algo not in FLOW_ALGOS.get(op, ()):
        raise SpecError("collective.algo", f"Tier B runs {op} with "
                        f"{', '.join(FLOW_ALGOS.get(op, ())) or 'nothing'}, not {algo!r}")
    n = len(ranks)
    if op == "send_recv":
        return Transfer((Phase((FlowClass(_hops(ctx, [(ranks[0], ranks[1])]), nbytes),)),))
    if algo == "tree":
        return Transfer((tree_phase(ctx, ranks, nbytes),))
    if algo == "hierarchical":
        return Transfer(hierarchical_phases(ctx, ranks, nbytes))
    if algo == "pairwise":
        return Transfer((pairwise_phase(ctx, ranks, nbytes),))
    if op == "broadcast":
        return Transfer((ring_phase(ctx, ranks, nbytes, open_chain=True),))
    passes = 2 if op == "all_reduce" else 1
    return Transfer((ring_phase(ctx, ranks, passes * (n - 1) / n * nbytes),))
