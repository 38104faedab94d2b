"""Collect phase: the ledger of exposed time, the critical path and DP overlap, from records.

The ledger is read on the *critical stage*: the (replica class, stage) that reached the optimizer
barrier last, i.e. the one that held the step up. Its compute stream tiles ``[0, barrier]``
without gaps (ops, recorded waits, and its blocking sends recorded on the ``p2p`` stream), so
summing the categories of its records and adding the optimizer time after the barrier gives
exactly the step time. Idle waiting for a
pipeline message is bubble until the message's transfer starts, pipeline communication after;
waiting for the DP reduction is exposed DP time.

The critical path follows each record's ``gate`` (the record that released it) back from the
end of the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcluster.observe.ledger import Ledger
from simcluster.observe.records import OpRecord
from simcluster.sim.cluster import EngineOutput
from simcluster.sim.plan import StepPlan


@dataclass(frozen=True, slots=True)
class Collected:
    """What the engine output means: ledger, critical stage, critical path, DP overlap."""

    ledger: Ledger
    critical_group: str
    critical_stage: int
    critical_path: tuple[OpRecord, ...]
    dp_total_s: float
    dp_hidden_s: float


def critical_stage(out: EngineOutput, plan: StepPlan) -> tuple[str, int]:
    """(class name, stage) of the last arrival at the optimizer barrier."""
    _, group, stage = out.arrivals[-1]
    return plan.groups[group].name, stage


def ledger_of(out: EngineOutput, group: str, stage: int) -> Ledger:
    """Exposed seconds per category on the critical stage, then the optimizer after the barrier."""
    ledger = Ledger()
    for rec in out.records:
        if rec.group != group or rec.stage != stage or rec.category == "optimizer":
            continue
        if rec.stream == "compute":
            for category, seconds in rec.parts:
                ledger.add(category, seconds)
        elif rec.stream == "p2p":  # blocking sends: the compute stream waits for them
            ledger.add("pp_comm", rec.duration_s)
    ledger.add("optimizer", out.end_s - out.barrier_s)
    return ledger


def critical_path(records: Sequence[OpRecord], end_s: float) -> tuple[OpRecord, ...]:
    """The chain of records that released one another, from step start to ``end_s``."""
    last = [r for r in records if r.stream == "compute" and r.end_s == end_s]
    if not last:
        return ()
    chain = [last[0]]
    while chain[-1].gate >= 0:
        chain.append(records[chain[-1].gate])
    return tuple(reversed(chain))


def dp_overlap(out: EngineOutput, group: str, stage: int) -> tuple[float, float]:
    """(total, hidden) DP reduction seconds on the critical stage.

    Total is the wall time the stage's DP buckets (or its ZeRO-3 gathers and reduce-scatters) took
    on their streams; hidden is the part not exposed as a wait on the compute stream.
    """
    total = sum(r.duration_s for r in out.records if r.stream in ("dp", "dp-rs")
                and r.stage == stage and r.group in ("all", group))
    exposed = sum(r.duration_s for r in out.records if r.stream == "compute" and r.group == group
                  and r.stage == stage and r.category == "dp_comm")
    return total, max(total - exposed, 0.0)


def collect(out: EngineOutput, plan: StepPlan) -> Collected:
    """Ledger, critical stage and path, and DP overlap of one simulated step."""
    group, stage = critical_stage(out, plan)
    total, hidden = dp_overlap(out, group, stage)
    return Collected(ledger=ledger_of(out, group, stage), critical_group=group,
                     critical_stage=stage, critical_path=critical_path(out.records, out.end_s),
                     dp_total_s=total, dp_hidden_s=hidden)
