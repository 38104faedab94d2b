"""Records -> tracer calls (Chrome/Perfetto): one process per (replica class, stage), one thread
per stream.

Rows: ``compute`` (F/B/W ops, blocking sends, and idle gaps named ``bubble``/``wait ...``),
``p2p`` (pipeline transfers on the links), ``dp`` (gradient buckets and ZeRO-3 gathers), ``dp-rs``
(ZeRO-3 reduce-scatters). Process
names carry the class multiplicity (``stage 3 [nominal x7]``). Timestamps are microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simcluster.observe.records import OpRecord
from simcluster.observe.tracer import ChromeTracer, Tracer, write_text_atomic
from simcluster.sim.plan import StepPlan

STREAMS = ("compute", "p2p", "dp", "dp-rs")


def _pid(plan: StepPlan, group: str, stage: int) -> int:
    names = [g.name for g in plan.groups]
    return (names.index(group) if group in names else 0) * plan.pp + stage


def emit(records: Iterable[OpRecord], plan: StepPlan, tracer: Tracer) -> None:
    """Send every record to ``tracer`` as spans, after naming processes and threads."""
    for g, group in enumerate(plan.groups):
        for stage in range(plan.pp):
            pid = g * plan.pp + stage
            tracer.name_process(pid, f"stage {stage} [{group.name} x{group.multiplicity}]", pid)
            for tid, stream in enumerate(STREAMS):
                tracer.name_thread(pid, tid, stream)
    for rec in records:
        pid = _pid(plan, rec.group, rec.stage)
        args: dict[str, Any] = {"eid": rec.eid, "gate": rec.gate}
        if rec.stream != "compute":
            args["work_s"] = sum(sec for _, sec in rec.parts)
        name = "bubble" if rec.name.startswith("wait") and rec.category == "bubble" \
            and dict(rec.parts).get("pp_comm", 0.0) == 0.0 else rec.name
        tracer.span(pid, STREAMS.index(rec.stream), name, rec.start_s, rec.end_s, rec.category,
                    args)


def chrome_trace(records: Iterable[OpRecord], plan: StepPlan) -> ChromeTracer:
    """A :class:`ChromeTracer` filled with ``records``."""
    tracer = ChromeTracer()
    emit(records, plan, tracer)
    return tracer


def write_trace_file(tracer: ChromeTracer, path: str | Path) -> Path:
    """Write the tracer's JSON to ``path`` atomically (temporary file, then rename)."""
    return write_text_atomic(path, tracer.to_json())
