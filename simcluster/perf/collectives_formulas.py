"""Raw alpha-beta (Hockney) costs of collective algorithms: the uncalibrated oracles of Tier A.

Each function is the closed form of one algorithm: ``alpha_s`` is the latency of one step (one
message), ``bandwidth_Bps`` the per-rank bandwidth that the step's bytes move at. No calibration
lives here; :mod:`simcluster.perf.collectives` feeds these functions calibrated numbers
(docs/collectives.md). Sizes follow nccl-tests (``doc/PERFORMANCE.md``):
``size_bytes`` is the per-rank buffer for all-reduce, broadcast and send/recv and the *total* array
for all-gather, reduce-scatter and all-to-all. Reduction arithmetic (the gamma term of
Thakur-Rabenseifner-Gropp) is not modelled: GPUs reduce at memory speed, far above link speed.

Sources: R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication Operations
in MPICH", IJHPCA 19(1), 2005 (cost comments of pmodels/mpich @6a79bf6 ``src/mpi/coll``); NVIDIA
nccl-tests @a0b82b2 ``doc/PERFORMANCE.md``; NVIDIA/nccl @5067397 ``src/graph/tuning.cc`` and
``src/graph/trees.cc``.
"""

from __future__ import annotations

from simcluster.errors import InvariantError, SpecError

#: Collective operations, named as in nccl-tests.
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")


def _lg(n: int) -> int:
    """``ceil(log2 n)`` for ``n >= 1`` (steps of a recursive or tree algorithm)."""
    return (n - 1).bit_length()


def check_op(op: str, key: str = "collective.op") -> None:
    """``SpecError`` at ``key`` unless ``op`` is one of :data:`OPS` (both tiers and the CLI)."""
    if op not in OPS:
        raise SpecError(key, f"unknown {op!r}; expected one of {', '.join(OPS)}")


def check_request(op: str, nbytes: float) -> None:
    """The checks every collective request passes first, in Tier A and Tier B alike: a known
    ``op`` and a size ``>= 0`` (NaN refused)."""
    check_op(op)
    if not nbytes >= 0:
        raise SpecError("collective.nbytes", f"must be >= 0, got {nbytes}")


#: Latency steps of one phase of an algorithm: (intra-node, inter-node) messages in sequence.
Steps = tuple[int, int]


def ring_steps(n: int, nodes: int, passes: int) -> Steps:
    """A flat ring of ``n`` ranks over ``nodes`` nodes: ``passes*(n-1)`` steps, of which
    ``passes*(nodes-1)`` cross a node boundary (NCCL tuning.cc ``nInterSteps``).

    ``passes`` is 2 for all-reduce (reduce-scatter, then all-gather), 1 otherwise.
    """
    inter = passes * (nodes - 1)
    return passes * (n - 1) - inter, inter


def tree_steps(nodes: int, per_node: int) -> Steps:
    """Double binary tree all-reduce: up and down a chain of ``per_node`` ranks in each node and a
    tree of depth ``ceil(lg nodes)`` over the nodes (NCCL tuning.cc Tree latency
    ``2((ppn-1)*intraLat + log2(nNodes)*interLat)``)."""
    return 2 * (per_node - 1), 2 * _lg(nodes)


def pairwise_steps(n: int, per_node: int) -> Steps:
    """Pairwise all-to-all: one message to each other rank, ``per_node-1`` of them in the node."""
    return per_node - 1, n - per_node


def p2p_steps(nodes: int) -> Steps:
    """One point-to-point message, across the network when the two ranks are on two nodes."""
    return (0, 1) if nodes > 1 else (1, 0)


def phase_steps(op: str, algo: str, n: int, nodes: int, per_node: int) -> list[Steps]:
    """Latency steps of each phase of ``algo`` running ``op``: the one table of NCCL step counts.

    Tier A's closed forms (:func:`ring_two_level_time_s`, :func:`tree_allreduce_time_s` and
    :mod:`simcluster.perf.collectives`) and Tier B's flow phases
    (:mod:`simcluster.flows.tier_b`) both take their step counts from here. Hierarchical
    all-reduce is three rings: reduce-scatter in the node, all-reduce across nodes (one rank per
    node per rail), all-gather in the node. Covers the algorithms with a step latency that both
    tiers run: ring, tree (all-reduce), hierarchical, pairwise and p2p.
    """
    if algo == "ring":
        return [ring_steps(n, nodes, 2 if op == "all_reduce" else 1)]
    if algo == "tree" and op == "all_reduce":
        return [tree_steps(nodes, per_node)]
    if algo == "hierarchical":
        in_node = ring_steps(per_node, 1, 1)
        return [in_node, ring_steps(nodes, nodes, 2), in_node]
    if algo == "pairwise":
        return [pairwise_steps(n, per_node)]
    if algo == "p2p":
        return [p2p_steps(nodes)]
    raise InvariantError(f"no step table for {algo!r} running {op!r}")


def bus_factor(op: str, n: int) -> float:
    """The nccl-tests bus-bandwidth factor: ``busbw = algbw * factor``.

    Parameters
    ----------
    op : str
        One of :data:`OPS`.
    n : int
        Ranks in the group.

    Returns
    -------
    float
        ``2(n-1)/n`` for all-reduce; ``(n-1)/n`` for all-gather, reduce-scatter and all-to-all;
        1 for broadcast and send/recv (nccl-tests ``doc/PERFORMANCE.md``).
    """
    check_op(op)
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def ring_allreduce_time_s(size_bytes: float, n: int, bandwidth_Bps: float, alpha_s: float) -> float:
    """Ring all-reduce: ``2(n-1)*alpha + 2(n-1)/n * S/B``.

    Reduce-scatter then all-gather around the ring, ``2(n-1)`` steps of ``S/n`` bytes each
    (Thakur et al. 2005; nccl-tests PERFORMANCE.md ``t = S/B * 2(n-1)/n``).
    """
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_Bps


def ring_allgather_time_s(size_bytes: float, n: int, bandwidth_Bps: float, alpha_s: float) -> float:
    """Ring all-gather or reduce-scatter of a total array S: ``(n-1)*alpha + (n-1)/n * S/B``.

    Thakur et al. 2005 (MPICH ``allgather_intra_ring``); the same cost for the pairwise/ring
    reduce-scatter (``reduce_scatter_block_intra_pairwise.c``).
    """
    return (n - 1) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


def ring_two_level_time_s(size_bytes: float, n: int, nodes: int, passes: int,
                          bandwidth_Bps: float, alpha_intra_s: float, alpha_inter_s: float) -> float:
    """A flat ring over ``nodes`` nodes of ``n/nodes`` ranks: NCCL's ring latency split.

    ``passes`` is 2 for all-reduce and 1 for all-gather/reduce-scatter. Of the ``passes*(n-1)``
    steps, ``passes*(nodes-1)`` cross a node boundary (NCCL tuning.cc ``nInterSteps``); the
    bandwidth term is the ring's ``passes*(n-1)/n * S/B`` with B the slowest ring edge. With
    ``nodes == 1`` this is :func:`ring_allreduce_time_s` / :func:`ring_allgather_time_s`.
    """
    intra_steps, inter_steps = ring_steps(n, nodes, passes)
    latency = intra_steps * alpha_intra_s + inter_steps * alpha_inter_s
    return latency + passes * (n - 1) / n * size_bytes / bandwidth_Bps


def tree_allreduce_time_s(size_bytes: float, nodes: int, per_node: int, bandwidth_Bps: float,
                          alpha_intra_s: float, alpha_inter_s: float) -> float:
    """Double binary tree all-reduce: ``2*ceil(lg N)*alpha_net + 2(g-1)*alpha_intra + 2*S/B``.

    Reduce up and broadcast down two trees over the nodes, each carrying half the data, with a chain
    of ``g`` ranks inside each node (Sanders, Speck, Traeff, Parallel Computing 2009; NCCL
    ``trees.cc`` and its Tree latency ``2((ppn-1)*intraLat + log2(nNodes)*interLat)``,
    ``algBw = busBw/2``).
    """
    intra_steps, inter_steps = tree_steps(nodes, per_node)
    latency = inter_steps * alpha_inter_s + intra_steps * alpha_intra_s
    return latency + 2 * size_bytes / bandwidth_Bps


def rabenseifner_allreduce_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                                  alpha_s: float) -> float:
    """Rabenseifner all-reduce (recursive-halving reduce-scatter + recursive-doubling all-gather).

    ``2*lg(p)*alpha + 2(p-1)/p * S/B`` for a power-of-two ``p``; otherwise MPICH's
    ``(2*floor(lg p) + 2)*alpha + (2(p-1)/p + 2) * S/B`` (Thakur et al. 2005, MPICH
    ``allreduce_intra_reduce_scatter_allgather``).
    """
    if n & (n - 1) == 0:
        return 2 * _lg(n) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_Bps
    floor_lg = n.bit_length() - 1
    return (2 * floor_lg + 2) * alpha_s + (2 * (n - 1) / n + 2) * size_bytes / bandwidth_Bps


def recursive_halving_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                             alpha_s: float) -> float:
    """Recursive-halving reduce-scatter or recursive-doubling all-gather: ``lg p*alpha + (p-1)/p*S/B``.

    Exact for a power-of-two ``p``; ``ceil(lg p)`` steps otherwise (Thakur et al. 2005, MPICH
    ``recursive_halving`` / ``recursive_doubling``).
    """
    return _lg(n) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


def bruck_allgather_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                           alpha_s: float) -> float:
    """Bruck all-gather, any ``p``: ``ceil(lg p)*alpha + (p-1)/p * S/B`` (Thakur et al. 2005)."""
    return _lg(n) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


def rhd_two_level_time_s(size_bytes: float, nodes: int, per_node: int, bandwidth_intra_Bps: float,
                         bandwidth_inter_Bps: float, alpha_intra_s: float,
                         alpha_inter_s: float) -> float:
    """Recursive halving (or doubling) over node-major ranks, inter-node distances first.

    The first ``lg N`` steps exchange ``S/2, S/4, ...`` across nodes, ``(N-1)/N * S`` in all at the
    per-rank NIC share; the last ``lg g`` steps move ``(g-1)/(g*N) * S`` inside the node [derived
    from the recursive-halving cost of Thakur et al. 2005]. With ``N == 1`` or ``g == 1`` it is
    :func:`recursive_halving_time_s`.
    """
    latency = _lg(nodes) * alpha_inter_s + _lg(per_node) * alpha_intra_s
    inter = (nodes - 1) / nodes * size_bytes / bandwidth_inter_Bps
    intra = (per_node - 1) / (per_node * nodes) * size_bytes / bandwidth_intra_Bps
    return latency + inter + intra


def hierarchical_allreduce_time_s(size_bytes: float, nodes: int, per_node: int,
                                  bandwidth_intra_Bps: float, bandwidth_inter_Bps: float,
                                  alpha_intra_s: float, alpha_inter_s: float) -> float:
    """2-D all-reduce: intra-node ring reduce-scatter, inter-node ring all-reduce of S/g, all-gather.

    ``T = T_RS(g, S) + T_AR(N, S/g) + T_AG(g, S)`` with the inter-node rings running one per rail at
    the per-rank NIC share (reduce-scatter, all-reduce, all-gather, each a ring of Thakur et al. 2005).
    """
    intra = ring_allgather_time_s(size_bytes, per_node, bandwidth_intra_Bps, alpha_intra_s)
    inter = ring_allreduce_time_s(size_bytes / per_node, nodes, bandwidth_inter_Bps, alpha_inter_s)
    return 2 * intra + inter


def nvls_allreduce_time_s(size_bytes: float, n: int, busbw_Bps: float, alpha_s: float) -> float:
    """NVLink SHARP all-reduce: ``alpha + 2(n-1)/n * S / busbw``, one switch-reduced step.

    NCCL models NVLS by a bus bandwidth (``bwIntra*nvlsEff*2``) and a single NVLS latency that do
    not depend on n (tuning.cc); ``busbw_Bps`` may exceed the link rate
    (nccl-tests#212).
    """
    return alpha_s + 2 * (n - 1) / n * size_bytes / busbw_Bps


def pairwise_all_to_all_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                               alpha_s: float) -> float:
    """Pairwise-exchange all-to-all of a total array S per rank: ``(p-1)*alpha + (p-1)/p * S/B``.

    MPICH's ``(p-1)*alpha + n*beta`` with ``n = (p-1)/p * S`` the bytes sent to other ranks
    (Thakur et al. 2005, MPICH ``alltoall_intra_pairwise``).
    """
    return (n - 1) * alpha_s + (n - 1) / n * size_bytes / bandwidth_Bps


def bruck_all_to_all_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                            alpha_s: float) -> float:
    """Bruck (store-and-forward) all-to-all: ``ceil(lg p)*alpha + S/2 * ceil(lg p) / B``.

    Thakur et al. 2005 (MPICH ``alltoall_intra_brucks``).
    """
    return _lg(n) * alpha_s + size_bytes / 2 * _lg(n) / bandwidth_Bps


def ring_broadcast_time_s(size_bytes: float, n: int, bandwidth_Bps: float, alpha_s: float) -> float:
    """Pipelined ring (chain) broadcast: ``(n-1)*alpha + S/B``.

    NCCL's only broadcast algorithm; busbw = algbw (nccl-tests PERFORMANCE.md), i.e. the data
    streams once through every link while the pipeline fills in ``n-1`` hops [derived].
    """
    return (n - 1) * alpha_s + size_bytes / bandwidth_Bps


def binomial_broadcast_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                              alpha_s: float) -> float:
    """Binomial-tree broadcast: ``lg p * (alpha + S/B)`` (Thakur et al. 2005, MPICH ``binomial``)."""
    return _lg(n) * (alpha_s + size_bytes / bandwidth_Bps)


def scatter_allgather_broadcast_time_s(size_bytes: float, n: int, bandwidth_Bps: float,
                                       alpha_s: float) -> float:
    """Scatter + recursive-doubling all-gather broadcast: ``2 lg p*alpha + 2(p-1)/p * S/B``.

    Thakur et al. 2005 (MPICH ``scatter_recursive_doubling_allgather``).
    """
    return 2 * _lg(n) * alpha_s + 2 * (n - 1) / n * size_bytes / bandwidth_Bps


def p2p_time_s(size_bytes: float, bandwidth_Bps: float, alpha_s: float) -> float:
    """One point-to-point message: ``alpha + S/B`` (Hockney, Parallel Computing 20(3), 1994)."""
    return alpha_s + size_bytes / bandwidth_Bps


def nvls_bus_factor(op: str, n: int) -> float:
    """NVLS bus bandwidth of ``op`` relative to the all-reduce NVLS bus bandwidth.

    NCCL doubles NVLS intra bandwidth for all-reduce ("pipelines two ops") and scales it by
    ``(ppn-1)/ppn`` otherwise (tuning.cc): ``(n-1)/(2n)`` for all-gather
    and reduce-scatter.
    """
    return 1.0 if op == "all_reduce" else (n - 1) / (2 * n)

