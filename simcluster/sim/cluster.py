"""Wiring in one place: build the components of a step plan, start their processes, run, collect.

desmod's explicit phases: :func:`build` creates the environment and the
components, :func:`wire` starts one compute-stream process per (replica class x stage) and one DP
stream per stage, :func:`run_plan` runs to completion and checks that every stream finished (a
schedule that deadlocks is an error, not a short step).
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from simcluster.errors import SimclusterError
from simcluster.observe.records import OpRecord
from simcluster.sim.device import Device, Fabric
from simcluster.sim.dpstream import DpStream
from simcluster.sim.engine import drain
from simcluster.sim.plan import StepPlan
from simcluster.sim.stream import ComputeStream


class SimulationError(SimclusterError):
    """The simulated step could not complete (e.g. a schedule that deadlocks)."""


@dataclass(frozen=True, slots=True)
class EngineOutput:
    """Raw output of one simulated step: records, barrier arrivals and release time."""

    records: tuple[OpRecord, ...]
    arrivals: tuple[tuple[float, int, int], ...]
    barrier_s: float
    end_s: float


@dataclass(slots=True)
class Built:
    """The components of one simulation (build phase)."""

    env: simpy.Environment
    fabric: Fabric
    devices: list[Device]


def build(plan: StepPlan) -> Built:
    """Environment, fabric and one device per (replica class, stage)."""
    env = simpy.Environment()
    fabric = Fabric(env, plan)
    devices = [Device(env, fabric, g, plan.stage(g, i))
               for g in range(len(plan.groups)) for i in range(plan.pp)]
    return Built(env, fabric, devices)


def wire(built: Built, plan: StepPlan) -> list[ComputeStream]:
    """Start the compute streams and the DP streams; returns the compute streams."""
    env, fabric = built.env, built.fabric
    procs = [ComputeStream(env, dev, plan.stage(dev.group_index, dev.stage))
             for dev in built.devices]
    for proc in procs:
        proc.start()
    for stage, buckets in enumerate(plan.dp_buckets):
        if buckets:
            DpStream(env, fabric, stage).start()
    return procs


def run_plan(plan: StepPlan) -> EngineOutput:
    """Simulate one step of ``plan``."""
    built = build(plan)
    procs = wire(built, plan)
    drain(built.env)
    stuck = [dev for dev, proc in zip(built.devices, procs, strict=True) if not proc.finished]
    if stuck:
        where = ", ".join(f"{d.group}/stage {d.stage}" for d in stuck[:4])
        raise SimulationError(f"the step deadlocked: {len(stuck)} streams never finished ({where})")
    fabric = built.fabric
    barrier = fabric.arrivals[-1][0]
    # env.now may be later than the step: a superseded link timer can fire after the last op.
    end = max(r.end_s for r in fabric.records if r.stream == "compute")
    return EngineOutput(records=tuple(fabric.records), arrivals=tuple(fabric.arrivals),
                        barrier_s=barrier, end_s=end)
