"""Links as shared resources: transfers share a link's bandwidth equally (processor sharing).

A transfer has ``work_s`` (its duration alone on idle links, from the collective model) and the
links it crosses. While ``n`` transfers are active on a link, each gets ``capacity/n`` of it; a
transfer progresses at the rate of its most loaded link. When a transfer arrives or leaves, the
transfers sharing a link with it are advanced to now, re-rated and their completion re-planned
in closed form (SimGrid-style flow model, reference/network.md sections 4.3 and 7.1 tier B, with
equal shares instead of max-min water-filling, so a change only touches its link neighbours).
Latency is inside ``work_s`` and is shared like the rest: a stated simplification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import simpy

from simcluster.errors import SpecError


@dataclass(slots=True, eq=False)
class Transfer:
    """One active transfer (mutable state of the network, not a record)."""

    name: str
    links: tuple[str, ...]
    work_s: float
    start_s: float
    done: simpy.Event
    remaining_s: float = field(init=False)
    rate: float = 0.0
    since_s: float = field(init=False)
    generation: int = 0

    def __post_init__(self) -> None:
        self.remaining_s = self.work_s
        self.since_s = self.start_s


def _payload(event: simpy.Event) -> tuple[Transfer, int]:
    """The (transfer, generation) a completion timer carries."""
    return cast(tuple[Transfer, int], event.value)


class Network:
    """Shared links of one simulation; ``capacity`` maps a link to its speed (1.0 = nominal)."""

    def __init__(self, env: simpy.Environment, capacity: dict[str, float] | None = None) -> None:
        self.env = env
        self.capacity = capacity or {}
        self.on_link: dict[str, list[Transfer]] = {}

    def transfer(self, name: str, links: Sequence[str], work_s: float) -> simpy.Event:
        """Start a transfer now; the returned event succeeds with the :class:`Transfer` at the end."""
        if work_s < 0:
            raise SpecError("transfer.work_s", f"must be >= 0, got {work_s}")
        flow = Transfer(name, tuple(links), work_s, self.env.now, self.env.event())
        if work_s == 0 or not flow.links:
            flow.done.succeed(flow)
            return flow.done
        for link in flow.links:
            self.on_link.setdefault(link, []).append(flow)
        self._replan(self._neighbours(flow))
        return flow.done

    def _neighbours(self, flow: Transfer) -> list[Transfer]:
        """Active transfers sharing a link with ``flow`` (``flow`` included if active)."""
        seen: dict[int, Transfer] = {}
        for link in flow.links:
            for other in self.on_link.get(link, ()):
                seen[id(other)] = other
        return list(seen.values())

    def _replan(self, flows: list[Transfer]) -> None:
        now, cap = self.env.now, self.capacity
        for flow in flows:
            flow.remaining_s -= flow.rate * (now - flow.since_s)
            flow.since_s = now
            flow.rate = min(cap.get(link, 1.0) / len(self.on_link[link]) for link in flow.links)
            flow.generation += 1
            timer = self.env.timeout(max(flow.remaining_s, 0.0) / flow.rate,
                                     (flow, flow.generation))
            timer.callbacks.append(self._on_timer)

    def _on_timer(self, event: simpy.Event) -> None:
        flow, generation = _payload(event)
        if generation != flow.generation:
            return  # superseded: the transfer was re-rated since
        for link in flow.links:
            self.on_link[link].remove(flow)
        flow.remaining_s = 0.0
        self._replan(self._neighbours(flow))
        flow.done.succeed(flow)
