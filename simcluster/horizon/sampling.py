"""Sample paths: every random input of one replica, drawn vectorised with numpy, in wall time.

Failures, straggler episodes and planned maintenance happen at wall-clock times that do not depend
on what the job is doing (a node fails whether the job is training or restarting), so a replica's
sample path depends on the seed and the failure model only, never on the checkpoint policy: the
interval sweep reuses the same paths for every interval (common random numbers).

Streams (``simcluster.rng.generator(seed, replica, name)``): ``failures`` (gaps of the superposed
Poisson process of all exponential classes, N x sum of rates; Palm-Khintchine), ``failure-classes``
(which class, by share), ``failures.weibull.<class>`` (per-node renewal processes of Weibull
classes, N slots drawn as one array per round), ``repair`` (lognormal repair time per event),
``maintenance`` (planned interruptions), ``stragglers``, ``straggler-lengths`` and
``straggler-repair``. Draws are
sequential within a stream, and paths are generated in fixed chunks (30 days, shorter when more than
``CHUNK_EVENTS`` events are expected in 30 days), so extending a path never changes its prefix and
memory never grows with the expected event count: gaps are drawn in blocks of at most
``MAX_BATCH``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

import numpy as np

from simcluster.horizon.config import HorizonConfig
from simcluster.rng import generator

#: Event kinds; at equal times events are applied in this order.
STRAG_OFF, STRAG_ON, FAILURE, EVICT, PLANNED_EVENT, HORIZON = range(6)
#: One event: (wall time s, kind, class index (-1 if none), repair time s).
Event = tuple[float, int, int, float]
CHUNK_S = 30 * 86400.0
#: Expected events of one chunk, at most: a faster event rate shortens the chunk below ``CHUNK_S``
#: (normal rates keep 30-day chunks, so their draws are unchanged), so memory does not grow with
#: the expected event count.
CHUNK_EVENTS = 1 << 16
#: Largest block of gaps drawn at once by :class:`BufferedPoisson` (a stream: longer spans loop).
MAX_BATCH = 1 << 17


def chunk_span_s(cfg: HorizonConfig) -> float:
    """Wall time of one chunk: ``CHUNK_S``, or less so that it expects at most ``CHUNK_EVENTS``."""
    per_node = sum(c.rate_per_node_s for c in cfg.classes) + 3.0 * cfg.stragglers.rate_per_node_s
    rate = cfg.nodes * per_node + cfg.planned_per_s
    return CHUNK_S if rate * CHUNK_S <= CHUNK_EVENTS else CHUNK_EVENTS / rate


class BufferedPoisson:
    """A Poisson process generated chunk by chunk; the surplus of a batch is kept (prefix-stable)."""

    def __init__(self, rate_s: float, rng: np.random.Generator) -> None:
        self.rate_s, self.rng, self.next_t = rate_s, rng, math.inf
        if rate_s > 0.0:
            self.next_t = float(rng.standard_exponential()) / rate_s
        self._future = np.empty(0)

    def until(self, end_s: float) -> np.ndarray:
        """Arrivals in ``[previous end, end_s)``, continuing the same gap sequence."""
        if self.rate_s <= 0.0:
            return np.empty(0)
        parts = [np.array([self.next_t]), self._future]
        last = float(self._future[-1]) if self._future.size else self.next_t
        while last < end_s:
            batch = min(MAX_BATCH, max(16, int(min(1.2 * (end_s - last) * self.rate_s, MAX_BATCH)) + 16))
            arr = last + np.cumsum(self.rng.standard_exponential(batch)) / self.rate_s
            parts.append(arr)
            last = float(arr[-1])
        allt = np.concatenate(parts)
        cut = int(np.searchsorted(allt, end_s))
        self.next_t, self._future = float(allt[cut]), allt[cut + 1:]
        return allt[:cut]


def weibull_scale(rate_s: float, shape: float) -> float:
    """Scale of the Weibull gaps whose mean is ``1 / rate_s`` (mean = scale x Gamma(1 + 1/shape))."""
    return math.exp(-math.log(rate_s) - math.lgamma(1.0 + 1.0 / shape))


def equilibrium_first(scale: float, shape: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Time to each node's first failure when its age is in equilibrium (the stationary renewal
    process): the forward recurrence time, density ``S(t) / mean``. For Weibull gaps its CDF is the
    regularised incomplete gamma ``P(1/shape, (t/scale)^shape)``, so ``(t/scale)^shape`` is
    Gamma(1/shape) distributed (Cox, Renewal Theory, 1962, s5.2)."""
    return scale * rng.gamma(1.0 / shape, 1.0, n) ** (1.0 / shape)


class WeibullSource:
    """Per-node renewal processes with Weibull gaps of mean ``1/rate``, vectorised over nodes.

    Node clocks start in equilibrium (expected failures in any window = rate x its length, for any
    shape), or at age 0 with ``new`` (``reliability.infant_mortality``: a fresh fleet)."""

    def __init__(self, nodes: int, rate_s: float, shape: float, rng: np.random.Generator,
                 new: bool = False) -> None:
        self.nodes, self.shape, self.rng = nodes, shape, rng
        self.scale = weibull_scale(rate_s, shape) if rate_s > 0 else math.inf
        if rate_s <= 0:
            self.next_t = np.full(nodes, math.inf)
        elif new:
            self.next_t = self.scale * rng.weibull(shape, nodes)
        else:
            self.next_t = equilibrium_first(self.scale, shape, nodes, rng)

    def until(self, end_s: float) -> np.ndarray:
        """Failure times of all nodes in ``[previous end, end_s)`` (unsorted)."""
        found = []
        while True:
            due = self.next_t < end_s
            if not due.any():
                break
            found.append(self.next_t[due])
            self.next_t[due] += self.scale * self.rng.weibull(self.shape, self.nodes)[due]
        return np.concatenate(found) if found else np.empty(0)


class SamplePath:
    """All random events of one replica, in time order, generated lazily chunk by chunk."""

    def __init__(self, cfg: HorizonConfig, seed: int, replica: int) -> None:
        self.cfg = cfg

        def gen(name: str) -> np.random.Generator:
            return generator(seed, replica, name)

        poisson = [i for i, c in enumerate(cfg.classes) if c.weibull_shape is None]
        rates = np.array([cfg.classes[i].rate_per_node_s for i in poisson])
        self.poisson_classes = np.array(poisson, dtype=np.int64)
        self.cum_share = np.cumsum(rates) / rates.sum() if rates.sum() > 0 else rates
        self.failures = BufferedPoisson(cfg.nodes * float(rates.sum()), gen("failures"))
        self.class_rng = gen("failure-classes")
        self.weibull = [(i, WeibullSource(cfg.nodes, c.rate_per_node_s, c.weibull_shape,
                                          gen(f"failures.weibull.{c.name}"),
                                          new=cfg.infant_mortality))
                        for i, c in enumerate(cfg.classes) if c.weibull_shape is not None]
        self.repair_rng = gen("repair")
        self.planned = BufferedPoisson(cfg.planned_per_s, gen("maintenance"))
        st = cfg.stragglers
        self.stragglers = BufferedPoisson(cfg.nodes * st.rate_per_node_s, gen("stragglers"))
        self.length_rng = gen("straggler-lengths")
        self.evict_repair_rng = gen("straggler-repair")
        self.pending: list[Event] = []

    def events(self) -> Iterator[Event]:
        """Events in (time, kind) order, ending with ``HORIZON`` when the horizon is finite."""
        start, horizon, span = 0.0, self.cfg.horizon_s, chunk_span_s(self.cfg)
        while start < horizon and not self._exhausted():
            # Chunks before the next event's are empty: step over them whole, on the same chunk
            # boundaries (so the draws are those of visiting each), instead of one by one (at
            # tiny failure rates that was millions of chunks with no event between two yields).
            ahead = (self._next_s() - start) / span
            skip = math.floor(ahead) if math.isfinite(ahead) else 0
            if skip >= 1:
                start = min(horizon, start + skip * span)
                continue
            end = min(start + span, horizon)
            yield from self._chunk(end)
            start = end
        yield from sorted(e for e in self.pending if e[0] <= horizon)
        if math.isfinite(horizon):
            yield (horizon, HORIZON, -1, 0.0)

    def _next_s(self) -> float:
        """The earliest time any source has an event at (inf when none will)."""
        times = [s.next_t for s in (self.failures, self.planned, self.stragglers)]
        times += [float(np.min(w.next_t)) for _, w in self.weibull if np.size(w.next_t)]
        times += [self.pending[0][0]] if self.pending else []
        return min(times, default=math.inf)

    def _exhausted(self) -> bool:
        """No source can produce another event (all rates zero)."""
        sources = (self.failures, self.planned, self.stragglers)
        return all(math.isinf(s.next_t) for s in sources) and not self.pending \
            and all(not np.isfinite(w.next_t).any() for _, w in self.weibull)

    def _chunk(self, end_s: float) -> list[Event]:
        times, classes = self._failures(end_s)
        repairs = self.repair_rng.lognormal(math.log(self.cfg.repair_median_s), self.cfg.repair_sigma,
                                            times.size) if times.size else np.empty(0)
        events: list[Event] = [(float(t), FAILURE, int(c), float(r))
                               for t, c, r in zip(times, classes, repairs, strict=True)]
        events.extend((float(t), PLANNED_EVENT, -1, 0.0) for t in self.planned.until(end_s))
        self._straggler_events(end_s)
        while self.pending and self.pending[0][0] < end_s:
            events.append(heapq.heappop(self.pending))
        events.sort()
        return events

    def _failures(self, end_s: float) -> tuple[np.ndarray, np.ndarray]:
        times = self.failures.until(end_s)
        u = self.class_rng.random(times.size)
        classes = self.poisson_classes[np.searchsorted(self.cum_share, u, side="right")
                                       .clip(0, max(len(self.poisson_classes) - 1, 0))] \
            if times.size else np.empty(0, dtype=np.int64)
        t_parts, c_parts = [times], [classes]
        for index, source in self.weibull:
            found = source.until(end_s)
            t_parts.append(found)
            c_parts.append(np.full(found.size, index, dtype=np.int64))
        return np.concatenate(t_parts), np.concatenate(c_parts)

    def _straggler_events(self, end_s: float) -> None:
        st, evict_class = self.cfg.stragglers, len(self.cfg.classes)
        starts = self.stragglers.until(end_s)
        if not starts.size:
            return
        lengths = self.length_rng.lognormal(math.log(st.median_s), st.sigma, starts.size)
        repairs = self.evict_repair_rng.lognormal(math.log(self.cfg.repair_median_s),
                                                  self.cfg.repair_sigma, starts.size)
        for t, length, repair in zip(starts, lengths, repairs, strict=True):
            off = float(t) + min(float(length), st.detect_s)
            heapq.heappush(self.pending, (float(t), STRAG_ON, -1, 0.0))
            heapq.heappush(self.pending, (off, STRAG_OFF, -1, 0.0))
            if st.detect_s < length:
                heapq.heappush(self.pending, (off, EVICT, evict_class, float(repair)))
