"""Tier B flow-level simulation: advance to the next completion in closed form, re-solve on change.

Between two events every active flow class moves at its max-min rate (:mod:`.maxmin`), so the next
event is the earlier of the next completion (``min remaining / rate``) and the next phase start;
all classes advance to it in one step. The rates are re-solved only when the set of active classes
changes (SimGrid's LMM, simgrid/simgrid ``docs/source/Models.rst``). A phase's latency is paid
before its flows start, without contention (SimGrid LV08). The loop is plain Python over numpy
arrays, not SimPy: the events are few (one per phase start and completion), and it stays a pure
function.

The link x class incidence does not depend on the bytes moved, so :func:`incidence` builds it once
and :func:`run` replays it for any size (Tier B sweeps many sizes of one collective); a ``memo``
of max-min rates by active set, shared across those runs, skips re-solving a set already solved
(the rates depend on the active set only, so the results are bit-identical).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from simcluster.errors import InvariantError
from simcluster.flows.maxmin import FloatArray, IntArray, max_min_rates
from simcluster.flows.plan import FlowClass, Transfer
from simcluster.topology import Edge

#: A class whose remaining bytes fall below this fraction of its size counts as done.
DONE_RTOL = 1e-9


@dataclass(frozen=True, slots=True)
class FlowResult:
    """Outcome of :func:`simulate`.

    Attributes
    ----------
    finish_s : tuple[float, ...]
        Completion time of each transfer, seconds (``inf`` if a flow never gets bandwidth).
    solves : int
        Max-min solves performed (one per change of a non-empty active set).
    """

    finish_s: tuple[float, ...]
    solves: int


@dataclass(slots=True)
class Incidence:
    """The flattened incidence of every class of every phase (built once, reused for any size).

    ``size`` holds each class's ``bytes_per_flow``; :func:`run` scales it.
    """

    link_of: IntArray
    class_of: IntArray
    weight: FloatArray
    capacity: FloatArray
    multiplicity: FloatArray
    size: FloatArray
    owner: list[tuple[int, int]]                       # class -> (transfer, phase)
    crossing: np.ndarray                               # class crosses at least one link
    members: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    phases: tuple[int, ...] = ()                       # phases of each transfer


def incidence(transfers: Sequence[Transfer], capacity_Bps: Mapping[Edge, float]) -> Incidence:
    """The incidence of ``transfers`` on links of ``capacity_Bps`` (see :func:`simulate`).

    Raises
    ------
    InvariantError
        When an edge the transfers use has no capacity (the capacities come from the same
        plan's edges, so this is a bug, not bad input).
    """
    classes: list[FlowClass] = []
    owner: list[tuple[int, int]] = []
    members: dict[tuple[int, int], list[int]] = {}
    for t, transfer in enumerate(transfers):
        for p, phase in enumerate(transfer.phases):
            members[t, p] = list(range(len(classes), len(classes) + len(phase.classes)))
            classes.extend(phase.classes)
            owner.extend([(t, p)] * len(phase.classes))
    edges = [e for c in classes for e, _ in c.usage]
    links = {e: i for i, e in enumerate(dict.fromkeys(edges))}
    cols = np.repeat(np.arange(len(classes), dtype=np.intp), [len(c.usage) for c in classes])
    crossing = np.zeros(len(classes), dtype=bool)
    crossing[cols] = True
    return Incidence(np.array([links[e] for e in edges], dtype=np.intp), cols,
                     np.array([w for c in classes for _, w in c.usage], dtype=np.float64),
                     np.array([_capacity(capacity_Bps, e) for e in links], dtype=np.float64),
                     np.array([c.multiplicity for c in classes], dtype=np.float64),
                     np.array([c.bytes_per_flow for c in classes], dtype=np.float64), owner,
                     crossing, members, tuple(len(t.phases) for t in transfers))


def _capacity(capacity_Bps: Mapping[Edge, float], edge: Edge) -> float:
    if edge not in capacity_Bps:
        raise InvariantError(f"no capacity for edge {edge} of the plan")
    return capacity_Bps[edge]


@dataclass(slots=True)
class _State:
    """Mutable progress of one simulation."""

    remaining: FloatArray
    active: np.ndarray
    left: dict[tuple[int, int], int]
    starts: list[tuple[float, int, int]]
    finish: list[float]
    latency_s: Sequence[Sequence[float]]              # [transfer][phase]
    now: float = 0.0
    solves: int = 0


def simulate(transfers: Sequence[Transfer], capacity_Bps: Mapping[Edge, float]) -> FlowResult:
    """Run ``transfers`` concurrently on links of ``capacity_Bps`` with max-min sharing.

    Parameters
    ----------
    transfers : sequence of Transfer
        Collectives or sends; each starts at its ``start_s`` plus its first phase's latency.
    capacity_Bps : mapping of Edge to float
        Capacity of every edge the transfers use, bytes/s (:func:`.capacity.link_capacities`).

    Returns
    -------
    FlowResult
        Completion time of each transfer and the number of max-min solves.
    """
    idx = incidence(transfers, capacity_Bps)
    return run(idx, idx.size, [[p.latency_s for p in t.phases] for t in transfers],
               [t.start_s for t in transfers])


def run(idx: Incidence, size: FloatArray, latency_s: Sequence[Sequence[float]],
        start_s: Sequence[float], memo: dict[bytes, FloatArray] | None = None) -> FlowResult:
    """Simulate the transfers of ``idx`` with class sizes ``size`` (bytes per flow).

    Parameters
    ----------
    idx : Incidence
        From :func:`incidence`.
    size : ndarray of float
        Bytes per flow of each class (``idx.size`` times a factor, for a scaled transfer).
    latency_s : sequence of sequence of float
        Latency of phase ``p`` of transfer ``t``, seconds.
    start_s : sequence of float
        Issue time of each transfer, seconds.
    memo : dict, optional
        Max-min rates by active set, filled and reused across runs of the same ``idx``.

    Returns
    -------
    FlowResult
        As :func:`simulate`.
    """
    idx = replace(idx, size=size)
    state = _State(size.copy(), np.zeros(size.size, dtype=bool),
                   {k: len(v) for k, v in idx.members.items()}, [], [math.nan] * len(start_s),
                   latency_s)
    for t, at_s in enumerate(start_s):
        _schedule(state, idx, t, 0, at_s)
    rate = np.zeros(0)
    dirty = True
    while True:
        if dirty:
            rate = _solve(idx, state, memo)
        t_next = _next_event(state, rate)
        if math.isinf(t_next):
            break
        dirty = _advance(idx, state, rate, t_next)
    stuck = [math.inf if math.isnan(f) else f for f in state.finish]
    return FlowResult(tuple(stuck), state.solves)


def _schedule(state: _State, idx: Incidence, t: int, p: int, at_s: float) -> None:
    """Queue phase ``p`` of transfer ``t`` (or record its end) after the phase's latency."""
    if p == idx.phases[t]:
        state.finish[t] = at_s
        return
    heapq.heappush(state.starts, (at_s + state.latency_s[t][p], t, p))


def _solve(idx: Incidence, state: _State, memo: dict[bytes, FloatArray] | None) -> FloatArray:
    if not state.active.any():
        return np.zeros(state.active.size)
    state.solves += 1
    key = state.active.tobytes()
    if memo is not None and key in memo:
        return memo[key]
    rate = max_min_rates(idx.link_of, idx.class_of, idx.weight, idx.capacity, idx.multiplicity,
                         state.active)
    if memo is not None:
        memo[key] = rate
    return rate


def _next_event(state: _State, rate: FloatArray) -> float:
    """Time of the next completion or phase start (inf when nothing can happen)."""
    t_start = state.starts[0][0] if state.starts else math.inf
    act = state.active
    if not act.any():
        return t_start
    with np.errstate(divide="ignore"):
        t_done = state.now + float(np.min(state.remaining[act] / rate[act]))
    return min(t_start, t_done)


def _advance(idx: Incidence, state: _State, rate: FloatArray, t_next: float) -> bool:
    """Move every active class to ``t_next``; finish and start what is due. True if the set changed."""
    act = state.active
    dt = t_next - state.now
    state.remaining[act] -= rate[act] * dt
    state.now = t_next
    done = act & (state.remaining <= idx.size * DONE_RTOL)
    if dt <= 0.0:  # time left below the clock's resolution (a huge rate): finish, never stall
        with np.errstate(divide="ignore", invalid="ignore"):
            done |= act & (state.now + state.remaining / rate <= state.now)
    changed = bool(done.any())
    for k in np.flatnonzero(done):
        _finish_class(idx, state, int(k))
    while state.starts and state.starts[0][0] <= state.now:
        _, t, p = heapq.heappop(state.starts)
        _start_phase(idx, state, t, p)
        changed = True
    return changed


def _finish_class(idx: Incidence, state: _State, k: int) -> None:
    state.active[k] = False
    state.remaining[k] = 0.0
    t, p = idx.owner[k]
    state.left[t, p] -= 1
    if state.left[t, p] == 0:
        _schedule(state, idx, t, p + 1, state.now)


def _start_phase(idx: Incidence, state: _State, t: int, p: int) -> None:
    """Activate the phase's classes; empty ones (no bytes or no links) finish at once."""
    members = idx.members[t, p]
    if not members:
        _schedule(state, idx, t, p + 1, state.now)
        return
    for k in members:
        state.active[k] = True
        if idx.size[k] <= 0 or not idx.crossing[k]:
            _finish_class(idx, state, k)
