"""Links as shared resources: concurrent transfers share bandwidth max-min fairly.

A transfer has ``work_s`` (its duration alone on idle links, from the collective model) and the
links it crosses; alone it would fill each of them. Rates are in units of that solo speed, so a
link of capacity ``c`` (1.0 = nominal) carries transfers whose rates sum to at most ``c``. The
rates are max-min fair, found by progressive filling (water-filling): every transfer rises at one
common rate, a link saturates when its transfers' rates reach its capacity, the transfers on it
freeze and the others keep rising (Bertsekas and Gallager, *Data Networks*, 2nd ed., section
6.5.2; SimGrid's flow model, simgrid/simgrid ``docs/source/Models.rst``). When a transfer
arrives or leaves, the transfers connected to it through shared links are advanced to now,
re-rated, and those whose rate changed have their completion re-planned in closed form. Latency is
inside ``work_s`` and is shared like the rest: a stated simplification.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from heapq import heappush

import simpy
from simpy.events import NORMAL

from simcluster.errors import InvariantError
from simcluster.sim.engine import pending

_new_event = object.__new__

#: Relative tolerance under which two link shares count as saturating in the same round.
SATURATION_RTOL = 1e-12


class Transfer:
    """One active transfer (mutable state of the network, not a record)."""

    __slots__ = ("done", "generation", "links", "name", "rate", "remaining_s", "since_s",
                 "start_s", "work_s")

    def __init__(self, name: str, links: tuple[str, ...], work_s: float, start_s: float,
                 done: simpy.Event | None) -> None:
        self.name = name
        self.links = links
        self.work_s = work_s
        self.start_s = start_s
        self.done = done
        self.remaining_s = work_s
        self.rate = 0.0
        self.since_s = start_s
        self.generation = 0


def max_min_shares(paths: Sequence[Sequence[str]],
                   capacity: Mapping[str, float] | None = None) -> list[float]:
    """Max-min fair rate of each transfer crossing ``paths[i]`` (progressive filling).

    Each transfer crosses each of its links once; ``capacity`` gives a link's capacity (default
    1.0). Every path must name at least one link. Pure Python: the DES solves thousands of tiny
    problems (one to a few dozen transfers), where array set-up would dominate; ``flows.maxmin``
    is the numpy solver for large incidence matrices.
    """
    cap = capacity or {}
    if len(paths) == 1:  # alone: the slowest of its links
        return [min(cap.get(link, 1.0) for link in paths[0])]
    users: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        for link in dict.fromkeys(path):
            users.setdefault(link, []).append(i)
    remaining = {link: cap.get(link, 1.0) for link in users}
    rates = [0.0] * len(paths)
    frozen = [False] * len(paths)
    level = 0.0
    while users:
        shares = {link: max(remaining[link], 0.0) / len(us) for link, us in users.items()}
        step = min(shares.values())
        level += step
        for link, us in users.items():
            remaining[link] -= step * len(us)
        tight = [link for link, share in shares.items() if share <= step * (1 + SATURATION_RTOL)]
        for i in (i for link in tight for i in users[link]):
            if not frozen[i]:
                frozen[i], rates[i] = True, level
        users = {link: [i for i in us if not frozen[i]] for link, us in users.items()
                 if link not in tight}
        users = {link: us for link, us in users.items() if us}
    return rates


class Network:
    """Shared links of one simulation; ``capacity`` maps a link to its speed (1.0 = nominal)."""

    def __init__(self, env: simpy.Environment, capacity: dict[str, float] | None = None) -> None:
        self.env = env
        self.capacity = capacity or {}
        self.on_link: dict[str, list[Transfer]] = {}
        self._solo: dict[tuple[str, ...], float] = {}  # links -> rate of a transfer alone

    def transfer(self, name: str, links: Sequence[str], work_s: float) -> simpy.Event:
        """Start a transfer now; the returned event succeeds with the :class:`Transfer` at the end."""
        if work_s < 0:
            raise InvariantError(f"transfer work must be >= 0 s, got {work_s}")
        done = pending(self.env)
        path = links if type(links) is tuple else tuple(links)
        flow = Transfer(name, path, work_s, self.env._now, done)
        if work_s == 0 or not path:
            flow.done = None
            done.succeed(flow)
            return done
        on_link = self.on_link
        alone = True  # on idle links: connected to nothing but itself
        for link in path:
            users = on_link.get(link)
            if users is None:
                on_link[link] = [flow]
                continue
            if users:
                alone = False
            users.append(flow)
        self._replan([flow] if alone else self._search(path))
        return done

    def _connected(self, links: Sequence[str]) -> list[Transfer]:
        """Active transfers reachable from ``links`` through shared links (discovery order).

        Fast path for the common case (no transfer, or one transfer alone on all of its links):
        the same answer as the search, without it.
        """
        on_link = self.on_link
        only: Transfer | None = None
        for link in links:
            users = on_link.get(link)
            if not users:
                continue
            if len(users) > 1 or (only is not None and users[0] is not only):
                return self._search(links)
            only = users[0]
        if only is None:
            return []
        if all(len(on_link[link]) == 1 for link in only.links):
            return [only]
        return self._search(links)

    def _search(self, links: Sequence[str]) -> list[Transfer]:
        """Breadth of :meth:`_connected`: every transfer sharing a link, transitively."""
        seen: dict[int, Transfer] = {}
        todo, visited = list(links), set(links)
        while todo:
            for other in self.on_link.get(todo.pop(), ()):
                if id(other) not in seen:
                    seen[id(other)] = other
                    todo.extend(link for link in other.links if link not in visited)
                    visited.update(other.links)
        return list(seen.values())

    def _replan(self, flows: list[Transfer]) -> None:
        if not flows:
            return
        if len(flows) == 1:  # alone: the slowest of its links (max_min_shares' own answer)
            flow = flows[0]
            rate = self._solo.get(flow.links)
            if rate is None:
                rate = self._solo[flow.links] = max_min_shares([flow.links], self.capacity)[0]
            if rate != flow.rate:
                self._rerate(flow, rate)
            return
        rates = max_min_shares([flow.links for flow in flows], self.capacity)
        for flow, rate in zip(flows, rates, strict=True):
            if rate != flow.rate:  # otherwise its timer still fires at the right time
                self._rerate(flow, rate)

    def _rerate(self, flow: Transfer, rate: float) -> None:
        """Advance ``flow`` to now at its old rate and re-plan its completion at ``rate``.

        The timer is :func:`~.engine.timeout` inlined.
        """
        env = self.env
        now = env._now
        flow.remaining_s -= flow.rate * (now - flow.since_s)
        flow.since_s, flow.rate = now, rate
        flow.generation += 1
        delay = max(flow.remaining_s, 0.0) / rate
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        timer: simpy.Event = _new_event(simpy.Event)
        timer.env = env
        timer.callbacks = [self._on_timer]
        timer._value = (flow, flow.generation)
        timer._ok = True
        heappush(env._queue, (now + delay, NORMAL, next(env._eid), timer))

    def _on_timer(self, event: simpy.Event) -> None:
        flow, generation = event._value
        if generation != flow.generation:
            return  # superseded: the transfer was re-rated since
        on_link, links = self.on_link, flow.links
        for link in links:
            on_link[link].remove(flow)
        flow.remaining_s = 0.0
        for link in links:
            if on_link[link]:  # someone left to re-rate (else _connected finds no one)
                self._replan(self._connected(links))
                break
        done, flow.done = flow.done, None  # no Transfer <-> Event cycle left for the collector
        if done is not None:  # done.succeed(flow), inlined: the same queue entry
            env = self.env
            done._ok = True
            done._value = flow
            heappush(env._queue, (env._now, NORMAL, next(env._eid), done))
