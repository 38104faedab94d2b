"""Up-front limits of the horizon engine: every evaluation ends in bounded time or is refused.

Checked from closed forms before any replica runs (``check_bounds``), each refusal a
:class:`SpecError` naming the keys and the limit:

1. Progress. A run that must finish (no ``reliability.horizon_days``) whose expected useful
   fraction of wall time, Daly's Eq. 9 (:func:`simcluster.perf.reliability.daly_work_fraction`),
   is below ``MIN_WORK_FRACTION``: the checkpoint dump (blocking write, plus the background persist
   of async and in-memory modes) or the recovery (detect, diagnose, restart, load, warm-up) is long
   against the job's mean time between interruptions, so a failure nearly always strikes first and
   the expected time to train is astronomically large.
2. Events per replica. The expected random events of one replica (failures, planned
   interruptions, straggler episodes x 3) over its expected span (the horizon, or the expected
   wall time of the run) above ``MAX_EVENTS_PER_REPLICA``.
3. Replicas above ``MAX_REPLICAS``, and the whole command's work, replicas x evaluations x
   (events + checkpoint cycles the loop steps one by one + ``REPLICA_COST``, weighted x
   ``SIMPY_COST`` for the SimPy loop), above ``MAX_TOTAL_WORK``. Measured on one core of the
   2-core reference machine, a unit costs 10-17 us (the 405B run: 466 events, 4.5 ms a replica;
   the 1k-H100 run: 16 events, 0.29 ms), so the limit is 10-17 s of the fast loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.horizon.config import HorizonConfig
from simcluster.perf.reliability import daly_log_expected_wall_per_work

#: Below this expected useful fraction of wall time a run that must finish is refused.
MIN_WORK_FRACTION = 1e-3
#: Expected random events of one replica (failures, planned, straggler on/off/evict).
MAX_EVENTS_PER_REPLICA = 1_000_000
#: Monte Carlo replicas of one evaluation.
MAX_REPLICAS = 100_000
#: replicas x evaluations x (events + stepped checkpoint cycles + REPLICA_COST), in the fast loop's
#: unit of work (one event).
MAX_TOTAL_WORK = 1_000_000
#: A replica's fixed cost (sample-path set-up, result), in events: 0.29 ms for 16 events above.
REPLICA_COST = 10.0
#: The SimPy loop's cost per event against the fast loop's.
SIMPY_COST = 10

PROGRESS_KEYS = "reliability.failure_rate_per_node_day / checkpoint.storage_write_GBps / " \
                "checkpoint.interval_min"
RATE_KEYS = "reliability.failure_rate_per_node_day / reliability.horizon_days / training.tokens"


@dataclass(frozen=True, slots=True)
class Cost:
    """Closed-form expectations of one replica of a configuration."""

    mtbf_s: float
    dump_s: float
    recovery_s: float
    log_wall_per_work: float
    span_s: float
    events: float
    stepped_cycles: float

    @property
    def work_fraction(self) -> float:
        """Expected useful fraction of wall time (0 when it underflows)."""
        return math.exp(-self.log_wall_per_work) if self.log_wall_per_work < 700.0 else 0.0


def interruption_rate_s(cfg: HorizonConfig) -> float:
    """Unexpected failures and planned interruptions of the whole job per second."""
    return cfg.failure_rate_s + cfg.planned_per_s


def mean_recovery_s(cfg: HorizonConfig) -> float:
    """Mean time from failure to resumed progress, waits for nodes excluded (rate-weighted)."""
    rate = sum(c.rate_per_node_s for c in cfg.classes)
    detect = sum(c.rate_per_node_s * c.detect_s for c in cfg.classes) / rate if rate > 0 else 0.0
    return detect + cfg.diagnose_s + cfg.restart_s + cfg.checkpoint.load_s + cfg.warmup_s


def replica_cost(cfg: HorizonConfig) -> Cost:
    """Expected MTBF, dump, recovery, span, random events and stepped cycles of one replica.

    The dump is the blocking write plus the background persist (async, in-memory): a failure
    before the persist ends loses the segment. Without checkpoints the segment is the whole run.
    """
    rate = interruption_rate_s(cfg)
    mtbf = math.inf if rate <= 0.0 else 1.0 / rate
    ck = cfg.checkpoint
    tau = min(ck.interval_s, cfg.work_s) if ck.mode != "none" else cfg.work_s
    dump = 0.0 if ck.mode == "none" else ck.blocking_s + ck.persist_s
    recovery = mean_recovery_s(cfg)
    log_ratio = daly_log_expected_wall_per_work(tau, dump, recovery, mtbf)
    if math.isinf(mtbf) and math.isfinite(tau):
        log_ratio = math.log1p(dump / tau)
    wall = cfg.work_s * math.exp(log_ratio) if log_ratio < 700.0 else math.inf
    span = min(cfg.horizon_s, wall)
    events_rate = rate + 3.0 * cfg.nodes * cfg.stragglers.rate_per_node_s
    events = 0.0 if events_rate <= 0.0 else events_rate * span
    cycles = 0.0 if ck.mode == "none" or math.isinf(span) else span / (ck.interval_s + ck.blocking_s)
    return Cost(mtbf_s=mtbf, dump_s=dump, recovery_s=recovery, log_wall_per_work=log_ratio,
                span_s=span, events=events, stepped_cycles=cycles)


def check_progress(cfg: HorizonConfig, cost: Cost) -> None:
    """Refuse a run that must finish but whose expected useful fraction is below the floor."""
    if math.isfinite(cfg.horizon_s) or cost.work_fraction >= MIN_WORK_FRACTION:
        return
    fraction = f"e^-{cost.log_wall_per_work:.3g}" if cost.work_fraction == 0.0 \
        else f"{cost.work_fraction:.3g}"
    dump = "no checkpoints (every failure restarts from the start)" if cfg.checkpoint.mode == "none" \
        else f"checkpoint write+persist {cost.dump_s:.4g} s every {cfg.checkpoint.interval_s:.4g} s"
    raise SpecError(PROGRESS_KEYS, (
        f"the run cannot make progress: job MTBF {cost.mtbf_s:.4g} s ({cfg.nodes} nodes) against "
        f"{dump} and recovery {cost.recovery_s:.4g} s; expected useful fraction {fraction} < "
        f"{MIN_WORK_FRACTION:g} (Daly 2006 Eq. 9): raise the storage bandwidth, change the "
        f"interval, lower the failure rate or set reliability.horizon_days"))


def check_events(cost: Cost) -> None:
    """Refuse a replica expected to hold more random events than the horizon engine takes."""
    if cost.events <= MAX_EVENTS_PER_REPLICA:
        return
    span = "an endless run" if math.isinf(cost.span_s) else f"{cost.span_s / 86400.0:.4g} days"
    raise SpecError(RATE_KEYS, (
        f"{cost.events:.3g} expected failures and interruptions per replica over {span} "
        f"(job MTBF {cost.mtbf_s:.4g} s); the limit is {MAX_EVENTS_PER_REPLICA:.0e}: lower the "
        f"failure rate, or shorten the run or the horizon"))


def check_replicas(replicas: int) -> None:
    """Refuse more than ``MAX_REPLICAS`` replicas."""
    if replicas > MAX_REPLICAS:
        raise SpecError("--replicas", f"{replicas} replicas; the limit is {MAX_REPLICAS}")


def check_bounds(configs: tuple[HorizonConfig, ...], replicas: int, loop: str = "fast") -> None:
    """Refuse, before any replica runs, an evaluation of ``configs`` that cannot end in bounded time.

    Parameters
    ----------
    configs : tuple of HorizonConfig
        Every configuration the command evaluates (one, or one per interval of a sweep).
    replicas : int
        Monte Carlo replicas of each configuration.
    loop : str
        ``fast`` or ``simpy`` (the SimPy loop costs ``SIMPY_COST`` x per event and steps every
        checkpoint cycle).
    """
    check_replicas(replicas)
    total = 0.0
    for cfg in configs:
        cost = replica_cost(cfg)
        check_progress(cfg, cost)
        check_events(cost)
        stepped = cost.stepped_cycles if loop == "simpy" or cfg.checkpoint.mode == "in-memory" else 0.0
        weight = SIMPY_COST if loop == "simpy" else 1.0
        total += replicas * weight * (cost.events + stepped + REPLICA_COST)
    if total > MAX_TOTAL_WORK:
        raise SpecError("--replicas", (
            f"{replicas} replicas x {len(configs)} evaluations ({loop} loop) is {total:.3g} units "
            f"of work (expected events and stepped checkpoint cycles); the limit is "
            f"{MAX_TOTAL_WORK:.0e}: use fewer replicas or intervals"))
