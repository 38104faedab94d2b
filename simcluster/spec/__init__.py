"""Specs: frozen dataclasses for scenarios, models, hardware and topologies, and their loader."""

from simcluster.spec.execution import ExecutionSpec
from simcluster.spec.hardware import (
    AcceleratorSpec,
    HostSpec,
    ScaleOutSpec,
    ScaleUpSpec,
    TopologySpec,
)
from simcluster.spec.layout import check_layout
from simcluster.spec.loader import dump_scenario, load_scenario, load_topology, to_yaml
from simcluster.spec.model import MLASpec, ModelSpec, MoESpec
from simcluster.spec.scenario import (
    CheckpointSpec,
    ClusterSpec,
    CostSpec,
    FailureClassSpec,
    GpuSlowdownSpec,
    LinkBandwidthSpec,
    ParallelismSpec,
    PerturbationsSpec,
    ReliabilitySpec,
    Scenario,
    TrainingSpec,
)

__all__ = [
    "AcceleratorSpec",
    "CheckpointSpec",
    "ClusterSpec",
    "CostSpec",
    "ExecutionSpec",
    "FailureClassSpec",
    "GpuSlowdownSpec",
    "HostSpec",
    "LinkBandwidthSpec",
    "MLASpec",
    "MoESpec",
    "ModelSpec",
    "ParallelismSpec",
    "PerturbationsSpec",
    "ReliabilitySpec",
    "ScaleOutSpec",
    "ScaleUpSpec",
    "Scenario",
    "TopologySpec",
    "TrainingSpec",
    "check_layout",
    "dump_scenario",
    "load_scenario",
    "load_topology",
    "to_yaml",
]
