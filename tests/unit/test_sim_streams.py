"""The callback-driven streams reproduce the SimPy processes they replaced, record for record.

The reference below is the engine's former process-based wiring (one SimPy process per compute
stream, one per DP stream waiting on ``env.all_of``), kept here as the oracle: the callback
streams must leave every record, time and gate as it was, including the order of simultaneous
events.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import simpy

from simcluster.sim.build import build_plan, uniform_plan
from simcluster.sim.cluster import build, run_plan
from simcluster.sim.commclock import MAX_EXTENSIONS, TOLERANCE_S
from simcluster.sim.device import Device, Fabric
from simcluster.sim.engine import drain, fire, wake
from simcluster.sim.perturb import GpuSlowdown, LinkDegradation, Perturbations
from simcluster.sim.plan import MsgKey, StagePlan, StepPlan, in_link, out_link
from simcluster.spec import load_scenario
from tests.golden.sim_cases import tiny

Proc = Generator[simpy.Event, Any, None]


def _msg(fabric: Fabric, group: str, key: MsgKey) -> simpy.Event:
    msgs = fabric.messages(group)
    if key not in msgs:
        msgs[key] = fabric.env.event()
    return msgs[key]


def _run_on(env: simpy.Environment, dev: Device, busy0: float, extra: list[float]) -> Proc:
    """Extend the running op for the collectives it overlapped so far (``extra[0]``: the seconds
    it has run past its nominal progress)."""
    for _ in range(MAX_EXTENSIONS):
        owed = dev.fabric.share * (dev.busy(env.now) - busy0) - extra[0]
        if owed <= TOLERANCE_S:
            return
        yield env.timeout(owed)
        extra[0] += owed


def _ref_compute(env: simpy.Environment, dev: Device, plan: StagePlan) -> Proc:
    fabric = dev.fabric
    if plan.gathers[1]:
        dev.issue_param_gathers(*plan.gathers)
    if plan.prologue_s > 0:
        yield from dev.gather_params(plan.prologue_s)
    for op in plan.ops:
        if op.recv is not None and not _msg(fabric, dev.group, op.recv).triggered:
            ev, start = _msg(fabric, dev.group, op.recv), env.now
            yield ev
            if env.now > start:
                flow_eid, flow_start = ev.value
                pp = env.now - max(start, flow_start)
                dev.last = fabric.record(dev.group, dev.stage, "compute",
                                         f"wait {op.recv[0]}{op.recv[1]} mb{op.recv[2]}",
                                         "bubble", start,
                                         (("bubble", env.now - start - pp), ("pp_comm", pp)),
                                         flow_eid)
        if op.zero3 is not None:
            yield from dev.run_layers(op, op.zero3)
        else:
            start, done, busy0 = env.now, 0.0, dev.busy(env.now)
            extra = [0.0]  # the SMs the collectives beside the op held (sim/commclock.py)
            for bucket, fraction in op.buckets:
                yield env.timeout(max(fraction * op.duration_s - done, 0.0))
                yield from _run_on(env, dev, busy0, extra)
                done = max(done, fraction * op.duration_s)
                fabric.event("ready", dev.group_index, dev.stage, bucket).succeed(dev.last)
            yield env.timeout(op.duration_s - done)
            yield from _run_on(env, dev, busy0, extra)
            extra_s = extra[0]
            dev.last = fabric.record(dev.group, dev.stage, "compute", op.name, "compute", start,
                                     (*op.parts, ("compute", extra_s)) if extra_s else op.parts,
                                     dev.last)
        if op.send is not None:
            start = env.now
            links = (out_link(dev.group, dev.stage), in_link(dev.group, op.send.dst))
            yield fabric.network.transfer(op.name, links, op.send.work_s)
            dev.last = fabric.record(dev.group, dev.stage, "p2p", f"send {op.name}", "pp_comm",
                                     start, (("pp_comm", op.send.work_s),), dev.last)
            fire(_msg(fabric, dev.group, op.send.key), (dev.last, start))
    yield from dev.wait_dp()
    yield from dev.barrier()
    yield from dev.optimizer(plan.optimizer_s)


def _ref_dp(env: simpy.Environment, fabric: Fabric, stage: int) -> Proc:
    last = -1
    for bucket, work in enumerate(fabric.plan.dp_buckets[stage]):
        ready = [fabric.event("ready", g, stage, bucket) for g in range(len(fabric.plan.groups))]
        yield env.all_of(ready)
        start = env.now
        gate = max([last, *(int(ev.value) for ev in ready)])
        fabric.stage_clocks[stage].start(start)
        done = yield fabric.network.transfer(f"bucket {bucket}", fabric.dp_links(stage), work)
        fabric.stage_clocks[stage].stop(env.now)
        last = fabric.record("all", stage, "dp", f"{done.name} s{stage}", "dp_comm", start,
                             (("dp_comm", work),), gate)
    fire(fabric.event("dp_done", stage), last)


def _reference(plan: StepPlan) -> list[Any]:
    built = build(plan)
    env = built.env
    for dev in built.devices:
        env.process(_ref_compute(env, dev, plan.stage(dev.group_index, dev.stage)))
    for stage, buckets in enumerate(plan.dp_buckets):
        if buckets:
            env.process(_ref_dp(env, built.fabric, stage))
    env.run()
    return built.fabric.records


ROOT = Path(__file__).resolve().parents[2]
_SLOW = Perturbations(gpu_slowdown=(GpuSlowdown(0, 3, 0.5),))
_LINK = Perturbations(link_bandwidth=(LinkDegradation("scale_out", 0, 0.25),))

PLANS = {
    "1f1b": lambda: uniform_plan("1f1b", 4, 8, 1.0, 2.0, message_s=0.3),
    "gpipe": lambda: uniform_plan("gpipe", 3, 5, 1.0, 2.0, message_s=1.0),
    "interleaved": lambda: uniform_plan("interleaved", 4, 8, 1.0, 2.0, v=2, message_s=0.1),
    "zb-h1": lambda: uniform_plan("zb-h1", 4, 6, 1.0, 2.0, t_w=0.8, message_s=0.2),
    # equal durations: many simultaneous events, where the order of the queue shows
    "ties": lambda: uniform_plan("1f1b", 4, 8, 1.0, 1.0, message_s=1.0),
    "ties-free-messages": lambda: uniform_plan("interleaved", 2, 4, 1.0, 1.0, v=2),
    # interleaved sends and DP buckets contending for links: the sender's wake-up must keep its
    # own queue entry after the link timer (merging the two changes this log)
    "llama3-405b": lambda: build_plan(load_scenario(ROOT / "scenarios/llama3-405b-16k-h100.yaml")),
    "dp-buckets": lambda: build_plan(tiny(pp=2)),
    "dp-overlap": lambda: build_plan(tiny(pp=2, execution={"overlap_grad_reduce": True})),
    "param-gather-sync": lambda: build_plan(tiny(pp=2, zero_stage=1,
                                                 execution={"overlap_param_gather": False})),
    "param-gather-overlap": lambda: build_plan(tiny(pp=2, zero_stage=1, schedule="interleaved",
                                                    virtual_stages=2, batch=16,
                                                    execution={"overlap_param_gather": True})),
    "zero2": lambda: build_plan(tiny(pp=1, zero_stage=2,
                                     execution={"overlap_grad_reduce": True})),
    "zero3": lambda: build_plan(tiny(pp=1, zero_stage=3)),
    "slow-gpu": lambda: build_plan(tiny(pp=2), _SLOW),
    "degraded-node": lambda: build_plan(tiny(pp=1), _LINK),
}


@pytest.mark.parametrize("case", sorted(PLANS))
def test_callback_streams_match_the_process_reference(case: str) -> None:
    plan = PLANS[case]()
    records = run_plan(plan).records
    assert len(records) > 0
    assert list(records) == _reference(plan)
    assert repr(records) == repr(tuple(_reference(plan)))  # int 0 stays int: same repr


def test_wake_takes_the_queue_entry_of_a_timeout() -> None:
    env = simpy.Environment()
    seen: list[tuple[Any, str]] = []
    for name, delay in (("a", 2.0), ("b", 0), ("c", 2.0)):
        env.timeout(delay).callbacks.append(lambda _, n=name: seen.append((env.now, n)))
        wake(env, delay, lambda _, n=name: seen.append((env.now, n.upper())))
    wake(env, 0, lambda _: seen.append((env.now, "urgent")), simpy.events.URGENT)
    drain(env)
    assert seen == [(0, "urgent"), (0, "b"), (0, "B"), (2.0, "a"), (2.0, "A"), (2.0, "c"),
                    (2.0, "C")]
    assert type(seen[0][0]) is int  # "now" stays SimPy's int 0


def test_wake_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError, match="Negative delay"):
        wake(simpy.Environment(), -0.5, lambda _: None)
