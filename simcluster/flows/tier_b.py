"""Tier B collective times: flow-level max-min on the link graph, with Tier A's latency terms.

:class:`FlowModel` holds one cluster's link graph and routes and answers the same question as Tier A
(:func:`simcluster.perf.collectives.collective_time`) with the same result type. The bandwidth part
comes from the flow simulation (:mod:`.engine`) on capacities of line rate x class efficiency
(:mod:`.capacity`); the latency part is Tier A's, per protocol (NCCL ``src/graph/tuning.cc`` latencies):
the per-call overhead ``alpha_p`` before the first phase, and per phase its intra-node and
inter-node steps (Tier A's table, :func:`simcluster.perf.collectives_formulas.phase_steps`) times
the calibrated per-step latencies. Messages below a protocol's ramp size
cost as much as the ramp (Tier A's channel-count reduction). ``protocol="auto"`` takes the fastest
of LL, LL128 and Simple, like Tier A; NVLS is not decomposed into flows, so Tier B ``auto`` picks
among ring and tree only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from simcluster.errors import SpecError
from simcluster.flows.capacity import link_capacities
from simcluster.flows.decompose import FLOW_ALGOS, Context, by_node, decompose, symmetric_skip
from simcluster.flows.engine import Incidence, incidence, run
from simcluster.flows.maxmin import FloatArray
from simcluster.flows.plan import Transfer
from simcluster.flows.routes import Router
from simcluster.perf.collectives import CollectiveTime, comm_group
from simcluster.perf.collectives_calibration import PROTOCOLS
from simcluster.perf.collectives_formulas import bus_factor, check_request, phase_steps
from simcluster.perf.collectives_group import CommGroup
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import Edge, build_graph

#: What Tier B ``auto`` chooses among (Tier A's AUTO_ALGOS without NVLS).
AUTO_FLOW_ALGOS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree"), "all_gather": ("ring",), "reduce_scatter": ("ring",),
    "broadcast": ("ring",), "all_to_all": ("pairwise",), "send_recv": ("p2p",),
}


def phase_latencies_s(group: CommGroup, protocol: str, steps: Sequence[tuple[int, int]]) -> list[float]:
    """Tier A latency of each phase: ``alpha_p`` on the first, then steps x per-step latency."""
    index = PROTOCOLS.index(protocol)
    layers = [c.protocols[index] for c in (group.intra, group.inter) if c is not None]
    alpha = max(c.alpha_s for c in layers)
    intra = group.intra.protocols[index].step_s if group.intra else 0.0
    inter = group.inter.protocols[index].step_s if group.inter else 0.0
    return [(alpha if i == 0 else 0.0) + a * intra + b * inter for i, (a, b) in enumerate(steps)]


def ramp_bytes(group: CommGroup, protocol: str) -> float:
    """Tier A ramp of ``protocol`` on ``group``: the larger of its layers'."""
    index = PROTOCOLS.index(protocol)
    return max(c.protocols[index].ramp_bytes for c in (group.intra, group.inter) if c is not None)


class FlowModel:
    """Tier B on one cluster: ``nodes`` nodes of ``topo``, routes memoised across calls.

    Parameters
    ----------
    topo : TopologySpec
        The cluster design.
    nodes : int
        Nodes in the link graph.
    spray : bool
        Spread inter-leaf flows over all spines (default) rather than ECMP-hash them.
    degraded : mapping of Edge to float, optional
        Capacity factors of degraded edges (:func:`simcluster.flows.capacity.degrade`).
    symmetric : bool
        Leave out intra-node hops that duplicate another node's (:func:`symmetric_skip`; exact
        for one collective alone, which is all :meth:`collective_time` simulates).
    """

    def __init__(self, topo: TopologySpec, nodes: int, spray: bool = True,
                 degraded: Mapping[Edge, float] | None = None, symmetric: bool = True) -> None:
        self.topo = topo
        self.graph = build_graph(topo, nodes)
        self.router = Router(self.graph, spray)
        self.degraded = dict(degraded or {})
        self.symmetric = symmetric
        self._plans: dict[tuple[str, str, tuple[int, ...]], Transfer] = {}
        self._capacities: dict[tuple[str, str, tuple[int, ...], str], dict[Edge, float]] = {}
        self._incidences: dict[tuple[str, str, tuple[int, ...], str], _Prepared] = {}

    def plan(self, op: str, algo: str, ranks: Sequence[int]) -> Transfer:
        """The decomposition of ``op`` over ``ranks`` for a 1-byte ``size`` (memoised)."""
        key = (op, algo, tuple(ranks))
        if key not in self._plans:
            self._plans[key] = decompose(self._context(ranks), op, algo, ranks, 1.0)
        return self._plans[key]

    def _context(self, ranks: Sequence[int]) -> Context:
        if not self.symmetric:
            return Context(self.router, self.topo)
        degraded_nodes = {self.router.node_of(v) for e in self.degraded for v in e}
        keep = [n for n in degraded_nodes if isinstance(n, int)]
        return Context(self.router, self.topo, symmetric_skip(self.topo, ranks, keep))

    def capacities(self, transfers: Sequence[Transfer], protocol: str = "Simple") -> dict[Edge, float]:
        """Effective capacity of every edge ``transfers`` use, for ``protocol``."""
        edges = set().union(*(t.edges() for t in transfers))
        return link_capacities(self.graph, edges, protocol, self.degraded)

    def collective_time(self, op: str, nbytes: float, size: int, stride: int = 1,
                        algo: str = "auto", protocol: str = "auto") -> CollectiveTime:
        """Tier B time of ``op`` of ``nbytes`` on ranks ``0, stride, ..., (size-1)*stride``.

        Parameters
        ----------
        op : str
            One of :data:`simcluster.perf.collectives.OPS`.
        nbytes : float
            nccl-tests ``size``, bytes.
        size, stride : int
            The group, placed like :func:`simcluster.perf.collectives.comm_group`.
        algo : str
            ``auto`` or one of ``FLOW_ALGOS[op]``.
        protocol : str
            ``auto`` or one of LL, LL128, Simple.

        Returns
        -------
        CollectiveTime
            Time, algorithm, protocol and nccl-tests algbw/busbw.
        """
        _check(op, nbytes, algo, protocol)
        ranks = [i * stride for i in range(size)]
        if size == 1 or nbytes == 0:
            return CollectiveTime(0.0, "none", "none", 0.0, 0.0)
        group = comm_group(self.topo, size, stride)
        algos = AUTO_FLOW_ALGOS[op] if algo == "auto" else (algo,)
        protocols = PROTOCOLS if protocol == "auto" else (protocol,)
        t, name, proto = min((self._time(op, a, p, nbytes, ranks, group), a, p)
                             for a in algos for p in protocols)
        algbw = nbytes / t
        return CollectiveTime(t, name, proto, algbw, algbw * bus_factor(op, size))

    def _time(self, op: str, algo: str, protocol: str, nbytes: float, ranks: Sequence[int],
              group: CommGroup) -> float:
        nodes = by_node(self.topo, ranks)
        steps = phase_steps(op, algo, len(ranks), len(nodes), min(len(m) for m in nodes))
        prepared = self._prepared(op, algo, ranks, protocol)
        size = prepared.incidence.size * max(nbytes, ramp_bytes(group, protocol))
        latencies = [phase_latencies_s(group, protocol, steps)]
        return run(prepared.incidence, size, latencies, [0.0], prepared.memo).finish_s[0]

    def _prepared(self, op: str, algo: str, ranks: Sequence[int], protocol: str) -> _Prepared:
        """The incidence of the 1-byte plan, built once per (op, algo, ranks, protocol).

        Every message size reuses it: only the bytes per flow and the phase latencies change
        (a sweep of 24 sizes used to rebuild it 24 times per protocol and algorithm).
        """
        key = (op, algo, tuple(ranks), protocol)
        if key not in self._incidences:
            plan = self.plan(op, algo, ranks)
            if key not in self._capacities:
                self._capacities[key] = self.capacities([plan], protocol)
            self._incidences[key] = _Prepared(incidence([plan], self._capacities[key]), {})
        return self._incidences[key]


class _Prepared(NamedTuple):
    """One plan's incidence and the max-min rates solved on it so far (by active set)."""

    incidence: Incidence
    memo: dict[bytes, FloatArray]


def _check(op: str, nbytes: float, algo: str, protocol: str) -> None:
    check_request(op, nbytes)
    if algo != "auto" and algo not in FLOW_ALGOS[op]:
        raise SpecError("collective.algo", f"Tier B runs {op} with auto or "
                        f"{', '.join(FLOW_ALGOS[op])}, not {algo!r}")
    if protocol != "auto" and protocol not in PROTOCOLS:
        raise SpecError("collective.protocol", f"expected auto or one of {', '.join(PROTOCOLS)}")
