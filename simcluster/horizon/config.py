"""The horizon engine's own frozen configuration, built from a scenario in one adapter.

``horizon_config`` is the only place that reads the ``reliability:`` and ``checkpoint:`` keys.
Everything is SI (seconds, bytes, bytes per second, events per second).

Defaults are listed in docs/scenarios.md. The failure rate (3.79e-3 per node-day: 419 unexpected
interruptions over 2,048 nodes in 54 days) and the default class mix are Llama 3's (arXiv 2407.21783,
section 3.3.4, Table 5), the mix grouped by component and calibrated to the counts (not the printed
percentages); restart 5 min is the low end of Kokolis et al.'s 5-20 min (arXiv 2410.21680); hangs
wait for PyTorch's NCCL watchdog, 10 min (pytorch/pytorch#110947); repair times are lognormal
(Schroeder and Gibson, DSN'06).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simcluster.errors import SpecError
from simcluster.perf.params import count_params
from simcluster.perf.reliability import (
    ADAM_MIXED_CHECKPOINT_BYTES,
    checkpoint_bytes,
    checkpoint_bytes_per_gpu,
    snapshot_time_s,
    transfer_time_s,
)
from simcluster.spec.scenario import CheckpointSpec, ReliabilitySpec, Scenario

DAY_S = 86400.0
#: The synthetic class of straggler evictions (counted as interruptions, not failures).
STRAGGLER = "straggler"
PLANNED = "planned"


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureClass:
    """One failure class: its rate and how the job gets over it.

    Attributes:
        name: class name (``gpu``, ``network``...).
        rate_per_node_s: events per node per second.
        detect_s: failure to detection (error report, or the watchdog timeout of a hang).
        domain_nodes: nodes taken out by one event (a ToR switch takes its rack).
        replace: the failed nodes must be swapped; ``False`` restarts in place.
        in_memory_restore: host memory survives, so in-memory snapshots can be reloaded.
        weibull_shape: Weibull shape of the per-node renewal process; ``None``: exponential.
    """

    name: str
    rate_per_node_s: float
    detect_s: float
    domain_nodes: int = 1
    replace: bool = True
    in_memory_restore: bool = False
    weibull_shape: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointPlan:
    """How the job checkpoints (docs/reliability.md, "Checkpoints").

    Attributes:
        mode: ``sync`` (block for the whole write), ``async`` (block ``blocking_s``, persist in the
            background), ``in-memory`` (snapshot to host memory; persist every ``persist_every``-th
            snapshot), ``none`` (no checkpoints: restart from the beginning).
        interval_s: useful work between snapshots.
        blocking_s: training stall per snapshot (sync: the full write).
        persist_s: background write to storage (0 for sync).
        persist_every: in-memory mode: every n-th snapshot is also persisted.
        load_s: restore from storage; memory_load_s: restore from host or peer memory.
        peer_copy: in-memory snapshots are replicated on a peer node.
        size_bytes: checkpoint size; write_s: its write time at the storage bandwidth.
    """

    mode: str = "sync"
    interval_s: float = 3600.0
    blocking_s: float = 0.0
    persist_s: float = 0.0
    persist_every: int = 1
    load_s: float = 0.0
    memory_load_s: float = 0.0
    peer_copy: bool = False
    size_bytes: float = 0.0
    write_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerPlan:
    """Fail-slow episodes: rate, slowdown, lognormal length, time to detect and evict."""

    rate_per_node_s: float = 0.0
    slowdown: float = 2.0
    median_s: float = 1440.0
    sigma: float = 1.0
    detect_s: float = math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class HorizonConfig:
    """Everything one replica of the horizon engine needs (SI units).

    ``work_s`` is the useful work of the whole run (steps x nominal step time); the replica ends at
    ``min(work done, horizon_s)``. ``restart_s`` already includes communicator init growing with the
    node count.
    """

    nodes: int
    work_s: float
    horizon_s: float = math.inf
    step_s: float = 1.0
    classes: tuple[FailureClass, ...] = ()
    planned_per_s: float = 0.0
    maintenance_s: float = 0.0
    diagnose_s: float = 0.0
    restart_s: float = 0.0
    warmup_s: float = 0.0
    spares: int = 0
    replace_s: float = 0.0
    repair_median_s: float = 14400.0
    repair_sigma: float = 1.0
    elastic: bool = False
    dp: int = 1
    nodes_per_replica: int = 1
    checkpoint: CheckpointPlan = field(default_factory=CheckpointPlan)
    stragglers: StragglerPlan = field(default_factory=StragglerPlan)
    infant_mortality: bool = False
    rejoin_s: float = 0.0
    graceful_eviction: bool = False

    @property
    def failure_rate_s(self) -> float:
        """Unexpected failures of the whole job per second (all classes)."""
        return self.nodes * sum(c.rate_per_node_s for c in self.classes)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Failure classes, then the straggler evictions and planned interruptions."""
        return (*(c.name for c in self.classes), STRAGGLER, PLANNED)


#: Llama 3 Table 5 counts grouped by component (sum 419): gpu = faulty GPU 148 + SRAM 19 + GSP 17 +
#: thermal 6 + SDC 6; hbm = HBM3 72; host = unplanned host maintenance 32 + SSD 3 + PSU 3 + chassis
#: 2 + IO board 2 + CPU 2 + system memory 2; nic = 7; network = switch/cable 35; software = bug 54 +
#: dependency 2; hang = NCCL watchdog timeouts 7. Per class: count, detect_s, detection, domain nodes
#: (one ToR per 2 servers, Llama 3 s3.3.1), replace, in_memory_restore. Detection 30 s for explicit
#: errors (Minder/Mycroft), hangs by the watchdog (PyTorch's NCCL default, pytorch/pytorch#110947).
LLAMA3_CLASSES: dict[str, tuple[int, float, str, int, bool, bool]] = {
    "gpu": (196, 30.0, "error", 1, True, False),
    "hbm": (72, 30.0, "error", 1, True, False),
    "host": (46, 60.0, "error", 1, True, False),
    "nic": (7, 60.0, "error", 1, True, False),
    "network": (35, 60.0, "error", 2, True, False),
    "software": (56, 30.0, "error", 1, False, True),
    "hang": (7, 600.0, "watchdog", 1, False, True),
}


#: The Llama 3 classes of the scale-out path (NIC; ToR switch or cable): a one-node job, which sends
#: nothing over the fabric, leaves them out, as it does classes marked ``fabric: true``.
LLAMA3_FABRIC = ("nic", "network")


def default_classes(rate_per_node_s: float, watchdog_s: float) -> tuple[FailureClass, ...]:
    """The Llama 3 Table 5 mix at a total rate of ``rate_per_node_s``."""
    total = sum(row[0] for row in LLAMA3_CLASSES.values())
    return tuple(
        FailureClass(name=name, rate_per_node_s=rate_per_node_s * count / total,
                     detect_s=watchdog_s if how == "watchdog" else detect,
                     domain_nodes=domain, replace=replace, in_memory_restore=in_memory)
        for name, (count, detect, how, domain, replace, in_memory) in LLAMA3_CLASSES.items())


def failure_classes(rel: ReliabilitySpec, nodes: int = 1) -> tuple[FailureClass, ...]:
    """The scenario's classes (Llama 3 mix when none are given), rates per node per second, with
    the lemon nodes' share folded into the node-replacing classes (:func:`lemon_factor`) and the
    job-level failures (``job_failures_per_day``) as one more class spread over ``nodes``. A
    one-node job leaves out the ``fabric`` classes (it does not use the scale-out network)."""
    rate = rel.failure_rate_per_node_day / DAY_S
    watchdog = float(rel.watchdog_timeout_s)
    shape = rel.weibull_shape if rel.inter_arrival == "weibull" else None
    if not rel.classes:
        out = [_with_shape(c, shape) for c in default_classes(rate, watchdog)
               if not (nodes == 1 and c.name in LLAMA3_FABRIC)]
    else:
        out = []
        for name, spec in rel.classes.items():
            if spec.fabric and nodes == 1:
                continue  # a one-node job sends nothing over the fabric
            own_shape = spec.weibull_shape
            out.append(FailureClass(
                name=name, rate_per_node_s=rate * spec.share,
                detect_s=watchdog if spec.detection == "watchdog" else spec.detect_s,
                domain_nodes=int(spec.domain_nodes), replace=bool(spec.replace),
                in_memory_restore=bool(spec.in_memory_restore),
                weibull_shape=own_shape if own_shape is not None else shape))
    lemon = lemon_factor(rel)
    out = [dataclasses.replace(c, rate_per_node_s=c.rate_per_node_s * lemon) if c.replace else c
           for c in out]
    if rel.job_failures_per_day > 0.0:
        if any(c.name == JOB_CLASS for c in out):
            raise SpecError(f"reliability.classes.{JOB_CLASS}", "is the job-level class of "
                            "reliability.job_failures_per_day: name the class otherwise")
        out.append(FailureClass(name=JOB_CLASS, detect_s=JOB_DETECT_S, replace=False,
                                in_memory_restore=True,
                                rate_per_node_s=rel.job_failures_per_day / DAY_S / max(1, nodes)))
    return tuple(out)


#: The class of job-level failures, and their detection: an error the job reports (as software).
JOB_CLASS = "job"
JOB_DETECT_S = 30.0


def lemon_factor(rel: ReliabilitySpec) -> float:
    """How much more often a job's node fails than a healthy node, in expectation over where the
    job lands: ``1 + f (m - 1)`` for a share ``f`` of lemon nodes failing ``m`` times as often
    (Kokolis et al. 2024, arXiv 2410.21680: lemon nodes, section 5)."""
    return 1.0 + float(rel.lemon_fraction) * (float(rel.lemon_multiplier) - 1.0)


def _with_shape(c: FailureClass, shape: float | None) -> FailureClass:
    return FailureClass(name=c.name, rate_per_node_s=c.rate_per_node_s, detect_s=c.detect_s,
                        domain_nodes=c.domain_nodes, replace=c.replace,
                        in_memory_restore=c.in_memory_restore, weibull_shape=shape)


def checkpoint_plan(ck: CheckpointSpec | None, params: float, step_s: float,
                    snapshot_default_s: float = 1.0, *, nodes: int = 1) -> CheckpointPlan:
    """Checkpoint timings: size = bytes_per_param x params; write/read at the storage bandwidth;
    the snapshot ``ck.snapshot_s``, else ``snapshot_default_s`` (:func:`default_snapshot_s`).

    Each of the ``nodes`` writes an equal share of the checkpoint (replicated tensors are written
    once, spread over their data-parallel copies: Megatron-Core's fully parallel save, PyTorch
    DCP's deduplication), over the smaller of its share of the storage bandwidth and its own
    storage link ``ck.node_storage_Bps`` (:func:`node_write_s`). The interval is rounded to whole
    steps (at least one).
    """
    if ck is None or ck.disabled:
        return CheckpointPlan(mode="none", interval_s=math.inf)
    size = checkpoint_bytes(params, float(ck.bytes_per_param))
    nodes = max(1, nodes)
    write_s = max(transfer_time_s(size, ck.storage_write_Bps), node_write_s(ck, size / nodes, nodes))
    interval = max(1, round(ck.interval_s / step_s)) * step_s
    snapshot_s = float(ck.snapshot_s) if ck.snapshot_s is not None else snapshot_default_s
    persist_interval = ck.persist_interval_s
    every = 1 if persist_interval is None else max(1, round(float(persist_interval) / interval))
    sync = ck.mode == "sync"
    return CheckpointPlan(
        mode=ck.mode, interval_s=interval, blocking_s=write_s if sync else snapshot_s,
        persist_s=0.0 if sync else write_s, persist_every=every if ck.mode == "in-memory" else 1,
        load_s=transfer_time_s(size, ck.storage_read_Bps),
        memory_load_s=float(ck.memory_load_s),
        peer_copy=bool(ck.peer_copy), size_bytes=size, write_s=write_s)


def node_write_s(ck: CheckpointSpec, node_bytes: float, nodes: int) -> float:
    """One node's persist: ``node_bytes`` over ``min(storage_write / nodes, node_storage)``."""
    share = ck.storage_write_Bps / max(1, nodes)
    if ck.node_storage_Bps is not None:
        share = min(share, float(ck.node_storage_Bps))
    return node_bytes / share


def default_snapshot_s(scenario: Scenario, params: float) -> float:
    """The device-to-host snapshot of the scenario's largest per-GPU checkpoint shard over the
    topology's host link (:func:`simcluster.perf.reliability.snapshot_time_s`)."""
    host = scenario.cluster.topology.host
    return snapshot_time_s(gpu_shard_bytes(scenario, params), host.pcie_Bps,
                           host.gpus_per_pcie_switch)


def gpu_shard_bytes(scenario: Scenario, params: float) -> float:
    """The largest checkpoint shard one GPU holds (:func:`checkpoint_bytes_per_gpu`)."""
    ck, par = scenario.checkpoint, scenario.parallelism
    per_param = float(ck.bytes_per_param) if ck is not None else ADAM_MIXED_CHECKPOINT_BYTES
    return checkpoint_bytes_per_gpu(params, par.tp * par.pp * par.cp, par.dp, par.zero_stage,
                                    per_param)


def straggler_plan(rel: ReliabilitySpec) -> StragglerPlan:
    """Fail-slow episodes (off unless ``stragglers_per_node_day`` > 0).

    ``straggler_slowdown`` null is the step engine's answer, which the run layer writes into the
    scenario before the horizon sees it (:func:`simcluster.run.straggler.resolve_straggler`)."""
    detect = rel.straggler_detect_s
    rate = float(rel.stragglers_per_node_day)
    slowdown = rel.straggler_slowdown
    if slowdown is None and rate > 0.0:
        raise SpecError("reliability.straggler_slowdown", "null (the step engine's answer for "
                        "straggler_degrades) must be resolved first: simcluster.run.straggler."
                        "resolve_straggler(scenario), or give a number")
    return StragglerPlan(
        rate_per_node_s=rate / DAY_S,
        slowdown=1.0 if slowdown is None else float(slowdown),
        median_s=float(rel.straggler_median_s),
        sigma=float(rel.straggler_sigma),
        detect_s=math.inf if detect is None else float(detect))


def work_s(scenario: Scenario, step_s: float) -> float:
    """Useful work of the run: ``ceil(tokens / (global_batch * seq_len))`` steps x step time."""
    tokens = scenario.training.tokens
    rel = scenario.reliability
    if tokens is None:
        if rel is not None and rel.horizon_s is not None:
            return math.inf
        raise SpecError("training.tokens", "needed by the reliability simulation "
                        "(or set reliability.horizon_days)")
    per_step = scenario.parallelism.global_batch * scenario.model.seq_len
    return math.ceil(tokens / per_step) * step_s


def horizon_config(scenario: Scenario, step_s: float, *, interval_s: float | None = None
                   ) -> HorizonConfig:
    """Build the engine's configuration from ``scenario`` with nominal step time ``step_s``.

    ``interval_s`` overrides ``checkpoint.interval`` (the interval sweep).
    """
    rel = scenario.reliability or ReliabilitySpec()
    ck = scenario.checkpoint
    if interval_s is not None:
        base = CheckpointSpec() if ck is None or ck.disabled else ck  # a sweep checkpoints
        ck = dataclasses.replace(base, interval_s=interval_s)
    nodes = scenario.cluster.nodes
    par = scenario.parallelism
    gpus_per_node = scenario.cluster.topology.gpus_per_node
    per_replica = max(1, (par.tp * par.pp * par.cp) // gpus_per_node)
    params = float(count_params(scenario.model).total)
    restart = rel.restart_s + float(rel.init_per_node_s) * nodes
    return HorizonConfig(
        nodes=nodes, work_s=work_s(scenario, step_s),
        horizon_s=math.inf if rel.horizon_s is None else rel.horizon_s, step_s=step_s,
        classes=failure_classes(rel, nodes), planned_per_s=rel.planned_per_day / DAY_S,
        maintenance_s=float(rel.maintenance_s), diagnose_s=rel.diagnose_s,
        restart_s=restart,
        warmup_s=float(rel.warmup_s), spares=rel.spares, replace_s=rel.replace_s,
        repair_median_s=float(rel.repair_median_s),
        repair_sigma=float(rel.repair_sigma),
        elastic=bool(rel.elastic), dp=par.dp, nodes_per_replica=per_replica,
        checkpoint=checkpoint_plan(ck, params, step_s, default_snapshot_s(scenario, params),
                                   nodes=nodes),
        stragglers=straggler_plan(rel), infant_mortality=bool(rel.infant_mortality),
        rejoin_s=rejoin_s(scenario, params, restart), graceful_eviction=rel.straggler_eviction == "graceful")


def rejoin_s(scenario: Scenario, params: float, restart_s: float) -> float:
    """The pause of an elastic job when its replacement nodes rejoin: ``elastic_rejoin_s``, else a
    restart of every worker (``restart_s``, with its per-node growth; TorchElastic restarts all
    workers on a membership change: PyTorch docs, torchrun "Membership Changes") with its warm-up,
    plus the new replicas copying each GPU's checkpoint shard over the GPU's share of its node's
    NICs."""
    rel = scenario.reliability or ReliabilitySpec()
    if rel.elastic_rejoin_s is not None:
        return float(rel.elastic_rejoin_s)
    topo = scenario.cluster.topology
    shard = gpu_shard_bytes(scenario, params)
    out = topo.scale_out
    share_Bps = out.nic_Bps * out.nics_per_node / topo.gpus_per_node
    copy_s = shard / share_Bps if share_Bps > 0 else 0.0
    return restart_s + float(rel.warmup_s) + copy_s
