"""A stage's compute stream as event callbacks instead of a SimPy process.

The stream runs the synchronous ZeRO-1/2 parameter gather if any, the schedule's ops in order,
then waits for its DP reduction, arrives at the optimizer barrier and runs the optimizer. Every
op but ZeRO-3's (and the first forwards that wait for overlapped parameter gathers) is driven by
callbacks on its own events: the message it waits for, its compute timer (and its DP buckets'
timers), the end of its pipeline send. The rest (ZeRO-3 ops, the step's tail) stays in :class:`Device`'s
generators, driven here exactly as ``yield from`` inside a SimPy process would drive them.

Ordering: every callback is appended to the same event, at the same moment, as the process's
``_resume`` would have been, so SimPy's queue holds the same entries in the same order and the
records come out identical. Only the process's own start and end events are different: the start
is one URGENT entry at time 0 in creation order (SimPy's ``Initialize``), the end schedules
nothing (nobody waits for a compute stream; :attr:`ComputeStream.finished` tells the deadlock
check).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy
from simpy.events import PENDING, URGENT

from simcluster.errors import InvariantError
from simcluster.sim.commclock import MAX_EXTENSIONS, extension_s
from simcluster.sim.device import Device
from simcluster.sim.engine import fire, pending, wake
from simcluster.sim.plan import Op, StagePlan, in_link, out_link


class ComputeStream:
    """One (replica class, stage) compute stream; :meth:`start` schedules its first step."""

    __slots__ = ("_bucket", "_busy0", "_dev", "_done_s", "_env", "_extra", "_fabric", "_gathers",
                 "_gen", "_index", "_links", "_msgs", "_ops", "_optimizer_s", "_passes",
                 "_prologue_s", "_share", "_start", "_then", "finished")

    def __init__(self, env: simpy.Environment, dev: Device, plan: StagePlan) -> None:
        self._env = env
        self._dev = dev
        self._fabric = dev.fabric
        self._ops = plan.ops
        self._optimizer_s = plan.optimizer_s
        self._prologue_s = plan.prologue_s
        self._gathers = plan.gathers
        self._index = 0
        self._start = 0.0
        self._gen: Generator[simpy.Event, Any, None] | None = None
        self._then: Callable[[], None] | None = None
        self._links: dict[int, tuple[str, str]] = {}
        self._msgs = self._fabric.messages(dev.group)
        self.finished = False
        self._bucket = 0  # of a bucketed op: the next bucket, and the op's seconds done
        self._done_s = 0.0
        # the SMs collectives beside an op take (commclock): the clocks at its start, the
        # seconds it has run past its nominal end, and how many times it has extended
        self._share = self._fabric.share
        self._busy0 = 0.0
        self._extra = 0.0
        self._passes = 0

    def start(self) -> None:
        """Schedule the stream's start: an URGENT event now, as ``env.process`` does."""
        wake(self._env, 0, self._begin, URGENT)

    def _begin(self, _: simpy.Event) -> None:
        if self._gathers[1]:
            self._dev.issue_param_gathers(*self._gathers)
        if self._prologue_s > 0:
            self._delegate(self._dev.gather_params(self._prologue_s), self._next)
            return
        self._next()

    # -- the common op ------------------------------------------------------------------------

    def _next(self) -> None:
        """Start op ``_index`` (or the tail once the ops are done)."""
        ops = self._ops
        if self._index == len(ops):
            self._delegate(self._tail(), self._finish)
            return
        op = ops[self._index]
        if op.recv is not None:
            ev = self._msgs.get(op.recv)
            if ev is None:
                ev = self._msgs[op.recv] = pending(self._env)
            if ev._value is PENDING:
                self._start = self._env._now
                ev.callbacks.append(self._got_message)
                return
        self._compute(op)

    def _got_message(self, ev: simpy.Event) -> None:
        """The awaited message arrived: book the wait, bubble until its transfer started, pp after."""
        env, dev, start = self._env, self._dev, self._start
        now = env._now
        op = self._ops[self._index]
        if now > start:
            key = op.recv
            if key is None:
                raise InvariantError("a stream waited for a message its op does not receive")
            flow_eid, flow_start = ev._value
            pp = now - max(start, flow_start)
            parts = (("bubble", now - start - pp), ("pp_comm", pp))
            dev.last = self._fabric.record(dev.group, dev.stage, "compute",
                                           f"wait {key[0]}{key[1]} mb{key[2]}", "bubble",
                                           start, parts, flow_eid)
        self._compute(op)

    def _compute(self, op: Op) -> None:
        if op.zero3 is not None:
            self._delegate(self._dev.run_layers(op, op.zero3), self._after_compute)
            return
        self._start = self._env._now
        if self._share > 0:
            self._busy0, self._extra, self._passes = self._dev.busy(self._start), 0.0, 0
        if op.buckets:
            self._bucket, self._done_s = 0, 0.0
            self._bucket_step(op)
            return
        wake(self._env, op.duration_s, self._computed)

    def _bucket_step(self, op: Op) -> None:
        """A bucketed op: wake at each bucket's fraction of the op, then at its end."""
        if self._bucket < len(op.buckets):
            fraction = op.buckets[self._bucket][1]
            wake(self._env, max(fraction * op.duration_s - self._done_s, 0.0), self._bucket_ready)
        else:
            wake(self._env, op.duration_s - self._done_s, self._computed)

    def _run_on(self, callback: Callable[[simpy.Event], None]) -> bool:
        """Whether the op still owes time for the SMs the collectives beside it held; if so, wake
        ``callback`` again after it (at most :data:`MAX_EXTENSIONS` times per call site)."""
        if self._share <= 0:
            return False
        owed = extension_s(self._share, self._dev.busy(self._env._now) - self._busy0, self._extra)
        if not owed or self._passes >= MAX_EXTENSIONS:
            self._passes = 0
            return False
        self._extra += owed
        self._passes += 1
        wake(self._env, owed, callback)
        return True

    def _bucket_ready(self, _: simpy.Event) -> None:
        """A DP bucket of the op is produced: mark it ready with the stream's last record."""
        if self._run_on(self._bucket_ready):
            return
        dev = self._dev
        op = self._ops[self._index]
        bucket, fraction = op.buckets[self._bucket]
        self._done_s = max(self._done_s, fraction * op.duration_s)
        self._fabric.event("ready", dev.group_index, dev.stage, bucket).succeed(dev.last)
        self._bucket += 1
        self._bucket_step(op)

    def _computed(self, _: simpy.Event) -> None:
        if self._run_on(self._computed):
            return
        dev = self._dev
        op = self._ops[self._index]
        parts = (*op.parts, ("compute", self._extra)) if self._extra else op.parts
        dev.last = self._fabric.record(dev.group, dev.stage, "compute", op.name, "compute",
                                       self._start, parts, dev.last)
        self._after_compute()

    def _after_compute(self) -> None:
        op = self._ops[self._index]
        send = op.send
        if send is None:
            self._index += 1
            self._next()
            return
        dev = self._dev
        self._start = self._env._now
        links = self._links.get(send.dst)
        if links is None:
            links = self._links[send.dst] = (out_link(dev.group, dev.stage),
                                             in_link(dev.group, send.dst))
        done = self._fabric.network.transfer(op.name, links, send.work_s)
        done.callbacks.append(self._sent)

    def _sent(self, _: simpy.Event) -> None:
        """The blocking send ended: record it on the ``p2p`` stream, deliver the message."""
        dev, fabric = self._dev, self._fabric
        op = self._ops[self._index]
        send = op.send
        if send is None:
            raise InvariantError("a stream ended a send its op does not make")
        start = self._start
        dev.last = fabric.record(dev.group, dev.stage, "p2p", f"send {op.name}", "pp_comm",
                                 start, (("pp_comm", send.work_s),), dev.last)
        msg = self._msgs.get(send.key)
        if msg is None:
            msg = self._msgs[send.key] = pending(self._env)
        fire(msg, (dev.last, start))
        self._index += 1
        self._next()

    # -- generators, as ``yield from`` inside a process -----------------------------------------

    def _tail(self) -> Generator[simpy.Event, Any, None]:
        dev = self._dev
        yield from dev.wait_dp()
        yield from dev.barrier()
        yield from dev.optimizer(self._optimizer_s)

    def _finish(self) -> None:
        self.finished = True

    def _delegate(self, gen: Generator[simpy.Event, Any, None], then: Callable[[], None]) -> None:
        self._gen, self._then = gen, then
        self._send(None)

    def _resume(self, ev: simpy.Event) -> None:
        if ev._ok:
            self._send(ev._value)
            return
        ev._defused = True  # SimPy's Process._resume does this
        exc = type(ev._value)(*ev._value.args)
        exc.__cause__ = ev._value
        self._send(None, exc)

    def _send(self, value: Any, exc: BaseException | None = None) -> None:
        """Run the delegated generator until it waits on a pending event or returns."""
        gen = self._gen
        if gen is None:
            raise InvariantError("a stream resumed a delegated generator it does not hold")
        while True:
            try:
                ev = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration:
                then, self._gen, self._then = self._then, None, None  # no cycle left behind
                if then is None:
                    raise InvariantError("a delegated generator returned with no continuation") from None
                then()
                return
            exc = None
            if ev.callbacks is not None:
                ev.callbacks.append(self._resume)
                return
            if not ev._ok:
                ev._defused = True
                exc = type(ev._value)(*ev._value.args)
                exc.__cause__ = ev._value
            value = ev._value
