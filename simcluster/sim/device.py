"""Devices with a compute stream and communication streams, and the fabric they share.

CUDA-stream semantics: ops on one stream run in order; the compute stream of a stage and the DP
stream of its replica classes run concurrently. Pipeline sends are blocking for the sender's
compute stream (Megatron's batched ``send_forward_recv_backward`` waits before the next op) and
travel on the shared links; DP gradient buckets run on the DP stream as backward produces them.

Components (:class:`Fabric`, :class:`Device`) keep state and write records; the generator
functions at the bottom are the thin SimPy processes ``(env, component, plan)`` that only
sequence.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from simcluster.observe.records import OpRecord
from simcluster.sim.commclock import MAX_EXTENSIONS, CommClock, extension_s
from simcluster.sim.engine import fire, timeout
from simcluster.sim.network import Network
from simcluster.sim.plan import (
    MsgKey,
    Op,
    StagePlan,
    StepPlan,
    Zero3Pass,
    in_link,
    out_link,
)

Proc = Generator[simpy.Event, Any, None]

#: Builds a record from its fields in order without the keyword handling of ``OpRecord(...)``
#: (hundreds of thousands per step).
_new_record = tuple.__new__


def _value(ev: simpy.Event) -> Any:
    """The value an event succeeded with (a record eid, or (eid, start) for messages)."""
    return ev.value


class Fabric:
    """What every device shares: links, pipeline mailboxes, DP bucket events, barrier, records."""

    def __init__(self, env: simpy.Environment, plan: StepPlan) -> None:
        self.env = env
        self.plan = plan
        self.network = Network(env, plan.link_capacity)
        self.records: list[OpRecord] = []
        self._events: dict[tuple[Any, ...], simpy.Event] = {}
        self._messages: dict[str, dict[MsgKey, simpy.Event]] = {}
        self.expected = len(plan.stages)
        self.arrivals: list[tuple[float, int, int]] = []  # (time, group, stage)
        self.barrier = env.event()
        self.share = plan.comm_sm_share
        self.stage_clocks = [CommClock() for _ in range(plan.pp)]  # each stage's DP buckets

    def record(self, group: str, stage: int, stream: str, name: str, category: str,
               start_s: float, parts: tuple[tuple[str, float], ...], gate: int) -> int:
        """Append a record ending now; returns its eid."""
        records = self.records
        eid = len(records)
        records.append(_new_record(OpRecord, (eid, group, stage, stream, name, category, start_s,
                                              self.env._now, parts, gate)))
        return eid

    def event(self, *key: Any) -> simpy.Event:
        """The event named ``key``, created by whichever side asks first."""
        ev = self._events.get(key)
        if ev is None:
            ev = self._events[key] = self.env.event()
        return ev

    def messages(self, group: str) -> dict[MsgKey, simpy.Event]:
        """The pipeline message events of replica class ``group``, by key (created on demand)."""
        found = self._messages.get(group)
        if found is None:
            found = self._messages[group] = {}
        return found

    def arrive(self, group: int, stage: int, eid: int) -> None:
        """A stage reached the optimizer barrier; the last arrival releases everyone."""
        self.arrivals.append((self.env.now, group, stage))
        if len(self.arrivals) == self.expected:
            fire(self.barrier, eid)

    def dp_links(self, stage: int) -> tuple[str, ...]:
        """Links of a DP bucket collective: the stage's ports in every replica class."""
        names = [g.name for g in self.plan.groups]
        return tuple([out_link(n, stage) for n in names] + [in_link(n, stage) for n in names])


class Device:
    """One stage GPU of one replica class (standing for its TP/CP ranks and its multiplicity)."""

    def __init__(self, env: simpy.Environment, fabric: Fabric, group: int, plan: StagePlan) -> None:
        self.env = env
        self.fabric = fabric
        self.group_index = group
        self.group = plan.group
        self.stage = plan.stage
        self.last = -1  # eid of the last record on the compute stream
        self._links: dict[int, tuple[str, str]] = {}  # send destination -> (out, in) links
        self.param_gathers: list[simpy.Process] = []  # issued at the step's start (ZeRO-1/2)
        self.clock = CommClock()  # this GPU's own ZeRO gathers and reduce-scatters
        self._stage_clock = fabric.stage_clocks[plan.stage]

    def busy(self, now: float) -> float:
        """Seconds so far with a collective of this GPU in flight (its own and its stage's DP
        buckets; :mod:`.commclock`)."""
        return self.clock.busy(now) + self._stage_clock.busy(now)

    def _book(self, name: str, category: str, start_s: float,
              parts: tuple[tuple[str, float], ...], gate: int) -> None:
        self.last = self.fabric.record(self.group, self.stage, "compute", name, category,
                                       start_s, parts, gate)

    def run_layers(self, op: Op, z: Zero3Pass) -> Proc:
        """Run ``op`` layer by layer with its ZeRO-3 gathers and reduce-scatters.

        Gathers run on the ``dp`` stream, reduce-scatters on ``dp-rs`` (each stream in order).
        With prefetch the next layer's gather is issued when a layer's compute starts and the
        reduce-scatters run behind the compute; the op ends when the last one has. Without it
        every collective blocks the compute stream.
        """
        env, n = self.env, z.layers
        issue = [env.event() for _ in range(n)]
        if z.issued_from >= 0:  # issued at the step's start (issue_param_gathers)
            gathers = self.param_gathers[z.issued_from:z.issued_from + n]
        else:
            gathers = [env.process(self._zero3("dp", f"all-gather {op.name} L{k}", z.gather_s,
                                               issue[k])) for k in range(n)] if z.gather_s > 0 else []
        parts = tuple((category, sec / n) for category, sec in op.parts)
        issue[0].succeed()
        scatter: simpy.Process | None = None
        for k in range(n):
            if gathers:
                yield from self._await(gathers[k], f"wait all-gather {op.name} L{k}")
            if z.prefetch and k + 1 < n:
                issue[k + 1].succeed()
            start, busy0 = env.now, self.busy(env.now)
            yield env.timeout(op.duration_s / n)
            extra = yield from self._beside_collectives(busy0)
            self._book(f"{op.name} L{k}", "compute", start,
                       (*parts, ("compute", extra)) if extra else parts, self.last)
            if z.scatter_s > 0:
                scatter = env.process(self._zero3("dp-rs", f"reduce-scatter {op.name} L{k}",
                                                  z.scatter_s, scatter))
                if not z.prefetch:
                    yield from self._await(scatter, f"wait reduce-scatter {op.name} L{k}")
            if not z.prefetch and k + 1 < n:
                issue[k + 1].succeed()
        if scatter is not None:
            yield from self._await(scatter, f"wait reduce-scatter {op.name}")

    def _beside_collectives(self, busy0: float) -> Generator[simpy.Event, Any, float]:
        """Run a compute op that started with :meth:`busy` at ``busy0`` on past its nominal end
        for the SMs the collectives it overlapped held (:mod:`.commclock`); the extra seconds."""
        share, env, extra = self.fabric.share, self.env, 0.0
        if share <= 0:
            return extra
        for _ in range(MAX_EXTENSIONS):
            owed = extension_s(share, self.busy(env.now) - busy0, extra)
            if not owed:
                break
            yield env.timeout(owed)
            extra += owed
        return extra

    def _zero3(self, stream: str, name: str, work_s: float,
               after: simpy.Event | None) -> Generator[simpy.Event, Any, int]:
        """One ZeRO-3 collective on this stage's links once ``after`` has happened; its eid."""
        if after is not None:
            yield after
        start, gate = self.env.now, self.last  # the compute stream's last record before it
        links = (out_link(self.group, self.stage), in_link(self.group, self.stage))
        self.clock.start(start)
        yield self.fabric.network.transfer(name, links, work_s)
        self.clock.stop(self.env.now)
        return self.fabric.record(self.group, self.stage, stream, name, "dp_comm", start,
                                  (("dp_comm", work_s),), gate)

    def issue_param_gathers(self, work_s: float, count: int) -> None:
        """Issue ``count`` per-layer ZeRO-1/2 parameter gathers back to back on this stage's
        links (overlapped: the first forwards wait for them, :meth:`run_layers`)."""
        after: simpy.Process | None = None
        gathers = []
        for k in range(count):
            after = self.env.process(self._zero3("dp", f"param all-gather L{k}", work_s, after))
            gathers.append(after)
        self.param_gathers = gathers

    def gather_params(self, work_s: float) -> Proc:
        """The synchronous ZeRO-1/2 parameter all-gather on this stage's links; the compute
        stream waits for all of it (exposed DP time)."""
        start = self.env.now
        links = (out_link(self.group, self.stage), in_link(self.group, self.stage))
        yield self.fabric.network.transfer("param all-gather", links, work_s)
        eid = self.fabric.record(self.group, self.stage, "dp", "param all-gather", "dp_comm", start,
                                 (("dp_comm", work_s),), -1)
        self._book("wait param all-gather", "dp_comm", start,
                   (("dp_comm", self.env.now - start),), eid)

    def _await(self, collective: simpy.Process, name: str) -> Proc:
        """Wait for a ZeRO-3 collective; the wait is exposed DP time."""
        start = self.env.now
        if not collective.triggered:
            yield collective
        if self.env.now > start:
            self._book(name, "dp_comm", start, (("dp_comm", self.env.now - start),),
                       _value(collective))

    def wait_dp(self) -> Proc:
        """Wait until this stage's last DP bucket is reduced (exposed DP time)."""
        if not self.fabric.plan.dp_buckets[self.stage]:
            return
        ev = self.fabric.event("dp_done", self.stage)
        start = self.env.now
        if not ev.triggered:
            yield ev
        if self.env.now > start:
            self._book("wait dp", "dp_comm", start, (("dp_comm", self.env.now - start),),
                       _value(ev))

    def barrier(self) -> Proc:
        """Arrive at the optimizer barrier and wait for every stage of every class."""
        start = self.env.now
        self.fabric.arrive(self.group_index, self.stage, self.last)
        if not self.fabric.barrier.triggered:
            yield self.fabric.barrier
        if self.env.now > start:
            self._book("wait barrier", "bubble", start, (("bubble", self.env.now - start),),
                       _value(self.fabric.barrier))

    def optimizer(self, duration_s: float) -> Proc:
        """The optimizer step of this GPU's shard."""
        start = self.env.now
        yield timeout(self.env, duration_s)
        self._book("optimizer", "optimizer", start, (("optimizer", duration_s),), self.last)
