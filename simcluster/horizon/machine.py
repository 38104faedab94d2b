"""The job's recovery state machine: phases, checkpoints, rollback and the lost-time ledger.

Both engines drive this one machine: the SimPy engine (``engine.py``) yields a timeout until
``phase_end_s`` and delivers random events as ``process.interrupt(cause)``; the fast engine
(``fast.py``) does the same in a plain loop. The machine does the bookkeeping; the engines only
sequence.

Phases (docs/reliability.md, "The model"): RUN (progress at rate capacity/slowdown) -> BLOCK (checkpoint
stall, including waiting for the previous persist: one host buffer) -> RUN ... On a failure:
DETECT -> DIAGNOSE -> WAIT (spare or replacement) -> RESTART -> LOAD -> WARMUP -> RUN; a failure
during any of them starts the sequence again. A planned interruption saves gracefully (MAINTAIN),
then WAIT -> RESTART -> LOAD -> WARMUP; so does a detected straggler (SAVE, then WAIT...) unless
its eviction is a crash. An elastic job that ran on fewer replicas pauses (REJOIN) when the nodes
are back. Progress since the restore point is lost at the failure and
charged to ``rework`` (the time that produced it); so at any instant

    elapsed = progress + sum(lost buckets)          (exactly, up to float rounding)
"""

from __future__ import annotations

import math
from enum import IntEnum

from simcluster.horizon.config import FailureClass, HorizonConfig
from simcluster.horizon.records import BUCKETS, ReplicaRecord
from simcluster.horizon.sampling import EVICT, FAILURE, HORIZON, PLANNED_EVENT, STRAG_OFF, STRAG_ON, Event
from simcluster.horizon.spares import SparePool

#: Progress within this many seconds of a target counts as reaching it (float rounding).
EPS_S = 1e-6


class Phase(IntEnum):
    """What the job is doing."""

    RUN = 0
    BLOCK = 1
    DETECT = 2
    DIAGNOSE = 3
    WAIT = 4
    RESTART = 5
    LOAD = 6
    WARMUP = 7
    MAINTAIN = 8
    REJOIN = 9
    SAVE = 10
    DONE = 11


#: The lost-time bucket (index into ``BUCKETS``) each non-RUN phase is charged to.
PHASE_BUCKET = {Phase.BLOCK: 0, Phase.DETECT: 2, Phase.DIAGNOSE: 3, Phase.WAIT: 4, Phase.RESTART: 5,
                Phase.LOAD: 6, Phase.WARMUP: 7, Phase.MAINTAIN: 8, Phase.REJOIN: 5, Phase.SAVE: 0}
REWORK, STRAGGLING, REDUCED = BUCKETS.index("rework"), BUCKETS.index("straggling"), \
    BUCKETS.index("reduced_replicas")
EVICTED = FailureClass(name="straggler", rate_per_node_s=0.0, detect_s=0.0, in_memory_restore=True)


class JobMachine:
    """One replica's job state; every method takes the wall time it happens at."""

    def __init__(self, cfg: HorizonConfig) -> None:
        self.cfg, self.ck = cfg, cfg.checkpoint
        self.pool = SparePool(cfg.spares, cfg.replace_s)
        self.lost = [0.0] * len(BUCKETS)
        self.counts = [0] * len(cfg.class_names)
        self.phase, self.phase_start_s, self.phase_end_s = Phase.RUN, 0.0, 0.0
        self.progress_s = self.seg_start_s = self.rate = 0.0
        self.slowdown, self.straggling_now, self.capacity = 1.0, 0, 1.0
        self.capacity_back_s = math.inf
        self.snap_p = self.mem_p = self.durable_p = self.persist_req_p = 0.0
        self.mem_valid = self.ck.mode == "in-memory"
        self.pending_s, self.pending_p, self.snapshots = math.inf, 0.0, 0
        self.save_on_maintenance, self.load_from_memory = False, False
        self.to_claim: list[int] = []
        self.nodes_ready_s, self.missing_nodes, self.restarts = 0.0, 0, 0
        self._run(0.0)

    @property
    def done(self) -> bool:
        """The run finished or reached the horizon."""
        return self.phase is Phase.DONE

    # -- phase changes ------------------------------------------------------------------------
    def _enter(self, phase: Phase, t: float, duration_s: float) -> None:
        self.phase, self.phase_start_s, self.phase_end_s = phase, t, t + duration_s

    def _target_p(self) -> float:
        return min(self.snap_p + self.ck.interval_s, self.cfg.work_s)

    def _run(self, t: float) -> None:
        if self.capacity_back_s <= t:
            self.capacity, self.capacity_back_s, self.missing_nodes = 1.0, math.inf, 0
        self.phase, self.phase_start_s, self.seg_start_s = Phase.RUN, t, t
        self.rate = self.capacity / self.slowdown
        to_target = (self._target_p() - self.progress_s) / self.rate
        self.phase_end_s = min(t + max(to_target, 0.0), self.capacity_back_s)

    def _close(self, t: float) -> None:
        """Charge the current phase up to ``t``."""
        if self.phase is Phase.RUN:
            dt = t - self.seg_start_s
            self.progress_s += dt * self.rate
            if self.rate != 1.0:
                self.lost[STRAGGLING] += dt - dt / self.slowdown
                self.lost[REDUCED] += dt / self.slowdown * (1.0 - self.capacity)
            self.seg_start_s = t
        elif self.phase is not Phase.DONE:
            self.lost[PHASE_BUCKET[self.phase]] += t - self.phase_start_s
        self.phase_start_s = t

    def _resolve_persist(self, t: float) -> None:
        if self.pending_s <= t:
            self.durable_p, self.pending_s = self.pending_p, math.inf

    def end_phase(self, t: float) -> None:
        """The current phase ends at ``t`` (= ``phase_end_s``): go to the next one."""
        self._close(t)
        phase = self.phase
        if phase is Phase.RUN:
            if self.capacity < 1.0 and self.capacity_back_s <= t + EPS_S:
                self._rejoin(t)
            elif self.progress_s >= self._target_p() - EPS_S:
                self._resolve_persist(t)
                wait = 0.0 if math.isinf(self.pending_s) else self.pending_s - t
                self._enter(Phase.BLOCK, t, wait + self._blocking_s())
            else:
                self._run(t)
        elif phase is Phase.BLOCK:
            self._snapshot(t)
        elif phase is Phase.DETECT:
            self._enter(Phase.DIAGNOSE, t, self.cfg.diagnose_s)
        elif phase in (Phase.DIAGNOSE, Phase.MAINTAIN, Phase.SAVE):
            if phase is not Phase.DIAGNOSE and self.save_on_maintenance:  # the graceful save
                self.durable_p = self.mem_p = self.snap_p = self.persist_req_p = self.progress_s
            self._wait(t)
        elif phase is Phase.WAIT:
            self.missing_nodes = 0 if self.capacity == 1.0 else self.missing_nodes
            self.restarts += 1
            self._enter(Phase.RESTART, t, self.cfg.restart_s)
        elif phase is Phase.RESTART:
            load = self.ck.memory_load_s if self.load_from_memory else self.ck.load_s
            self._enter(Phase.LOAD, t, load)
        elif phase is Phase.LOAD:
            self._enter(Phase.WARMUP, t, self.cfg.warmup_s)
        else:
            self._run(t)

    def _rejoin(self, t: float) -> None:
        """The replacement nodes are back: every worker restarts and the new replicas copy the
        state (``rejoin_s``, charged to ``restart``); no work is lost."""
        self.capacity, self.capacity_back_s, self.missing_nodes = 1.0, math.inf, 0
        self.restarts += 1
        self._enter(Phase.REJOIN, t, self.cfg.rejoin_s)

    def _blocking_s(self) -> float:
        return 0.0 if self.ck.mode == "none" else self.ck.blocking_s

    def _snapshot(self, t: float) -> None:
        self._resolve_persist(t)
        ck, p = self.ck, self.progress_s
        self.snap_p, self.snapshots = p, self.snapshots + 1
        final = p >= self.cfg.work_s - EPS_S
        if ck.mode == "sync":
            self.durable_p = self.mem_p = p
        elif ck.mode == "async":
            self.pending_s, self.pending_p = t + ck.persist_s, p
        elif ck.mode == "in-memory":
            self.mem_p, self.mem_valid = p, True
            if final or p - self.persist_req_p >= ck.persist_every * ck.interval_s - EPS_S:
                self.pending_s, self.pending_p, self.persist_req_p = t + ck.persist_s, p, p
        if final:
            self._enter(Phase.DONE, t, math.inf)
        else:
            self._run(t)

    def _wait(self, t: float) -> None:
        for nodes in self.to_claim:
            ready, missing = self.pool.claim(t, nodes)
            self.nodes_ready_s = max(self.nodes_ready_s, ready)
            self.missing_nodes += missing
        self.to_claim.clear()
        wait = max(0.0, self.nodes_ready_s - t)
        lost_replicas = math.ceil(self.missing_nodes / self.cfg.nodes_per_replica)
        if self.cfg.elastic and wait > 0.0 and lost_replicas < self.cfg.dp:
            self.capacity = (self.cfg.dp - lost_replicas) / self.cfg.dp
            self.capacity_back_s, wait = self.nodes_ready_s, 0.0
        elif wait > 0.0:
            self.capacity, self.capacity_back_s = 1.0, math.inf
        self._enter(Phase.WAIT, t, wait)

    # -- the fast engine's inner loop -----------------------------------------------------------
    def fast_forward(self, limit_s: float) -> None:
        """Apply every whole RUN -> BLOCK -> RUN step that ends by ``limit_s``, in local variables.

        The same float operations as :meth:`end_phase` in the same order, for the common case only:
        full rate, no pending capacity change, not the final checkpoint; runs of identical cycles
        are jumped in closed form (:meth:`_steady_cycles`). Anything else is left to
        :meth:`end_phase`.
        """
        if self.phase is not Phase.RUN or self.rate != 1.0 or self.capacity_back_s != math.inf:
            return
        ck, work, block = self.ck, self.cfg.work_s, self._blocking_s()
        tau, mode, persist = ck.interval_s, ck.mode, ck.persist_s
        every_s = ck.persist_every * tau
        p, seg, end, snap = self.progress_s, self.seg_start_s, self.phase_end_s, self.snap_p
        pend_s, pend_p, durable, req = self.pending_s, self.pending_p, self.durable_p, self.persist_req_p
        mem_p, lost0, snaps = self.mem_p, self.lost[0], self.snapshots
        while end <= limit_s:
            target = min(snap + tau, work)
            p_end = p + (end - seg) * 1.0
            if target >= work - EPS_S or p_end < target - EPS_S:
                break
            if pend_s <= end:
                durable, pend_s = pend_p, math.inf
            block_end = end + ((0.0 if math.isinf(pend_s) else pend_s - end) + block)
            p = p_end
            if block_end > limit_s:
                self.phase, self.phase_start_s, self.phase_end_s = Phase.BLOCK, end, block_end
                seg = end
                break
            lost0 += block_end - end
            if pend_s <= block_end:
                durable, pend_s = pend_p, math.inf
            snap, snaps = p, snaps + 1
            if mode == "sync":
                durable = mem_p = p
            elif mode == "async":
                pend_s, pend_p = block_end + persist, p
            elif mode == "in-memory":
                mem_p = p
                self.mem_valid = True
                if p - req >= every_s - EPS_S:
                    pend_s, pend_p, req = block_end + persist, p, p
            jump = self._steady_cycles(p, block_end, limit_s, pend_p)
            if jump:
                count, cycle_s, stall_s = jump
                p, block_end = p + count * tau, block_end + count * cycle_s
                lost0, snaps, snap = lost0 + count * stall_s, snaps + count, p
                if mode == "sync":
                    durable = mem_p = p
                else:
                    durable, pend_s, pend_p = p - tau, block_end + persist, p
            seg = block_end
            self.phase_start_s = block_end
            end = min(block_end + max((min(snap + tau, work) - p) / 1.0, 0.0), math.inf)
        self.progress_s, self.seg_start_s, self.snap_p, self.mem_p = p, seg, snap, mem_p
        self.pending_s, self.pending_p, self.durable_p, self.persist_req_p = pend_s, pend_p, durable, req
        self.lost[0], self.snapshots = lost0, snaps
        if self.phase is Phase.RUN:
            self.phase_end_s = end

    def _steady_cycles(self, p: float, start_s: float, limit_s: float, pending_p: float
                       ) -> tuple[int, float, float] | None:
        """Whole identical checkpoint cycles that fit between ``start_s`` and ``limit_s``.

        Right after a snapshot at progress ``p`` (sync, or async with that snapshot persisting),
        every later cycle is ``tau`` of running plus the same stall (``blocking``, plus the wait for
        the previous persist when it is longer than ``tau``). Returns (cycles, cycle length, stall)
        for all but the last cycle that fits, or ``None``. Closed-form time differs from step-by-step
        addition only by float rounding.
        """
        ck, tau = self.ck, self.ck.interval_s
        if ck.mode == "sync":
            stall = ck.blocking_s
        elif ck.mode == "async" and pending_p == p:
            stall = max(0.0, ck.persist_s - tau) + ck.blocking_s
        else:
            return None
        cycle = tau + stall
        span, left = (limit_s - start_s) / cycle, (self.cfg.work_s - EPS_S - p) / tau
        by_time = math.floor(span) if math.isfinite(span) else 1 << 62
        by_work = math.ceil(left) - 1 if math.isfinite(left) else 1 << 62
        count = min(by_time, by_work) - 1
        return (count, cycle, stall) if count >= 1 else None

    # -- random events --------------------------------------------------------------------------
    def interrupt(self, t: float, event: Event) -> None:
        """Apply a random event of the sample path at ``t``."""
        kind = event[1]
        if kind in (STRAG_ON, STRAG_OFF):
            running = self.phase is Phase.RUN
            if running:
                self._close(t)
            self.straggling_now += 1 if kind == STRAG_ON else -1
            self.slowdown = self.cfg.stragglers.slowdown if self.straggling_now > 0 else 1.0
            if running:
                self._run(t)
        elif kind == EVICT and self.cfg.graceful_eviction:
            self._evict(t, event[2], event[3])
        elif kind in (FAILURE, EVICT):
            cls = self.cfg.classes[event[2]] if kind == FAILURE else EVICTED
            self._fail(t, event[2], cls, event[3])
        elif kind == PLANNED_EVENT:
            self._planned(t)
        elif kind == HORIZON:
            self._close(t)
            self._enter(Phase.DONE, t, math.inf)

    def _fail(self, t: float, index: int, cls: FailureClass, repair_s: float) -> None:
        self.counts[index] += 1
        self._close(t)
        self._resolve_persist(t)
        self.pending_s = math.inf
        keeps_memory = self.ck.mode == "in-memory" and (cls.in_memory_restore or self.ck.peer_copy)
        self._roll_back(keeps_memory)
        if cls.replace:
            self.to_claim.append(cls.domain_nodes)
            self.pool.send_to_repair(t + repair_s, cls.domain_nodes)
        self.save_on_maintenance = False
        self._enter(Phase.DETECT, t, cls.detect_s)

    def _evict(self, t: float, index: int, repair_s: float) -> None:
        """A health check found the slow node: a running job saves (a synchronous write, charged
        to ``checkpoint_blocking``), the node goes to repair and the job restarts on a spare; a job
        that was not running has nothing newer to save than what it would restore."""
        running = self.phase in (Phase.RUN, Phase.BLOCK)
        if not running:
            self._fail(t, index, EVICTED, repair_s)
            return
        self.counts[index] += 1
        self._close(t)
        self._resolve_persist(t)
        self.pending_s = math.inf
        saves = self.ck.mode != "none"
        if not saves:
            self._roll_back(keeps_memory=False)
        self.load_from_memory = False
        self.to_claim.append(1)
        self.pool.send_to_repair(t + repair_s, 1)
        self.save_on_maintenance = saves  # applied when the write ends (a failure first: lost)
        self._enter(Phase.SAVE, t, self.ck.write_s if saves else 0.0)

    def _roll_back(self, keeps_memory: bool) -> None:
        self.mem_valid = self.mem_valid and keeps_memory
        restore = self.mem_p if self.mem_valid else self.durable_p
        self.lost[REWORK] += self.progress_s - restore
        self.progress_s = self.snap_p = self.mem_p = restore
        self.persist_req_p = min(self.persist_req_p, self.durable_p)
        self.load_from_memory = self.mem_valid

    def _planned(self, t: float) -> None:
        self.counts[-1] += 1
        running = self.phase in (Phase.RUN, Phase.BLOCK)
        self._close(t)
        self._resolve_persist(t)
        self.pending_s = math.inf
        can_save = self.ck.mode != "none"
        if running or self.phase is not Phase.MAINTAIN:
            self.save_on_maintenance = running and can_save
        if not self.save_on_maintenance:
            self._roll_back(keeps_memory=False)
        self.load_from_memory = False
        save_s = self.ck.write_s if self.save_on_maintenance else 0.0
        self._enter(Phase.MAINTAIN, t, save_s + self.cfg.maintenance_s)

    def record(self) -> ReplicaRecord:
        """The replica's result (call when ``done``)."""
        return ReplicaRecord(elapsed_s=self.phase_start_s, useful_s=self.progress_s,
                             lost_s=tuple(self.lost), interruptions=tuple(self.counts),
                             completed=self.progress_s >= self.cfg.work_s - EPS_S,
                             spare_exhaustions=self.pool.exhausted, restarts=self.restarts)
