"""Tier A collective costs: calibrated alpha-beta formulas with an NCCL-like tuner.

The step-time model asks "how long does this collective of S bytes take on this group?". The answer
is the minimum over algorithm x protocol (like NCCL's ``topoGetAlgoInfo``) of

    t = alpha_p + steps(algo) * step_p + volume(algo, op) * max(S, ramp_p) / B_p(algo, group)

where the algorithm's exact alpha-beta form comes from :mod:`collectives_formulas` and the protocol
numbers (per-call overhead, per-step latency, achieved fraction of line rate, ramp) come from the
platform classes of ``catalog/collectives.yaml`` (docs/collectives.md, "Model" and "Calibration").
A group that spans nodes pays, per protocol, the larger per-call overhead of its two layers, the
intra-node step latency on intra-node hops and the network one on node crossings.

``nbytes`` follows nccl-tests ``size`` (``doc/PERFORMANCE.md``): the per-rank buffer for all-reduce,
broadcast and send/recv; the total array for all-gather, reduce-scatter and all-to-all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.perf import collectives_formulas as f
from simcluster.perf.cache import memoised
from simcluster.perf.collectives_calibration import PROTOCOLS, ProtocolCost
from simcluster.perf.collectives_formulas import OPS, bus_factor
from simcluster.perf.collectives_group import CommGroup, comm_group
from simcluster.spec.hardware import TopologySpec

__all__ = ["ALGOS", "AUTO_ALGOS", "OPS", "PROTOCOLS", "CollectiveTime", "CommGroup",
           "collective_time", "comm_group", "send_recv_time"]

#: Algorithms; "auto" picks the fastest of :data:`AUTO_ALGOS` for the op.
ALGOS = ("auto", "ring", "tree", "rhd", "hierarchical", "nvls", "bruck", "pairwise", "p2p")

#: Algorithms each op accepts (tree = double binary tree for all-reduce, binomial for broadcast;
#: rhd = Rabenseifner / recursive halving-doubling / scatter+all-gather broadcast).
OP_ALGOS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "rhd", "hierarchical", "nvls"),
    "all_gather": ("ring", "rhd", "bruck", "nvls"),
    "reduce_scatter": ("ring", "rhd", "nvls"),
    "all_to_all": ("pairwise", "bruck"),
    "broadcast": ("ring", "tree", "rhd"),
    "send_recv": ("p2p",),
}

#: What NCCL's tuner chooses among (``src/graph/tuning.cc``): ring, tree and NVLS for all-reduce;
#: ring and NVLS for all-gather/reduce-scatter; ring for broadcast; p2p for all-to-all and sends.
AUTO_ALGOS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "nvls"),
    "all_gather": ("ring", "nvls"),
    "reduce_scatter": ("ring", "nvls"),
    "all_to_all": ("pairwise",),
    "broadcast": ("ring",),
    "send_recv": ("p2p",),
}


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    """Duration of one collective and its nccl-tests bandwidths.

    Attributes
    ----------
    time_s : float
        Duration, seconds.
    algorithm : str
        Algorithm used (``none`` for a 1-rank group or 0 bytes).
    protocol : str
        NCCL protocol used (LL, LL128, Simple, NVLS; ``none`` when nothing moves).
    algbw_Bps : float
        nccl-tests algorithm bandwidth ``S / t``, bytes/s.
    busbw_Bps : float
        nccl-tests bus bandwidth ``algbw * factor(op, n)``, bytes/s.
    """

    time_s: float
    algorithm: str
    protocol: str
    algbw_Bps: float
    busbw_Bps: float


@dataclass(frozen=True, slots=True)
class _Path:
    """One protocol's combined numbers for a group (intra and inter layers)."""

    protocol: str
    alpha_s: float
    step_intra_s: float
    step_inter_s: float
    intra_Bps: float  # per-rank intra-node bandwidth (inf when g == 1)
    inter_Bps: float  # per-rank NIC share (inf on one node)
    ramp_bytes: float
    nodes: int
    per_node: int
    n: int

    @property
    def ring_Bps(self) -> float:
        """Slowest ring edge: NVLink per rank, or the g NIC shares a node boundary gets."""
        return min(self.intra_Bps, self.per_node * self.inter_Bps)

    @property
    def worst_Bps(self) -> float:
        """Single-level algorithms: the slower layer."""
        return min(self.intra_Bps, self.inter_Bps)

    @property
    def worst_step_s(self) -> float:
        """Single-level algorithms: the slower layer's step."""
        return max(self.step_intra_s, self.step_inter_s)


def _path(group: CommGroup, index: int) -> _Path:
    """Protocol ``PROTOCOLS[index]`` combined over the group's layers."""
    costs = [c.protocols[index] for c in (group.intra, group.inter) if c is not None]
    intra = group.intra.protocols[index] if group.intra else None
    inter = group.inter.protocols[index] if group.inter else None
    return _Path(PROTOCOLS[index], max(c.alpha_s for c in costs),
                 intra.step_s if intra else 0.0, inter.step_s if inter else 0.0,
                 intra.bandwidth_Bps if intra else math.inf,
                 inter.bandwidth_Bps if inter else math.inf,
                 max(c.ramp_bytes for c in costs), group.nodes, group.ranks_per_node, group.n)


def _hops_s(p: _Path, steps: f.Steps) -> float:
    """Latency of ``steps`` (:func:`f.phase_steps`' table) at the path's per-step latencies."""
    intra, inter = steps
    return intra * p.step_intra_s + inter * p.step_inter_s


def _ring(op: str, s: float, p: _Path) -> float:
    """Flat ring (broadcast: pipelined chain) over all nodes."""
    if op == "broadcast":
        return p.alpha_s + _hops_s(p, f.ring_steps(p.n, p.nodes, 1)) + s / p.ring_Bps
    passes = 2 if op == "all_reduce" else 1
    return p.alpha_s + f.ring_two_level_time_s(s, p.n, p.nodes, passes, p.ring_Bps,
                                               p.step_intra_s, p.step_inter_s)


def _tree(op: str, s: float, p: _Path) -> float:
    """Double binary tree all-reduce; binomial broadcast."""
    if op == "broadcast":
        return p.alpha_s + f.binomial_broadcast_time_s(s, p.n, p.worst_Bps, p.worst_step_s)
    return p.alpha_s + f.tree_allreduce_time_s(s, p.nodes, p.per_node, p.ring_Bps,
                                               p.step_intra_s, p.step_inter_s)


def _rhd(op: str, s: float, p: _Path) -> float:
    """Recursive halving/doubling (Rabenseifner for all-reduce), node-major two-level form."""
    if op == "broadcast":
        return p.alpha_s + f.scatter_allgather_broadcast_time_s(s, p.n, p.worst_Bps, p.worst_step_s)
    half = f.rhd_two_level_time_s(s, p.nodes, p.per_node, p.intra_Bps, p.inter_Bps,
                                  p.step_intra_s, p.step_inter_s)
    return p.alpha_s + (2 * half if op == "all_reduce" else half)


def _hierarchical(op: str, s: float, p: _Path) -> float:
    """Intra-node reduce-scatter, inter-node all-reduce per rail, intra-node all-gather."""
    return p.alpha_s + f.hierarchical_allreduce_time_s(s, p.nodes, p.per_node, p.intra_Bps,
                                                       p.inter_Bps, p.step_intra_s, p.step_inter_s)


def _pairwise(op: str, s: float, p: _Path) -> float:
    """Direct/pairwise all-to-all: intra-node and NIC shares of the array move concurrently.

    ``(g-1)/n`` of S goes over the scale-up fabric, ``(n-g)/n`` over the rank's NIC share (PXN keeps
    it on the rail: NVIDIA developer blog, "Doubling all2all Performance with NVIDIA Collective
    Communication Library 2.12", February 2022). One node: :func:`f.pairwise_all_to_all_time_s`.
    """
    g = p.n // p.nodes
    hops = _hops_s(p, f.pairwise_steps(p.n, g))
    intra = (g - 1) / p.n * s / p.intra_Bps
    inter = (p.n - g) / p.n * s / p.inter_Bps
    return p.alpha_s + hops + max(intra, inter)


def _bruck(op: str, s: float, p: _Path) -> float:
    """Bruck all-gather / all-to-all at the slower layer's numbers."""
    formula = f.bruck_allgather_time_s if op == "all_gather" else f.bruck_all_to_all_time_s
    return p.alpha_s + formula(s, p.n, p.worst_Bps, p.worst_step_s)


def _p2p(op: str, s: float, p: _Path) -> float:
    """One message between the two ranks."""
    return p.alpha_s + f.p2p_time_s(s, p.worst_Bps, _hops_s(p, f.p2p_steps(p.nodes)))


_ALGO_TIME: dict[str, Callable[[str, float, _Path], float]] = {
    "ring": _ring, "tree": _tree, "rhd": _rhd, "hierarchical": _hierarchical,
    "pairwise": _pairwise, "bruck": _bruck, "p2p": _p2p,
}


def _nvls(op: str, nbytes: float, group: CommGroup) -> tuple[float, str]:
    """NVLink SHARP (one switch domain): NCCL's NVLS bus-bandwidth model."""
    cost: ProtocolCost | None = group.intra.nvls if group.intra else None
    if cost is None or group.nodes > 1:
        raise SpecError("collective.algo", "nvls needs one NVSwitch domain with NVLink SHARP")
    busbw = cost.bandwidth_Bps * f.nvls_bus_factor(op, group.n)
    s = max(nbytes, cost.ramp_bytes)
    if op == "all_reduce":
        return f.nvls_allreduce_time_s(s, group.n, busbw, cost.alpha_s), "NVLS"
    return cost.alpha_s + (group.n - 1) / group.n * s / busbw, "NVLS"


def applicable(op: str, algo: str, group: CommGroup) -> bool:
    """Whether ``algo`` can run ``op`` on ``group`` (hardware and shape)."""
    if algo not in OP_ALGOS[op]:
        return False
    if algo == "nvls":
        return group.nvls
    if algo == "hierarchical":
        return group.nodes > 1 and group.intra is not None
    return True


def _algo_time(op: str, algo: str, nbytes: float, group: CommGroup) -> tuple[float, str]:
    """Fastest protocol of one algorithm: (time, protocol)."""
    if algo == "nvls":
        return _nvls(op, nbytes, group)
    best = (math.inf, "")
    for index in range(len(PROTOCOLS)):
        path = _path(group, index)
        t = _ALGO_TIME[algo](op, max(nbytes, path.ramp_bytes), path)
        best = min(best, (t, path.protocol))
    return best


def _check(op: str, nbytes: float, algo: str) -> None:
    """``SpecError`` for an unknown op or algorithm, or a negative size."""
    f.check_request(op, nbytes)
    if algo != "auto" and algo not in OP_ALGOS[op]:
        raise SpecError("collective.algo", f"{algo!r} cannot run {op}; expected auto or one of "
                        f"{', '.join(OP_ALGOS[op])}")


@memoised()
def collective_time(op: str, nbytes: float, group: CommGroup, algo: str = "auto") -> CollectiveTime:
    """Time of collective ``op`` of ``nbytes`` on ``group`` (Tier A, calibrated).

    Parameters
    ----------
    op : str
        One of :data:`OPS`.
    nbytes : float
        nccl-tests ``size``, bytes: per-rank buffer (all-reduce, broadcast, send/recv) or total
        array (all-gather, reduce-scatter, all-to-all).
    group : CommGroup
        From :func:`comm_group`.
    algo : str
        One of :data:`ALGOS`; ``auto`` takes the fastest of :data:`AUTO_ALGOS` x protocol.

    Returns
    -------
    CollectiveTime
        Time, chosen algorithm and protocol, nccl-tests algbw and busbw. A 1-rank group or 0 bytes
        costs 0 s with algorithm ``none``. Memoised on all four arguments (:mod:`.cache`): a
        sweep asks for the same collective on the same group for many layouts.
    """
    _check(op, nbytes, algo)
    if group.n == 1 or nbytes == 0:
        return CollectiveTime(0.0, "none", "none", 0.0, 0.0)
    if algo != "auto" and not applicable(op, algo, group):
        raise SpecError("collective.algo", f"{algo} does not apply to {op} on this group "
                        f"(n={group.n}, nodes={group.nodes}, nvls={group.nvls})")
    names = AUTO_ALGOS[op] if algo == "auto" else (algo,)
    t, proto, name = min((*_algo_time(op, a, nbytes, group), a) for a in names
                         if applicable(op, a, group))
    algbw = nbytes / t
    return CollectiveTime(t, name, proto, algbw, algbw * bus_factor(op, group.n))


def send_recv_time(nbytes: float, topo: TopologySpec, inter_node: bool) -> CollectiveTime:
    """Point-to-point send of ``nbytes`` between neighbouring GPUs (pipeline-parallel boundary).

    Parameters
    ----------
    nbytes : float
        Message size, bytes.
    topo : TopologySpec
        The cluster design.
    inter_node : bool
        Between GPU 0 of two adjacent nodes (one NIC share each, or NVLink inside an NVLink domain);
        otherwise between GPUs 0 and 1 of one node.

    Returns
    -------
    CollectiveTime
        With ``algorithm == "p2p"``; busbw = algbw.
    """
    if not inter_node and topo.gpus_per_node < 2:
        raise SpecError("gpus_per_node", "an intra-node send needs at least 2 GPUs per node")
    group = comm_group(topo, 2, topo.gpus_per_node if inter_node else 1)
    return collective_time("send_recv", nbytes, group, "p2p")
