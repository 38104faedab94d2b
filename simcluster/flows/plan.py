"""The values Tier B works on: flow classes, phases and transfers (docs/collectives.md, "Tier B").

A :class:`FlowClass` is ``multiplicity`` identical flows that each move ``bytes_per_flow`` over the
same links; ``usage`` lists each directed edge with the number of times one flow crosses it. A ring
channel is one class whose usage is the sum of its hops' routes: every hop moves the same bytes and
the ring's synchronisation makes them progress together, so the slowest edge governs the whole
ring (docs/collectives.md, "Flow classes"). A :class:`Phase` is a set of classes that start together; a
:class:`Transfer` (one collective, or one send) runs its phases one after the other, each after its
latency (SimGrid LV08 semantics: latency is paid before the bytes move, without contention).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from simcluster.topology import Edge

#: Virtual vertex of a sprayed leaf uplink bundle: ``(leaf, SPINES)`` stands for the edges from
#: ``leaf`` to every spine, ``(SPINES, leaf)`` for those back; see :mod:`.routes`.
SPINES = ("spine", "*")

Usage = tuple[tuple[Edge, float], ...]
"""``((edge, crossings per flow), ...)``, each edge once, in no particular order."""


@dataclass(frozen=True, slots=True)
class FlowClass:
    """Identical flows over the same links.

    Attributes
    ----------
    usage : Usage
        Directed edges and crossings per flow (fractional when sprayed over spines).
    bytes_per_flow : float
        Bytes each flow moves across each of its crossings, bytes.
    multiplicity : int
        Identical flows in the class (>= 1).
    """

    usage: Usage
    bytes_per_flow: float
    multiplicity: int = 1


@dataclass(frozen=True, slots=True)
class Phase:
    """Flow classes that start together; the phase ends when the last one ends.

    Attributes
    ----------
    classes : tuple[FlowClass, ...]
        The flows of the phase.
    latency_s : float
        Paid before the phase's bytes start to move, seconds.
    """

    classes: tuple[FlowClass, ...]
    latency_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Transfer:
    """One collective (or send): phases run one after the other.

    Attributes
    ----------
    phases : tuple[Phase, ...]
        In order.
    start_s : float
        When the transfer is issued, seconds.
    label : str
        For reports.
    """

    phases: tuple[Phase, ...]
    start_s: float = 0.0
    label: str = ""

    def edges(self) -> set[Edge]:
        """Every directed edge the transfer uses."""
        return {e for p in self.phases for c in p.classes for e, _ in c.usage}


def merge_usage(parts: Iterable[Usage]) -> Usage:
    """Sum crossings edge by edge: the usage of flows that move together (a ring's hops)."""
    total: dict[Edge, float] = {}
    for usage in parts:
        for edge, weight in usage:
            total[edge] = total.get(edge, 0.0) + weight
    return tuple(total.items())


def group_classes(classes: Iterable[FlowClass]) -> tuple[FlowClass, ...]:
    """Merge classes with identical usage and bytes into one with the summed multiplicity.

    Exact: identical flows on identical links get identical max-min rates (max-min fairness treats
    them alike; Bertsekas and Gallager, *Data Networks*, section 6.5.2).
    """
    merged: dict[tuple[frozenset[tuple[Edge, float]], float], FlowClass] = {}
    for c in classes:
        key = (frozenset(c.usage), c.bytes_per_flow)
        seen = merged.get(key)
        merged[key] = c if seen is None else replace(seen, multiplicity=seen.multiplicity + c.multiplicity)
    return tuple(merged.values())
