"""Tier C: per-chunk discrete-event simulation of ring collectives in SimPy (validation only).

docs/collectives.md, "Tier C". One SimPy process per (channel, rank) runs NCCL's ring
loop (``prims_simple.h`` / ``all_reduce.h``): the channel's buffer is cut into loops of ``n``
chunks of at most ``chunk_bytes`` (Simple: ``buffSize / NCCL_STEPS`` = 4 MiB / 8 = 512 KiB); in
each loop a rank sends its chunk (step 0), then ``steps - 1`` times receives a chunk from its
predecessor and forwards it, then receives the last one. A connection has ``credits`` buffer slots
(NCCL_STEPS = 8): a send waits for a free slot, and the receiver frees it once it has forwarded the
chunk. A chunk moves cut-through: it holds every link of its path (acquired in one global order,
so no deadlock) for ``bytes / (slowest link of the path)``, the links being SimPy resources served
first come, first served, so concurrent rings share them chunk by chunk. With spray, successive
chunks of a connection take the spine paths in turn.

Only rings (all-reduce ``2(n-1)`` steps, all-gather and reduce-scatter ``n-1``) and at most
:data:`MAX_RANKS` ranks: this tier checks Tier B (``tests/validation/test_flows_tiers.py``).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import simpy

from simcluster.errors import SpecError
from simcluster.flows.decompose import ring_channels
from simcluster.flows.routes import Path, Router
from simcluster.spec.hardware import TopologySpec
from simcluster.topology import Edge, Vertex, gpu_vertex

#: NCCL Simple chunk: buffSize 4 MiB / NCCL_STEPS 8 (NVIDIA/nccl src/init.cc, src/include/device.h).
CHUNK_BYTES = 512 * 1024
#: NCCL_STEPS: buffer slots per connection.
CREDITS = 8
#: Largest group Tier C accepts.
MAX_RANKS = 64
RING_STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
              "reduce_scatter": lambda n: n - 1}


@dataclass(frozen=True, slots=True)
class ChunkRing:
    """One ring channel to simulate chunk by chunk.

    Attributes
    ----------
    order : tuple[Vertex, ...]
        GPU vertices in ring order.
    nbytes : float
        The channel's share of the buffer, bytes (cut into loops of ``n`` chunks).
    steps : int
        Sends per rank per loop (``2(n-1)`` all-reduce, ``n-1`` all-gather/reduce-scatter).
    """

    order: tuple[Vertex, ...]
    nbytes: float
    steps: int


def loop_chunks(nbytes: float, n: int, chunk_bytes: float) -> list[float]:
    """Chunk size of each loop: ``n`` chunks of at most ``chunk_bytes`` cover ``nbytes``."""
    loops = max(1, math.ceil(nbytes / (n * chunk_bytes)))
    return [min(chunk_bytes, (nbytes - i * n * chunk_bytes) / n) for i in range(loops)]


def collective_rings(topo: TopologySpec, op: str, ranks: Sequence[int], nbytes: float) -> list[ChunkRing]:
    """The channels of ring ``op`` of ``nbytes`` (nccl-tests size) over ``ranks``, like Tier B.

    Raises
    ------
    SpecError
        ``collective.op`` for an op without a ring here; ``collective.ranks`` beyond
        :data:`MAX_RANKS`.
    """
    if op not in RING_STEPS:
        raise SpecError("collective.op", f"Tier C runs {', '.join(RING_STEPS)}, not {op!r}")
    if len(ranks) > MAX_RANKS:
        raise SpecError("collective.ranks", f"Tier C takes at most {MAX_RANKS} ranks, got {len(ranks)}")
    channels = ring_channels(topo, ranks)
    steps = RING_STEPS[op](len(ranks))
    return [ChunkRing(tuple(gpu_vertex(topo, r) for r in order), nbytes / len(channels), steps)
            for order in channels]


@dataclass(slots=True)
class _Wiring:
    """The SimPy objects of one run (built before any process starts)."""

    env: simpy.Environment
    links: dict[Edge, simpy.Resource]
    rank: dict[Edge, int]
    capacity_Bps: Mapping[Edge, float]


@dataclass(slots=True)
class _Connection:
    """A rank's outgoing ring connection: paths, buffer slots, the receiver's inbox."""

    paths: tuple[Path, ...]
    credits: simpy.Container
    inbox: simpy.Store
    sent: int = 0

    def next_path(self) -> Path:
        """The path of the next chunk (spine paths in turn)."""
        path = self.paths[self.sent % len(self.paths)]
        self.sent += 1
        return path


def _move(w: _Wiring, path: Path, nbytes: float) -> Generator[simpy.Event, object, None]:
    """Cut-through: hold every link of ``path`` for ``nbytes`` at its slowest link's rate."""
    requests = [w.links[e].request() for e in sorted(path, key=w.rank.__getitem__)]
    for request in requests:
        yield request
    yield w.env.timeout(nbytes / min(w.capacity_Bps[e] for e in path) if path else 0.0)
    for edge, request in zip(sorted(path, key=w.rank.__getitem__), requests, strict=True):
        w.links[edge].release(request)


def _rank(w: _Wiring, ring: ChunkRing, inbound: _Connection,
          outbound: _Connection) -> Generator[simpy.Event, object, None]:
    """One rank of one channel: per loop, send, (receive, forward) x (steps-1), receive."""
    for chunk in loop_chunks(ring.nbytes, len(ring.order), CHUNK_BYTES):
        for step in range(ring.steps):
            if step > 0:
                yield inbound.inbox.get()
            yield outbound.credits.get(1)
            yield w.env.process(_move(w, outbound.next_path(), chunk))
            yield outbound.inbox.put(chunk)
            if step > 0:
                yield inbound.credits.put(1)
        yield inbound.inbox.get()
        yield inbound.credits.put(1)


def simulate_rings(router: Router, rings: Sequence[ChunkRing], capacity_Bps: Mapping[Edge, float],
                   spray: bool = True) -> list[float]:
    """Run ``rings`` concurrently, chunk by chunk; the finish time of each, seconds.

    Parameters
    ----------
    router : Router
        Routes of the link graph (:meth:`Router.paths`; every spine path in turn with ``spray``).
    rings : sequence of ChunkRing
        Channels to run together (several collectives' channels may be mixed).
    capacity_Bps : mapping of Edge to float
        Capacity of every edge of every path, bytes/s (:func:`.capacity.link_capacities`).
    spray : bool
        Use all spine paths in turn; otherwise the first (the ECMP route when the router hashes).
    """
    env = simpy.Environment()
    edges = sorted({e for r in rings for path in _ring_paths(router, r, spray) for p in path for e in p},
                   key=repr)
    w = _Wiring(env, {e: simpy.Resource(env, capacity=1) for e in edges},
                {e: i for i, e in enumerate(edges)}, capacity_Bps)
    done = [_start(w, router, ring, spray) for ring in rings]
    env.run()
    return [max(cast(float, p.value) for p in procs) for procs in done]


def simulate_collectives(router: Router, collectives: Sequence[Sequence[ChunkRing]],
                        capacity_Bps: Mapping[Edge, float], spray: bool = True) -> list[float]:
    """Run several ring collectives (each a list of channels) together; each one's finish time."""
    times = simulate_rings(router, [ring for rings in collectives for ring in rings], capacity_Bps,
                           spray)
    out, start = [], 0
    for rings in collectives:
        out.append(max(times[start:start + len(rings)], default=0.0))
        start += len(rings)
    return out


def _ring_paths(router: Router, ring: ChunkRing, spray: bool) -> list[tuple[Path, ...]]:
    """Paths of each hop ``order[i] -> order[i+1]`` of ``ring``."""
    n = len(ring.order)
    hops = [router.paths(ring.order[i], ring.order[(i + 1) % n]) for i in range(n)]
    return hops if spray else [paths[:1] for paths in hops]


def _start(w: _Wiring, router: Router, ring: ChunkRing, spray: bool) -> list[simpy.Process]:
    """Wire one ring's connections and start its rank processes (each returns its end time)."""
    conns = [_Connection(paths, simpy.Container(w.env, CREDITS, init=CREDITS), simpy.Store(w.env))
             for paths in _ring_paths(router, ring, spray)]
    n = len(ring.order)
    return [w.env.process(_timed(w, _rank(w, ring, conns[(i - 1) % n], conns[i]))) for i in range(n)]


def _timed(w: _Wiring, proc: Generator[simpy.Event, object, None]) -> Generator[simpy.Event, object, float]:
    yield w.env.process(proc)
    return float(w.env.now)
