"""Reference transforms of a Tier B transfer, for tests: the direct way the flow model's reused
incidence (``FlowModel._prepared``) must agree with. Moved out of ``simcluster/flows/plan.py``,
where nothing used them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from simcluster.flows.plan import Transfer


def scaled(transfer: Transfer, factor: float) -> Transfer:
    """``transfer`` with every flow's bytes multiplied by ``factor`` (latencies unchanged)."""
    phases = tuple(replace(p, classes=tuple(replace(c, bytes_per_flow=c.bytes_per_flow * factor)
                                            for c in p.classes)) for p in transfer.phases)
    return replace(transfer, phases=phases)


def with_latencies(transfer: Transfer, latencies_s: Iterable[float]) -> Transfer:
    """``transfer`` with phase ``i`` paying ``latencies_s[i]`` before it starts."""
    phases = tuple(replace(p, latency_s=lat)
                   for p, lat in zip(transfer.phases, latencies_s, strict=True))
    return replace(transfer, phases=phases)
