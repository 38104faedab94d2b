"""The scenario: model, cluster, parallel layout, precision, training run, reliability and cost.

Schema ``simcluster/scenario/v1`` (DESIGN.md section 3.1). The data-parallel degree is derived from
the GPU count; every consistency rule that involves several sections lives in :mod:`.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.errors import SpecError
from simcluster.spec.checks import check_scenario, check_tp_divides_model
from simcluster.spec.hardware import DTYPES, TopologySpec
from simcluster.spec.model import ModelSpec
from simcluster.spec.schema import Context, spec_field

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
RECOMPUTE = ("none", "selective", "full")
INTER_ARRIVAL = ("exponential", "weibull")
CHECKPOINT_MODES = ("sync", "async", "in-memory")
SCENARIO_SCHEMA = "simcluster/scenario/v1"


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
    micro_batch: int = spec_field(1, ge=1)
    global_batch: int = spec_field(ge=1)
    schedule: str = spec_field("1f1b", choices=SCHEDULES)
    virtual_stages: int = spec_field(1, ge=1)
    sequence_parallel: bool = spec_field(False)
    recompute: str = spec_field("none", choices=RECOMPUTE)
    zero_stage: int = spec_field(1, ge=0, le=3)
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
        if self.global_batch % (self.micro_batch * self.dp):
            raise SpecError("global_batch", f"{self.global_batch} is not divisible by "
                            f"micro_batch*dp = {self.micro_batch}*{self.dp}")
        if (self.dp * self.cp) % self.ep:
            raise SpecError("ep", f"{self.ep} must divide dp*cp = {self.dp * self.cp} "
                            "(experts are sharded across data-parallel ranks)")

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step per pipeline (gradient accumulation steps)."""
        return self.global_batch // (self.micro_batch * self.dp)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSpec:
    """Kernel and overlap choices of the training framework (Megatron-LM flag names in docs)."""

    flash_attention: bool = spec_field(
        True, doc="fused attention kernel (FlashAttention); false: scores GEMM + softmax + AV GEMM")
    overlap_grad_reduce: bool = spec_field(
        True, doc="DP gradient reduction overlaps the last backward (--overlap-grad-reduce)")
    scatter_gather: bool = spec_field(
        True, doc="pipeline sends split over TP ranks, all-gathered over NVLink (SC'21 4.1)")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """The training run: tokens to train on."""

    tokens: float | None = spec_field(None, gt=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureClassSpec:
    """One failure class: its share of unexpected interruptions and its detection latency."""

    share: float = spec_field(ge=0, le=1)
    detect_s: float = spec_field(60.0, unit="s", ge=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReliabilitySpec:
    """Failures, recovery and spares (reference/failures.md; refined by the reliability engine)."""

    failure_rate_per_node_day: float = spec_field(3.79e-3, ge=0)
    classes: dict[str, FailureClassSpec] = spec_field({})
    inter_arrival: str = spec_field("exponential", choices=INTER_ARRIVAL)
    weibull_shape: float = spec_field(0.8, gt=0)
    planned_per_day: float = spec_field(0.0, ge=0)
    diagnose_s: float = spec_field(300.0, unit="s", ge=0)
    restart_s: float = spec_field(300.0, unit="s", ge=0)
    spares: int = spec_field(0, ge=0)
    replace_s: float = spec_field(7200.0, unit="s", ge=0)
    horizon_s: float | None = spec_field(None, unit="days", gt=0)

    def __post_init__(self) -> None:
        total = sum(c.share for c in self.classes.values())
        if self.classes and abs(total - 1.0) > 1e-6:
            raise SpecError("classes", f"shares sum to {total:.6g}, expected 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSpec:
    """How often and how checkpoints are written."""

    interval_s: float = spec_field(3600.0, unit="min", gt=0)
    mode: str = spec_field("sync", choices=CHECKPOINT_MODES)
    storage_write_Bps: float = spec_field(100e9, unit="GBps", gt=0)
    storage_read_Bps: float = spec_field(100e9, unit="GBps", gt=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSpec:
    """Either rent (per GPU-hour) or buy (price per node, amortisation, power)."""

    rent_per_gpu_hour_usd: float | None = spec_field(None, unit="usd", ge=0)
    node_price_usd: float | None = spec_field(None, unit="usd", ge=0)
    amortisation_years: float = spec_field(4.0, gt=0)
    electricity_per_kWh_usd: float = spec_field(0.0, unit="usd", ge=0)
    node_power_W: float | None = spec_field(None, unit="W", gt=0)
    pue: float = spec_field(1.0, ge=1.0)

    def __post_init__(self) -> None:
        if (self.rent_per_gpu_hour_usd is None) == (self.node_price_usd is None):
            raise SpecError("rent_per_gpu_hour_usd",
                            "give exactly one of rent_per_gpu_hour_usd (rent) or node_price_usd (buy)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A complete, resolved scenario (DESIGN.md section 3.1)."""

    schema: str = spec_field(SCENARIO_SCHEMA, choices=(SCENARIO_SCHEMA,))
    name: str = spec_field("scenario")
    seed: int = spec_field(0, ge=0)
    model: ModelSpec = spec_field()
    cluster: ClusterSpec = spec_field()
    parallelism: ParallelismSpec = spec_field()
    precision: str = spec_field("bf16", choices=DTYPES)
    execution: ExecutionSpec = spec_field(ExecutionSpec())
    training: TrainingSpec = spec_field(TrainingSpec())
    reliability: ReliabilitySpec | None = spec_field(None)
    checkpoint: CheckpointSpec | None = spec_field(None)
    cost: CostSpec | None = spec_field(None)

    def __post_init__(self) -> None:
        check_scenario(self)
