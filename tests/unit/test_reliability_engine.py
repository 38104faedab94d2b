"""The horizon engine: hand-computed timelines, both engines equal, seeds, spares, config adapter.

Timelines are pinned on injected event lists (a stub sample path), so every number below is
worked out by hand in the test's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from simcluster.horizon import (
    BUCKETS,
    CheckpointPlan,
    FailureClass,
    HorizonConfig,
    StragglerPlan,
    horizon_config,
    run_replica,
    simulate_config,
)
from simcluster.horizon.config import LLAMA3_CLASSES
from simcluster.horizon.fast import run_fast
from simcluster.horizon.machine import JobMachine
from simcluster.horizon.records import ReplicaRecord
from simcluster.horizon.sampling import (
    EVICT,
    FAILURE,
    HORIZON,
    PLANNED_EVENT,
    STRAG_OFF,
    STRAG_ON,
    Event,
    SamplePath,
)
from simcluster.horizon.spares import SparePool
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]


class FixedPath:
    """A sample path with fixed events."""

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    def events(self) -> Iterator[Event]:
        return iter(self._events)


def _cfg(**kw: object) -> HorizonConfig:
    base: dict[str, object] = {
        "nodes": 1, "work_s": 100.0, "diagnose_s": 3.0, "restart_s": 4.0, "warmup_s": 1.0,
        "classes": (FailureClass(name="f", rate_per_node_s=0.0, detect_s=2.0, replace=False),),
        "checkpoint": CheckpointPlan(mode="sync", interval_s=30.0, blocking_s=5.0, load_s=6.0)}
    base.update(kw)
    return HorizonConfig(**base)  # type: ignore[arg-type]


def _run(cfg: HorizonConfig, events: list[Event]) -> ReplicaRecord:
    return run_fast(JobMachine(cfg), FixedPath(events))  # type: ignore[arg-type]


def _lost(rec: ReplicaRecord) -> dict[str, float]:
    return dict(zip(BUCKETS, rec.lost_s, strict=True))


def test_one_failure_timeline() -> None:
    """RUN 0-30, BLOCK 30-35 (durable 30), RUN 35-50 (p=45); failure at 50 loses 15. DETECT 50-52,
    DIAGNOSE -55, RESTART -59, LOAD -65, WARMUP -66, RUN 66-96 (60), BLOCK -101, RUN -131 (90),
    BLOCK -136, RUN -146 (100), final BLOCK -151."""
    rec = _run(_cfg(), [(50.0, FAILURE, 0, 0.0)])
    assert rec.elapsed_s == pytest.approx(151.0)
    assert rec.useful_s == pytest.approx(100.0)
    lost = _lost(rec)
    assert lost["checkpoint_blocking"] == pytest.approx(20.0)
    assert lost["rework"] == pytest.approx(15.0)
    assert (lost["detection"], lost["diagnosis"], lost["restart"], lost["load"], lost["warmup"]) == \
        pytest.approx((2.0, 3.0, 4.0, 6.0, 1.0))
    assert rec.interruptions == (1, 0, 0)
    assert rec.completed


def test_no_failures_no_lost_time_but_checkpoints() -> None:
    rec = _run(_cfg(), [])
    assert rec.elapsed_s == pytest.approx(100.0 + 4 * 5.0)
    assert sum(rec.lost_s) == pytest.approx(20.0) == _lost(rec)["checkpoint_blocking"]
    free = _run(_cfg(checkpoint=CheckpointPlan(mode="none", interval_s=math.inf)), [])
    assert free.elapsed_s == pytest.approx(100.0)
    assert sum(free.lost_s) == 0.0


def test_failure_during_recovery_restarts_the_sequence() -> None:
    """Failure at 50 (p 45 -> 30); second at 56 during RESTART: detect 56-58, diagnose -61,
    restart -65, load -71, warmup -72; detection 4, diagnosis 6, restart 1 + 4."""
    rec = _run(_cfg(), [(50.0, FAILURE, 0, 0.0), (56.0, FAILURE, 0, 0.0)])
    lost = _lost(rec)
    assert lost["rework"] == pytest.approx(15.0)
    assert lost["detection"] == pytest.approx(4.0)
    assert lost["diagnosis"] == pytest.approx(6.0)
    assert lost["restart"] == pytest.approx(5.0)
    assert rec.elapsed_s == pytest.approx(157.0)


def test_async_persist_lag_decides_the_restore_point() -> None:
    """Snapshot at p=30 ends at t=31, persists until 51: a failure at 45 rolls back to 0, one at
    55 to 30."""
    ck = CheckpointPlan(mode="async", interval_s=30.0, blocking_s=1.0, persist_s=20.0, load_s=0.0)
    early = _run(_cfg(checkpoint=ck), [(45.0, FAILURE, 0, 0.0), (1000.0, HORIZON, -1, 0.0)])
    late = _run(_cfg(checkpoint=ck), [(55.0, FAILURE, 0, 0.0), (1000.0, HORIZON, -1, 0.0)])
    assert _lost(early)["rework"] == pytest.approx(44.0)
    assert _lost(late)["rework"] == pytest.approx(24.0)


def test_in_memory_restore_depends_on_class_and_peer_copy() -> None:
    """In-memory snapshots every 10 s of work (blocking 1), persisted every 3rd. Failure at 25
    (p = 23 after snapshots at 10, 20): a process-restart class rolls back to 20 from memory;
    a node-killing class to the last durable checkpoint, 0."""
    ck = CheckpointPlan(mode="in-memory", interval_s=10.0, blocking_s=1.0, persist_s=0.5,
                        persist_every=3, load_s=6.0, memory_load_s=0.5)
    soft = FailureClass(name="sw", rate_per_node_s=0.0, detect_s=0.0, replace=False,
                        in_memory_restore=True)
    hard = FailureClass(name="gpu", rate_per_node_s=0.0, detect_s=0.0, replace=False)
    cfg = _cfg(checkpoint=ck, classes=(soft, hard))
    assert _lost(_run(cfg, [(25.0, FAILURE, 0, 0.0)]))["rework"] == pytest.approx(3.0)
    assert _lost(_run(cfg, [(25.0, FAILURE, 0, 0.0)]))["load"] == pytest.approx(0.5)
    assert _lost(_run(cfg, [(25.0, FAILURE, 1, 0.0)]))["rework"] == pytest.approx(23.0)
    peer = replace(cfg, checkpoint=replace(ck, peer_copy=True))
    assert _lost(_run(peer, [(25.0, FAILURE, 1, 0.0)]))["rework"] == pytest.approx(3.0)


def test_straggler_stretches_steps() -> None:
    """Slowdown 2 from 10 to 20: 5 s of work in 10 s; elapsed 105, straggling 5."""
    cfg = _cfg(checkpoint=CheckpointPlan(mode="none", interval_s=math.inf),
               stragglers=StragglerPlan(slowdown=2.0))
    rec = _run(cfg, [(10.0, STRAG_ON, -1, 0.0), (20.0, STRAG_OFF, -1, 0.0)])
    assert rec.elapsed_s == pytest.approx(105.0)
    assert _lost(rec)["straggling"] == pytest.approx(5.0)


def test_planned_interruption_saves_first() -> None:
    """Planned at 40 (p = 35): graceful save (write 5) + maintenance 10, no rework; restart 4,
    load 6, warmup 1; 100 + 4 x 5 blocking + 26 = 146."""
    ck = CheckpointPlan(mode="sync", interval_s=30.0, blocking_s=5.0, load_s=6.0, write_s=5.0)
    rec = _run(_cfg(checkpoint=ck, maintenance_s=10.0), [(40.0, PLANNED_EVENT, -1, 0.0)])
    lost = _lost(rec)
    assert lost["rework"] == 0.0
    assert lost["maintenance"] == pytest.approx(15.0)
    assert rec.interruptions[-1] == 1
    assert rec.elapsed_s == pytest.approx(100.0 + 4 * 5.0 + 15.0 + 11.0)


def test_waiting_for_a_replacement_and_elastic() -> None:
    """No spares: the node arrives 50 s after diagnosis. Elastic with dp=4: run at 3/4 meanwhile."""
    cls = (FailureClass(name="gpu", rate_per_node_s=0.0, detect_s=2.0, replace=True),)
    ck = CheckpointPlan(mode="none", interval_s=math.inf)
    waits = _run(_cfg(classes=cls, checkpoint=ck, replace_s=50.0), [(10.0, FAILURE, 0, 1e9)])
    assert _lost(waits)["waiting_for_nodes"] == pytest.approx(50.0)
    spare = _run(_cfg(classes=cls, checkpoint=ck, replace_s=50.0, spares=1), [(10.0, FAILURE, 0, 1e9)])
    assert _lost(spare)["waiting_for_nodes"] == 0.0
    elastic = _run(_cfg(classes=cls, checkpoint=ck, replace_s=50.0, elastic=True, dp=4),
                   [(10.0, FAILURE, 0, 1e9)])
    lost = _lost(elastic)
    assert lost["waiting_for_nodes"] == 0.0
    # The node is due at 15 + 50 = 65; restart 15-19, load 0, warm-up 19-20, then 45 s at 3/4.
    assert lost["reduced_replicas"] == pytest.approx(45.0 * 0.25)
    assert elastic.elapsed_s == pytest.approx(elastic.useful_s + sum(elastic.lost_s))


def test_spare_pool_claims_and_returns() -> None:
    pool = SparePool(2, replace_s=100.0)
    assert pool.claim(0.0, 1) == (0.0, 0)
    pool.send_to_repair(50.0, 1)
    assert pool.claim(10.0, 2) == (110.0, 1)
    assert pool.claim(60.0, 1) == (60.0, 0)
    assert pool.exhausted == 1


def _rich(nodes: int = 16) -> HorizonConfig:
    classes = (FailureClass(name="gpu", rate_per_node_s=2e-6, detect_s=30.0),
               FailureClass(name="sw", rate_per_node_s=1e-6, detect_s=60.0, replace=False,
                            in_memory_restore=True),
               FailureClass(name="tor", rate_per_node_s=5e-7, detect_s=600.0, domain_nodes=2,
                            weibull_shape=0.7))
    return HorizonConfig(
        nodes=nodes, work_s=20 * 86400.0, classes=classes, planned_per_s=1 / 86400.0,
        maintenance_s=600.0, diagnose_s=300.0, restart_s=300.0, warmup_s=60.0, spares=1,
        replace_s=7200.0, elastic=True, dp=8, nodes_per_replica=2,
        checkpoint=CheckpointPlan(mode="in-memory", interval_s=600.0, blocking_s=2.0, persist_s=300.0,
                                  persist_every=4, load_s=120.0, memory_load_s=20.0, write_s=300.0),
        stragglers=StragglerPlan(rate_per_node_s=2e-6, slowdown=1.5, median_s=1200.0,
                                 detect_s=900.0))


def _variant(mode: str) -> HorizonConfig:
    cfg = _rich()
    persist = 0.0 if mode == "sync" else 700.0
    return replace(cfg, elastic=mode == "sync",
                   checkpoint=replace(cfg.checkpoint, mode=mode, blocking_s=30.0, persist_s=persist))


@pytest.mark.parametrize("mode", ["sync", "async", "in-memory"])
@pytest.mark.parametrize("replica", range(4))
def test_fast_and_simpy_engines_give_identical_records(mode: str, replica: int) -> None:
    """Equal counts; times equal up to float rounding (the fast engine jumps over identical
    checkpoint cycles in closed form)."""
    cfg = _variant(mode)
    fast = run_replica(cfg, 3, replica, "fast")
    des = run_replica(cfg, 3, replica, "simpy")
    assert sum(fast.interruptions) > 0
    assert (fast.interruptions, fast.completed, fast.restarts) == \
        (des.interruptions, des.completed, des.restarts)
    assert fast.elapsed_s == pytest.approx(des.elapsed_s, rel=1e-9)
    assert fast.useful_s == pytest.approx(des.useful_s, rel=1e-9)
    assert fast.lost_s == pytest.approx(des.lost_s, rel=1e-7, abs=1e-5)


def test_engines_equal_on_llama3_scenario() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml",
                             ["reliability.horizon_days=3"])
    cfg = horizon_config(scenario, 6.7)
    for replica in range(3):
        fast, des = run_replica(cfg, 0, replica, "fast"), run_replica(cfg, 0, replica, "simpy")
        assert fast.interruptions == des.interruptions
        assert fast.lost_s == pytest.approx(des.lost_s, rel=1e-7, abs=1e-5)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_same_seed_same_result_different_seed_different(engine: str) -> None:
    """The seed drives the failure, straggler and planned-maintenance samples: the same seed
    replays a replica exactly, another seed (or another replica) changes it. This is the
    simulator's same-seed test; the step DES draws nothing (tests/property/test_sim_props.py)."""
    cfg = _rich()
    assert run_replica(cfg, 1, 0, engine) == run_replica(cfg, 1, 0, engine)
    assert run_replica(cfg, 1, 0, engine) != run_replica(cfg, 2, 0, engine)
    assert run_replica(cfg, 1, 0, engine) != run_replica(cfg, 1, 1, engine)


def test_sample_path_does_not_depend_on_checkpoint_policy() -> None:
    cfg = _rich()
    other = replace(cfg, checkpoint=replace(cfg.checkpoint, interval_s=1234.0, mode="sync"))
    first = list(zip(range(200), SamplePath(cfg, 5, 0).events(), strict=False))
    second = list(zip(range(200), SamplePath(other, 5, 0).events(), strict=False))
    assert first == second


def test_ledger_sums_exactly_on_rich_config() -> None:
    for rec in simulate_config(_rich(), replicas=20, seed=9).records:
        assert rec.elapsed_s - rec.useful_s == pytest.approx(sum(rec.lost_s), rel=1e-9, abs=1e-6)


def test_config_adapter_defaults_to_llama3_mix() -> None:
    assert sum(row[0] for row in LLAMA3_CLASSES.values()) == 419
    assert LLAMA3_CLASSES["gpu"][0] + LLAMA3_CLASSES["hbm"][0] == 268
    scenario = load_scenario(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml")
    cfg = horizon_config(scenario, 10.0)
    assert cfg.failure_rate_s * 86400 == pytest.approx(2048 * 3.79e-3)
    assert cfg.checkpoint.size_bytes / 1e12 == pytest.approx(5.68, abs=0.02)
    assert cfg.checkpoint.interval_s == pytest.approx(300.0)
    # The snapshot: a 6.64 GB shard (2P/128 + 12P/128^2) over PCIe 5.0 x16 shared by 2 GPUs at
    # 0.86 of 64 GB/s.
    assert cfg.checkpoint.blocking_s == pytest.approx(6.64e9 * 2 / (64e9 * 0.86), rel=0.01)
    assert cfg.checkpoint.persist_s == pytest.approx(2.84, abs=0.01)
    assert (cfg.nodes_per_replica, cfg.dp) == (16, 128)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e-6])
def test_skipping_empty_chunks_gives_the_same_sample_path(scale: float,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample path steps over chunks with no event (found by the CLI fuzz test: at 3.79e-12
    failures per node-day the SimPy injector walked a million empty chunks between two events);
    the events are exactly those of visiting every chunk."""
    rich = _rich()
    classes = tuple(replace(c, rate_per_node_s=c.rate_per_node_s * scale) for c in rich.classes)
    cfg = replace(rich, classes=classes, planned_per_s=rich.planned_per_s * scale,
                  horizon_s=400 * 86400.0)
    skipped = list(SamplePath(cfg, 3, 0).events())
    with monkeypatch.context() as m:
        m.setattr(SamplePath, "_next_s", lambda self: 0.0)  # never ahead: visit every chunk
        visited = list(SamplePath(cfg, 3, 0).events())
    assert skipped == visited
    assert skipped[-1][0] == cfg.horizon_s


def test_a_path_with_rare_events_visits_few_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rich = _rich()
    classes = tuple(replace(c, rate_per_node_s=c.rate_per_node_s * 1e-9) for c in rich.classes)
    cfg = replace(rich, classes=classes, planned_per_s=1e-15, horizon_s=math.inf)
    calls = []
    chunk = SamplePath._chunk
    monkeypatch.setattr(SamplePath, "_chunk", lambda self, end: calls.append(end) or chunk(self, end))
    events = list(zip(range(5), SamplePath(cfg, 3, 0).events(), strict=False))
    assert len(events) == 5
    assert len(calls) <= 10 * len(events)


def test_graceful_eviction_saves_then_restarts() -> None:
    """Issue 25: a health check that finds a straggler lets the job save. Slow (x2) from 10 to 40:
    p = 25 at 40. SAVE 40-45 (the write, 5 s; durable 25), WAIT 0 (a spare), RESTART -49, LOAD -55,
    WARMUP -56, RUN to p 55 at 86, BLOCK -91, RUN to 85 at 121, BLOCK -126, RUN to 100 at 141,
    final BLOCK -146. No rework; the crash path instead rolls back all 25 s of progress."""
    ck = CheckpointPlan(mode="sync", interval_s=30.0, blocking_s=5.0, load_s=6.0, write_s=5.0)
    events: list[Event] = [(10.0, STRAG_ON, -1, 0.0), (40.0, STRAG_OFF, -1, 0.0),
                           (40.0, EVICT, 1, 0.0)]
    cfg = _cfg(checkpoint=ck, stragglers=StragglerPlan(slowdown=2.0), spares=1,
               graceful_eviction=True)
    rec = _run(cfg, events)
    lost = _lost(rec)
    assert rec.elapsed_s == pytest.approx(146.0)
    assert lost["rework"] == 0.0
    assert lost["checkpoint_blocking"] == pytest.approx(20.0)
    assert lost["straggling"] == pytest.approx(15.0)
    assert rec.interruptions == (0, 1, 0)
    crash = _lost(_run(replace(cfg, graceful_eviction=False), events))
    assert crash["rework"] == pytest.approx(25.0)


def test_elastic_rejoin_pauses_the_job() -> None:
    """An elastic job that ran on half its replicas pauses ``rejoin_s`` when the replacement node
    is back (charged to ``restart``): the same sample path takes exactly that much longer."""
    hw = FailureClass(name="hw", rate_per_node_s=0.0, detect_s=2.0, replace=True)
    base = _cfg(nodes=2, dp=2, nodes_per_replica=1, elastic=True, spares=0, replace_s=50.0,
                classes=(hw,), checkpoint=CheckpointPlan(mode="sync", interval_s=1000.0,
                                                         blocking_s=0.0, load_s=0.0))
    events: list[Event] = [(20.0, FAILURE, 0, 1000.0)]
    free, paused = _run(base, events), _run(replace(base, rejoin_s=7.0), events)
    assert paused.elapsed_s - free.elapsed_s == pytest.approx(7.0)
    assert _lost(paused)["restart"] - _lost(free)["restart"] == pytest.approx(7.0)


def test_an_eviction_during_recovery_restarts_the_recovery_on_a_spare() -> None:
    """Issue 25's graceful eviction when the job is not running (here: detecting a failure at 10)
    has nothing to save: it is a failure of the slow node, which goes to repair for the event's
    repair time (500 s) while the job claims the one spare. The recovery starts again at 11:
    DETECT 0, DIAGNOSE 11-14, RESTART -18, LOAD -24, WARMUP -25, then the 100 s of work with its
    three checkpoints and the final one (4 x 5 s): 145 s; no wait for a node."""
    soft = FailureClass(name="f", rate_per_node_s=0.0, detect_s=2.0, replace=False)
    hard = FailureClass(name="hw", rate_per_node_s=0.0, detect_s=2.0, replace=True)
    cfg = _cfg(classes=(soft, hard), stragglers=StragglerPlan(slowdown=2.0), spares=1,
               replace_s=1e6, graceful_eviction=True)
    events: list[Event] = [(10.0, FAILURE, 0, 0.0), (11.0, EVICT, 2, 500.0)]
    rec = _run(cfg, events)
    assert rec.interruptions == (1, 0, 1, 0)  # f, hw, straggler, planned
    assert rec.elapsed_s == pytest.approx(145.0)
    assert _lost(rec)["waiting_for_nodes"] == 0.0
    assert _lost(rec)["rework"] == pytest.approx(10.0)
