"""The SimPy horizon engine: two thin processes over the job's state machine.

Build -> wire -> run -> collect: ``run_simpy`` builds the environment, wires a
``job`` process and an ``injector`` process, runs until the job ends and collects its record. The
job process sequences phases (it yields a timeout until the phase ends); the injector delivers each
random event of the sample path as ``job.interrupt(event)``; the machine does all the arithmetic.
A phase that ends at the same instant as a random event ends first: the injector yields one more
zero-delay timeout before interrupting, so SimPy's (time, priority, event id) order runs the job's
earlier-scheduled timeout first.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, cast

import simpy

from simcluster.horizon.machine import JobMachine
from simcluster.horizon.records import ReplicaRecord
from simcluster.horizon.sampling import Event, SamplePath

Process = Generator[simpy.Event, Any, None]


def job(env: simpy.Environment, machine: JobMachine, plan: None = None) -> Process:
    """Run the job's phases; a random event arrives as an ``Interrupt`` whose cause is the event."""
    while not machine.done:
        try:
            yield env.timeout(max(0.0, machine.phase_end_s - env.now))
            machine.end_phase(machine.phase_end_s)
        except simpy.Interrupt as stop:
            event = cast(Event, stop.cause)
            machine.interrupt(event[0], event)


def injector(env: simpy.Environment, target: simpy.Process, plan: Iterator[Event]) -> Process:
    """Deliver each event of the sample path to ``target`` at its time."""
    for event in plan:
        yield env.timeout(max(0.0, event[0] - env.now))
        yield env.timeout(0.0)
        if not target.is_alive:
            return
        target.interrupt(event)


def run_simpy(machine: JobMachine, path: SamplePath) -> ReplicaRecord:
    """Run one replica with SimPy; returns its record."""
    env = simpy.Environment()
    job_process = env.process(job(env, machine))
    env.process(injector(env, job_process, path.events()))
    env.run(until=job_process)
    return machine.record()
