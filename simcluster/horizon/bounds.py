"""Up-front limits of the horizon engine: every evaluation ends in bounded time or is refused.

Checked from closed forms before any replica runs (``check_bounds``), each refusal a
:class:`SpecError` naming the keys and the limit:

1. Progress. A run that must finish (no ``reliability.horizon_days``) whose expected useful
   fraction of wall time, Daly's Eq. 9 (:func:`simcluster.perf.reliability.daly_work_fraction`),
   is below ``MIN_WORK_FRACTION``: the checkpoint dump (blocking write, plus the background persist
   of async and in-memory modes) or the recovery (detect, diagnose, restart, load, warm-up) is long
   against the job's mean time between interruptions, so a failure nearly always strikes first and
   the expected time to train is astronomically large. The recovery counts every term of the
   time a failure costs: detection, diagnosis, the wait for a replacement node (``replace_s``
   with the chance that the spare pool is short, from the repair times), restart, load and
   warm-up, and for a planned interruption the save and the maintenance; outcomes are averaged
   as ``e^{R/M}`` (a rare long wait weighs by its exponential).
2. Events per replica. The expected random events of one replica (failures, planned
   interruptions, straggler episodes x 3) over its expected span (the horizon, or the expected
   wall time of the run) above ``MAX_EVENTS_PER_REPLICA``.
3. Replicas above ``MAX_REPLICAS``, and the whole command's work, replicas x evaluations x
   (events, x ``SIMPY_COST`` for the SimPy loop, + checkpoint cycles the loop steps one by one,
   x ``STEP_COST``, + ``REPLICA_COST`` a replica) above ``MAX_TOTAL_WORK`` (about 7 s of the fast
   loop on one core).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcluster.errors import SpecError
from simcluster.horizon.config import HorizonConfig
from simcluster.perf.reliability import daly_log_expected_wall_per_work

#: Below this expected useful fraction of wall time a run that must finish is refused.
MIN_WORK_FRACTION = 1e-3
#: Expected random events of one replica (failures, planned, straggler on/off/evict).
MAX_EVENTS_PER_REPLICA = 1_000_000
#: Monte Carlo replicas of one evaluation.
MAX_REPLICAS = 100_000
#: replicas x evaluations x (events + stepped checkpoint cycles + a replica), in units of one
#: event of the fast loop (about 7 us on one core): about 7 s.
MAX_TOTAL_WORK = 1_000_000
#: Measured costs in those units (best of 2 on one core, 1k-h100-reliability.yaml variants): a
#: SimPy event about 13 us, a checkpoint cycle the loop steps one by one about 3 us (SimPy; the
#: fast loop's in-memory cycles 0.3 us), a replica's fixed cost (sample-path streams, machine,
#: record) about 100 us.
SIMPY_COST = 3
STEP_COST = 0.5
REPLICA_COST = 20

PROGRESS_KEYS = "reliability.failure_rate_per_node_day / checkpoint.storage_write_GBps / " \
                "checkpoint.interval_min"
RECOVERY_KEYS = "reliability.diagnose_s / reliability.restart_s / reliability.warmup_s / " \
                "reliability.maintenance_s"
WAIT_KEYS = "reliability.replace_s / reliability.spares / reliability.repair_median_s"
STRAGGLER_KEYS = "reliability.stragglers_per_node_day / reliability.straggler_detect_s"
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
    """Unexpected failures, straggler evictions and planned interruptions of the whole job per
    second (an eviction stops the job and rolls it back like a failure)."""
    return cfg.failure_rate_s + cfg.nodes * eviction_rate_per_node_s(cfg) + cfg.planned_per_s


def mean_recovery_s(cfg: HorizonConfig) -> float:
    """Mean time from failure to resumed progress, waits for nodes excluded (rate-weighted)."""
    rate = sum(c.rate_per_node_s for c in cfg.classes)
    detect = sum(c.rate_per_node_s * c.detect_s for c in cfg.classes) / rate if rate > 0 else 0.0
    return detect + cfg.diagnose_s + cfg.restart_s + cfg.checkpoint.load_s + cfg.warmup_s


def poisson_tail(mean: float, k: int) -> float:
    """``P(N >= k)`` for ``N ~ Poisson(mean)`` (normal approximation above a mean of 1000)."""
    if k <= 0:
        return 1.0
    if mean <= 0.0:
        return 0.0
    if mean > 1000.0:
        return 0.5 * math.erfc((k - 0.5 - mean) / math.sqrt(2.0 * mean))
    log_pmf = k * math.log(mean) - mean - math.lgamma(k + 1.0)
    if k > 10.0 * mean + 100.0:  # the tail is below twice its first term
        return min(1.0, 2.0 * math.exp(log_pmf))
    below, term = 0.0, math.exp(-mean)
    for j in range(k):
        below += term
        term *= mean / (j + 1)
    return max(0.0, 1.0 - below)


def eviction_rate_per_node_s(cfg: HorizonConfig) -> float:
    """Straggler evictions per node per second (episodes longer than the detection time)."""
    st = cfg.stragglers
    if st.rate_per_node_s <= 0.0 or math.isinf(st.detect_s):
        return 0.0
    if st.detect_s <= 0.0:
        return st.rate_per_node_s
    z = (math.log(st.detect_s) - math.log(st.median_s)) / (st.sigma * math.sqrt(2.0)) \
        if st.sigma > 0.0 else (math.inf if st.detect_s >= st.median_s else -math.inf)
    return st.rate_per_node_s * 0.5 * math.erfc(z)


def pool_short_probability(cfg: HorizonConfig, domain_nodes: int) -> float:
    """Chance that a claim of ``domain_nodes`` finds too few spares (so waits ``replace_s``).

    Nodes in repair are ``Poisson(a)`` (M/G/inf, Little's law): ``a`` = replaced nodes per second
    x the mean lognormal repair time; the claim is short when more than ``spares - domain_nodes``
    are away.
    """
    per_node = sum(c.rate_per_node_s * c.domain_nodes for c in cfg.classes if c.replace)
    per_node += eviction_rate_per_node_s(cfg)
    repair_mean = cfg.repair_median_s * math.exp(min(cfg.repair_sigma, 30.0) ** 2 / 2.0)
    away = cfg.nodes * per_node * repair_mean
    return poisson_tail(away if math.isfinite(away) else 1e300, cfg.spares - domain_nodes + 1)


def recovery_outcomes(cfg: HorizonConfig) -> list[tuple[float, float]]:
    """(rate per second, time lost to recovery) of every way an interruption is recovered from.

    Each failure class: detect + diagnose + restart + load + warm-up, and, for a class whose nodes
    are replaced, a second outcome with the wait ``replace_s`` weighted by the chance that the
    spare pool is short (:func:`pool_short_probability`, which counts the repair times). A straggler
    eviction: the same after its detection time, the evicted node replaced. A planned
    interruption: the save, the maintenance, restart, load and warm-up.
    """
    ck = cfg.checkpoint
    load = max(ck.load_s, ck.memory_load_s) if ck.mode == "in-memory" else ck.load_s
    common = cfg.diagnose_s + cfg.restart_s + load + cfg.warmup_s
    out: list[tuple[float, float]] = []
    for c in cfg.classes:
        rate, base = cfg.nodes * c.rate_per_node_s, c.detect_s + common
        short = pool_short_probability(cfg, c.domain_nodes) if c.replace and cfg.replace_s > 0 else 0.0
        out += [(rate * (1.0 - short), base), (rate * short, base + cfg.replace_s)]
    evict = cfg.nodes * eviction_rate_per_node_s(cfg)
    if evict > 0.0:  # detected after straggler_detect_s, then recovered like a replaced node
        short = pool_short_probability(cfg, 1) if cfg.replace_s > 0 else 0.0
        base = cfg.stragglers.detect_s + common
        out += [(evict * (1.0 - short), base), (evict * short, base + cfg.replace_s)]
    save = ck.write_s if ck.mode != "none" else 0.0
    out.append((cfg.planned_per_s, save + cfg.maintenance_s + cfg.restart_s + load + cfg.warmup_s))
    return [(rate, lost) for rate, lost in out if rate > 0.0]


def effective_recovery_s(cfg: HorizonConfig, mtbf_s: float) -> float:
    """The single recovery time ``R`` whose ``e^{R/M}`` is the mean of ``e^{R_i/M}`` (Daly Eq. 9).

    A recovery that may itself be interrupted costs ``e^{R/M}`` in expectation, so a rare but
    long wait (no spare free, ``replace_s``) weighs by its exponential, not by its mean.
    """
    outcomes = recovery_outcomes(cfg)
    total = sum(rate for rate, _ in outcomes)
    if total <= 0.0:
        return mean_recovery_s(cfg)
    if math.isinf(mtbf_s):
        return sum(rate * lost for rate, lost in outcomes) / total
    logs = [math.log(rate / total) + lost / mtbf_s for rate, lost in outcomes]
    top = max(logs)
    if math.isinf(top):
        return math.inf
    return mtbf_s * (top + math.log(sum(math.exp(x - top) for x in logs)))


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
    recovery = effective_recovery_s(cfg, mtbf)
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
    """Refuse a run that must finish but whose expected useful fraction is below the floor.

    A run nothing interrupts (job MTBF infinite) always finishes, however long its dumps: its
    cycles are priced by the work limit (:func:`check_bounds`), not refused here."""
    if (math.isfinite(cfg.horizon_s) or math.isinf(cost.mtbf_s)
            or cost.work_fraction >= MIN_WORK_FRACTION):
        return
    fraction = f"e^-{cost.log_wall_per_work:.3g}" if cost.work_fraction == 0.0 \
        else f"{cost.work_fraction:.3g}"
    dump = "no checkpoints (every failure restarts from the start)" if cfg.checkpoint.mode == "none" \
        else f"checkpoint write+persist {cost.dump_s:.4g} s every {cfg.checkpoint.interval_s:.4g} s"
    keys, wait = PROGRESS_KEYS, ""
    if cost.recovery_s > cost.mtbf_s:
        keys = f"{PROGRESS_KEYS} / {RECOVERY_KEYS}"
    if cost.recovery_s > 2.0 * effective_recovery_s(replace(cfg, replace_s=0.0), cost.mtbf_s):
        keys, wait = f"{PROGRESS_KEYS} / {WAIT_KEYS}", (
            f", with the wait for a replacement node ({cfg.replace_s:.4g} s when fewer than "
            f"{cfg.spares} spares are free; add spares or shorten it)")
    if cfg.nodes * eviction_rate_per_node_s(cfg) * cost.mtbf_s > 0.5:  # mostly evictions
        keys = f"{STRAGGLER_KEYS} / {keys}"
    raise SpecError(keys, (
        f"the run cannot make progress: job MTBF {cost.mtbf_s:.4g} s ({cfg.nodes} nodes) against "
        f"{dump} and recovery {cost.recovery_s:.4g} s{wait}; expected useful fraction {fraction} < "
        f"{MIN_WORK_FRACTION:g} (Daly 2006 Eq. 9): raise the storage bandwidth, change the "
        f"interval, lower the failure or straggler rate or set reliability.horizon_days"))


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
        total += replicas * (weight * (cost.events + 1.0) + STEP_COST * stepped + REPLICA_COST)
    if total > MAX_TOTAL_WORK:
        raise SpecError("--replicas", (
            f"{replicas} replicas x {len(configs)} evaluations ({loop} loop) is {total:.3g} units "
            f"of work (expected events and stepped checkpoint cycles); the limit is "
            f"{MAX_TOTAL_WORK:.0e}: use fewer replicas or intervals"))
