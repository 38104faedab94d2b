"""The scenario: model, cluster, parallel layout, precision, training run, reliability and cost.

Schema ``simcluster/scenario/v1`` (docs/scenarios.md). The data-parallel degree is derived from
the GPU count; every consistency rule that involves several sections lives in :mod:`.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.spec.checks import check_scenario, check_tp_divides_model
from simcluster.spec.execution import ExecutionSpec
from simcluster.spec.hardware import PRECISIONS, TopologySpec
from simcluster.spec.model import ModelSpec
from simcluster.spec.schema import Context, spec_field

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
RECOMPUTE = ("none", "selective", "full")
#: ``parallelism.offload``: ZeRO-Offload and ZeRO-Infinity's CPU offload (:mod:`simcluster.perf.offload`).
OFFLOADS = ("none", "optimizer", "optimizer+params")
INTER_ARRIVAL = ("exponential", "weibull")
#: Weibull shapes accepted: published fits of hardware failures lie in 0.5-1.5 (Schroeder and
#: Gibson, DSN 2006: 0.7-0.8); below 0.1 the mean is an extreme tail (Gamma(11) times the scale).
MIN_WEIBULL_SHAPE, MAX_WEIBULL_SHAPE = 0.1, 20.0
CHECKPOINT_MODES = ("sync", "async", "in-memory", "none")
DETECTIONS = ("error", "watchdog")
LINK_LAYERS = ("scale_up", "scale_out")
COST_MODES = ("rent", "buy")
SCENARIO_SCHEMA = "simcluster/scenario/v1"
#: Largest global batch accepted, in sequences (2**40: far beyond any real run, small enough that
#: per-step counts stay exact and the engines' loops stay bounded by their own limits).
MAX_GLOBAL_BATCH = 2**40


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """How many nodes of which topology."""

    topology: TopologySpec = spec_field()
    nodes: int = spec_field(ge=1)

    @property
    def gpus(self) -> int:
        """Total accelerators."""
        return self.nodes * self.topology.gpus_per_node


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelismSpec:
    """The parallel layout: TP x PP x CP x DP (x EP inside DP), batch, schedule, memory savers.

    ``stage_layers`` states uneven pipeline stages explicitly (one entry per pipeline stage, or per
    virtual stage with ``interleaved``); ``tp_across_nodes`` allows TP groups to span nodes.
    """

    tp: int = spec_field(1, ge=1)
    pp: int = spec_field(1, ge=1)
    cp: int = spec_field(1, ge=1)
    dp: int = spec_field(ge=1, derived=True)
    ep: int = spec_field(1, ge=1)
    expert_tp: int | None = spec_field(
        None, ge=1, doc="tensor parallelism of the routed experts (Megatron-Core's "
        "expert_tensor_parallel_size; MoE only): null = tp (Megatron's default); 1 keeps whole "
        "experts on each GPU and lets the expert-parallel group span the TP ranks (MoE parallel "
        "folding, docs/moe.md)")
    micro_batch: int = spec_field(1, ge=1)
    global_batch: int = spec_field(ge=1, le=MAX_GLOBAL_BATCH)
    schedule: str = spec_field("1f1b", choices=SCHEDULES)
    virtual_stages: int = spec_field(1, ge=1)
    sequence_parallel: bool = spec_field(False)
    recompute: str = spec_field("none", choices=RECOMPUTE)
    zero_stage: int = spec_field(1, ge=0, le=3)
    offload: str = spec_field(
        "none", choices=OFFLOADS, doc="optimizer: each GPU's ZeRO shard of fp32 weights, Adam "
        "moments and gradients in host memory, Adam on the CPU (ZeRO-Offload; needs zero_stage "
        ">= 1); optimizer+params: the 16-bit weights too, fetched layer by layer over PCIe "
        "(ZeRO-Infinity, CPU; needs zero_stage 3); NVMe is not modelled (docs/offload.md)")
    stage_layers: tuple[int, ...] | None = spec_field(None, ge=0)
    tp_across_nodes: bool = spec_field(False)

    @staticmethod
    def derive(values: dict[str, Any], context: Context) -> None:
        """``dp = gpus / (tp*pp*cp)``; a given ``dp`` must agree."""
        cluster = context.get("cluster")
        if not isinstance(cluster, ClusterSpec):
            return
        model = context.get("model")
        if isinstance(model, ModelSpec):
            check_tp_divides_model(values.get("tp", 1), model, key="tp")
        gpus = cluster.gpus
        tp, pp, cp = (values.get(k, 1) for k in ("tp", "pp", "cp"))
        model_par = tp * pp * cp
        if gpus % model_par:
            culprit = "tp" if gpus % tp else "pp" if gpus % (tp * pp) else "cp"
            raise SpecError(culprit, f"tp*pp*cp = {tp}*{pp}*{cp} = {model_par} does not divide "
                            f"the {gpus} GPUs ({cluster.nodes} nodes x "
                            f"{cluster.topology.gpus_per_node})")
        derived = gpus // model_par
        given = values.setdefault("dp", derived)
        if given != derived:
            raise SpecError("dp", f"{given} is inconsistent: gpus/(tp*pp*cp) = {gpus}/{model_par} "
                            f"= {derived}")

    def __post_init__(self) -> None:
        if self.virtual_stages > 1 and self.schedule != "interleaved":
            raise SpecError("virtual_stages", f"{self.virtual_stages} needs schedule: interleaved")
        if self.schedule == "interleaved" and self.virtual_stages < 2:
            raise SpecError("virtual_stages", "schedule interleaved needs virtual_stages >= 2")
        if self.schedule == "interleaved" and self.pp < 2:
            raise SpecError("schedule", "interleaved needs pp >= 2 (virtual stages interleave "
                            "pipeline stages); use 1f1b with pp = 1")
        if self.global_batch % (self.micro_batch * self.dp):
            raise SpecError("global_batch", f"{self.global_batch} is not divisible by "
                            f"micro_batch*dp = {self.micro_batch}*{self.dp}")
        ranks = self.tp * self.cp * self.dp
        if ranks % (self.etp * self.ep):
            raise SpecError("ep", f"expert_tp*ep = {self.etp}*{self.ep} must divide tp*cp*dp = "
                            f"{ranks} (the experts of a pipeline stage fold onto its GPUs; "
                            "with expert_tp = tp: ep must divide dp*cp)")

    @property
    def etp(self) -> int:
        """Expert tensor-parallel size: ``expert_tp``, or ``tp`` where unset."""
        return self.tp if self.expert_tp is None else self.expert_tp

    @property
    def expert_dp(self) -> int:
        """Expert data-parallel size ``tp*cp*dp / (etp*ep)``: the ranks that hold the same experts
        (``dp*cp/ep`` with ``etp = tp``)."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step per pipeline (gradient accumulation steps)."""
        return self.global_batch // (self.micro_batch * self.dp)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSlowdownSpec:
    """One slow GPU (or every GPU of a node): compute runs at ``factor`` of nominal speed."""

    node: int = spec_field(0, ge=0, doc="node index (node-major numbering)")
    gpu: int | None = spec_field(None, ge=0, doc="local GPU index; null = every GPU of the node")
    factor: float = spec_field(gt=0, le=1, doc="compute speed over nominal (0.5 = half speed)")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkBandwidthSpec:
    """A degraded fabric layer on one node or on every node: bandwidth times ``factor``."""

    layer: str = spec_field("scale_out", choices=LINK_LAYERS)
    node: int | None = spec_field(None, ge=0, doc="node index; null = every node")
    factor: float = spec_field(gt=0, doc="bandwidth over nominal (0.5: 800G degraded to 400G)")


@dataclass(frozen=True, slots=True, kw_only=True)
class PerturbationsSpec:
    """What breaks the cluster's symmetry in the iteration engine (stragglers, degraded links)."""

    gpu_slowdown: tuple[GpuSlowdownSpec, ...] = spec_field(())
    link_bandwidth: tuple[LinkBandwidthSpec, ...] = spec_field(())


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """The training run: tokens to train on."""

    tokens: float | None = spec_field(None, gt=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureClassSpec:
    """One failure class: its share of unexpected interruptions and its detection latency."""

    share: float = spec_field(ge=0, le=1)
    detect_s: float = spec_field(60.0, unit="s", ge=0)
    detection: str = spec_field("error", choices=DETECTIONS,
                                doc="error: detected after detect_s; watchdog: a hang, detected after "
                                    "reliability.watchdog_timeout_s")
    domain_nodes: int = spec_field(1, ge=1, doc="nodes taken out by one event (a ToR switch: 2)")
    replace: bool = spec_field(True, doc="failed nodes are swapped for spares/replacements; "
                                         "false: restart in place (software, hang)")
    in_memory_restore: bool = spec_field(False, doc="host memory survives, so in-memory checkpoints "
                                                    "can be reloaded (process-restart recoverable)")
    fabric: bool = spec_field(False, doc="a failure of the node's scale-out path (NIC, InfiniBand "
                                         "link, switch port): it stops only jobs spanning nodes")
    weibull_shape: float | None = spec_field(
        None, ge=MIN_WEIBULL_SHAPE, le=MAX_WEIBULL_SHAPE,
        doc="per-class override of reliability.weibull_shape")


#: How a detected straggler leaves the job (``reliability.straggler_eviction``).
EVICTIONS = ("graceful", "crash")

#: What a fail-slow episode degrades on the node it hits (``reliability.straggler_degrades.what``).
STRAGGLER_KINDS = ("gpu", "node", "scale_out", "scale_up")


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerDegradeSpec:
    """What one fail-slow episode degrades on the node it hits: one GPU's compute (``gpu``), every
    GPU of the node (``node``), the node's NICs (``scale_out``) or its NVLink (``scale_up``), to
    ``factor`` of nominal. The step engine prices it (``simcluster.run.straggler``)."""

    what: str = spec_field("scale_out", choices=STRAGGLER_KINDS)
    factor: float = spec_field(0.5, gt=0, le=1, doc="speed or bandwidth over nominal (0.5: a port "
                                                    "that negotiated 800G down to 400G)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReliabilitySpec:
    """Failures, recovery and spares (docs/reliability.md)."""

    preset: str | None = spec_field(
        None, doc="reliability preset the rates came from (simcluster catalog reliability); the "
        "loader merges its keys under the ones given")
    failure_rate_per_node_day: float = spec_field(3.79e-3, ge=0)
    lemon_fraction: float = spec_field(
        0.0, ge=0, le=0.5, doc="share of nodes whose node-replacing classes fail lemon_multiplier "
        "times as often (Kokolis et al. 2024: 1.2% of RSC-1's nodes); the job's rate is the "
        "expectation over where it lands (docs/reliability.md)")
    lemon_multiplier: float = spec_field(1.0, ge=1, le=1e4, doc="hazard of a lemon node over a "
                                                              "healthy one")
    job_failures_per_day: float = spec_field(
        0.0, ge=0, doc="failures of the job itself, not of a node (software, user code, hangs "
        "not tied to a node): restart in place, per job-day whatever its size")
    classes: dict[str, FailureClassSpec] = spec_field({})
    inter_arrival: str = spec_field("exponential", choices=INTER_ARRIVAL)
    weibull_shape: float = spec_field(
        0.8, ge=MIN_WEIBULL_SHAPE, le=MAX_WEIBULL_SHAPE, doc="shape of each node's Weibull "
        "time between failures (inter_arrival: weibull); below 1 a node that just failed is "
        "likelier to fail again. The mean stays 1 / failure rate, and node clocks start in "
        "equilibrium, so the long-run rate is the stated one for any shape (docs/reliability.md)")
    infant_mortality: bool = spec_field(
        False, doc="Weibull failures only: every node starts at age 0 when the job starts (a "
        "freshly installed fleet: with a shape below 1, more failures early in the run); "
        "false: node ages start in equilibrium (a fleet in service)")
    planned_per_day: float = spec_field(0.0, ge=0)
    diagnose_s: float = spec_field(300.0, unit="s", ge=0)
    restart_s: float = spec_field(300.0, unit="s", ge=0)
    spares: int = spec_field(0, ge=0)
    replace_s: float = spec_field(7200.0, unit="s", ge=0)
    watchdog_timeout_s: float = spec_field(
        600.0, unit="s", ge=0, doc="hang detection: NCCL watchdog timeout (PyTorch default 10 min)")
    warmup_s: float = spec_field(60.0, unit="s", ge=0, doc="warm-up/recompile after a restart")
    init_per_node_s: float = spec_field(0.0, unit="s", ge=0,
                                        doc="communicator init growth: added to restart_s per job node")
    maintenance_s: float = spec_field(0.0, unit="s", ge=0,
                                      doc="downtime of a planned interruption after its graceful checkpoint")
    repair_median_s: float = spec_field(14400.0, unit="s", gt=0,
                                        doc="median repair time of a failed node (lognormal) before it "
                                            "returns to the spare pool")
    repair_sigma: float = spec_field(1.0, ge=0, doc="lognormal sigma of the repair time")
    elastic: bool = spec_field(False, doc="continue with fewer DP replicas while waiting for nodes")
    elastic_rejoin_s: float | None = spec_field(
        None, unit="s", ge=0, doc="pause when the replacement nodes rejoin an elastic job (every "
        "worker restarts, as TorchElastic does on a membership change, and the new replicas copy "
        "the model state); null: restart_s + warmup_s + each GPU's checkpoint shard over its share "
        "of the node's NICs")
    stragglers_per_node_day: float = spec_field(0.0, ge=0, doc="fail-slow episodes per node-day")
    straggler_degrades: StragglerDegradeSpec = spec_field(
        StragglerDegradeSpec(), doc="what an episode degrades on its node; the step engine's time "
        "with that degradation over the nominal step is the slowdown")
    straggler_slowdown: float | None = spec_field(
        None, ge=1, doc="step-time multiplier during an episode; null: the step engine's answer for "
        "straggler_degrades (the same engine as the nominal step)")
    straggler_median_s: float = spec_field(1440.0, unit="s", gt=0,
                                           doc="median episode length (lognormal; GREYHOUND ~24 min)")
    straggler_sigma: float = spec_field(1.0, ge=0, doc="lognormal sigma of the episode length")
    straggler_detect_s: float | None = spec_field(600.0, unit="s", ge=0,
                                                  doc="time to detect and evict a straggler; null: never")
    straggler_eviction: str = spec_field(
        "graceful", choices=EVICTIONS, doc="graceful: the health check that found the slow node "
        "lets the job save, then swaps the node (DLRover, PAI); crash: the job fails and rolls "
        "back to its last checkpoint")
    horizon_s: float | None = spec_field(None, unit="days", gt=0)

    def __post_init__(self) -> None:
        total = sum(c.share for c in self.classes.values())
        if self.classes and abs(total - 1.0) > 1e-6:
            raise SpecError("classes", f"shares sum to {total:.6g}, expected 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSpec:
    """How often and how checkpoints are written.

    ``checkpoint: none`` (or ``mode: none``) states that the run writes no checkpoint: the scenario
    then has a :class:`CheckpointSpec` whose ``mode`` is ``"none"`` (:attr:`disabled`), whereas a
    scenario without a ``checkpoint:`` section has ``checkpoint = None`` (nothing was said).
    """

    scalar_forms: ClassVar[dict[str, dict[str, str]]] = {"none": {"mode": "none"}}

    interval_s: float = spec_field(3600.0, unit="min", gt=0)
    mode: str = spec_field("sync", choices=CHECKPOINT_MODES)
    storage_write_Bps: float = spec_field(100e9, unit="GBps", gt=0)
    storage_read_Bps: float = spec_field(100e9, unit="GBps", gt=0)
    node_storage_Bps: float | None = spec_field(
        None, unit="GBps", gt=0, doc="one node's link to the storage (its frontend or storage NICs, "
        "e.g. a DGX H100's two 200G storage ports: 50); each node writes an equal share of the "
        "checkpoint over the smaller of this and its share of storage_write_GBps; null: the share")
    bytes_per_param: float = spec_field(14.0, gt=0, doc="checkpoint bytes per parameter (bf16 weights 2 "
                                                        "+ fp32 master 4 + Adam m 4 + v 4)")
    snapshot_s: float | None = spec_field(
        None, unit="s", ge=0, doc="blocking device-to-host snapshot of async and in-memory modes; "
        "null: each GPU's checkpoint shard over its host link (topology host.pcie_GBps, shared by "
        "host.gpus_per_pcie_switch GPUs) at the measured pinned-copy rate, 0.86 of the line rate "
        "(docs/reliability.md)")
    persist_interval_s: float | None = spec_field(None, unit="min", gt=0,
                                                  doc="in-memory mode: how often a snapshot is also "
                                                      "persisted to storage; null: every snapshot")
    peer_copy: bool = spec_field(False, doc="in-memory mode: snapshots are replicated to a peer node "
                                            "(Gemini), so they survive node loss")
    memory_load_s: float = spec_field(30.0, unit="s", ge=0, doc="restore time from host or peer memory")

    @property
    def disabled(self) -> bool:
        """The scenario says explicitly that no checkpoint is written (``checkpoint: none``)."""
        return self.mode == "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSpec:
    """Rent (per GPU-hour) or buy (price per node, amortisation, power): docs/cost.md.

    ``mode`` says which; a number left out is taken from the catalog's dated prices (rent: the
    accelerator's ``price.rent_per_gpu_hour_usd``; buy: the topology's ``price.node_usd`` and,
    unless ``node_power_W`` is given, its ``price.node_power_W``). It is resolved here, after
    ``cluster``, so a ``--set cluster.topology=...`` brings its own prices. ``cost: rent`` and
    ``cost: buy`` are shorthands for ``{mode: rent}`` and ``{mode: buy}``.
    """

    scalar_forms: ClassVar[dict[str, dict[str, str]]] = {m: {"mode": m} for m in COST_MODES}

    mode: str = spec_field(derived=True, choices=COST_MODES,
                           doc="derived from the number given; with no number, prices come "
                               "from the catalog")
    rent_per_gpu_hour_usd: float | None = spec_field(None, unit="usd", ge=0)
    node_price_usd: float | None = spec_field(None, unit="usd", ge=0)
    amortisation_years: float = spec_field(4.0, gt=0)
    electricity_per_kWh_usd: float = spec_field(0.0, unit="usd", ge=0)
    node_power_W: float | None = spec_field(None, unit="W", gt=0)
    pue: float = spec_field(1.0, ge=1.0)
    nic_usd: float | None = spec_field(None, unit="usd", ge=0,
                                       doc="buy: one scale-out NIC (default: the topology's "
                                           "price.nic_usd)")
    switch_port_usd: float | None = spec_field(None, unit="usd", ge=0,
                                               doc="buy: one scale-out switch port (default: the "
                                                   "topology's price.switch_port_usd)")

    @staticmethod
    def derive(values: dict[str, Any], context: Context) -> None:
        """``mode`` from the number given, or the missing number from the catalog."""
        rent, node = values.get("rent_per_gpu_hour_usd"), values.get("node_price_usd")
        if rent is not None and node is not None:
            raise SpecError("rent_per_gpu_hour_usd", "give one of rent_per_gpu_hour_usd (rent) or "
                            "node_price_usd (buy), not both")
        mode = values.get("mode") or _mode_of(rent, node)
        values["mode"] = mode
        if (mode == "rent" and node is not None) or (mode == "buy" and rent is not None):
            given = "node_price_usd" if node is not None else "rent_per_gpu_hour_usd"
            raise SpecError("mode", f"{mode} contradicts {given}; to switch a scenario to "
                            f"{mode}ing use 'cost: {mode}' (--set cost={mode}), catalog prices")
        for key in ("nic_usd", "switch_port_usd"):
            if mode == "rent" and values.get(key) is not None:
                raise SpecError(key, "prices bought network gear; a rented GPU-hour includes the "
                                "network (use mode: buy)")
        cluster = context.get("cluster")
        topology = cluster.topology if isinstance(cluster, ClusterSpec) else None
        if mode == "rent" and rent is None:
            values["rent_per_gpu_hour_usd"] = _catalog_rent(topology)
        if mode == "buy":
            price = topology.price if topology is not None else None
            if node is None:
                values["node_price_usd"] = _catalog_node_price(topology)
            for key in ("node_power_W", "nic_usd", "switch_port_usd"):
                if values.get(key) is None and price is not None:
                    values[key] = getattr(price, key)


def _mode_of(rent: float | None, node: float | None) -> str:
    if rent is not None:
        return "rent"
    if node is not None:
        return "buy"
    raise SpecError("rent_per_gpu_hour_usd",
                    "give exactly one of rent_per_gpu_hour_usd (rent) or node_price_usd (buy), or "
                    "mode: rent | buy to take the price from the catalog")


def _catalog_rent(topology: TopologySpec | None) -> float:
    if topology is None:
        raise SpecError("mode", "rent needs cluster.topology to find a price; give "
                        "cost.rent_per_gpu_hour_usd")
    acc = topology.accelerator
    if acc.price is None or acc.price.rent_per_gpu_hour_usd is None:
        raise SpecError("mode", f"rent: accelerator {acc.name} has no price.rent_per_gpu_hour_usd "
                        "in the catalog (simcluster/catalog/accelerators.yaml); give "
                        "cost.rent_per_gpu_hour_usd")
    return acc.price.rent_per_gpu_hour_usd


def _catalog_node_price(topology: TopologySpec | None) -> float:
    if topology is None:
        raise SpecError("mode", "buy needs cluster.topology to find a price; give "
                        "cost.node_price_usd")
    if topology.price is None or topology.price.node_usd is None:
        where = (f"topologies/{topology.name}.yaml" if topology.name in catalog.names("topologies")
                 else "its file")
        raise SpecError("mode", f"buy: topology {topology.name} has no price.node_usd in {where}; "
                        "give cost.node_price_usd")
    return topology.price.node_usd


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A complete, resolved scenario (docs/scenarios.md)."""

    schema: str = spec_field(SCENARIO_SCHEMA, choices=(SCENARIO_SCHEMA,))
    name: str = spec_field("scenario")
    seed: int = spec_field(0, ge=0)
    model: ModelSpec = spec_field()
    cluster: ClusterSpec = spec_field()
    parallelism: ParallelismSpec = spec_field()
    precision: str = spec_field(
        "bf16", choices=PRECISIONS, doc="training dtype, or the low-precision format of the "
        "linear layers' GEMMs (fp8: E4M3/E5M2 with execution.fp8_recipe; mxfp8, nvfp4: block "
        "scaled, Blackwell); activations, attention, norms and the optimizer stay bf16 under "
        "fp8, mxfp8 and nvfp4 (docs/stacks.md, Low precision)")
    execution: ExecutionSpec = spec_field(ExecutionSpec())
    perturbations: PerturbationsSpec = spec_field(PerturbationsSpec())
    training: TrainingSpec = spec_field(TrainingSpec())
    reliability: ReliabilitySpec | None = spec_field(None)
    checkpoint: CheckpointSpec | None = spec_field(None)
    cost: CostSpec | None = spec_field(None)

    def __post_init__(self) -> None:
        check_scenario(self)
