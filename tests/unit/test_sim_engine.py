"""The step's event loop helpers keep SimPy's order and semantics."""

from __future__ import annotations

import pytest
import simpy

from simcluster.sim.engine import drain, fire, timeout


def _log_order(use_inline: bool) -> list[tuple[float, str]]:
    env = simpy.Environment()
    seen: list[tuple[float, str]] = []
    for name, delay in (("a", 2.0), ("b", 1.0), ("c", 2.0), ("d", 0.0)):
        ev = timeout(env, delay, name) if use_inline else env.timeout(delay, name)
        ev.callbacks.append(lambda e: seen.append((env.now, e.value)))
    drain(env) if use_inline else env.run()
    return seen


def test_inline_timeout_and_drain_keep_simpy_order() -> None:
    assert _log_order(True) == _log_order(False) == [(0.0, "d"), (1.0, "b"), (2.0, "a"),
                                                     (2.0, "c")]


def test_timeout_refuses_negative_delay() -> None:
    with pytest.raises(ValueError, match="Negative delay"):
        timeout(simpy.Environment(), -1.0)


def test_fire_without_waiter_is_processed_at_once() -> None:
    env = simpy.Environment()
    ev = env.event()
    fire(ev, 7)
    assert ev.processed
    assert ev.value == 7
    assert not env._queue


def test_fire_with_waiter_goes_through_the_queue() -> None:
    env = simpy.Environment()
    ev = env.event()
    got: list[int] = []

    def waiter() -> object:
        got.append((yield ev))

    env.process(waiter())
    env.step()  # start the waiter: it now waits on ev
    fire(ev, 3)
    assert ev.triggered
    assert not ev.processed
    drain(env)
    assert got == [3]


def test_drain_raises_an_undefused_failure() -> None:
    env = simpy.Environment()
    env.event().fail(RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        drain(env)
