"""The SimPy event loop of one step, driven without ``Environment.step``'s per-event call.

:func:`drain` pops SimPy's own queue in SimPy's order ((time, priority, event id)) and runs each
event's callbacks exactly as :meth:`simpy.Environment.step` does (a failed, undefused event
crashes the run); only the per-event method call and ``run``'s exception plumbing are gone.
:func:`fire` triggers an event nobody waits on without a trip through the queue; :func:`timeout`
is ``env.timeout`` inlined (same queue entry, same event id order); :func:`wake` is such a timeout
with a plain callback as its waiter, the unit of the callback-driven streams (:mod:`.stream`,
:mod:`.dpstream`).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.events import NORMAL, PENDING, EventPriority

_new_event = object.__new__


def drain(env: simpy.Environment) -> None:
    """Process every scheduled event of ``env`` (``env.run()`` without ``until``)."""
    queue = env._queue  # SimPy's own heap, popped in its order
    pop = heappop
    while queue:
        env._now, _, _, event = pop(queue)
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


def fire(event: simpy.Event, value: Any) -> None:
    """Succeed ``event`` with ``value``.

    With no callback yet (nobody waits) it is processed on the spot: scheduling it would only
    pop an event that wakes no one. Its waiters check ``triggered`` before yielding it, so no
    callback can arrive later; the relative order of every other event is unchanged.
    """
    if event.callbacks:
        event.succeed(value)
        return
    event._ok = True
    event._value = value
    event.callbacks = None  # type: ignore[assignment]


def pending(env: simpy.Environment) -> simpy.Event:
    """A new untriggered event: ``env.event()`` without its constructor call."""
    ev: simpy.Event = _new_event(simpy.Event)
    ev.env = env
    ev.callbacks = []
    ev._value = PENDING
    return ev


def timeout(env: simpy.Environment, delay: float, value: Any = None) -> simpy.Event:
    """An event that succeeds with ``value`` after ``delay``: :class:`simpy.Timeout` without its
    constructor chain (the same (time, NORMAL, next event id) entry on SimPy's queue)."""
    if delay < 0:
        raise ValueError(f"Negative delay {delay}")
    ev: simpy.Event = _new_event(simpy.Event)
    ev.env = env
    ev.callbacks = []
    ev._value = value
    ev._ok = True
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), ev))
    return ev


def wake(env: simpy.Environment, delay: float, callback: Callable[[simpy.Event], None],
         priority: EventPriority = NORMAL) -> None:
    """Call ``callback`` after ``delay``: the queue entry of ``env.timeout(delay)`` (or, at
    ``URGENT``, of a process's start) with ``callback`` as its only waiter.

    "Now" is ``delay=0`` (an int, as SimPy's own ``schedule``): ``0.0`` would turn the clock's
    initial int 0 into a float and change the records' ``repr``."""
    if delay < 0:
        raise ValueError(f"Negative delay {delay}")
    ev: simpy.Event = _new_event(simpy.Event)
    ev.env = env
    ev.callbacks = [callback]
    ev._value = None
    ev._ok = True
    heappush(env._queue, (env._now + delay, priority, next(env._eid), ev))
