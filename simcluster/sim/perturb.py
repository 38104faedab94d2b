"""Perturbations that break the cluster's symmetry: slow GPUs and degraded links.

:func:`perturbations_of` is the one adapter from the scenario's ``perturbations:`` section
(``simcluster.spec.scenario.PerturbationsSpec``). :func:`replica_classes` maps perturbed GPUs to the
DP replicas and pipeline stages they sit on under Megatron's rank order (TP fastest, then CP,
DP, PP; ``gpu = node * gpus_per_node + local``): every perturbed replica becomes its own class,
the others stay one nominal class with a multiplicity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from simcluster.perf.slowdown import placements
from simcluster.spec.checks import check_perturbation_entries
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True)
class GpuSlowdown:
    """Compute of one GPU (or of every GPU of ``node`` when ``gpu`` is None) at ``factor`` speed."""

    node: int
    gpu: int | None
    factor: float


@dataclass(frozen=True, slots=True)
class LinkDegradation:
    """Bandwidth of ``layer`` on ``node`` (every node when None) times ``factor``."""

    layer: str
    node: int | None
    factor: float


@dataclass(frozen=True, slots=True)
class Perturbations:
    """Everything that differs from a perfectly symmetric cluster."""

    gpu_slowdown: tuple[GpuSlowdown, ...] = ()
    link_bandwidth: tuple[LinkDegradation, ...] = ()


@dataclass(frozen=True, slots=True)
class Local:
    """What differs for one (replica, stage) TP group: compute speed and link bandwidth factors."""

    speed: float = 1.0
    scale_out: float = 1.0
    scale_up: float = 1.0

    def merge(self, other: Local) -> Local:
        """The slowest of both (a TP group runs at its slowest member's pace)."""
        return Local(min(self.speed, other.speed), min(self.scale_out, other.scale_out),
                     min(self.scale_up, other.scale_up))


@dataclass(frozen=True, slots=True)
class ReplicaClass:
    """DP replicas simulated once: name, multiplicity, per-stage differences."""

    name: str
    multiplicity: int
    stages: Mapping[int, Local] = field(default_factory=dict)

    def local(self, stage: int) -> Local:
        """The stage's differences (nominal when absent)."""
        return self.stages.get(stage, Local())


def perturbations_of(scenario: Scenario) -> Perturbations:
    """The scenario's ``perturbations`` section as the engine's own values."""
    section = scenario.perturbations
    slow = tuple(GpuSlowdown(x.node, x.gpu, x.factor) for x in section.gpu_slowdown)
    links = tuple(LinkDegradation(x.layer, x.node, x.factor) for x in section.link_bandwidth)
    return Perturbations(slow, links)


def uniform_link_factors(pert: Perturbations) -> tuple[float, float]:
    """(scale_out, scale_up) factors applied to every node."""
    out = up = 1.0
    for link in pert.link_bandwidth:
        if link.node is None:
            out, up = (out * link.factor, up) if link.layer == "scale_out" else (out, up * link.factor)
    return out, up


def _check(s: Scenario, pert: Perturbations) -> None:
    check_perturbation_entries(s.cluster.nodes, s.cluster.topology.gpus_per_node,
                               pert.gpu_slowdown, pert.link_bandwidth)


def _placements(s: Scenario, node: int, gpu: int | None) -> Iterable[tuple[int, int]]:
    """(replica, stage) of the GPUs named, under Megatron's rank order."""
    return placements(s.parallelism, s.cluster.topology.gpus_per_node, node, gpu)


def _local_effects(s: Scenario, pert: Perturbations) -> dict[int, dict[int, Local]]:
    effects: dict[int, dict[int, Local]] = {}

    def add(replica: int, stage: int, local: Local) -> None:
        stages = effects.setdefault(replica, {})
        stages[stage] = stages.get(stage, Local()).merge(local)

    for slow in pert.gpu_slowdown:
        for replica, stage in _placements(s, slow.node, slow.gpu):
            add(replica, stage, Local(speed=slow.factor))
    for link in pert.link_bandwidth:
        if link.node is None:
            continue
        local = Local(scale_out=link.factor) if link.layer == "scale_out" else \
            Local(scale_up=link.factor)
        for replica, stage in _placements(s, link.node, None):
            add(replica, stage, local)
    return effects


def replica_classes(s: Scenario, pert: Perturbations) -> tuple[ReplicaClass, ...]:
    """The nominal class (if any replica is left in it) and one class per perturbed replica."""
    _check(s, pert)
    effects = _local_effects(s, pert)
    dp = s.parallelism.dp
    classes = [ReplicaClass("nominal", dp - len(effects))] if len(effects) < dp else []
    classes += [ReplicaClass(f"dp{r}", 1, effects[r]) for r in sorted(effects)]
    return tuple(classes)
