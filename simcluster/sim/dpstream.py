"""A stage's DP stream as event callbacks: each bucket's collective once every replica class has
produced it, in bucket order.

It replaces a SimPy process that waited on ``env.all_of(ready)`` and then on the bucket's
transfer. The wait for the ready events is SimPy's :class:`~simpy.events.AllOf` reproduced: a
check appended to each pending ready event (counted at once if already processed), and once all
are in, one event scheduled now (NORMAL) whose callback starts the transfer, as the condition's
``succeed`` and the process's resume did. The queue therefore holds the same entries in the same
order. Ready events only ever succeed (a compute stream marks its buckets), so there is no
failure path to reproduce.
"""

from __future__ import annotations

import simpy
from simpy.events import URGENT

from simcluster.sim.device import Fabric
from simcluster.sim.engine import fire, wake


class DpStream:
    """The DP bucket collectives of one stage; :meth:`start` schedules its first step."""

    __slots__ = ("_bucket", "_count", "_env", "_fabric", "_last", "_links", "_ready", "_stage",
                 "_start", "_works")

    def __init__(self, env: simpy.Environment, fabric: Fabric, stage: int) -> None:
        self._env = env
        self._fabric = fabric
        self._stage = stage
        self._works = fabric.plan.dp_buckets[stage]
        self._links = fabric.dp_links(stage)
        self._bucket = 0
        self._last = -1  # eid of the last bucket's record
        self._ready: list[simpy.Event] = []
        self._count = 0
        self._start = 0.0

    def start(self) -> None:
        """Schedule the stream's start: an URGENT event now, as ``env.process`` does."""
        wake(self._env, 0, self._begin, URGENT)

    def _begin(self, _: simpy.Event) -> None:
        self._wait()

    def _wait(self) -> None:
        """Wait until every replica class has produced bucket ``_bucket`` (or finish)."""
        fabric, stage = self._fabric, self._stage
        if self._bucket == len(self._works):
            fire(fabric.event("dp_done", stage), self._last)
            return
        bucket = self._bucket
        self._ready = ready = [fabric.event("ready", g, stage, bucket)
                               for g in range(len(fabric.plan.groups))]
        self._count = 0
        if not ready:
            wake(self._env, 0, self._go)
            return
        for ev in ready:
            if ev.callbacks is None:
                self._check(ev)
            else:
                ev.callbacks.append(self._check)

    def _check(self, _: simpy.Event) -> None:
        self._count += 1
        if self._count == len(self._ready):
            wake(self._env, 0, self._go)

    def _go(self, _: simpy.Event) -> None:
        """Every class produced the bucket: start its collective on the stage's links."""
        self._start = self._env._now
        self._fabric.stage_clocks[self._stage].start(self._start)
        done = self._fabric.network.transfer(f"bucket {self._bucket}", self._links,
                                             self._works[self._bucket])
        done.callbacks.append(self._done)

    def _done(self, ev: simpy.Event) -> None:
        gate = max([self._last, *(int(r._value) for r in self._ready)])
        stage = self._stage
        self._fabric.stage_clocks[stage].stop(self._env._now)
        self._last = self._fabric.record("all", stage, "dp", f"{ev._value.name} s{stage}",
                                         "dp_comm", self._start,
                                         (("dp_comm", self._works[self._bucket]),), gate)
        self._bucket += 1
        self._wait()
